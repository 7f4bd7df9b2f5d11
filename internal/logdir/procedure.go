package logdir

import (
	"fmt"
	"path/filepath"
)

// The parts Move and Recover share: copying a folder through staging, and rewriting
// checkpoint files.

// stageAndPlace copies the folder src/tp into the staging directory of dst (removing a
// partial copy of an interrupted run first), fsyncs and verifies it, and renames it into
// dst. It returns the source's manifest as read while copying.
func (op *operation) stageAndPlace(src, dst *side, tp TP) (Manifest, error) {
	stage, err := dst.makeStaging()
	if err != nil {
		return nil, err
	}
	defer stage.close()
	name := tp.String()
	staged := stage.join(name)
	if ok, err := stage.exists(name); err != nil {
		return nil, err
	} else if ok {
		if err := stage.removeTree(name); err != nil {
			return nil, fmt.Errorf("remove the partial copy %s: %w", staged, err)
		}
		op.logf("removed %s, the partial copy of an interrupted run", staged)
	}
	folder, err := src.openFolder(tp)
	if err != nil {
		return nil, err
	}
	defer folder.close()
	copying := op.once(StepCopying)
	m, err := copyTree(folder, stage, name, dst.owner, copying)
	if err != nil {
		return nil, err
	}
	if err := copying(); err != nil { // a folder without files
		return nil, err
	}
	if err := stage.sync(); err != nil {
		return nil, err
	}
	op.logf("copied %s to %s: %d files, %d bytes, each fsynced", src.folder(tp), staged, m.Files(), m.Bytes())
	copied, err := stage.sub(name)
	if err != nil {
		return nil, err
	}
	got, err := manifestOf(copied)
	copied.close()
	if err != nil {
		return nil, err
	}
	if diff := m.Diff(got); diff != "" {
		return nil, fmt.Errorf("the copy %s differs from %s: %s", staged, src.folder(tp), diff)
	}
	op.logf("verified the copy against the source: same files, sizes and SHA-256")
	if err := op.reach(StepStaged); err != nil {
		return nil, err
	}
	if err := rename(stage, name, dst.d, name); err != nil {
		return nil, fmt.Errorf("rename the copy into place: %w", err)
	}
	if err := dst.d.sync(); err != nil {
		return nil, err
	}
	if err := stage.sync(); err != nil {
		return nil, err
	}
	op.logf("placed %s (renamed from staging; %s fsynced)", dst.folder(tp), dst.dir)
	return m, op.reach(StepPlaced)
}

// edit is a new content of one checkpoint file, and what changed in it.
type edit struct {
	name string
	cp   *Checkpoint
	what string
}

// wanted is, per checkpoint file (in CheckpointFiles order), the entry a log dir must
// have for the partition; nil: none.
type wanted [len(CheckpointFiles)]*Entry

// count is the number of files that have an entry.
func (w wanted) count() int {
	n := 0
	for _, e := range w {
		if e != nil {
			n++
		}
	}
	return n
}

// setEdits are the edits that give s the entries of w (replacing an entry of the
// partition with another offset). With strict, files where w has no entry lose the
// partition's entry too.
func setEdits(s *side, tp TP, w wanted, strict bool) []edit {
	var out []edit
	for i, name := range CheckpointFiles {
		cur, has := s.cps[name].Lookup(tp)
		switch {
		case w[i] != nil && (!has || cur != *w[i]):
			cp := s.cps[name].Clone()
			cp.Set(*w[i])
			what := fmt.Sprintf("added %s %d", tp, w[i].Offset)
			if has {
				what = fmt.Sprintf("replaced %s %d by %s %d", tp, cur.Offset, tp, w[i].Offset)
			}
			if s.cps[name] == nil {
				what += " (new file)"
			}
			out = append(out, edit{name: name, cp: cp, what: what})
		case w[i] == nil && has && strict:
			out = append(out, removeEdit(s, name, tp, "removed the stale entry"))
		}
	}
	return out
}

// removeEdits are the edits that take the partition's entries out of every file of s.
func removeEdits(s *side, tp TP) []edit {
	var out []edit
	for _, name := range CheckpointFiles {
		if _, has := s.cps[name].Lookup(tp); has {
			out = append(out, removeEdit(s, name, tp, "removed"))
		}
	}
	return out
}

func removeEdit(s *side, name string, tp TP, verb string) edit {
	cur, _ := s.cps[name].Lookup(tp)
	cp := s.cps[name].Clone()
	cp.Remove(tp)
	return edit{name: name, cp: cp, what: fmt.Sprintf("%s %s %d", verb, tp, cur.Offset)}
}

// checkpointSteps name the steps writeEdits reaches; "" reaches none.
type checkpointSteps struct{ tmp, partial, done string }

// writeEdits writes each edit atomically (temp file, fsync, rename, fsync of the dir),
// in order, and records the new content in s.
func (op *operation) writeEdits(s *side, edits []edit, steps checkpointSteps) error {
	tmp := op.once(steps.tmp)
	for i, e := range edits {
		path := filepath.Join(s.dir, e.name)
		if err := writeFileAtomic(s.d, e.name, e.cp.Bytes(), s.owner, tmp); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		s.cps[e.name], s.raw[e.name] = e.cp, e.cp.Bytes()
		op.logf("%s: %s", path, e.what)
		if i == 0 {
			if err := op.reach(steps.partial); err != nil {
				return err
			}
		}
	}
	return op.reach(steps.done)
}

// checkEntries re-reads the checkpoint files of s and checks that they have exactly the
// entries of w for the partition (strict) or at least those (not strict).
func checkEntries(s *side, tp TP, w wanted, strict bool) error {
	fresh := &side{role: s.role, dir: s.dir, d: s.d}
	if err := fresh.readCheckpoints(); err != nil {
		return err
	}
	for i, name := range CheckpointFiles {
		got := fresh.entry(name, tp)
		path := filepath.Join(s.dir, name)
		switch {
		case w[i] != nil && got == nil:
			return fmt.Errorf("%s lacks %s %d", path, tp, w[i].Offset)
		case w[i] != nil && *got != *w[i]:
			return fmt.Errorf("%s has %s %d, want %d", path, tp, got.Offset, w[i].Offset)
		case w[i] == nil && got != nil && strict:
			return fmt.Errorf("%s still lists %s (line %d)", path, tp, fresh.cps[name].Line(tp))
		}
	}
	return nil
}

// verifyFolder checks that dst/tp holds the files of the manifest m.
func verifyFolder(dst *side, tp TP, m Manifest) error {
	got, err := folderManifest(dst, tp)
	if err != nil {
		return err
	}
	if diff := m.Diff(got); diff != "" {
		return fmt.Errorf("%s differs from the source: %s", dst.folder(tp), diff)
	}
	return nil
}

// removeStaged removes what is left of the names in s's staging directory, and the
// directory itself once empty.
func (op *operation) removeStaged(s *side, names ...string) error {
	stage, err := s.openStaging()
	if err != nil || stage == nil {
		return err
	}
	for _, name := range names {
		ok, err := stage.exists(name)
		if err == nil && ok {
			err = stage.removeTree(name)
			if err == nil {
				op.logf("removed %s", stage.join(name))
			}
		}
		if err != nil {
			stage.close()
			return fmt.Errorf("remove %s: %w", stage.join(name), err)
		}
	}
	stage.close()
	removed, err := s.parent.removeIfEmpty(s.stagingName())
	if permissionDenied(err) {
		// The parent of the log dir is not this user's (a mount point, root's): run as root,
		// the tool runs as the log dir's owner, and the root process that started it removes
		// the staging directory it made for it (Drop.Finish).
		op.logf("left the empty staging directory %s: this user may not remove it from %s", s.staging, s.parent.path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", s.staging, err)
	}
	if removed {
		op.logf("removed the empty staging directory %s", s.staging)
	}
	return nil
}

// parseTarget parses the --partition argument of Move and Recover.
func parseTarget(s string) (TP, error) {
	tp, err := ParseTP(s)
	if err != nil {
		return TP{}, refusef("%v", err)
	}
	if tp.Topic == metadataTopic {
		return TP{}, refusef("%s is the KRaft metadata log, which this tool does not move or copy", tp)
	}
	return tp, nil
}

// noFuture is a Refusal when s holds a future folder of tp: the broker would resume that
// online move at its next start.
func noFuture(s *side, tp TP) error {
	name, err := s.futureFolder(tp)
	if err != nil {
		return err
	}
	if name != "" {
		return refusef("%s %s holds %s, an online log-dir move of %s that the broker resumes when it starts; "+
			"let it finish (or remove that folder) first", s.role, s.dir, name, tp)
	}
	return nil
}

// recoveryNotSkipped is a Refusal when the target dir has Kafka's clean-shutdown marker
// and the source dir has not: the broker of the target would skip the log recovery the
// copied folder may need.
func recoveryNotSkipped(src, dst *side) error {
	srcClean, err := src.cleanShutdown()
	if err != nil {
		return err
	}
	dstClean, err := dst.cleanShutdown()
	if err != nil {
		return err
	}
	if dstClean && !srcClean {
		return refusef("%s has %s (its broker stopped cleanly) but %s has not: the copied folder may need the log "+
			"recovery that the broker of %s would skip; start and cleanly stop the broker of %s first",
			dst.dir, CleanShutdownFile, src.dir, dst.dir, src.dir)
	}
	return nil
}
