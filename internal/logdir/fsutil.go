package logdir

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// tmpSuffix is what an atomic write appends to the file name while it writes; Kafka uses
// the same suffix for its own checkpoint writes.
const tmpSuffix = ".tmp"

// writeFileAtomic replaces the file name of d with data: it writes name+".tmp" in d (a
// leftover of an interrupted write is removed first; the new one is created with O_EXCL,
// never through a link), fsyncs it, calls afterTmp (the crash hook; nil for none), renames
// it over name and fsyncs d. An existing file keeps its mode and owner; a new one gets
// mode 0644 and the owner own (nil: this process). A link by either name is refused.
func writeFileAtomic(d *dir, name string, data []byte, own *owner, afterTmp func() error) error {
	perm := fs.FileMode(0o644)
	if fi, err := d.entry(name, 0); err == nil {
		perm = fi.Mode().Perm()
		own = ownerOf(fi)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	tmp := name + tmpSuffix
	if _, err := d.entry(tmp, 0); err == nil {
		if err := d.remove(tmp); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := d.create(tmp, perm)
	if err != nil {
		return err
	}
	if err := writeSyncClose(f, data, perm, own); err != nil {
		return fmt.Errorf("write %s: %w", d.join(tmp), err)
	}
	if afterTmp != nil {
		if err := afterTmp(); err != nil {
			return err
		}
	}
	if err := rename(d, tmp, d, name); err != nil {
		return err
	}
	return d.sync()
}

func writeSyncClose(f *os.File, data []byte, perm fs.FileMode, own *owner) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(perm) // the umask may have narrowed it
	}
	if err == nil {
		err = own.chownFile(f)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
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

// chownFile gives the open file f to o unless it has that owner already (or o is nil).
func (o *owner) chownFile(f *os.File) error {
	if o == nil {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if cur := ownerOf(fi); cur != nil && *cur == *o {
		return nil
	}
	if err := f.Chown(o.uid, o.gid); err != nil {
		return fmt.Errorf("give %s to uid %d gid %d: %w", f.Name(), o.uid, o.gid, err)
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

// manifestOf reads every file of the folder d and hashes it. Anything but regular files
// and directories (a symbolic link, a device) is an error: Kafka writes neither.
func manifestOf(d *dir) (Manifest, error) {
	var m Manifest
	err := walk(d, func(rel string, parent *dir, name string, fi fs.FileInfo) error {
		if fi.IsDir() {
			m = append(m, File{Path: rel, Dir: true})
			return nil
		}
		src, _, err := parent.open(name)
		if err != nil {
			return err
		}
		defer src.Close()
		f, err := hashFile(src, io.Discard)
		f.Path = rel
		m = append(m, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// walk calls fn for everything below d, depth first in lexical order, with the path
// relative to d ('/' separators), the directory that holds it, its name there and its
// lstat; a directory is reported before what it holds. It follows no link: a symbolic
// link is a SymlinkError, anything else but regular files and directories an error.
func walk(d *dir, fn func(rel string, parent *dir, name string, fi fs.FileInfo) error) error {
	return walkFrom(d, "", fn)
}

func walkFrom(d *dir, prefix string, fn func(rel string, parent *dir, name string, fi fs.FileInfo) error) error {
	entries, err := d.list()
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		fi, err := d.lstat(name)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return &SymlinkError{Path: d.join(name)}
		case !fi.IsDir() && !fi.Mode().IsRegular():
			return fmt.Errorf("%s is neither a regular file nor a directory (%s)", d.join(name), fi.Mode().Type())
		}
		rel := prefix + name
		if err := fn(rel, d, name, fi); err != nil {
			return err
		}
		if fi.IsDir() {
			sub, err := d.sub(name)
			if err != nil {
				return err
			}
			err = walkFrom(sub, rel+"/", fn)
			sub.close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// hashFile copies src to w and returns its size and SHA-256.
func hashFile(src *os.File, w io.Writer) (File, error) {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), src)
	if err != nil {
		return File{}, fmt.Errorf("read %s: %w", src.Name(), err)
	}
	var f File
	f.Size = n
	copy(f.SHA256[:], h.Sum(nil))
	return f, nil
}

// copyTree copies the folder src to the new directory name of parent (it must not exist):
// files with their mode and modification time (Kafka falls back on a segment's mtime for
// time-based retention), owned by own. Every file and directory is fsynced. afterFirst
// (the crash hook) runs once the first file is copied. It returns the manifest of src as
// read while copying.
func copyTree(src, parent *dir, name string, own *owner, afterFirst func() error) (Manifest, error) {
	fi, err := src.stat()
	if err != nil {
		return nil, err
	}
	dst, err := parent.mkdir(name, fi.Mode().Perm(), own)
	if err != nil {
		return nil, err
	}
	dirs := map[string]*dir{"": dst}
	order := []*dir{dst}
	defer func() { closeAll(order...) }()
	var m Manifest
	copied := 0
	err = walk(src, func(rel string, from *dir, name string, info fs.FileInfo) error {
		to := dirs[parentRel(rel)]
		if info.IsDir() {
			m = append(m, File{Path: rel, Dir: true})
			sub, err := to.mkdir(name, info.Mode().Perm(), own)
			if err != nil {
				return err
			}
			dirs[rel] = sub
			order = append(order, sub)
			return nil
		}
		f, err := copyFile(from, to, name, own)
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
	for i := len(order) - 1; i >= 0; i-- {
		if err := order[i].sync(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// parentRel is the relative path of the directory that holds rel ("" for the top).
func parentRel(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

// copyFile copies the file name of from to to, keeping its mode and mtime, and fsyncs
// the copy.
func copyFile(from, to *dir, name string, own *owner) (File, error) {
	in, info, err := from.open(name)
	if err != nil {
		return File{}, err
	}
	defer in.Close()
	out, err := to.create(name, info.Mode().Perm())
	if err != nil {
		return File{}, err
	}
	f, err := hashFile(in, out)
	if err == nil {
		err = out.Chmod(info.Mode().Perm())
	}
	if err == nil {
		err = own.chownFile(out)
	}
	if err == nil {
		err = to.chtimes(name, info.ModTime())
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return File{}, fmt.Errorf("copy %s to %s: %w", from.join(name), to.join(name), err)
	}
	return f, nil
}
