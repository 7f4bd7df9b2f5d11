package logdir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
// file); F_GETLK finds it and names the holder.
//
// POSIX locks belong to the process and are all released when it closes any descriptor of
// the file: never call ProbeLock on a dir whose lock this process holds.
func ProbeLock(dir string) (LockState, error) {
	st := LockState{Path: filepath.Join(dir, LockFile)}
	f, err := os.Open(st.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("open %s: %w", st.Path, err)
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

// lockDirs takes a write lock on dir/.lock of every dir (creating the file, as Kafka does),
// in sorted order; it fails, naming the holder, when another process has one.
func lockDirs(dirs ...string) (*locks, error) {
	l := &locks{}
	for _, dir := range slices.Sorted(slices.Values(dirs)) {
		if err := l.lock(dir); err != nil {
			l.release()
			return nil, err
		}
	}
	return l, nil
}

func (l *locks) lock(dir string) error {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
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
