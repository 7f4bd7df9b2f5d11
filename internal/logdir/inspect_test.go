package logdir_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/logdir"
	lt "github.com/kafkamender/kafkamender/internal/logdir/logdirtest"
)

// A dir as a cleanly stopped broker leaves it has no inconsistency.
func TestLogDirInspectConsistent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kafka-logs")
	lt.LogDir(t, dir, 1, "orders-0", "orders-1")
	lt.PartitionFolder(t, filepath.Join(dir, "__cluster_metadata-0"))
	lt.PartitionFolder(t, filepath.Join(dir, "orders-2.5b7a2a0e3c4d4e5f8a9b0c1d2e3f4a5b-delete"))
	r, err := logdir.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) > 0 {
		t.Errorf("problems: %q", r.Problems)
	}
	if id, key := r.Meta.BrokerID(); id != "1" || key != "broker.id" || r.Meta.ClusterID() != lt.ClusterID {
		t.Errorf("meta %v", r.Meta)
	}
	if !r.Lock.Exists || r.Lock.Held || !r.CleanShutdown || len(r.Folders) != 4 || len(r.Checkpoints) != 4 {
		t.Errorf("report %+v", r)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "inconsistencies: none\n") {
		t.Errorf("output:\n%s", out.String())
	}
}

// A dir with one of each inconsistency: the report names them all (golden file).
func TestLogDirInspectGolden(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kafka-logs")
	lt.WriteFile(t, filepath.Join(dir, logdir.MetaFile), lt.KRaftMeta(3, "b6yAqXbqQ6iSC9lJ3NhfTw"))
	lt.WriteFile(t, filepath.Join(dir, logdir.LockFile), "")
	for _, folder := range []string{
		"orders-0", // complete
		"orders-1", // no recovery point
		"orders-2", // no high watermark, and listed twice in the recovery points
		"orders-9.0f1e2d3c4b5a69788796a5b4c3d2e1f0-future", // its entries are not missing folders
		"orders-8.0f1e2d3c4b5a69788796a5b4c3d2e1f0-delete",
		"old.events-4.0f1e2d3c4b5a69788796a5b4c3d2e1f0-stray",
		"__cluster_metadata-0",
		"lost+found", // Kafka fails on it
	} {
		lt.PartitionFolder(t, filepath.Join(dir, folder))
	}
	lt.WriteFile(t, filepath.Join(dir, logdir.LogStartOffsetCheckpoint), "0\n3\norders 0 10\norders 1 0\n")
	lt.WriteFile(t, filepath.Join(dir, logdir.RecoveryPointCheckpoint), "0\n5\norders 0 120\norders 2 118\norders 9 40\nghost 0 7\norders 2 119\n")
	lt.WriteFile(t, filepath.Join(dir, logdir.ReplicationOffsetCheckpoint), "0\n2\norders 0 120\norders 1 88\n")
	lt.WriteFile(t, filepath.Join(dir, logdir.RecoveryPointCheckpoint+".tmp"), "0\n")
	lt.WriteFile(t, filepath.Join(logdir.StagingDir(dir), "orders-5", "00000000000000000000.log"), "partial")
	lt.WriteFile(t, filepath.Join(logdir.StagingDir(dir), "trash-orders-6", "00000000000000000000.log"), "old")

	r, out := inspectText(t, dir)
	golden(t, "inspect.golden", []byte(strings.ReplaceAll(out, dir, "$DIR")))
	if len(r.Problems) != 9 {
		t.Errorf("%d problems, want 9: %q", len(r.Problems), r.Problems)
	}
}

func TestLogDirInspectErrors(t *testing.T) {
	if _, err := logdir.Inspect(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("inspect of a missing dir: no error")
	}
	file := filepath.Join(t.TempDir(), "f")
	lt.WriteFile(t, file, "")
	if _, err := logdir.Inspect(file); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("inspect of a file: %v", err)
	}
	// An empty dir: no meta.properties is the one inconsistency.
	r, err := logdir.Inspect(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "meta.properties is absent") {
		t.Errorf("problems of an empty dir: %q", r.Problems)
	}
	if _, err := os.Stat(logdir.StagingDir(file)); err == nil {
		t.Error("inspect created a staging directory")
	}
}

// Between the rename into place and the removal of the source, the partition is in two
// log dirs of the broker; AcrossDirs names it, and only for dirs of one broker.
func TestLogDirInspectAcrossDirs(t *testing.T) {
	_, d1, d2 := twoDirs(t)
	if _, err := logdir.Move(logdir.StopAt(moveOpts(d1, d2, nil), logdir.StepPlaced)); err == nil {
		t.Fatal("not stopped")
	}
	reports := inspectAll(t, d1, d2)
	got := logdir.AcrossDirs(reports...)
	want := "my.topic-x-3 is in 2 log dirs of broker 1 (" + d1 + ", " + d2 + "): Kafka refuses to start"
	if len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("across dirs: %q, want %q", got, want)
	}
	other := filepath.Join(t.TempDir(), "b2")
	lt.LogDir(t, other, 2, moved)
	if got := logdir.AcrossDirs(inspectAll(t, d1, other)...); len(got) != 0 {
		t.Errorf("dirs of two brokers: %q", got)
	}
	if _, err := logdir.Move(moveOpts(d1, d2, nil)); err != nil {
		t.Fatal(err)
	}
	if got := logdir.AcrossDirs(inspectAll(t, d1, d2)...); len(got) != 0 {
		t.Errorf("after the move: %q", got)
	}
}

func inspectAll(t *testing.T, dirs ...string) []*logdir.Report {
	t.Helper()
	var out []*logdir.Report
	for _, d := range dirs {
		r, err := logdir.Inspect(d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// The bytes of a checkpoint file or of meta.properties are never repeated in an error, a
// refusal or a report: the file may be something its owner should not read (a link, a
// hard link), and messages end up in terminals and logs. The messages name the file, the
// line and what is wrong.
func TestLogDirErrorsHideContent(t *testing.T) {
	const secret = "hunter2:TOPSECRET" // not a topic name: a valid one would be an entry, shown as such
	for _, tc := range []struct {
		name, file, content, want string
	}{
		{"checkpoint", logdir.RecoveryPointCheckpoint, secret + "\n", "recovery-point-offset-checkpoint:1: want format version"},
		{"checkpoint entry", logdir.ReplicationOffsetCheckpoint, "0\n1\n" + secret + " 0 1\n", "replication-offset-checkpoint:3: bad topic"},
		{"checkpoint partition", logdir.CleanerOffsetCheckpoint, "0\n1\nt " + secret + " 1\n", "cleaner-offset-checkpoint:3: bad partition"},
		{"meta broker.id", logdir.MetaFile, "broker.id=" + secret + "\ncluster.id=" + lt.ClusterID + "\n", "meta.properties: broker.id is not what Kafka writes"},
		{"meta cluster.id", logdir.MetaFile, "broker.id=1\ncluster.id=" + secret + "\n", "meta.properties: cluster.id is not what Kafka writes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, d1, d2 := twoDirs(t)
			lt.WriteFile(t, filepath.Join(d1, tc.file), tc.content)
			_, err := logdir.Move(moveOpts(d1, d2, nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("move: %v, want an error with %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("move's error quotes the file: %v", err)
			}
			_, out := inspectText(t, d1)
			if !strings.Contains(out, tc.want) {
				t.Errorf("inspect does not report %q:\n%s", tc.want, out)
			}
			if strings.Contains(out, "hunter2") {
				t.Errorf("inspect quotes the file:\n%s", out)
			}
		})
	}
}

// inspectText inspects dir and returns the report and its text.
func inspectText(t *testing.T, dir string) (*logdir.Report, string) {
	t.Helper()
	r, err := logdir.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	return r, out.String()
}
