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
	"time"

	"golang.org/x/sys/unix"
)

// The broker's user owns its log dirs and may plant symbolic links in them, and this tool
// may run as root (it drops to the log dir's owner when it can, see privilege.go). So it
// reaches every file of a log dir, of a partition folder and of a staging directory
// through a dir: an open directory (an os.Root, so that no name escapes it), one name at a
// time, and it follows no symbolic link there. Kafka makes none in a log dir, so one is
// refused with a SymlinkError naming it. Files are opened and then checked (fstat) to be
// the very file the name showed (lstat) when it was not a link, and created with O_EXCL,
// which never follows a link; renames, removals and time changes act on names, not on
// link targets.

// SymlinkError is a symbolic link where Kafka makes none: in a log dir, a partition
// folder or a staging directory. The tool does not follow it.
type SymlinkError struct{ Path string }

func (e *SymlinkError) Error() string {
	return fmt.Sprintf("%s is a symbolic link: Kafka makes none in a log dir, and this tool follows none there "+
		"(check who made it; remove it, or put the real file or directory there)", e.Path)
}

// dir is an open directory.
type dir struct {
	path string   // for messages
	root *os.Root // what names are resolved in
	f    *os.File // the directory itself: fstat, fsync, the fd for renameat and fstatfs
}

// openDir opens the directory at path, an absolute path the operator gave (resolved by
// resolve): symbolic links in it are the operator's, and followed.
func openDir(path string) (*dir, error) {
	r, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	return newDir(path, r)
}

func newDir(path string, r *os.Root) (*dir, error) {
	f, err := r.Open(".")
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	return &dir{path: path, root: r, f: f}, nil
}

// close closes the directory; nil is closed.
func (d *dir) close() {
	if d == nil {
		return
	}
	_ = d.f.Close()
	_ = d.root.Close()
}

// closeAll closes every dir.
func closeAll(ds ...*dir) {
	for _, d := range ds {
		d.close()
	}
}

// join is the path of name in d, for messages.
func (d *dir) join(name string) string { return filepath.Join(d.path, name) }

// pathErr gives a *os.PathError about name the whole path of name, for messages (the
// methods of os.Root name the path relative to the root).
func (d *dir) pathErr(err error, name string) error {
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Path == name {
		pe.Path = d.join(name)
	}
	return err
}

// checkName refuses what is not one path component: the tool only ever names the entries
// of a directory it holds open.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("internal error: %q is not a file name", name)
	}
	return nil
}

// stat describes the directory itself.
func (d *dir) stat() (fs.FileInfo, error) { return d.f.Stat() }

// lstat describes the entry name without following it.
func (d *dir) lstat(name string) (fs.FileInfo, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fi, err := d.root.Lstat(name)
	return fi, d.pathErr(err, name)
}

// exists reports whether d has an entry name (of any kind).
func (d *dir) exists(name string) (bool, error) {
	_, err := d.lstat(name)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// entry describes name, which must be of the kind want (a regular file: 0, a directory:
// fs.ModeDir): a symbolic link is a SymlinkError, another kind an error. A missing entry
// is an error satisfying errors.Is(err, fs.ErrNotExist).
func (d *dir) entry(name string, want fs.FileMode) (fs.FileInfo, error) {
	fi, err := d.lstat(name)
	if err != nil {
		return nil, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, &SymlinkError{Path: d.join(name)}
	case want == fs.ModeDir && !fi.IsDir():
		return nil, fmt.Errorf("%s is not a directory", d.join(name))
	case want == 0 && !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file (%s)", d.join(name), fi.Mode().Type())
	}
	return fi, nil
}

// sameAs checks that the open f is the entry fi showed: not another file put there (a
// link to it, say) between the lstat and the open.
func sameAs(path string, f *os.File, fi fs.FileInfo) error {
	got, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(got, fi) {
		return fmt.Errorf("%s changed while this tool opened it", path)
	}
	return nil
}

// sub opens the subdirectory name, which must be a directory, not a link to one.
func (d *dir) sub(name string) (*dir, error) {
	fi, err := d.entry(name, fs.ModeDir)
	if err != nil {
		return nil, err
	}
	r, err := d.root.OpenRoot(name)
	if err != nil {
		return nil, d.pathErr(err, name)
	}
	s, err := newDir(d.join(name), r)
	if err != nil {
		return nil, err
	}
	if err := sameAs(s.path, s.f, fi); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// open opens the regular file name for reading; it returns its fstat.
func (d *dir) open(name string) (*os.File, fs.FileInfo, error) {
	fi, err := d.entry(name, 0)
	if err != nil {
		return nil, nil, err
	}
	// O_NONBLOCK: were a FIFO swapped in, the open would not wait for a writer (sameAs
	// then refuses it).
	f, err := d.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, d.pathErr(err, name)
	}
	if err := sameAs(d.join(name), f, fi); err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readFile reads the regular file name.
func (d *dir) readFile(name string) ([]byte, error) {
	f, _, err := d.open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", d.join(name), err)
	}
	return data, nil
}

// create creates the regular file name, which must not exist (O_EXCL: never through a
// link), for writing.
func (d *dir) create(name string, perm fs.FileMode) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		if _, lerr := d.entry(name, 0); lerr != nil {
			return nil, lerr // a link: say so
		}
	}
	return f, d.pathErr(err, name)
}

// mkdir creates the directory name with mode perm (whatever the umask), owned by own
// (nil: this process), and opens it.
func (d *dir) mkdir(name string, perm fs.FileMode, own *owner) (*dir, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := d.root.Mkdir(name, perm); err != nil {
		return nil, d.pathErr(err, name)
	}
	s, err := d.sub(name)
	if err != nil {
		return nil, err
	}
	err = s.f.Chmod(perm)
	if err == nil {
		err = own.chownFile(s.f)
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// remove removes the entry name (a file, or an empty directory).
func (d *dir) remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	return d.pathErr(d.root.Remove(name), name)
}

// removeTree removes the directory name and everything in it, following no link (nothing
// when it does not exist), and fsyncs d. A link by that name is refused.
func (d *dir) removeTree(name string) error {
	if _, err := d.entry(name, fs.ModeDir); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if err := d.root.RemoveAll(name); err != nil {
		return d.pathErr(err, name)
	}
	return d.sync()
}

// removeIfEmpty removes the subdirectory name when it exists and is empty.
func (d *dir) removeIfEmpty(name string) (bool, error) {
	s, err := d.sub(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	entries, err := s.list()
	s.close()
	if err != nil || len(entries) > 0 {
		return false, err
	}
	// rmdir, not unlink: should something else have been put there meanwhile, it stays.
	if err := unix.Unlinkat(int(d.f.Fd()), name, unix.AT_REMOVEDIR); err != nil {
		return false, &os.PathError{Op: "rmdir", Path: d.join(name), Err: err}
	}
	return true, d.sync()
}

// list returns the entries of d, sorted by name.
func (d *dir) list() ([]fs.DirEntry, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", d.path, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// chtimes sets the access and modification times of the entry name (not of a link's
// target).
func (d *dir) chtimes(name string, t time.Time) error {
	if err := checkName(name); err != nil {
		return err
	}
	return d.pathErr(d.root.Chtimes(name, t, t), name)
}

// sync fsyncs the directory, making the creations, renames and removals in it durable.
func (d *dir) sync() error {
	if err := d.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", d.path, err)
	}
	return nil
}

// rename renames the entry oldname of from to newname in to (renameat: the names are
// not followed, whatever they are).
func rename(from *dir, oldname string, to *dir, newname string) error {
	if err := checkName(oldname); err != nil {
		return err
	}
	if err := checkName(newname); err != nil {
		return err
	}
	if err := syscall.Renameat(int(from.f.Fd()), oldname, int(to.f.Fd()), newname); err != nil {
		return &os.LinkError{Op: "rename", Old: from.join(oldname), New: to.join(newname), Err: err}
	}
	return nil
}

// device is the ID of the filesystem that holds d.
func (d *dir) device() (uint64, error) {
	fi, err := d.stat()
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no device number on this platform", d.path)
	}
	return uint64(st.Dev), nil
}

// freeBytes is the space an unprivileged user may still write on the filesystem of d.
func (d *dir) freeBytes() (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(d.f.Fd()), &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", d.path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
