package logdir_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/kafkamender/kafkamender/internal/logdir"
	lt "github.com/kafkamender/kafkamender/internal/logdir/logdirtest"
)

// The partition the move tests move: its topic has dots and dashes.
const moved = "my.topic-x-3"

// twoDirs writes two log dirs of broker 1 below a fresh root: d1 holds orders-0, orders-1
// and moved, d2 holds payments-0.
func twoDirs(t *testing.T) (root, d1, d2 string) {
	t.Helper()
	root = t.TempDir()
	d1, d2 = filepath.Join(root, "disk1", "kafka-logs"), filepath.Join(root, "disk2", "kafka-logs")
	lt.LogDir(t, d1, 1, "orders-0", moved, "orders-1")
	lt.LogDir(t, d2, 1, "payments-0")
	return root, d1, d2
}

func moveOpts(d1, d2 string, out *bytes.Buffer) logdir.Options {
	return logdir.Options{From: d1, To: d2, Partition: moved, Out: writer(out)}
}

// writer is out as an io.Writer, nil (not a nil *bytes.Buffer) when out is nil.
func writer(out *bytes.Buffer) io.Writer {
	if out == nil {
		return nil
	}
	return out
}

func TestLogDirMove(t *testing.T) {
	_, d1, d2 := twoDirs(t)
	c := lt.NewMoveCase(t, d1, d2, moved)
	var out bytes.Buffer
	res, err := logdir.Move(moveOpts(d1, d2, &out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	c.CheckDone(t)
	if !res.Copied || res.Nothing || res.Files != 8 || res.Entries != 4 || res.Bytes == 0 {
		t.Errorf("result %+v", res)
	}
	for _, want := range []string{
		"move my.topic-x-3 from " + d1 + " to " + d2 + "\n",
		"  locked " + d1 + "/.lock and " + d2 + "/.lock\n",
		"  copied " + d1 + "/my.topic-x-3 to " + d2 + ".kafkamender/my.topic-x-3: 8 files",
		"  verified the copy against the source: same files, sizes and SHA-256\n",
		"  placed " + d2 + "/my.topic-x-3",
		"  " + d2 + "/recovery-point-offset-checkpoint: added my.topic-x-3 ",
		"  " + d1 + "/replication-offset-checkpoint: removed my.topic-x-3 ",
		"  renamed the source " + d1 + "/my.topic-x-3 to " + d1 + ".kafkamender/trash-my.topic-x-3\n",
		"  removed " + d1 + ".kafkamender/trash-my.topic-x-3\n",
		"moved my.topic-x-3 from " + d1 + " to " + d2 + ": 8 files, ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.HasSuffix(out.String(), res.Summary+"\n") {
		t.Errorf("the summary is not the last line:\n%s", out.String())
	}

	// Again: nothing to do, and nothing changed.
	before := lt.Snapshot(t, filepath.Dir(filepath.Dir(d1)))
	out.Reset()
	res, err = logdir.Move(moveOpts(d1, d2, &out))
	if err != nil || !res.Nothing || res.Copied {
		t.Fatalf("rerun: %+v, %v\n%s", res, err, out.String())
	}
	if !strings.Contains(out.String(), "nothing to do: my.topic-x-3 is already in "+d2) {
		t.Errorf("rerun output:\n%s", out.String())
	}
	if d := lt.Diff(before, lt.Snapshot(t, filepath.Dir(filepath.Dir(d1)))); len(d) > 0 {
		t.Errorf("the rerun changed %v", d)
	}
}

// Files the target lacks are created; files the source has no entry in give the target
// none (a stale one there is removed); the other entries keep their order.
func TestLogDirMoveCheckpointEdits(t *testing.T) {
	_, d1, d2 := twoDirs(t)
	if err := os.Remove(filepath.Join(d2, logdir.CleanerOffsetCheckpoint)); err != nil {
		t.Fatal(err)
	}
	lt.WriteCheckpoint(t, d1, logdir.LogStartOffsetCheckpoint, "orders-0", "orders-1")
	// d2's log-start file has a stale entry of the partition (no folder), and its
	// recovery-point file lists it before payments-0 with another offset.
	lt.WriteFile(t, filepath.Join(d2, logdir.LogStartOffsetCheckpoint), "0\n2\nmy.topic-x 3 999\npayments 0 1\n")
	lt.WriteFile(t, filepath.Join(d2, logdir.RecoveryPointCheckpoint), "0\n2\nmy.topic-x 3 5\npayments 0 7\n")
	c := lt.NewMoveCase(t, d1, d2, moved)
	if _, err := logdir.Move(moveOpts(d1, d2, nil)); err != nil {
		t.Fatal(err)
	}
	c.CheckDone(t)
	for name, want := range map[string]string{
		logdir.CleanerOffsetCheckpoint:  "0\n1\nmy.topic-x 3 " + off(logdir.CleanerOffsetCheckpoint) + "\n",
		logdir.LogStartOffsetCheckpoint: "0\n1\npayments 0 1\n",
		logdir.RecoveryPointCheckpoint:  "0\n2\nmy.topic-x 3 " + off(logdir.RecoveryPointCheckpoint) + "\npayments 0 7\n",
		logdir.ReplicationOffsetCheckpoint: "0\n2\npayments 0 " + itoa(lt.Offset(logdir.ReplicationOffsetCheckpoint, "payments-0")) +
			"\nmy.topic-x 3 " + off(logdir.ReplicationOffsetCheckpoint) + "\n",
	} {
		if got := read(t, filepath.Join(d2, name)); got != want {
			t.Errorf("%s:\n%s\nwant\n%s", name, got, want)
		}
	}
	want := "0\n2\norders 0 " + itoa(lt.Offset(logdir.RecoveryPointCheckpoint, "orders-0")) + "\norders 1 " +
		itoa(lt.Offset(logdir.RecoveryPointCheckpoint, "orders-1")) + "\n"
	if got := read(t, filepath.Join(d1, logdir.RecoveryPointCheckpoint)); got != want {
		t.Errorf("source recovery points:\n%s\nwant\n%s", got, want)
	}
}

func off(file string) string { return itoa(lt.Offset(file, moved)) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Leftovers of interrupted runs (temporary checkpoint files, a partial copy, an old
// trash) are cleaned up, and the move goes through.
func TestLogDirMoveCleansLeftovers(t *testing.T) {
	_, d1, d2 := twoDirs(t)
	lt.WriteFile(t, filepath.Join(d1, logdir.RecoveryPointCheckpoint+".tmp"), "0\n1\ngarb")
	lt.WriteFile(t, filepath.Join(d2, logdir.CleanerOffsetCheckpoint+".tmp"), "")
	lt.WriteFile(t, filepath.Join(logdir.StagingDir(d2), moved, "00000000000000000000.log"), "partial")
	lt.WriteFile(t, filepath.Join(logdir.StagingDir(d1), "trash-"+moved, "old"), "old")
	c := lt.NewMoveCase(t, d1, d2, moved)
	var out bytes.Buffer
	if _, err := logdir.Move(moveOpts(d1, d2, &out)); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	c.CheckDone(t)
	for _, want := range []string{
		"removed " + d1 + "/recovery-point-offset-checkpoint.tmp, left by an interrupted write",
		"removed " + d2 + "/cleaner-offset-checkpoint.tmp, left by an interrupted write",
		"removed " + d2 + ".kafkamender/my.topic-x-3, the partial copy of an interrupted run",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// An interrupted move (at every step, and, without -short, again at every later step on
// the first resume) leaves a state from which a rerun finishes the move.
func TestLogDirMoveInterrupted(t *testing.T) {
	for i, first := range logdir.MoveSteps {
		for _, second := range resumes(logdir.MoveSteps[i:]) {
			t.Run(first+"/"+second, func(t *testing.T) {
				t.Parallel()
				_, d1, d2 := twoDirs(t)
				c := lt.NewMoveCase(t, d1, d2, moved)
				var out bytes.Buffer
				if _, err := logdir.Move(logdir.StopAt(moveOpts(d1, d2, &out), first)); !errors.Is(err, logdir.ErrStopped) {
					t.Fatalf("stop at %s: %v\n%s", first, err, out.String())
				}
				c.CheckInterrupted(t)
				if second != "" {
					_, err := logdir.Move(logdir.StopAt(moveOpts(d1, d2, &out), second))
					if err != nil && !errors.Is(err, logdir.ErrStopped) {
						t.Fatalf("second run: %v\n%s", err, out.String())
					}
					c.CheckInterrupted(t)
				}
				if _, err := logdir.Move(moveOpts(d1, d2, &out)); err != nil {
					t.Fatalf("resume: %v\n%s", err, out.String())
				}
				c.CheckDone(t)
			})
		}
	}
}

// resumes are the steps a resumed run is interrupted at again ("": not interrupted): every
// later one, or under -short none.
func resumes(later []string) []string {
	if testing.Short() {
		return []string{""}
	}
	return append([]string{""}, later...)
}

// While it runs, the move holds the locks of both dirs, as another process (a starting
// broker) sees them.
func TestLogDirMoveHoldsLocks(t *testing.T) {
	_, d1, d2 := twoDirs(t)
	var reached []string
	opts := logdir.OnStep(moveOpts(d1, d2, nil), func(step string) {
		reached = append(reached, step)
		for _, dir := range []string{d1, d2} {
			if held, pid := lt.Probe(t, dir, helperTest); !held || pid != os.Getpid() {
				t.Errorf("at step %s, %s/.lock: held %v by pid %d, want held by this process (%d)", step, dir, held, pid, os.Getpid())
			}
		}
	})
	if _, err := logdir.Move(opts); err != nil {
		t.Fatal(err)
	}
	if strings.Join(reached, " ") != strings.Join(logdir.MoveSteps, " ") {
		t.Errorf("steps reached %v, want %v", reached, logdir.MoveSteps)
	}
	for _, dir := range []string{d1, d2} {
		if held, _ := lt.Probe(t, dir, helperTest); held {
			t.Errorf("%s/.lock still held after the move", dir)
		}
	}
}

// Every refusal changes nothing: every file of both dirs (and beside them) is as it was.
func TestLogDirMoveRefusals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		setup     func(t *testing.T, root, d1, d2 string) (from, to string)
		partition string
		want      string
	}{
		{name: "same dir", setup: func(t *testing.T, root, d1, d2 string) (string, string) { return d1, d1 },
			want: "--from " + "$D1" + " and --to $D1 are the same directory"},
		{name: "same dir through a symlink", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			link := filepath.Join(root, "link")
			if err := os.Symlink(d1, link); err != nil {
				t.Fatal(err)
			}
			return d1, link
		}, want: "are the same directory"},
		{name: "from does not exist", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			return filepath.Join(root, "nope"), d2
		}, want: "--from $ROOT/nope: lstat $ROOT/nope: no such file or directory"},
		{name: "to is a file", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			return d1, filepath.Join(d2, logdir.MetaFile)
		}, want: "--to $D2/meta.properties is not a directory"},
		{name: "no meta.properties in from", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			rm(t, filepath.Join(d1, logdir.MetaFile))
			return d1, d2
		}, want: "--from $D1 has no meta.properties: it is not a Kafka log dir"},
		{name: "no meta.properties in to", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			rm(t, filepath.Join(d2, logdir.MetaFile))
			return d1, d2
		}, want: "--to $D2 has no meta.properties"},
		{name: "other broker", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.WriteFile(t, filepath.Join(d2, logdir.MetaFile), lt.Meta(2))
			return d1, d2
		}, want: "--from $D1 (broker 1, cluster.id " + lt.ClusterID + ") and --to $D2 (broker 2, cluster.id " + lt.ClusterID +
			") are not log dirs of the same broker"},
		{name: "other cluster", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.WriteFile(t, filepath.Join(d2, logdir.MetaFile), "broker.id=1\ncluster.id=other\nversion=0\n")
			return d1, d2
		}, want: "(broker 1, cluster.id other) are not log dirs of the same broker"},
		{name: "no broker id", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.WriteFile(t, filepath.Join(d1, logdir.MetaFile), "cluster.id=x\nversion=0\n")
			return d1, d2
		}, want: "--from $D1: meta.properties has neither node.id nor broker.id"},
		{name: "no cluster id", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.WriteFile(t, filepath.Join(d2, logdir.MetaFile), "broker.id=1\nversion=0\n")
			return d1, d2
		}, want: "--to $D2: meta.properties has no cluster.id"},
		{name: "KRaft source", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.WriteFile(t, filepath.Join(d1, logdir.MetaFile), lt.KRaftMeta(1, "b6yAqXbqQ6iSC9lJ3NhfTw"))
			lt.WriteFile(t, filepath.Join(d2, logdir.MetaFile), "node.id=1\nversion=1\ncluster.id="+lt.ClusterID+"\n")
			return d1, d2
		}, want: "$D1 has a directory.id in meta.properties and $D2 has none: they are not two log dirs of one KRaft broker"},
		{name: "KRaft target", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.WriteFile(t, filepath.Join(d1, logdir.MetaFile), "node.id=1\nversion=1\ncluster.id="+lt.ClusterID+"\n")
			lt.WriteFile(t, filepath.Join(d2, logdir.MetaFile), lt.KRaftMeta(1, "3RAIdFDQSyiz5yQe2uoBcg"))
			return d1, d2
		}, want: "$D2 has a directory.id in meta.properties and $D1 has none"},
		{name: "KRaft dirs with one id", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.WriteFile(t, filepath.Join(d1, logdir.MetaFile), lt.KRaftMeta(1, "3RAIdFDQSyiz5yQe2uoBcg"))
			lt.WriteFile(t, filepath.Join(d2, logdir.MetaFile), lt.KRaftMeta(1, "3RAIdFDQSyiz5yQe2uoBcg"))
			return d1, d2
		}, want: "have the same directory.id 3RAIdFDQSyiz5yQe2uoBcg"},
		{name: "malformed source checkpoint", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.WriteFile(t, filepath.Join(d1, logdir.RecoveryPointCheckpoint), "0\n3\norders 0 1\nx y\n")
			return d1, d2
		}, want: `--from: malformed checkpoint file, which this tool does not edit: $D1/recovery-point-offset-checkpoint:4: want "<topic> <partition> <offset>": three fields separated by single spaces`},
		{name: "target checkpoint count mismatch", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.WriteFile(t, filepath.Join(d2, logdir.CleanerOffsetCheckpoint), "0\n2\npayments 0 1\n")
			return d1, d2
		}, want: "--to: malformed checkpoint file, which this tool does not edit: $D2/cleaner-offset-checkpoint:4: the file ends after 1 entries, but line 2 announces 2"},
		{name: "duplicate entries", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.WriteFile(t, filepath.Join(d2, logdir.ReplicationOffsetCheckpoint), "0\n2\npayments 0 1\npayments 0 2\n")
			return d1, d2
		}, want: "--to: $D2/replication-offset-checkpoint:4: payments-0 is listed again (first on line 3); this tool does not edit a checkpoint file that lists a partition twice"},
		{name: "partition in neither dir", partition: "orders-7", want: "orders-7 is in neither $D1 nor $D2"},
		{name: "bad partition name", partition: "orders", want: `partition "orders": want <topic>-<partition>`},
		{name: "metadata log", partition: "__cluster_metadata-0", want: "__cluster_metadata-0 is the KRaft metadata log"},
		{name: "target has a different copy", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.PartitionFolder(t, filepath.Join(d2, moved))
			lt.WriteFile(t, filepath.Join(d2, moved, "00000000000000000042.log"), "other")
			return d1, d2
		}, want: "$D2 already has a my.topic-x-3 folder that differs from the one in $D1 (00000000000000000042.log has 5 bytes, the source "},
		{name: "target has an extra file", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.PartitionFolder(t, filepath.Join(d2, moved))
			lt.WriteFile(t, filepath.Join(d2, moved, "00000000000000000099.log"), "")
			return d1, d2
		}, want: "(00000000000000000099.log is not in the source)"},
		{name: "target has an empty folder", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			if err := os.Mkdir(filepath.Join(d2, moved), 0o755); err != nil {
				t.Fatal(err)
			}
			return d1, d2
		}, want: "(00000000000000000000.index is missing)"},
		{name: "online move pending", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.PartitionFolder(t, filepath.Join(d2, moved+".0f1e2d3c4b5a69788796a5b4c3d2e1f0-future"))
			return d1, d2
		}, want: "--to $D2 holds my.topic-x-3.0f1e2d3c4b5a69788796a5b4c3d2e1f0-future, an online log-dir move of my.topic-x-3"},
		{name: "source not shut down cleanly", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			rm(t, filepath.Join(d1, logdir.CleanShutdownFile))
			return d1, d2
		}, want: "$D2 has .kafka_cleanshutdown (its broker stopped cleanly) but $D1 has not"},
		{name: "staging path is a file", setup: func(t *testing.T, root, d1, d2 string) (string, string) {
			lt.WriteFile(t, logdir.StagingDir(d2), "x")
			return d1, d2
		}, want: "$D2.kafkamender exists and is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, d1, d2 := twoDirs(t)
			from, to := d1, d2
			if tc.setup != nil {
				from, to = tc.setup(t, root, d1, d2)
			}
			partition := moved
			if tc.partition != "" {
				partition = tc.partition
			}
			before := lt.Snapshot(t, root)
			var out bytes.Buffer
			_, err := logdir.Move(logdir.Options{From: from, To: to, Partition: partition, Out: &out})
			want := strings.NewReplacer("$D1", d1, "$D2", d2, "$ROOT", root).Replace(tc.want)
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

// The staging directory must be on the log dir's filesystem, or renames would not be
// atomic: a log dir that is a mount point (here a tmpfs, mounted when the test may) has
// its staging directory on another filesystem, and is refused.
func TestLogDirMoveStagingOnOtherFilesystem(t *testing.T) {
	root := t.TempDir()
	d1, d2 := filepath.Join(root, "disk1", "kafka-logs"), filepath.Join(root, "disk2")
	if err := os.MkdirAll(d2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", d2, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("cannot mount a tmpfs (not root?): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(d2, syscall.MNT_DETACH) })
	lt.LogDir(t, d1, 1, "orders-0", moved)
	lt.LogDir(t, d2, 1)
	if devOf(t, d2) == devOf(t, root) {
		t.Fatal("the tmpfs is on the temp dir's filesystem")
	}
	before := lt.Snapshot(t, root)
	_, err := logdir.Move(moveOpts(d1, d2, nil))
	var refusal *logdir.Refusal
	if !errors.As(err, &refusal) || !strings.Contains(err.Error(), "is on another filesystem than the log dir") {
		t.Errorf("error %v, want a refusal naming the filesystem", err)
	}
	if d := lt.Diff(before, lt.Snapshot(t, root)); len(d) > 0 {
		t.Errorf("the refusal changed files: %v", d)
	}
}

func devOf(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(fi.Sys().(*syscall.Stat_t).Dev)
}

func rm(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// A rerun finds the partition in both dirs after an interrupted run; when the target copy
// is not identical, it refuses and changes nothing.
func TestLogDirMoveResumeRefusesAChangedCopy(t *testing.T) {
	root, d1, d2 := twoDirs(t)
	if _, err := logdir.Move(logdir.StopAt(moveOpts(d1, d2, nil), logdir.StepTargetPartial)); !errors.Is(err, logdir.ErrStopped) {
		t.Fatal(err)
	}
	lt.WriteFile(t, filepath.Join(d2, moved, "leader-epoch-checkpoint"), "0\n1\n9 9\n")
	before := lt.Snapshot(t, root)
	_, err := logdir.Move(moveOpts(d1, d2, nil))
	if !strings.Contains(fmtErr(err), "leader-epoch-checkpoint differs from the source (SHA-256)") {
		t.Errorf("error %v", err)
	}
	if d := lt.Diff(before, lt.Snapshot(t, root)); len(d) > 0 {
		t.Errorf("the refusal changed files: %v", d)
	}
}

// Once the source is gone, an entry it still lists with another offset than the target
// is not resolved by guessing.
func TestLogDirMoveTargetOnlyConflict(t *testing.T) {
	_, d1, d2 := twoDirs(t)
	if _, err := logdir.Move(moveOpts(d1, d2, nil)); err != nil {
		t.Fatal(err)
	}
	lt.WriteFile(t, filepath.Join(d1, logdir.RecoveryPointCheckpoint), "0\n1\nmy.topic-x 3 1\n")
	_, err := logdir.Move(moveOpts(d1, d2, nil))
	var refusal *logdir.Refusal
	if !errors.As(err, &refusal) || !strings.Contains(err.Error(), "this tool does not choose between them") {
		t.Errorf("error %v", err)
	}
	// With the same offset, the rerun finishes: the entry leaves the source.
	lt.WriteFile(t, filepath.Join(d1, logdir.RecoveryPointCheckpoint), "0\n1\nmy.topic-x 3 "+off(logdir.RecoveryPointCheckpoint)+"\n")
	if _, err := logdir.Move(moveOpts(d1, d2, nil)); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(d1, logdir.RecoveryPointCheckpoint)); got != "0\n0\n" {
		t.Errorf("source recovery points %q", got)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
