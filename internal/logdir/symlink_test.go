package logdir_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/logdir"
	lt "github.com/kafkamender/kafkamender/internal/logdir/logdirtest"
)

// The broker's user owns its log dirs and can plant symbolic links in them; the tool runs
// as root. So it follows no link below a log dir (nor the staging directory beside it):
// Kafka makes none there. These tests plant links to a file and a directory outside the
// log dirs, and check that the tool refuses, naming the link, and that nothing outside is
// written, chmodded, removed or read.

// secretContent is what the file outside holds; ':' keeps it from ever being a topic name.
const secretContent = "root-only:TOPSECRET\n"

// outside is a directory beside the log dirs: a root-only file (secret) and a directory
// (elsewhere) holding a folder of the moved partition, which the tool must not touch.
type outside struct {
	dir, secret, elsewhere string
	before                 map[string]string
	atime                  time.Time
	atimeWorks             bool // reading a file updates its atime here (relatime)
}

func newOutside(t *testing.T) *outside {
	t.Helper()
	o := &outside{dir: t.TempDir()}
	o.secret = filepath.Join(o.dir, "secret")
	o.elsewhere = filepath.Join(o.dir, "elsewhere")
	lt.WriteFile(t, o.secret, secretContent)
	if err := os.Chmod(o.secret, 0o600); err != nil {
		t.Fatal(err)
	}
	lt.PartitionFolder(t, filepath.Join(o.elsewhere, moved))
	o.atime = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	control := filepath.Join(t.TempDir(), "control")
	lt.WriteFile(t, control, "x")
	setAtime(t, control, o.atime)
	if _, err := os.ReadFile(control); err != nil {
		t.Fatal(err)
	}
	o.atimeWorks = !atimeOf(t, control).Equal(o.atime)
	o.arm(t)
	return o
}

// arm records what is outside, then sets the secret's atime before its mtime: with
// relatime (or strictatime) any read of it moves the atime.
func (o *outside) arm(t *testing.T) {
	t.Helper()
	o.before = lt.Snapshot(t, o.dir)
	setAtime(t, o.secret, o.atime)
}

func setAtime(t *testing.T, path string, atime time.Time) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, atime, fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

func atimeOf(t *testing.T, path string) time.Time {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return time.Unix(st.Atim.Sec, st.Atim.Nsec).UTC()
}

// untouched checks that nothing outside changed (content, mode, mtime, the files there),
// that the secret was not read (its atime, where reads move it), and that no file below
// root (the log dirs and their staging directories) holds its content.
func (o *outside) untouched(t *testing.T, root string) {
	t.Helper()
	if o.atimeWorks && !atimeOf(t, o.secret).Equal(o.atime) {
		t.Errorf("%s was read (its atime moved)", o.secret)
	}
	if d := lt.Diff(o.before, lt.Snapshot(t, o.dir)); len(d) > 0 {
		t.Errorf("changed outside the log dirs: %v", d)
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil && bytes.Contains(data, []byte("TOPSECRET")) {
			t.Errorf("%s holds the content of %s", path, o.secret)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.RemoveAll(link); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// refused checks that err names link as a symbolic link without quoting the secret, and
// that nothing outside was touched.
func (o *outside) refused(t *testing.T, root string, err error, link string) {
	t.Helper()
	defer o.untouched(t, root)
	if want := link + " is a symbolic link"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one with %q", err, want)
	}
	if err != nil && strings.Contains(err.Error(), "TOPSECRET") {
		t.Errorf("the error quotes the file outside: %v", err)
	}
}

func TestLogDirMoveRefusesSymlinks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, o *outside, d1, d2 string) (link string)
	}{
		{"source checkpoint file to a root-only file", func(t *testing.T, o *outside, d1, d2 string) string {
			return plant(t, o.secret, filepath.Join(d1, logdir.RecoveryPointCheckpoint))
		}},
		{"target checkpoint file to a root-only file", func(t *testing.T, o *outside, d1, d2 string) string {
			return plant(t, o.secret, filepath.Join(d2, logdir.ReplicationOffsetCheckpoint))
		}},
		{"meta.properties", func(t *testing.T, o *outside, d1, d2 string) string {
			return plant(t, o.secret, filepath.Join(d2, logdir.MetaFile))
		}},
		{".lock", func(t *testing.T, o *outside, d1, d2 string) string {
			return plant(t, o.secret, filepath.Join(d2, logdir.LockFile))
		}},
		{"partition folder to a directory elsewhere", func(t *testing.T, o *outside, d1, d2 string) string {
			return plant(t, filepath.Join(o.elsewhere, moved), filepath.Join(d1, moved))
		}},
		{"segment to a root-only file", func(t *testing.T, o *outside, d1, d2 string) string {
			return plant(t, o.secret, filepath.Join(d1, moved, "00000000000000000042.log"))
		}},
		{"staging directory to a directory elsewhere", func(t *testing.T, o *outside, d1, d2 string) string {
			return plant(t, o.elsewhere, logdir.StagingDir(d2))
		}},
		{"trash to a directory elsewhere", func(t *testing.T, o *outside, d1, d2 string) string {
			return plant(t, filepath.Join(o.elsewhere, moved), filepath.Join(logdir.StagingDir(d1), "trash-"+moved))
		}},
		{"the temporary checkpoint file to a root-only file", func(t *testing.T, o *outside, d1, d2 string) string {
			return plant(t, o.secret, filepath.Join(d2, logdir.CleanerOffsetCheckpoint+".tmp"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, d1, d2 := twoDirs(t)
			o := newOutside(t)
			link := tc.plant(t, o, d1, d2)
			_, err := logdir.Move(moveOpts(d1, d2, nil))
			o.refused(t, root, err, link)
		})
	}
}

// plant replaces link by a symbolic link to target and returns link.
func plant(t *testing.T, target, link string) string {
	t.Helper()
	symlink(t, target, link)
	return link
}

// A link planted while the tool runs (the broker's user races it) is not followed either:
// here the temporary names of the target's checkpoint files, once the copy is placed.
func TestLogDirMoveRefusesSymlinkPlantedMidway(t *testing.T) {
	root, d1, d2 := twoDirs(t)
	o := newOutside(t)
	opts := logdir.OnStep(moveOpts(d1, d2, nil), func(step string) {
		if step == logdir.StepPlaced {
			for _, name := range logdir.CheckpointFiles {
				symlink(t, o.secret, filepath.Join(d2, name+".tmp"))
			}
		}
	})
	_, err := logdir.Move(opts)
	o.refused(t, root, err, filepath.Join(d2, logdir.CleanerOffsetCheckpoint+".tmp"))
	if fi, err := os.Lstat(o.secret); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, %v; want mode 0600", o.secret, fi.Mode(), err)
	}
}

func TestLogDirRecoverRefusesSymlinks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, o *outside, healthy, broken string) string
	}{
		{"source checkpoint file", func(t *testing.T, o *outside, h, b string) string {
			return plant(t, o.secret, filepath.Join(h, logdir.ReplicationOffsetCheckpoint))
		}},
		{"source segment", func(t *testing.T, o *outside, h, b string) string {
			return plant(t, o.secret, filepath.Join(h, lost, "00000000000000000000.index"))
		}},
		{"target staging directory", func(t *testing.T, o *outside, h, b string) string {
			lt.PartitionFolder(t, filepath.Join(o.elsewhere, lost))
			o.arm(t)
			return plant(t, o.elsewhere, logdir.StagingDir(b))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, healthy, broken := brokers(t)
			o := newOutside(t)
			link := tc.plant(t, o, healthy, broken)
			_, err := logdir.Recover(recoverOpts(healthy, broken, nil))
			o.refused(t, root, err, link)
		})
	}
}

// Inspect reports a link where Kafka makes none, and does not follow it.
func TestLogDirInspectRefusesSymlinks(t *testing.T) {
	root, d1, _ := twoDirs(t)
	o := newOutside(t)
	links := []string{
		plant(t, o.secret, filepath.Join(d1, logdir.RecoveryPointCheckpoint)),
		plant(t, filepath.Join(o.elsewhere, moved), filepath.Join(d1, "orders-1")),
		plant(t, o.elsewhere, logdir.StagingDir(d1)),
	}
	_, out := inspectText(t, d1)
	for _, link := range links {
		if !strings.Contains(out, link+" is a symbolic link") {
			t.Errorf("the report does not name %s as a link:\n%s", link, out)
		}
	}
	if strings.Contains(out, "TOPSECRET") || strings.Contains(out, "0000000000000000000.log") {
		t.Errorf("the report shows what is outside:\n%s", out)
	}
	o.untouched(t, root)

	// meta.properties as a link: not read.
	plant(t, o.secret, filepath.Join(d1, logdir.MetaFile))
	o.arm(t)
	r, _ := inspectText(t, d1)
	if r.Meta != nil || !strings.Contains(r.MetaErr, "is a symbolic link") {
		t.Errorf("meta %v, %q", r.Meta, r.MetaErr)
	}
	o.untouched(t, root)
}
