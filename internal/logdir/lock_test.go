package logdir_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/logdir"
	lt "github.com/kafkamender/kafkamender/internal/logdir/logdirtest"
)

// helperTest is the test function the lock helpers re-execute this binary as.
const helperTest = "TestLogDirHelperProcess"

// TestLogDirHelperProcess is not a test: the lock tests start this binary as a helper
// process that holds or probes a lock (see logdirtest.Helper).
func TestLogDirHelperProcess(t *testing.T) {
	lt.Helper()
	t.Skip("only a helper process of the lock tests")
}

// A broker that runs (here, a process holding .lock as Kafka does) makes move, recover
// and inspect name its pid; move and recover refuse and change nothing.
func TestLogDirLiveLock(t *testing.T) {
	for _, which := range []string{"from", "to"} {
		t.Run(which, func(t *testing.T) {
			root, d1, d2 := twoDirs(t)
			locked := map[string]string{"from": d1, "to": d2}[which]
			pid, _ := lt.HoldLock(t, filepath.Join(locked, logdir.LockFile), helperTest)
			before := lt.Snapshot(t, root)

			_, err := logdir.Move(moveOpts(d1, d2, nil))
			want := fmt.Sprintf("--%s %s: %s/.lock is locked by pid %d: its broker is running", which, locked, locked, pid)
			var refusal *logdir.Refusal
			if !errors.As(err, &refusal) || !strings.Contains(err.Error(), want) {
				t.Errorf("move: %v, want a refusal with %q", err, want)
			}

			r, err := logdir.Inspect(locked)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Lock.Held || r.Lock.PID != pid {
				t.Errorf("inspect: lock %+v, want held by %d", r.Lock, pid)
			}
			var out bytes.Buffer
			if err := r.WriteText(&out); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf(".lock: HELD by pid %d", pid); !strings.Contains(out.String(), want) {
				t.Errorf("inspect output lacks %q:\n%s", want, out.String())
			}
			if d := lt.Diff(before, lt.Snapshot(t, root)); len(d) > 0 {
				t.Errorf("changed files: %v", d)
			}
		})
	}
}

// Recover refuses while either broker runs, and says which.
func TestLogDirRecoverLiveLock(t *testing.T) {
	for which, whose := range map[string]string{"from": "the healthy broker (--from)", "to": "the broker being recovered (--to)"} {
		t.Run(which, func(t *testing.T) {
			root, healthy, broken := brokers(t)
			locked := map[string]string{"from": healthy, "to": broken}[which]
			pid, _ := lt.HoldLock(t, filepath.Join(locked, logdir.LockFile), helperTest)
			before := lt.Snapshot(t, root)
			_, err := logdir.Recover(recoverOpts(healthy, broken, nil))
			want := fmt.Sprintf("%s/.lock is locked by pid %d: %s is running", locked, pid, whose)
			if !strings.Contains(fmtErr(err), want) {
				t.Errorf("recover: %v, want %q", err, want)
			}
			if d := lt.Diff(before, lt.Snapshot(t, root)); len(d) > 0 {
				t.Errorf("changed files: %v", d)
			}
		})
	}
}

// The locks the tool takes are POSIX write locks that another process sees, with this
// process's pid (so a broker starting meanwhile fails to lock the dir); taking one that is
// held fails naming the holder; a missing .lock is created, as Kafka does.
func TestLogDirLocks(t *testing.T) {
	dir := t.TempDir()
	release, err := logdir.LockDirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if held, pid := lt.Probe(t, dir, helperTest); !held || pid != os.Getpid() {
		t.Errorf("held %v by %d, want held by %d", held, pid, os.Getpid())
	}
	release()
	if held, _ := lt.Probe(t, dir, helperTest); held {
		t.Error("still held after release")
	}

	other := t.TempDir()
	pid, _ := lt.HoldLock(t, filepath.Join(other, logdir.LockFile), helperTest)
	_, err = logdir.LockDirs(dir, other)
	if want := fmt.Sprintf("%s/.lock is locked by pid %d", other, pid); !strings.Contains(fmtErr(err), want) {
		t.Errorf("lock a held dir: %v, want %q", err, want)
	}
	// The lock taken on dir before the failure was dropped.
	if held, _ := lt.Probe(t, dir, helperTest); held {
		t.Error("the first lock is still held after the second failed")
	}

	st, err := logdir.ProbeLock(t.TempDir())
	if err != nil || st.Exists || st.Held {
		t.Errorf("probe without .lock: %+v, %v", st, err)
	}
}
