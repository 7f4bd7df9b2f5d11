package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// findProcess returns the pid of the live process whose command line names marker (a
// configuration file inside the state folder) as one of its arguments and whose program is
// one of progs, or 0. Zombies do not count: a server that exited but was not reaped yet is
// gone. Matching on an argument, not a substring, keeps `tail -f <state>/…/server.log` and
// the like from being mistaken for a server.
func findProcess(marker string, progs ...string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if !matchesProg(args[0], progs) || !hasArg(args[1:], marker) {
			continue
		}
		if zombie(pid) {
			continue
		}
		return pid, nil
	}
	return 0, nil
}

func matchesProg(argv0 string, progs []string) bool {
	base := filepath.Base(argv0)
	for _, p := range progs {
		if base == p || strings.HasPrefix(base, p+"-") {
			return true
		}
	}
	return false
}

func hasArg(args []string, marker string) bool {
	for _, a := range args {
		if a == marker || strings.HasSuffix(a, "="+marker) {
			return true
		}
	}
	return false
}

// zombie reports whether pid has exited (state Z or X) or no longer exists.
func zombie(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 || i+2 >= len(raw) {
		return true
	}
	switch raw[i+2] {
	case 'Z', 'X', 'x':
		return true
	}
	return false
}

// startDetached starts argv in its own session with stdout and stderr appended to logPath,
// so that it outlives the process that started it (stackctl exits right after `up`; a test
// binary exits after its tests). The child is reaped by a goroutine while this process lives
// and by init afterwards.
func startDetached(argv []string, dir, logPath string, env []string) (int, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("open log: %w", err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n=== kafkamender stack: starting at %s: %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", argv[0], err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// signalAndWait sends sig to pid and waits until the process is gone or ctx ends.
func signalAndWait(ctx context.Context, pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %d with %v: %w", pid, sig, err)
	}
	return waitGone(ctx, pid)
}

func waitGone(ctx context.Context, pid int) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !zombie(pid) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("process %d still running: %w", pid, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Tail returns the last n lines of the file at path, for error messages.
func Tail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return lastLines(string(raw), n)
}
