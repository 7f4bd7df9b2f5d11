package logdir

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// tmpSuffix is what an atomic write appends to the file name while it writes; Kafka uses
// the same suffix for its own checkpoint writes.
const tmpSuffix = ".tmp"

// writeFileAtomic replaces path with data: it writes path+".tmp" in the same directory
// (truncating a leftover of an interrupted write), fsyncs it, calls afterTmp (the crash
// hook; nil for none), renames it over path and fsyncs the directory. An existing file
// keeps its mode and owner; a new one gets mode 0644 and the owner own (nil: this process).
func writeFileAtomic(path string, data []byte, own *owner, afterTmp func() error) error {
	perm := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
		own = ownerOf(fi)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if err := writeSyncClose(f, data, perm, own); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if afterTmp != nil {
		if err := afterTmp(); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func writeSyncClose(f *os.File, data []byte, perm fs.FileMode, own *owner) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(perm) // the umask may have narrowed it
	}
	if err == nil && own != nil {
		err = own.chown(f.Name())
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir fsyncs a directory, making the creations, renames and removals in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// exists reports whether path exists (without following a final symlink).
func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// device returns the ID of the filesystem that holds path.
func device(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no device number on this platform", path)
	}
	return uint64(st.Dev), nil
}

// freeBytes is the space an unprivileged user may still write on the filesystem of path.
func freeBytes(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// owner is the uid and gid that copies and new files get: those of the log dir they are
// written into, so that the broker's user can write them.
type owner struct{ uid, gid int }

func ownerOf(fi fs.FileInfo) *owner {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return &owner{uid: int(st.Uid), gid: int(st.Gid)}
}

// chown gives path to o unless it has that owner already.
func (o *owner) chown(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if cur := ownerOf(fi); cur != nil && *cur == *o {
		return nil
	}
	if err := os.Lchown(path, o.uid, o.gid); err != nil {
		return fmt.Errorf("give %s to uid %d gid %d: %w", path, o.uid, o.gid, err)
	}
	return nil
}

// canGive reports why this process could not give files to o (nil when it can): only
// root gives files to another user.
func (o *owner) canGive() error {
	if o == nil || os.Geteuid() == 0 || os.Geteuid() == o.uid {
		return nil
	}
	return fmt.Errorf("the copies must belong to uid %d (the owner of the target log dir, i.e. the broker's user), "+
		"and this process runs as uid %d: run it as that user or as root", o.uid, os.Geteuid())
}

// File is one entry of a partition folder's Manifest.
type File struct {
	Path   string // relative to the folder, with '/' separators
	Dir    bool
	Size   int64
	SHA256 [sha256.Size]byte
}

// Manifest is the content of a partition folder: every file and subdirectory (the folder
// itself excluded), in lexical order, with the size and SHA-256 of each file.
type Manifest []File

// Files is the number of regular files.
func (m Manifest) Files() int {
	n := 0
	for _, f := range m {
		if !f.Dir {
			n++
		}
	}
	return n
}

// Bytes is the total size of the files.
func (m Manifest) Bytes() int64 {
	var n int64
	for _, f := range m {
		n += f.Size
	}
	return n
}

// Diff describes the first difference between m (the source) and o, or returns "" when
// they list the same files with the same sizes and hashes.
func (m Manifest) Diff(o Manifest) string {
	for i := 0; i < len(m) || i < len(o); i++ {
		switch {
		case i >= len(o):
			return fmt.Sprintf("%s is missing", m[i].Path)
		case i >= len(m):
			return fmt.Sprintf("%s is not in the source", o[i].Path)
		case m[i].Path != o[i].Path:
			if m[i].Path < o[i].Path {
				return fmt.Sprintf("%s is missing", m[i].Path)
			}
			return fmt.Sprintf("%s is not in the source", o[i].Path)
		case m[i].Dir != o[i].Dir:
			return fmt.Sprintf("%s is a directory on one side only", m[i].Path)
		case m[i].Size != o[i].Size:
			return fmt.Sprintf("%s has %d bytes, the source %d", m[i].Path, o[i].Size, m[i].Size)
		case m[i].SHA256 != o[i].SHA256:
			return fmt.Sprintf("%s differs from the source (SHA-256)", m[i].Path)
		}
	}
	return ""
}

// manifestOf reads every file of the folder root and hashes it. Anything but regular files
// and directories (a symlink, a device) is an error: Kafka writes neither.
func manifestOf(root string) (Manifest, error) {
	var m Manifest
	err := walk(root, func(rel string, d fs.DirEntry) error {
		if d.IsDir() {
			m = append(m, File{Path: rel, Dir: true})
			return nil
		}
		f, err := hashFile(filepath.Join(root, rel), io.Discard)
		f.Path = rel
		m = append(m, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// walk calls fn for everything below root in lexical order, with the path relative to
// root; it refuses anything but regular files and directories.
func walk(root string, fn func(rel string, d fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root {
			if !d.IsDir() {
				return fmt.Errorf("%s is not a directory", path)
			}
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s is neither a regular file nor a directory (%s)", path, d.Type())
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), d)
	})
}

// hashFile copies path to w and returns its size and SHA-256.
func hashFile(path string, w io.Writer) (File, error) {
	src, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer src.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), src)
	if err != nil {
		return File{}, fmt.Errorf("read %s: %w", path, err)
	}
	var f File
	f.Size = n
	copy(f.SHA256[:], h.Sum(nil))
	return f, nil
}

// copyTree copies the folder src to dst, which must not exist: files with their mode and
// modification time (Kafka falls back on a segment's mtime for time-based retention),
// owned by own. Every file and directory is fsynced. afterFirst (the crash hook) runs once
// the first file is copied. It returns the manifest of src as read while copying.
func copyTree(src, dst string, own *owner, afterFirst func() error) (Manifest, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	if err := makeDir(dst, fi.Mode().Perm(), own); err != nil {
		return nil, err
	}
	dirs := []string{dst}
	var m Manifest
	copied := 0
	err = walk(src, func(rel string, d fs.DirEntry) error {
		from, to := filepath.Join(src, filepath.FromSlash(rel)), filepath.Join(dst, filepath.FromSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			m = append(m, File{Path: rel, Dir: true})
			dirs = append(dirs, to)
			return makeDir(to, info.Mode().Perm(), own)
		}
		f, err := copyFile(from, to, info, own)
		if err != nil {
			return err
		}
		f.Path = rel
		m = append(m, f)
		if copied++; copied == 1 && afterFirst != nil {
			return afterFirst()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syncDir(dirs[i]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func makeDir(path string, perm fs.FileMode, own *owner) error {
	if err := os.Mkdir(path, perm); err != nil {
		return err
	}
	if err := os.Chmod(path, perm); err != nil {
		return err
	}
	if own != nil {
		return own.chown(path)
	}
	return nil
}

// copyFile copies one file, keeping its mode and mtime, and fsyncs the copy.
func copyFile(from, to string, info fs.FileInfo, own *owner) (File, error) {
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
	if err != nil {
		return File{}, err
	}
	f, err := hashFile(from, out)
	if err == nil {
		err = out.Chmod(info.Mode().Perm())
	}
	if err == nil && own != nil {
		err = own.chown(to)
	}
	if err == nil {
		err = os.Chtimes(to, info.ModTime(), info.ModTime())
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return File{}, fmt.Errorf("copy %s to %s: %w", from, to, err)
	}
	return f, nil
}

// removeTree removes path and everything below it (nothing when it does not exist) and
// fsyncs its parent directory.
func removeTree(path string) error {
	ok, err := exists(path)
	if err != nil || !ok {
		return err
	}
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// removeIfEmpty removes the directory path when it exists and is empty.
func removeIfEmpty(path string) (bool, error) {
	entries, err := os.ReadDir(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if len(entries) > 0 {
		return false, nil
	}
	if err := os.Remove(path); err != nil {
		return false, err
	}
	return true, syncDir(filepath.Dir(path))
}
