package logdirtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kafkamender/kafkamender/internal/logdir"
)

// helperEnv tells a re-executed test binary to act as a helper process: "hold:<file>"
// takes a write lock on the file as a broker does and keeps it until its stdin closes;
// "probe:<dir>" prints what ProbeLock sees of dir from another process.
const helperEnv = "KAFKAMENDER_LOGDIRTEST_HELPER"

// Helper runs the helper process when this test binary was started as one, and exits; it
// returns at once otherwise. Call it from a test function of your package named
// helperTest (and pass that name to HoldLock and Probe):
//
//	func TestLogdirHelperProcess(t *testing.T) { logdirtest.Helper() }
func Helper() {
	mode, path, ok := strings.Cut(os.Getenv(helperEnv), ":")
	if !ok {
		return
	}
	switch mode {
	case "hold":
		os.Exit(hold(path))
	case "probe":
		st, err := logdir.ProbeLock(path)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(st.Held, st.PID)
		os.Exit(0)
	}
	os.Exit(2)
}

func hold(path string) int {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	// As Java's FileChannel.tryLock does on Linux: a POSIX write lock on the whole file.
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes it
	return 0
}

func helperCommand(helperTest, arg string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+helperTest+"$")
	cmd.Env = append(os.Environ(), helperEnv+"="+arg)
	return cmd
}

// HoldLock starts a process that holds a write lock on path (a log dir's .lock) as a
// running broker does, and returns its pid; release (or the end of the test) stops it.
func HoldLock(t testing.TB, path, helperTest string) (pid int, release func()) {
	t.Helper()
	cmd := helperCommand(helperTest, "hold:"+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = stdin.Close()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(release)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("lock helper: %q, %v", line, err)
	}
	return cmd.Process.Pid, release
}

// Probe reports what another process sees of dir's lock: whether it is held, and by whom.
func Probe(t testing.TB, dir, helperTest string) (held bool, pid int) {
	t.Helper()
	out, err := helperCommand(helperTest, "probe:"+dir).Output()
	if err != nil {
		t.Fatalf("probe helper: %v: %s", err, out)
	}
	if _, err := fmt.Sscan(string(out), &held, &pid); err != nil {
		t.Fatalf("probe helper said %q: %v", out, err)
	}
	return held, pid
}
