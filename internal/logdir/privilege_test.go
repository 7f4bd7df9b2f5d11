package logdir_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kafkamender/kafkamender/internal/logdir"
	lt "github.com/kafkamender/kafkamender/internal/logdir/logdirtest"
)

// As root, PlanDrop picks the owner of the log dirs; none for root's dirs; a refusal for
// dirs of two owners. Prepare makes, as root, the staging directories the owner may not
// make (in a directory of root's), owned by the owner, and Finish removes them when empty.
func TestLogDirPlanDrop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	root, d1, d2 := twoDirs(t)
	if drop, err := logdir.PlanDrop(d1, d2); drop != nil || err != nil {
		t.Errorf("root's dirs: %v, %v; want none", drop, err)
	}
	for _, d := range []string{d1, d2} {
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	drop, err := logdir.PlanDrop(d1, d2, filepath.Join(root, "missing"))
	if err != nil || drop == nil || drop.UID != 65534 || drop.GID != 65534 {
		t.Fatalf("nobody's dirs: %v, %v", drop, err)
	}
	if err := drop.Prepare(d1, filepath.Join(root, "missing")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(logdir.StagingDir(d1))
	if err != nil || !fi.IsDir() || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Fatalf("staging directory: %v, %v", fi, err)
	}
	if _, err := os.Lstat(logdir.StagingDir(d2)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a staging directory for %s, not asked for: %v", d2, err)
	}
	var out strings.Builder
	if err := drop.Finish(&out); err != nil || !strings.Contains(out.String(), "removed the empty staging directory "+logdir.StagingDir(d1)) {
		t.Errorf("finish: %v\n%s", err, out.String())
	}
	if _, err := os.Lstat(logdir.StagingDir(d1)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s is left: %v", logdir.StagingDir(d1), err)
	}

	// A link by the staging directory's name is not followed: Prepare leaves it to the
	// command, which refuses it.
	o := newOutside(t)
	plant(t, o.elsewhere, logdir.StagingDir(d1))
	if err := drop.Prepare(d1); err != nil {
		t.Fatal(err)
	}
	if err := drop.Finish(&out); err != nil {
		t.Fatal(err)
	}
	o.untouched(t, root)

	if err := os.Chown(d2, 65533, 65533); err != nil {
		t.Fatal(err)
	}
	_, err = logdir.PlanDrop(d1, d2)
	var refusal *logdir.Refusal
	if !errors.As(err, &refusal) || !strings.Contains(err.Error(), "belongs to uid 65534 gid 65534 and "+d2+" to uid 65533 gid 65533") {
		t.Errorf("two owners: %v", err)
	}
	lt.NoStrayFolders(t, d1)
}
