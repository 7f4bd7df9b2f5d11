package logdir_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/logdir"
	lt "github.com/kafkamender/kafkamender/internal/logdir/logdirtest"
)

// The partition the recover tests restore.
const lost = "orders-1"

// brokers writes a log dir of the healthy broker 1 (orders-0, orders-1, payments-0) and
// one of the broken broker 2, which lost orders-1: its folder is gone, its recovery-point
// file still lists it with a stale offset, and its cleaner file lists it although the
// healthy broker's does not.
func brokers(t *testing.T) (root, healthy, broken string) {
	t.Helper()
	root = t.TempDir()
	healthy, broken = filepath.Join(root, "broker1", "kafka-logs"), filepath.Join(root, "broker2", "kafka-logs")
	lt.LogDir(t, healthy, 1, "orders-0", lost, "payments-0")
	lt.WriteCheckpoint(t, healthy, logdir.CleanerOffsetCheckpoint, "orders-0", "payments-0")
	lt.LogDir(t, broken, 2, "orders-0", "payments-0")
	lt.WriteFile(t, filepath.Join(broken, logdir.RecoveryPointCheckpoint), "0\n3\norders 0 5\norders 1 3\npayments 0 9\n")
	lt.WriteFile(t, filepath.Join(broken, logdir.CleanerOffsetCheckpoint), "0\n1\norders 1 2\n")
	return root, healthy, broken
}

func recoverOpts(from, to string, out *bytes.Buffer) logdir.Options {
	return logdir.Options{From: from, To: to, Partition: lost, Out: writer(out)}
}

func TestLogDirRecover(t *testing.T) {
	_, healthy, broken := brokers(t)
	c := lt.NewRecoverCase(t, healthy, broken, lost)
	var out bytes.Buffer
	res, err := logdir.Recover(recoverOpts(healthy, broken, &out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	c.CheckDone(t)
	if !res.Copied || res.Nothing || res.Files != 8 || res.Entries != 3 {
		t.Errorf("result %+v", res)
	}
	for _, want := range []string{
		"recover orders-1 from " + healthy + " into " + broken + "\n",
		"  placed " + broken + "/orders-1",
		"  " + broken + "/recovery-point-offset-checkpoint: replaced orders-1 3 by orders-1 ",
		"  " + broken + "/cleaner-offset-checkpoint: removed the stale entry orders-1 2\n",
		"recovered orders-1 into " + broken + " from " + healthy + ": 8 files, ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if got := read(t, filepath.Join(broken, logdir.RecoveryPointCheckpoint)); got != "0\n3\norders 0 5\norders 1 "+
		itoa(lt.Offset(logdir.RecoveryPointCheckpoint, lost))+"\npayments 0 9\n" {
		t.Errorf("recovery points, replaced in place:\n%s", got)
	}

	out.Reset()
	res, err = logdir.Recover(recoverOpts(healthy, broken, &out))
	if err != nil || !res.Nothing {
		t.Fatalf("rerun: %+v %v\n%s", res, err, out.String())
	}
	c.CheckDone(t)
}

// Recover is not subject to the KRaft rule of move.
func TestLogDirRecoverKRaft(t *testing.T) {
	_, healthy, broken := brokers(t)
	lt.WriteFile(t, filepath.Join(healthy, logdir.MetaFile), lt.KRaftMeta(1, "b6yAqXbqQ6iSC9lJ3NhfTw"))
	lt.WriteFile(t, filepath.Join(broken, logdir.MetaFile), lt.KRaftMeta(2, "3RAIdFDQSyiz5yQe2uoBcg"))
	c := lt.NewRecoverCase(t, healthy, broken, lost)
	if _, err := logdir.Recover(recoverOpts(healthy, broken, nil)); err != nil {
		t.Fatal(err)
	}
	c.CheckDone(t)
}

// An interrupted recovery (at every step, and, without -short, again at every later step)
// leaves the source
// untouched and a state from which a rerun finishes.
func TestLogDirRecoverInterrupted(t *testing.T) {
	for i, first := range logdir.RecoverSteps {
		for _, second := range resumes(logdir.RecoverSteps[i:]) {
			t.Run(first+"/"+second, func(t *testing.T) {
				t.Parallel()
				_, healthy, broken := brokers(t)
				c := lt.NewRecoverCase(t, healthy, broken, lost)
				var out bytes.Buffer
				if _, err := logdir.Recover(logdir.StopAt(recoverOpts(healthy, broken, &out), first)); !errors.Is(err, logdir.ErrStopped) {
					t.Fatalf("stop at %s: %v\n%s", first, err, out.String())
				}
				c.CheckInterrupted(t)
				if second != "" {
					_, err := logdir.Recover(logdir.StopAt(recoverOpts(healthy, broken, &out), second))
					if err != nil && !errors.Is(err, logdir.ErrStopped) {
						t.Fatalf("second run: %v\n%s", err, out.String())
					}
					c.CheckInterrupted(t)
				}
				if _, err := logdir.Recover(recoverOpts(healthy, broken, &out)); err != nil {
					t.Fatalf("resume: %v\n%s", err, out.String())
				}
				c.CheckDone(t)
			})
		}
	}
}

// Every refusal changes nothing.
func TestLogDirRecoverRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, root, healthy, broken string) (from, to string)
		want  string
	}{
		{"same dir", func(t *testing.T, root, h, b string) (string, string) { return h, h }, "are the same directory"},
		{"same broker", func(t *testing.T, root, h, b string) (string, string) {
			lt.WriteFile(t, filepath.Join(b, logdir.MetaFile), lt.Meta(1))
			return h, b
		}, "--from $H and --to $B are both of broker 1: recover copies a replica from another broker"},
		{"other cluster", func(t *testing.T, root, h, b string) (string, string) {
			lt.WriteFile(t, filepath.Join(b, logdir.MetaFile), "broker.id=2\ncluster.id=other\n")
			return h, b
		}, "--from $H is of cluster.id " + lt.ClusterID + " and --to $B of cluster.id other"},
		{"no meta.properties", func(t *testing.T, root, h, b string) (string, string) {
			rm(t, filepath.Join(b, logdir.MetaFile))
			return h, b
		}, "--to $B has no meta.properties"},
		{"source lacks the partition", func(t *testing.T, root, h, b string) (string, string) {
			if err := os.RemoveAll(filepath.Join(h, lost)); err != nil {
				t.Fatal(err)
			}
			return h, b
		}, "--from $H has no orders-1 folder: nothing to recover from"},
		{"target has a different copy", func(t *testing.T, root, h, b string) (string, string) {
			lt.PartitionFolder(t, filepath.Join(b, lost))
			rm(t, filepath.Join(b, lost, "partition.metadata"))
			return h, b
		}, "--to $B already has orders-1, and it differs from the one in $H (partition.metadata is missing): recover only restores a missing replica"},
		{"malformed target checkpoint", func(t *testing.T, root, h, b string) (string, string) {
			lt.WriteFile(t, filepath.Join(b, logdir.ReplicationOffsetCheckpoint), "0\r\n0\r\n")
			return h, b
		}, `--to: malformed checkpoint file, which this tool does not edit: $B/replication-offset-checkpoint:1: carriage return`},
		{"online move pending in the target", func(t *testing.T, root, h, b string) (string, string) {
			lt.PartitionFolder(t, filepath.Join(b, lost+".0f1e2d3c4b5a69788796a5b4c3d2e1f0-future"))
			return h, b
		}, "an online log-dir move of orders-1"},
		{"source not shut down cleanly", func(t *testing.T, root, h, b string) (string, string) {
			rm(t, filepath.Join(h, logdir.CleanShutdownFile))
			return h, b
		}, "$B has .kafka_cleanshutdown (its broker stopped cleanly) but $H has not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, healthy, broken := brokers(t)
			from, to := tc.setup(t, root, healthy, broken)
			before := lt.Snapshot(t, root)
			_, err := logdir.Recover(recoverOpts(from, to, nil))
			want := strings.NewReplacer("$H", healthy, "$B", broken).Replace(tc.want)
			var refusal *logdir.Refusal
			if !errors.As(err, &refusal) || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want a refusal with\n%s", err, want)
			}
			if d := lt.Diff(before, lt.Snapshot(t, root)); len(d) > 0 {
				t.Errorf("the refusal changed files: %v", d)
			}
		})
	}
}

// A target without any checkpoint file (a replaced disk, formatted again) gets the files.
func TestLogDirRecoverIntoAnEmptyDir(t *testing.T) {
	root := t.TempDir()
	healthy, broken := filepath.Join(root, "b1"), filepath.Join(root, "b2")
	lt.LogDir(t, healthy, 1, "orders-0", lost)
	lt.WriteFile(t, filepath.Join(broken, logdir.MetaFile), lt.Meta(2))
	c := lt.NewRecoverCase(t, healthy, broken, lost)
	if _, err := logdir.Recover(recoverOpts(healthy, broken, nil)); err != nil {
		t.Fatal(err)
	}
	c.CheckDone(t)
	if got := read(t, filepath.Join(broken, logdir.ReplicationOffsetCheckpoint)); got != "0\n1\norders 1 "+
		itoa(lt.Offset(logdir.ReplicationOffsetCheckpoint, lost))+"\n" {
		t.Errorf("new file %q", got)
	}
	if _, err := os.Stat(filepath.Join(broken, logdir.LockFile)); err != nil {
		t.Errorf("no .lock created: %v", err)
	}
}
