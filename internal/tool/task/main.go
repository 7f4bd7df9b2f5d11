// Command task runs go-task from the build-tools module (tools/go.mod), so that
// `go tool task …` works as documented while the product's go.mod lists only what the
// product uses. It passes its arguments, standard streams, working directory and exit
// status through.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		fmt.Fprintln(os.Stderr, "task: not inside the kafkamender module (go env GOMOD):", err)
		os.Exit(2)
	}
	modfile := filepath.Join(filepath.Dir(gomod), "tools", "go.mod")
	cmd := exec.Command("go", append([]string{"tool", "-modfile=" + modfile, "task"}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Signals sent to this process alone (a CI runner's SIGTERM) reach go-task too.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "task:", err)
		os.Exit(1)
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "task:", err)
		os.Exit(1)
	}
}
