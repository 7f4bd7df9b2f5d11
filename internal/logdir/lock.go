package logdir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// LockFile is the file a running broker holds locked in each of its log dirs.
const LockFile = ".lock"

// LockState says whether a process holds the lock of a log dir.
type LockState struct {
	Path   string // <dir>/.lock
	Exists bool   // the file exists (Kafka creates it at its first start)
	Held   bool   // another process holds a lock on it
	PID    int    // that process, as fcntl(F_GETLK) reports it
}

func (s LockState) String() string {
	switch {
	case !s.Exists:
		return "absent (Kafka creates it when it starts)"
	case s.Held:
		return fmt.Sprintf("HELD by pid %d (a running broker, or another kafkamender logdir run)", s.PID)
	default:
		return "free (no process holds it)"
	}
}

// ProbeLock reports whether another process holds a lock on dir/.lock. Kafka locks it with
// FileChannel.tryLock, which on Linux is a POSIX record lock (fcntl F_SETLK on the whole
// file); F_GETLK finds it and names the holder. A .lock that is a symbolic link is an
// error (a SymlinkError): it is not followed.
//
// POSIX locks belong to the process and are all released when it closes any descriptor of
// the file: never call ProbeLock on a dir whose lock this process holds.
func ProbeLock(dir string) (LockState, error) {
	parent, d, err := openLogDir(dir)
	if err != nil {
		return LockState{Path: filepath.Join(dir, LockFile)}, err
	}
	defer closeAll(d, parent)
	return probeLock(d)
}

// probeLock is ProbeLock of the open log dir d.
func probeLock(d *dir) (LockState, error) {
	st := LockState{Path: d.join(LockFile)}
	f, _, err := d.open(LockFile)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	defer f.Close()
	st.Exists = true
	lk := wholeFile(syscall.F_WRLCK)
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return st, fmt.Errorf("fcntl(F_GETLK) %s: %w", st.Path, err)
	}
	if lk.Type != syscall.F_UNLCK {
		st.Held, st.PID = true, int(lk.Pid)
	}
	return st, nil
}

func wholeFile(typ int16) syscall.Flock_t {
	return syscall.Flock_t{Type: typ, Whence: io.SeekStart, Start: 0, Len: 0}
}

// locks are the log-dir locks this process holds. A broker that starts while they are
// held fails to lock its dir and stops, instead of loading a half-done move.
type locks struct{ files []*os.File }

// lockDirs takes a write lock on .lock of every side's dir (creating the file, owned like
// the dir, as Kafka does), in the order of the dirs' paths; it fails, naming the holder,
// when another process has one.
func lockDirs(sides ...*side) (*locks, error) {
	l := &locks{}
	for _, s := range slices.SortedFunc(slices.Values(sides), func(a, b *side) int { return strings.Compare(a.dir, b.dir) }) {
		if err := l.lock(s.d, s.owner); err != nil {
			l.release()
			return nil, err
		}
	}
	return l, nil
}

// openLock opens d/.lock for writing, creating it (owned by own) when absent; a link by
// that name is refused.
func openLock(d *dir, own *owner) (*os.File, error) {
	fi, err := d.entry(LockFile, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err := d.root.OpenFile(LockFile, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		err = d.pathErr(err, LockFile)
		if err == nil {
			err = own.chownFile(f)
		}
		return f, err
	}
	if err != nil {
		return nil, err
	}
	f, err := d.root.OpenFile(LockFile, os.O_RDWR, 0)
	if err != nil {
		return nil, d.pathErr(err, LockFile)
	}
	if err := sameAs(d.join(LockFile), f, fi); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func (l *locks) lock(d *dir, own *owner) error {
	path := d.join(LockFile)
	f, err := openLock(d, own)
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		return fmt.Errorf("open %s: %w", path, err)
	}
	lk := wholeFile(syscall.F_WRLCK)
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		holder := wholeFile(syscall.F_WRLCK)
		_ = syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &holder)
		_ = f.Close()
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
			return &Refusal{Reason: fmt.Sprintf("%s is locked by pid %d (a running broker, or another kafkamender logdir run): stop it first", path, holder.Pid)}
		}
		return fmt.Errorf("lock %s: %w", path, err)
	}
	l.files = append(l.files, f)
	return nil
}

// release drops the locks (closing the files releases them).
func (l *locks) release() {
	if l == nil {
		return
	}
	for _, f := range l.files {
		_ = f.Close()
	}
	l.files = nil
}
