package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kafkamender/kafkamender/internal/logdir"
	lt "github.com/kafkamender/kafkamender/internal/logdir/logdirtest"
)

// The tests of "worker logdir" need no server: they work on fake log dirs in temp dirs.

// logdirHelperTest is the test the lock helper re-executes this test binary as.
const logdirHelperTest = "TestLogdirHelperProcess"

// TestLogdirHelperProcess is not a test: TestLogdirMoveCommand starts this binary as a
// process that holds a log dir's lock, as a running broker does.
func TestLogdirHelperProcess(t *testing.T) {
	lt.Helper()
	t.Skip("only a helper process of the logdir tests")
}

// logdirRun runs "worker logdir args..." in this process.
func logdirRun(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = logdirCommand(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestLogdirUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "Usage: worker logdir inspect --dir DIR"},
		{"help", []string{"--help"}, 0, "Exit status: 0 done (or nothing to do), 1 refused or failed"},
		{"unknown command", []string{"mv"}, 2, `worker logdir: unknown command "mv"`},
		{"inspect help", []string{"inspect", "--help"}, 0, "Usage: worker logdir inspect --dir DIR [--dir DIR ...] [--strict]"},
		{"inspect without --dir", []string{"inspect"}, 2, "worker logdir inspect: --dir is required"},
		{"inspect unknown flag", []string{"inspect", "--dirs", "x"}, 2, "flag provided but not defined: -dirs"},
		{"move help", []string{"move", "-h"}, 0, "Usage: worker logdir move --from DIR --to DIR --partition TOPIC-PARTITION"},
		{"recover help", []string{"recover", "--help"}, 0, "Usage: worker logdir recover --from DIR --to DIR"},
		{"move without --from", []string{"move", "--to", "b", "--partition", "t-0"}, 2, "worker logdir move: --from is required"},
		{"move without --to", []string{"move", "--from", "a", "--partition", "t-0"}, 2, "worker logdir move: --to is required"},
		{"recover without --partition", []string{"recover", "--from", "a", "--to", "b"}, 2, "worker logdir recover: --partition is required"},
		{"bad partition", []string{"move", "--from", "a", "--to", "b", "--partition", "orders"}, 2,
			`worker logdir move: --partition: partition "orders": want <topic>-<partition>`},
		{"extra argument", []string{"move", "--from", "a", "--to", "b", "--partition", "t-0", "more"}, 2, `unexpected arguments: ["more"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := logdirRun(tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			// Help asked for goes to stdout; a usage error to stderr.
			out, other := stderr, stdout
			if tc.code == 0 {
				out, other = stdout, stderr
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
			if other != "" {
				t.Errorf("the other stream:\n%s", other)
			}
		})
	}
	// Through run, as main calls it; --config is not asked for.
	var out, stderr bytes.Buffer
	if code := run([]string{"logdir", "--help"}, &out, &stderr); code != 0 || !strings.Contains(out.String(), "Usage: worker logdir") {
		t.Errorf("run logdir --help: exit %d\n%s", code, out.String())
	}
	out.Reset()
	if code := run([]string{"--help"}, &out, &stderr); code != 0 || !strings.Contains(out.String(), "worker logdir inspect|move|recover") {
		t.Errorf("run --help does not mention logdir: exit %d\n%s", code, out.String())
	}
}

func TestLogdirInspectCommand(t *testing.T) {
	good := filepath.Join(t.TempDir(), "kafka-logs")
	lt.LogDir(t, good, 1, "orders-0")
	bad := filepath.Join(t.TempDir(), "kafka-logs")
	lt.LogDir(t, bad, 1, "orders-0")
	lt.WriteFile(t, filepath.Join(bad, logdir.RecoveryPointCheckpoint), "0\n2\norders 0 1\n")

	code, stdout, stderr := logdirRun("inspect", "--dir", good, "--strict")
	if code != 0 || !strings.Contains(stdout, "log dir "+good+"\n") || !strings.Contains(stdout, "inconsistencies: none") {
		t.Errorf("consistent dir: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = logdirRun("inspect", "--dir", good, "--dir", bad)
	if code != 0 || !strings.Contains(stdout, "recovery-point-offset-checkpoint:4: the file ends after 1 entries, but line 2 announces 2") {
		t.Errorf("inconsistent dir without --strict: exit %d\n%s", code, stdout)
	}
	if code, _, _ := logdirRun("inspect", "--dir", good, "--dir", bad, "--strict"); code != 3 {
		t.Errorf("inconsistent dir with --strict: exit %d, want 3", code)
	}
	code, _, stderr = logdirRun("inspect", "--dir", filepath.Join(good, "none"))
	if code != 1 || !strings.Contains(stderr, "worker logdir inspect: stat ") {
		t.Errorf("missing dir: exit %d\n%s", code, stderr)
	}
}

func TestLogdirMoveCommand(t *testing.T) {
	root := t.TempDir()
	d1, d2 := filepath.Join(root, "d1"), filepath.Join(root, "d2")
	lt.LogDir(t, d1, 1, "orders-0", "orders-1")
	lt.LogDir(t, d2, 1)

	// Refused while the broker runs: exit 1, the pid on stderr, nothing changed.
	before := lt.Snapshot(t, root)
	pid, release := lt.HoldLock(t, filepath.Join(d2, logdir.LockFile), logdirHelperTest)
	code, _, stderr := logdirRun("move", "--from", d1, "--to", d2, "--partition", "orders-1")
	if want := fmt.Sprintf("worker logdir move: refused: --to %s: %s/.lock is locked by pid %d", d2, d2, pid); code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, want 1 and %q:\n%s", code, want, stderr)
	}
	if d := lt.Diff(before, lt.Snapshot(t, root)); len(d) > 0 {
		t.Errorf("the refusal changed %v", d)
	}
	release()

	// orders-01 is not orders-1: partition numbers are canonical decimal, as Kafka names
	// its folders. A usage error, and nothing changed.
	for _, p := range []string{"orders-01", "orders-+1", "orders- 1"} {
		code, _, stderr = logdirRun("move", "--from", d1, "--to", d2, "--partition", p)
		if want := fmt.Sprintf("worker logdir move: --partition: partition %q: bad partition", p); code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("--partition %s: exit %d, want 2 and %q:\n%s", p, code, want, stderr)
		}
	}
	if d := lt.Diff(before, lt.Snapshot(t, root)); len(d) > 0 {
		t.Errorf("a non-canonical partition changed %v", d)
	}

	c := lt.NewMoveCase(t, d1, d2, "orders-1")
	code, stdout, stderr := logdirRun("move", "--from", d1, "--to", d2, "--partition", "orders-1")
	if code != 0 || !strings.Contains(stdout, "moved orders-1 from "+d1+" to "+d2+": 8 files") || stderr != "" {
		t.Errorf("move: exit %d\n%s%s", code, stdout, stderr)
	}
	c.CheckDone(t)
	code, stdout, _ = logdirRun("move", "--from", d1, "--to", d2, "--partition", "orders-1")
	if code != 0 || !strings.Contains(stdout, "nothing to do") {
		t.Errorf("rerun: exit %d\n%s", code, stdout)
	}
	code, _, stderr = logdirRun("move", "--from", d1, "--to", d2, "--partition", "orders-7")
	if code != 1 || !strings.Contains(stderr, "worker logdir move: refused: orders-7 is in neither") {
		t.Errorf("missing partition: exit %d\n%s", code, stderr)
	}
}

func TestLogdirRecoverCommand(t *testing.T) {
	root := t.TempDir()
	healthy, broken := filepath.Join(root, "b1"), filepath.Join(root, "b2")
	lt.LogDir(t, healthy, 1, "orders-0", "orders-1")
	lt.LogDir(t, broken, 2, "orders-0")
	c := lt.NewRecoverCase(t, healthy, broken, "orders-1")
	code, stdout, stderr := logdirRun("recover", "--from", healthy, "--to", broken, "--partition", "orders-1")
	if code != 0 || !strings.Contains(stdout, "recovered orders-1 into "+broken+" from "+healthy+": 8 files") {
		t.Errorf("recover: exit %d\n%s%s", code, stdout, stderr)
	}
	c.CheckDone(t)
	code, _, stderr = logdirRun("recover", "--from", healthy, "--to", healthy, "--partition", "orders-1")
	if code != 1 || !strings.Contains(stderr, "worker logdir recover: refused: --from "+healthy+" and --to "+healthy+" are the same directory") {
		t.Errorf("same dir: exit %d\n%s", code, stderr)
	}
}

// The real binary, killed (SIGKILL, by its crash hook) at every step of a move and of a
// recovery, leaves a state a rerun finishes from: the source whole or the target
// complete, checkpoint files that parse, no folder Kafka fails on. The hook is only in a
// build with the test hooks' tag.
func TestLogdirCrash(t *testing.T) {
	bin := buildBinary(t, ".", "worker", "-tags", logdir.TestHooksTag)
	for _, step := range logdir.MoveSteps {
		t.Run("move/"+step, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			d1, d2 := filepath.Join(root, "disk1", "kafka-logs"), filepath.Join(root, "disk2", "kafka-logs")
			lt.LogDir(t, d1, 1, "orders-0", "my.topic-x-3", "orders-1")
			lt.LogDir(t, d2, 1, "payments-0")
			c := lt.NewMoveCase(t, d1, d2, "my.topic-x-3")
			args := []string{"logdir", "move", "--from", d1, "--to", d2, "--partition", "my.topic-x-3"}
			killedAt(t, bin, step, args...)
			c.CheckInterrupted(t)
			// inspect shows that the move is unfinished between these steps.
			inspectExit(t, bin, step != logdir.StepLocked && step != logdir.StepDone, d1, d2)
			if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("rerun: %v\n%s", err, out)
			}
			c.CheckDone(t)
			inspectExit(t, bin, false, d1, d2)
		})
	}
	for _, step := range logdir.RecoverSteps {
		t.Run("recover/"+step, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			healthy, broken := filepath.Join(root, "b1", "kafka-logs"), filepath.Join(root, "b2", "kafka-logs")
			lt.LogDir(t, healthy, 1, "orders-0", "orders-1")
			lt.LogDir(t, broken, 2, "orders-0")
			lt.WriteFile(t, filepath.Join(broken, logdir.RecoveryPointCheckpoint), "0\n2\norders 1 3\norders 0 5\n")
			c := lt.NewRecoverCase(t, healthy, broken, "orders-1")
			args := []string{"logdir", "recover", "--from", healthy, "--to", broken, "--partition", "orders-1"}
			killedAt(t, bin, step, args...)
			c.CheckInterrupted(t)
			// The stale entry of the lost partition is an inconsistency until the end.
			inspectExit(t, bin, step != logdir.StepDone, broken)
			if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("rerun: %v\n%s", err, out)
			}
			c.CheckDone(t)
			inspectExit(t, bin, false, healthy, broken)
		})
	}
}

// A release build (no test hooks' tag) has no crash hook: told to die at a step, the
// worker finishes the move.
func TestLogdirKillHookNotInReleaseBuild(t *testing.T) {
	bin := buildWorker(t)
	root := t.TempDir()
	d1, d2 := filepath.Join(root, "d1"), filepath.Join(root, "d2")
	lt.LogDir(t, d1, 1, "orders-0", "orders-1")
	lt.LogDir(t, d2, 1)
	c := lt.NewMoveCase(t, d1, d2, "orders-1")
	cmd := exec.Command(bin, "logdir", "move", "--from", d1, "--to", d2, "--partition", "orders-1")
	cmd.Env = append(os.Environ(), logdir.KillEnv+"="+logdir.StepPlaced)
	if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), "killing this process") {
		t.Fatalf("%v\n%s", err, out)
	}
	c.CheckDone(t)
}

// inspectExit runs "worker logdir inspect --strict" on dirs: exit 3 when problems are
// expected, else 0.
func inspectExit(t *testing.T, bin string, problems bool, dirs ...string) {
	t.Helper()
	args := []string{"logdir", "inspect", "--strict"}
	for _, d := range dirs {
		args = append(args, "--dir", d)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if want := map[bool]int{true: 3, false: 0}[problems]; code != want {
		t.Errorf("inspect --strict: exit %d, want %d\n%s", code, want, out)
	}
}

// killedAt runs bin with the crash hook set to step and checks that it died of SIGKILL
// there.
func killedAt(t *testing.T, bin, step string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), logdir.KillEnv+"="+step)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("not killed at %s: %v\n%s", step, err, out.String())
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("not killed by SIGKILL at %s: %v\n%s", step, err, out.String())
	}
	if want := logdir.KillEnv + "=" + step + ": killing this process"; !strings.Contains(out.String(), want) {
		t.Fatalf("output lacks %q:\n%s", want, out.String())
	}
}
