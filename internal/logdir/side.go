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
}

// openSide resolves dir and reads its meta.properties; a dir that is missing, or is not
// a Kafka log dir, is a Refusal. The checkpoint files are read by readCheckpoints.
func openSide(role, dir string) (*side, error) {
	if dir == "" {
		return nil, refusef("%s: no log dir given", role)
	}
	resolved, err := resolve(dir)
	if err != nil {
		return nil, refusef("%s %s: %v", role, dir, err)
	}
	info, err := os.Stat(resolved)
	if err != nil {
		return nil, refusef("%s %s: %v", role, dir, err)
	}
	if !info.IsDir() {
		return nil, refusef("%s %s is not a directory", role, dir)
	}
	s := &side{role: role, dir: resolved, info: info, staging: StagingDir(resolved), owner: ownerOf(info)}
	s.meta, err = ReadMeta(resolved)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, refusef("%s %s has no %s: it is not a Kafka log dir (or its broker never started)", role, resolved, MetaFile)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", role, resolved, err)
	}
	return s, nil
}

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
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			s.cps[name] = nil
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
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
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) && s.cps[name] == nil {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if s.cps[name] == nil || !bytes.Equal(data, s.raw[name]) {
			return fmt.Errorf("%s changed while this tool ran", path)
		}
	}
	return nil
}

// folder is the path of tp's folder in this log dir.
func (s *side) folder(tp TP) string { return filepath.Join(s.dir, tp.String()) }

// hasFolder reports whether tp's folder exists; anything but a directory by that name is
// a Refusal.
func (s *side) hasFolder(tp TP) (bool, error) {
	fi, err := os.Lstat(s.folder(tp))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, refusef("%s is not a directory", s.folder(tp))
	}
	return true, nil
}

// futureFolder returns the name of a "<tp>.<id>-future" folder, the target of an online
// log-dir move of tp that the broker resumes when it starts, or "".
func (s *side) futureFolder(tp TP) (string, error) {
	entries, err := os.ReadDir(s.dir)
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
	st, err := ProbeLock(s.dir)
	if err != nil {
		return err
	}
	if st.Held {
		return refusef("%s %s: %s is locked by pid %d: %s is running (or another kafkamender logdir run is); stop it first",
			s.role, s.dir, st.Path, st.PID, whose)
	}
	return nil
}

// cleanShutdown reports whether the dir has Kafka's clean-shutdown marker.
func (s *side) cleanShutdown() (bool, error) {
	return exists(filepath.Join(s.dir, CleanShutdownFile))
}

// stagingOnSameFS is a Refusal when the staging directory of the dir is (or would be
// created) on another filesystem than the dir: renames between them would not be atomic.
func (s *side) stagingOnSameFS() error {
	want, err := device(s.dir)
	if err != nil {
		return err
	}
	probe := s.staging
	if ok, err := exists(probe); err != nil {
		return err
	} else if !ok {
		probe = filepath.Dir(s.staging)
	} else if fi, err := os.Stat(probe); err != nil || !fi.IsDir() {
		return refusef("%s exists and is not a directory; this tool stages its copies there", s.staging)
	}
	got, err := device(probe)
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

// makeStaging creates the staging directory (owned like the log dir) and checks again
// that it is on the log dir's filesystem.
func (s *side) makeStaging() error {
	ok, err := exists(s.staging)
	if err != nil {
		return err
	}
	if !ok {
		if err := makeDir(s.staging, 0o755, s.owner); err != nil {
			return fmt.Errorf("create %s: %w", s.staging, err)
		}
		if err := syncDir(filepath.Dir(s.staging)); err != nil {
			return err
		}
	}
	return s.stagingOnSameFS()
}

// removeLeftoverTmp removes "<checkpoint>.tmp" files left by an interrupted write (this
// tool's or Kafka's); the complete file is the one without the suffix.
func (op *operation) removeLeftoverTmp(s *side) error {
	for _, name := range CheckpointFiles {
		path := filepath.Join(s.dir, name+tmpSuffix)
		ok, err := exists(path)
		if err != nil || !ok {
			if err != nil {
				return err
			}
			continue
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		if err := syncDir(s.dir); err != nil {
			return err
		}
		op.logf("removed %s, left by an interrupted write", path)
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

// countTree is the number and total size of the files below root.
func countTree(root string) (files int, size int64, err error) {
	err = walk(root, func(_ string, d fs.DirEntry) error {
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err == nil {
			files++
			size += info.Size()
		}
		return err
	})
	return files, size, err
}

// roomFor is a Refusal when the filesystem of dst has less free space than the folder
// src needs (counting a partial copy in staging, which is removed first).
func roomFor(src string, dst *side, staged string) error {
	_, need, err := countTree(src)
	if err != nil {
		return err
	}
	free, err := freeBytes(dst.dir)
	if err != nil {
		return err
	}
	if ok, _ := exists(staged); ok {
		_, partial, err := countTree(staged)
		if err != nil {
			return err
		}
		free += partial
	}
	if free < need {
		return refusef("%s has %d bytes free, and %s needs %d", dst.dir, free, src, need)
	}
	return nil
}

// matches compares the folders a (the source) and b; "" when they hold the same files.
func matches(a, b string) (Manifest, string, error) {
	ma, err := manifestOf(a)
	if err != nil {
		return nil, "", err
	}
	mb, err := manifestOf(b)
	if err != nil {
		return nil, "", err
	}
	return ma, ma.Diff(mb), nil
}
