package logdir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// side is one of the two log dirs of a Move or Recover, as read at the start (and read
// again under the locks).
type side struct {
	role    string // "--from" or "--to", for messages
	dir     string // the resolved path
	info    fs.FileInfo
	meta    *Meta
	staging string                 // StagingDir(dir)
	cps     map[string]*Checkpoint // by file name; nil: the file is absent
	raw     map[string][]byte      // the files' bytes as read
	owner   *owner                 // of the log dir: copies and new files get it
	d       *dir                   // the log dir, open
	parent  *dir                   // the directory that holds it and its staging directory
}

// openSide resolves dir, opens it and reads its meta.properties; a dir that is missing, a
// link where the tool follows none, or not a Kafka log dir, is a Refusal. The checkpoint
// files are read by readCheckpoints. The caller closes the side.
func openSide(role, dir string) (*side, error) {
	if dir == "" {
		return nil, refusef("%s: no log dir given", role)
	}
	parent, d, err := openLogDir(dir)
	if errors.Is(err, errNotDir) {
		return nil, refusef("%s %s is not a directory", role, dir)
	}
	if err != nil {
		return nil, refusef("%s %s: %v", role, dir, err)
	}
	s := &side{role: role, dir: d.path, staging: StagingDir(d.path), d: d, parent: parent}
	if s.info, err = d.stat(); err != nil {
		s.close()
		return nil, err
	}
	s.owner = ownerOf(s.info)
	data, err := d.readFile(MetaFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = refusef("%s %s has no %s: it is not a Kafka log dir (or its broker never started)", role, d.path, MetaFile)
	case err != nil:
		err = refusef("%s %s: %v", role, d.path, err)
	default:
		s.meta = ParseMeta(data)
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// openSides opens the sides --from and --to of opts; the caller closes them.
func openSides(opts Options) (src, dst *side, err error) {
	if src, err = openSide("--from", opts.From); err != nil {
		return nil, nil, err
	}
	if dst, err = openSide("--to", opts.To); err != nil {
		src.close()
		return nil, nil, err
	}
	return src, dst, nil
}

// close closes the side's directories; nil is closed.
func (s *side) close() {
	if s != nil {
		closeAll(s.d, s.parent)
	}
}

// openLogDir resolves the log dir path (symbolic links in the path the operator gave are
// followed) and opens it and the directory that holds it (where its staging directory
// is). The log dir must be a directory in its parent, not a link.
func openLogDir(path string) (parent, d *dir, err error) {
	resolved, err := resolve(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return nil, nil, err
	}
	if !fi.IsDir() {
		return nil, nil, fmt.Errorf("%s is %w", resolved, errNotDir)
	}
	parent, err = openDir(filepath.Dir(resolved))
	if err != nil {
		return nil, nil, err
	}
	d, err = parent.sub(filepath.Base(resolved))
	if err != nil {
		parent.close()
		return nil, nil, err
	}
	return parent, d, nil
}

// errNotDir is what openLogDir returns for a path that is not a directory.
var errNotDir = errors.New("not a directory")

// resolve makes dir absolute and resolves its symlinks: the staging directory is beside
// the real dir, on its filesystem.
func resolve(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// readCheckpoints reads the four checkpoint files; a malformed file, or one that lists a
// partition twice, is a Refusal naming the file and the line.
func (s *side) readCheckpoints() error {
	s.cps, s.raw = map[string]*Checkpoint{}, map[string][]byte{}
	for _, name := range CheckpointFiles {
		path := filepath.Join(s.dir, name)
		data, err := s.d.readFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			s.cps[name] = nil
			continue
		}
		if err != nil {
			return refusef("%s: %v", s.role, err)
		}
		cp, err := ParseCheckpoint(path, data)
		if err != nil {
			return refusef("%s: malformed checkpoint file, which this tool does not edit: %v", s.role, err)
		}
		if problems := cp.Problems(path); len(problems) > 0 {
			return refusef("%s: %s; this tool does not edit a checkpoint file that lists a partition twice", s.role, strings.Join(problems, "; "))
		}
		s.cps[name], s.raw[name] = cp, data
	}
	return nil
}

// checkpointsUnchanged reports the first checkpoint file whose bytes differ from what
// was read at the start.
func (s *side) checkpointsUnchanged() error {
	for _, name := range CheckpointFiles {
		path := filepath.Join(s.dir, name)
		data, err := s.d.readFile(name)
		if errors.Is(err, fs.ErrNotExist) && s.cps[name] == nil {
			continue
		}
		if err != nil {
			return err
		}
		if s.cps[name] == nil || !bytes.Equal(data, s.raw[name]) {
			return fmt.Errorf("%s changed while this tool ran", path)
		}
	}
	return nil
}

// folder is the path of tp's folder in this log dir.
func (s *side) folder(tp TP) string { return filepath.Join(s.dir, tp.String()) }

// hasFolder reports whether tp's folder exists; anything but a directory by that name (a
// link to one included) is a Refusal.
func (s *side) hasFolder(tp TP) (bool, error) {
	_, err := s.d.entry(tp.String(), fs.ModeDir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, refusef("%v", err)
	}
	return true, nil
}

// openFolder opens tp's folder, which must be a directory (not a link to one).
func (s *side) openFolder(tp TP) (*dir, error) { return s.d.sub(tp.String()) }

// futureFolder returns the name of a "<tp>.<id>-future" folder, the target of an online
// log-dir move of tp that the broker resumes when it starts, or "".
func (s *side) futureFolder(tp TP) (string, error) {
	entries, err := s.d.list()
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if kind, ftp := ClassifyFolder(e.Name()); kind == KindFuture && ftp == tp {
			return e.Name(), nil
		}
	}
	return "", nil
}

// entry returns tp's entry in one checkpoint file, nil when there is none.
func (s *side) entry(name string, tp TP) *Entry {
	if e, ok := s.cps[name].Lookup(tp); ok {
		return &e
	}
	return nil
}

// lockFree is a Refusal when another process holds dir/.lock, naming it.
func (s *side) lockFree(whose string) error {
	st, err := probeLock(s.d)
	if err != nil {
		return refusef("%s %s: %v", s.role, s.dir, err)
	}
	if st.Held {
		return refusef("%s %s: %s is locked by pid %d: %s is running (or another kafkamender logdir run is); stop it first",
			s.role, s.dir, st.Path, st.PID, whose)
	}
	return nil
}

// cleanShutdown reports whether the dir has Kafka's clean-shutdown marker.
func (s *side) cleanShutdown() (bool, error) {
	return s.d.exists(CleanShutdownFile)
}

// stagingName is the name of the staging directory in s.parent.
func (s *side) stagingName() string { return filepath.Base(s.dir) + StagingSuffix }

// openStaging opens the staging directory; nil when there is none. Anything but a
// directory by its name (a link to one included) is a Refusal.
func (s *side) openStaging() (*dir, error) {
	fi, err := s.parent.lstat(s.stagingName())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err == nil && fi.Mode()&fs.ModeSymlink == 0 && !fi.IsDir():
		return nil, refusef("%s exists and is not a directory; this tool stages its copies there", s.staging)
	}
	st, err := s.parent.sub(s.stagingName())
	if err != nil {
		return nil, refusef("%v; this tool stages its copies there", err)
	}
	return st, nil
}

// stagingOnSameFS is a Refusal when the staging directory of the dir is (or would be
// created) on another filesystem than the dir: renames between them would not be atomic.
func (s *side) stagingOnSameFS() error {
	st, err := s.openStaging()
	if err != nil {
		return err
	}
	defer st.close()
	return s.sameFS(st)
}

// sameFS is stagingOnSameFS for the open staging directory st (nil: none yet, so the
// parent it would be created in).
func (s *side) sameFS(st *dir) error {
	want, err := s.d.device()
	if err != nil {
		return err
	}
	probe := st
	if probe == nil {
		probe = s.parent
	}
	got, err := probe.device()
	if err != nil {
		return err
	}
	if got != want {
		return refusef("%s (where this tool stages copies for %s) is on another filesystem than the log dir "+
			"(device %d, not %d), so renaming between them would not be atomic; %s is probably a mount point: "+
			"this tool needs a log dir below the mount point (e.g. <mount>/kafka-logs)", s.staging, s.dir, got, want, s.dir)
	}
	return nil
}

// makeStaging opens the staging directory, creating it (owned like the log dir) when
// there is none, and checks again that it is on the log dir's filesystem. The caller
// closes it.
func (s *side) makeStaging() (*dir, error) {
	st, err := s.openStaging()
	if err != nil {
		return nil, err
	}
	if st == nil {
		if st, err = s.parent.mkdir(s.stagingName(), 0o755, s.owner); err != nil {
			return nil, fmt.Errorf("create %s: %w", s.staging, err)
		}
		if err := s.parent.sync(); err != nil {
			st.close()
			return nil, err
		}
	}
	if err := s.sameFS(st); err != nil {
		st.close()
		return nil, err
	}
	return st, nil
}

// removeLeftoverTmp removes "<checkpoint>.tmp" files left by an interrupted write (this
// tool's or Kafka's); the complete file is the one without the suffix. A link by that
// name is refused.
func (op *operation) removeLeftoverTmp(s *side) error {
	for _, name := range CheckpointFiles {
		tmp := name + tmpSuffix
		_, err := s.d.entry(tmp, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return refusef("%v", err)
		}
		if err := s.d.remove(tmp); err != nil {
			return err
		}
		if err := s.d.sync(); err != nil {
			return err
		}
		op.logf("removed %s, left by an interrupted write", s.d.join(tmp))
	}
	return nil
}

// sameDir is a Refusal when from and to are the same directory.
func sameDir(from, to *side) error {
	if from.dir == to.dir || os.SameFile(from.info, to.info) {
		return refusef("--from %s and --to %s are the same directory", from.dir, to.dir)
	}
	return nil
}

// needIdentity is a Refusal when the meta.properties of s lacks the broker id or the
// cluster id, or has an identifying value Kafka does not write (which is then never
// repeated in a message).
func needIdentity(s *side) (broker, cluster string, err error) {
	if problems := s.meta.Problems(); len(problems) > 0 {
		return "", "", refusef("%s %s: %s", s.role, s.dir, strings.Join(problems, "; "))
	}
	broker, _ = s.meta.BrokerID()
	if broker == "" {
		return "", "", refusef("%s %s: %s has neither node.id nor broker.id", s.role, s.dir, MetaFile)
	}
	cluster = s.meta.ClusterID()
	if cluster == "" {
		return "", "", refusef("%s %s: %s has no cluster.id", s.role, s.dir, MetaFile)
	}
	return broker, cluster, nil
}

// countTree is the number and total size of the files below d.
func countTree(d *dir) (files int, size int64, err error) {
	err = walk(d, func(_ string, _ *dir, _ string, fi fs.FileInfo) error {
		if !fi.IsDir() {
			files++
			size += fi.Size()
		}
		return nil
	})
	return files, size, err
}

// countFolder is countTree of the folder name of d.
func countFolder(d *dir, name string) (files int, size int64, err error) {
	sub, err := d.sub(name)
	if err != nil {
		return 0, 0, err
	}
	defer sub.close()
	return countTree(sub)
}

// roomFor is a Refusal when the filesystem of dst has less free space than src's folder
// of tp needs (counting a partial copy in staging, which is removed first).
func roomFor(src *side, dst *side, tp TP) error {
	_, need, err := countFolder(src.d, tp.String())
	if err != nil {
		return err
	}
	free, err := dst.d.freeBytes()
	if err != nil {
		return err
	}
	st, err := dst.openStaging()
	if err != nil {
		return err
	}
	if st != nil {
		defer st.close()
		if ok, _ := st.exists(tp.String()); ok {
			_, partial, err := countFolder(st, tp.String())
			if err != nil {
				return err
			}
			free += partial
		}
	}
	if free < need {
		return refusef("%s has %d bytes free, and %s needs %d", dst.dir, free, src.folder(tp), need)
	}
	return nil
}

// matches compares the folders of tp in a (the source) and b; "" when they hold the same
// files.
func matches(a, b *side, tp TP) (Manifest, string, error) {
	ma, err := folderManifest(a, tp)
	if err != nil {
		return nil, "", err
	}
	mb, err := folderManifest(b, tp)
	if err != nil {
		return nil, "", err
	}
	return ma, ma.Diff(mb), nil
}

// folderManifest is the manifest of tp's folder in s.
func folderManifest(s *side, tp TP) (Manifest, error) {
	f, err := s.openFolder(tp)
	if err != nil {
		return nil, err
	}
	defer f.close()
	return manifestOf(f)
}
