package logdir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Run as root (which the tool allows: it gives copies to the broker's user), "worker
// logdir" does not work on the log dirs as root: it re-executes itself as their owner,
// the broker's user, and that process does everything, so the kernel refuses it whatever
// the broker's user could not do (read a root-only file through a hard link, write one
// through anything). This file holds the rules; command worker does the re-execution.
//
// Why a new process rather than setuid in this one: the child gets its credentials from
// the kernel before it runs a single instruction (fork, setgroups, setgid, setuid, exec),
// all threads alike and irreversibly (real, effective and saved ids), with no Go runtime
// or cgo subtleties; and the root parent is left one job no unprivileged process can do
// when the log dir's parent is root's (a mount point): creating and removing the staging
// directory beside the log dir (Prepare, Finish), which it does by name in the open parent,
// following no link. The parent reads no file of the log dirs.

// Drop says as whom a command started as root runs: the owner of the log dirs.
type Drop struct {
	UID, GID int
	dirs     map[string]bool // the resolved log dirs whose staging directories Prepare may create
	made     []string        // the resolved log dirs whose staging directories Prepare created
}

// PlanDrop returns the user a command on the log dirs runs as, or nil when it runs as it
// is: this process is not root, or the dirs are root's (then it runs as root, following
// no link, as always). Every dir must have the same owner (uid and gid), or it is a
// Refusal: there is no one user to run as. A dir that cannot be opened is left to the
// command, which reports it.
func PlanDrop(dirs ...string) (*Drop, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var (
		drop  *Drop
		first string
	)
	for _, path := range dirs {
		parent, d, err := openLogDir(path)
		if err != nil {
			continue
		}
		fi, err := d.stat()
		closeAll(d, parent)
		if err != nil {
			continue
		}
		own := ownerOf(fi)
		if own == nil {
			return nil, fmt.Errorf("%s: no owner on this platform", path)
		}
		if drop == nil {
			drop, first = &Drop{UID: own.uid, GID: own.gid, dirs: map[string]bool{}}, path
		} else if own.uid != drop.UID || own.gid != drop.GID {
			return nil, refusef("%s belongs to uid %d gid %d and %s to uid %d gid %d: run as root, this tool works as "+
				"the owner of the log dirs (the broker's user), so they must have one owner; run it as each owner "+
				"(or give the dirs one owner)", first, drop.UID, drop.GID, path, own.uid, own.gid)
		}
		drop.dirs[d.path] = true
	}
	if drop == nil || drop.UID == 0 {
		return nil, nil
	}
	return drop, nil
}

// SysProcAttr makes a child process run as the drop's user, with no supplementary groups.
func (d *Drop) SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(d.UID), Gid: uint32(d.GID), Groups: []uint32{}}}
}

// Prepare creates, as root, the staging directory of each of the dirs that lacks one
// (owned by the drop's user), where that user may not be able to: the dirs are those
// whose staging directory the command may use (move: both, recover: --to). Only a dir
// that has a meta.properties (a log dir) gets one. Finish removes them again when empty.
func (d *Drop) Prepare(dirs ...string) error {
	own := &owner{uid: d.UID, gid: d.GID}
	for _, path := range dirs {
		parent, ld, err := openLogDir(path)
		if err != nil {
			continue // the command reports it
		}
		err = d.prepare(parent, ld, own)
		closeAll(ld, parent)
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *Drop) prepare(parent, ld *dir, own *owner) error {
	if !d.dirs[ld.path] {
		return nil
	}
	if _, err := ld.entry(MetaFile, 0); err != nil {
		return nil // not a log dir (or a link): the command refuses it
	}
	name := filepath.Base(ld.path) + StagingSuffix
	if ok, err := parent.exists(name); err != nil || ok {
		return err // one there already: the command checks it
	}
	st, err := parent.mkdir(name, 0o755, own)
	if err != nil {
		return fmt.Errorf("create %s: %w", parent.join(name), err)
	}
	st.close()
	d.made = append(d.made, ld.path)
	return parent.sync()
}

// Finish removes the staging directories Prepare created, when they are empty (the
// command leaves them so when it is done, since its user may not remove them), and tells
// out.
func (d *Drop) Finish(out io.Writer) error {
	var errs []error
	for _, path := range d.made {
		parent, err := openDir(filepath.Dir(path))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		name := filepath.Base(path) + StagingSuffix
		removed, err := parent.removeIfEmpty(name)
		parent.close()
		if err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", StagingDir(path), err))
		} else if removed {
			fmt.Fprintf(out, "  removed the empty staging directory %s\n", StagingDir(path))
		}
	}
	d.made = nil
	return errors.Join(errs...)
}

// permissionDenied reports whether err is the kernel refusing this user an operation.
func permissionDenied(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// String is "uid N gid M".
func (d *Drop) String() string { return fmt.Sprintf("uid %d gid %d", d.UID, d.GID) }
