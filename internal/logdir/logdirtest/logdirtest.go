// Package logdirtest builds fake Kafka log dirs for tests and checks what package logdir
// leaves in them: snapshots of whole trees, and the invariants of an interrupted and of a
// finished move or recovery.
package logdirtest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/logdir"
)

// ClusterID is the cluster.id of every fake log dir.
const ClusterID = "Q3mfXcHcTjqj0b6lbVgZ8w"

// MTime is the modification time of every file of the fake partition folders, so that
// tests can see it is kept.
var MTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Meta is the meta.properties of a ZooKeeper-mode broker, as Kafka writes it.
func Meta(broker int) string {
	return fmt.Sprintf("#\n#Fri Jan 02 03:04:05 UTC 2026\nbroker.id=%d\nversion=0\ncluster.id=%s\n", broker, ClusterID)
}

// KRaftMeta is the meta.properties of a KRaft broker with several log dirs (Kafka 3.7+).
func KRaftMeta(node int, dirID string) string {
	return fmt.Sprintf("#\n#Fri Jan 02 03:04:05 UTC 2026\nnode.id=%d\ndirectory.id=%s\nversion=1\ncluster.id=%s\n", node, dirID, ClusterID)
}

// Offset is the offset the fake checkpoint file named file lists for partition tp.
func Offset(file, tp string) int64 {
	h := fnv.New32a()
	h.Write([]byte(file + "/" + tp))
	return int64(h.Sum32() % 100000)
}

// LogDir writes a log dir at path, as a cleanly stopped broker leaves it: meta.properties
// of broker (ZooKeeper mode), .lock, .kafka_cleanshutdown, a folder of segment files with
// random bytes per partition, and the four checkpoint files listing every partition (with
// offsets from Offset).
func LogDir(t testing.TB, path string, broker int, partitions ...string) {
	t.Helper()
	WriteFile(t, filepath.Join(path, logdir.MetaFile), Meta(broker))
	WriteFile(t, filepath.Join(path, logdir.LockFile), "")
	WriteFile(t, filepath.Join(path, logdir.CleanShutdownFile), "")
	for _, tp := range partitions {
		PartitionFolder(t, filepath.Join(path, tp))
	}
	for _, name := range logdir.CheckpointFiles {
		WriteCheckpoint(t, path, name, partitions...)
	}
}

// PartitionFolder writes a partition folder: two segments (log, index, time index) of
// random bytes seeded by the folder's name, a leader-epoch-checkpoint and a
// partition.metadata, all with the modification time MTime.
func PartitionFolder(t testing.TB, folder string) {
	t.Helper()
	name := filepath.Base(folder)
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(h.Sum64(), 7))
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return string(b)
	}
	files := map[string]string{
		"00000000000000000000.log":       random(3000 + rng.IntN(2000)),
		"00000000000000000000.index":     random(80),
		"00000000000000000000.timeindex": random(120),
		"00000000000000000042.log":       random(500 + rng.IntN(500)),
		"00000000000000000042.index":     random(16),
		"00000000000000000042.timeindex": random(24),
		"leader-epoch-checkpoint":        "0\n1\n0 0\n",
		"partition.metadata":             "version: 0\ntopic_id: " + fmt.Sprintf("%x", h.Sum64()) + "\n",
	}
	for file, content := range files {
		path := filepath.Join(folder, file)
		WriteFile(t, path, content)
		if err := os.Chtimes(path, MTime, MTime); err != nil {
			t.Fatal(err)
		}
	}
}

// WriteCheckpoint writes the checkpoint file name of dir listing the partitions, each
// with the offset Offset(name, tp).
func WriteCheckpoint(t testing.TB, dir, name string, partitions ...string) {
	t.Helper()
	cp := &logdir.Checkpoint{}
	for _, s := range partitions {
		tp, err := logdir.ParseTP(s)
		if err != nil {
			t.Fatal(err)
		}
		cp.Entries = append(cp.Entries, logdir.Entry{TP: tp, Offset: Offset(name, s)})
	}
	WriteFile(t, filepath.Join(dir, name), string(cp.Bytes()))
}

// WriteFile writes content to path, creating its directory.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Snapshot describes every file and directory below root (root included, as "."): mode,
// and for files size, SHA-256 and modification time. Two equal snapshots are trees equal
// byte for byte. A missing root is an empty snapshot.
func Snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == root {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel] = fmt.Sprintf("dir %v", info.Mode())
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(path)
			out[rel] = "symlink to " + target
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("file %v %d %x %s", info.Mode(), len(data), sha256.Sum256(data), info.ModTime().UTC().Format(time.RFC3339Nano))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Diff lists the differences between two snapshots, sorted; none when they are equal.
func Diff(before, after map[string]string) []string {
	var out []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			out = append(out, "removed "+k)
		} else if w != v {
			out = append(out, fmt.Sprintf("changed %s: %s -> %s", k, v, w))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			out = append(out, "added "+k)
		}
	}
	slices.Sort(out)
	return out
}

// Checkpoints reads the four checkpoint files of dir strictly; an absent file is nil,
// a malformed one (or one listing a partition twice) fails the test.
func Checkpoints(t testing.TB, dir string) map[string]*logdir.Checkpoint {
	t.Helper()
	out := map[string]*logdir.Checkpoint{}
	for _, name := range logdir.CheckpointFiles {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			out[name] = nil
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		cp, err := logdir.ParseCheckpoint(path, data)
		if err != nil {
			t.Fatalf("checkpoint file does not parse: %v", err)
		}
		if p := cp.Problems(path); len(p) > 0 {
			t.Fatalf("checkpoint file: %v", p)
		}
		out[name] = cp
	}
	return out
}

// others are the entries of every partition but tp, in order.
func others(cp *logdir.Checkpoint, tp logdir.TP) []logdir.Entry {
	if cp == nil {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(cp.Entries), func(e logdir.Entry) bool { return e.TP == tp })
}

// NoStrayFolders fails the test when a subdirectory of dir is not one Kafka loads.
func NoStrayFolders(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if kind, _ := logdir.ClassifyFolder(e.Name()); e.IsDir() && kind == logdir.KindUnknown {
			t.Errorf("%s: a folder Kafka would fail on", filepath.Join(dir, e.Name()))
		}
	}
}

// NoLeftovers fails the test when dir has a *.tmp file at its root or a staging
// directory beside it.
func NoLeftovers(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("%s left behind", filepath.Join(dir, e.Name()))
		}
	}
	if _, err := os.Lstat(logdir.StagingDir(dir)); err == nil {
		t.Errorf("%s left behind: %v", logdir.StagingDir(dir), Snapshot(t, logdir.StagingDir(dir)))
	}
}

// Consistent fails the test when Inspect finds an inconsistency in dir.
func Consistent(t testing.TB, dir string) {
	t.Helper()
	r, err := logdir.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Problems {
		t.Errorf("inspect %s: %s", dir, p)
	}
}
