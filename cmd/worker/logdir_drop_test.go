package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kafkamender/kafkamender/internal/logdir"
	lt "github.com/kafkamender/kafkamender/internal/logdir/logdirtest"
)

// nobody is the uid and gid the log dirs of the privilege tests belong to.
const nobody = 65534

// dropRoot is a temp dir every user may enter (t.TempDir's parent is root's, 0700), with
// the worker binary in it, for a worker run as root that works as another user.
func dropRoot(t *testing.T) (root, bin string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the tool drops root to the log dir's owner")
	}
	root = t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for d := filepath.Dir(filepath.Dir(root)); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not open to other users (%v): the temp dir must be, for a process run as uid %d", d, err, nobody)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	built := buildWorker(t)
	bin = filepath.Join(root, "bin", "worker")
	data, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	lt.WriteFile(t, bin, string(data))
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, bin
}

// chownTree gives path and everything below it to uid:gid.
func chownTree(t *testing.T, path string, uid, gid int) {
	t.Helper()
	err := filepath.WalkDir(path, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ownedBy fails the test for every file or directory below path that is not uid's.
func ownedBy(t *testing.T, path string, uid int) {
	t.Helper()
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid || int(st.Gid) != uid {
			t.Errorf("%s belongs to uid %d gid %d, want %d", p, st.Uid, st.Gid, uid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func runBin(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String(), errOut.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errOut.String()
}

// Run as root on log dirs of another user, the worker works as that user: what it creates
// is that user's, and a root-only file is out of its reach however it is reached (here a
// hard link in a partition folder, which is not a symbolic link). The staging directories
// beside the log dirs, in directories of root's (mount points, say), are made and removed
// by the root process.
func TestLogdirDropsPrivileges(t *testing.T) {
	root, bin := dropRoot(t)
	d1, d2 := filepath.Join(root, "disk1", "kafka-logs"), filepath.Join(root, "disk2", "kafka-logs")
	lt.LogDir(t, d1, 1, "orders-0", "orders-1")
	lt.LogDir(t, d2, 1, "payments-0")
	chownTree(t, d1, nobody, nobody)
	chownTree(t, d2, nobody, nobody)

	// A move as root: done as nobody.
	c := lt.NewMoveCase(t, d1, d2, "orders-1")
	code, stdout, stderr := runBin(t, bin, "logdir", "move", "--from", d1, "--to", d2, "--partition", "orders-1")
	if code != 0 || !strings.Contains(stdout, "moved orders-1 from "+d1+" to "+d2) {
		t.Fatalf("move: exit %d\n%s%s", code, stdout, stderr)
	}
	c.CheckDone(t)
	ownedBy(t, d1, nobody)
	ownedBy(t, d2, nobody)
	for _, d := range []string{d1, d2} {
		if _, err := os.Lstat(logdir.StagingDir(d)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is left: %v", logdir.StagingDir(d), err)
		}
	}

	// A root-only file, hard-linked into the partition to move (as the broker's user could
	// where hard links to others' files are allowed): as nobody the move cannot read it,
	// so it fails, and nothing the broker's user can read holds its content.
	secret := filepath.Join(root, "secret")
	lt.WriteFile(t, secret, "root-only:TOPSECRET")
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(d1, "orders-0", "00000000000000000099.log")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runBin(t, bin, "logdir", "move", "--from", d1, "--to", d2, "--partition", "orders-0")
	if code != 1 || !strings.Contains(stderr, "permission denied") {
		t.Errorf("move of a folder with a root-only file: exit %d, want 1 and permission denied\n%s%s", code, stdout, stderr)
	}
	sfi, err := os.Stat(secret)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil || os.SameFile(fi, sfi) {
			return err
		}
		if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte("TOPSECRET")) {
			t.Errorf("%s (uid %d, %v) holds the root-only file's content", p, fi.Sys().(*syscall.Stat_t).Uid, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// inspect, as root, reads as nobody too: the root-only file as a checkpoint file is
	// not read.
	cp := filepath.Join(d1, logdir.CleanerOffsetCheckpoint)
	if err := os.Remove(cp); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, cp); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runBin(t, bin, "logdir", "inspect", "--dir", d1)
	if code != 0 || !strings.Contains(stdout, cp+": permission denied") {
		t.Errorf("inspect: exit %d, want the root-only file unreadable\n%s%s", code, stdout, stderr)
	}
}

// Log dirs of two owners: there is no one user to work as, so root refuses, changing
// nothing.
func TestLogdirDropRefusesTwoOwners(t *testing.T) {
	root, bin := dropRoot(t)
	d1, d2 := filepath.Join(root, "disk1", "kafka-logs"), filepath.Join(root, "disk2", "kafka-logs")
	lt.LogDir(t, d1, 1, "orders-0")
	lt.LogDir(t, d2, 1)
	chownTree(t, d1, nobody, nobody)
	chownTree(t, d2, nobody-1, nobody-1)
	before := lt.Snapshot(t, root)
	code, _, stderr := runBin(t, bin, "logdir", "move", "--from", d1, "--to", d2, "--partition", "orders-0")
	if code != 1 || !strings.Contains(stderr, "refused: "+d1+" belongs to uid 65534 gid 65534 and "+d2+" to uid 65533 gid 65533") {
		t.Errorf("exit %d, want 1 and the two owners:\n%s", code, stderr)
	}
	if d := lt.Diff(before, lt.Snapshot(t, root)); len(d) > 0 {
		t.Errorf("the refusal changed %v", d)
	}
}
