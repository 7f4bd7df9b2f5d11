package logdir

import (
	"fmt"
	"path/filepath"
)

// Move moves the folder of one partition, with its checkpoint entries, from the log dir
// opts.From to the log dir opts.To of the same stopped broker. It refuses (a *Refusal,
// nothing changed) when the dirs are not two dirs of one broker, a broker runs, a
// checkpoint file is malformed, the dirs belong to a KRaft broker (offlineMoveAllowed),
// or the target holds a different copy of the partition. Run again after an interruption
// at any point, it finishes the move. The package documentation has the whole procedure.
func Move(opts Options) (*Result, error) {
	op, err := newOperation("move", opts, MoveSteps)
	if err != nil {
		return nil, err
	}
	tp, err := parseTarget(opts.Partition)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(op.out, "move %s from %s to %s\n", tp, opts.From, opts.To)
	p, held, err := lockedPlan(op, func(probe bool) (*movePlan, error) { return planMove(tp, opts, probe) })
	if err != nil {
		return nil, err
	}
	defer held.release()
	defer closeSides(p)
	return op.move(p)
}

func (p *movePlan) sides() (src, dst *side) { return p.src, p.dst }

// closeSides closes the directories of a plan's sides.
func closeSides(p interface{ sides() (src, dst *side) }) {
	src, dst := p.sides()
	src.close()
	dst.close()
}

func (p *movePlan) describe() string { return p.state.String() }

// lockedPlan is the start Move and Recover share: plan (every check, nothing changed),
// take the locks of both dirs, plan again under them (another run may have changed
// things meanwhile), and reach StepLocked. The caller releases the locks.
func lockedPlan[P interface {
	sides() (src, dst *side)
	describe() string
}](op *operation, plan func(probe bool) (P, error)) (P, *locks, error) {
	var none P
	p, err := plan(true)
	if err != nil {
		return none, nil, err
	}
	src, dst := p.sides()
	held, err := lockDirs(src, dst)
	closeSides(p)
	if err != nil {
		return none, nil, err
	}
	if p, err = plan(false); err != nil {
		held.release()
		return none, nil, err
	}
	src, dst = p.sides()
	op.logf("locked %s and %s", filepath.Join(src.dir, LockFile), filepath.Join(dst.dir, LockFile))
	op.logf("state: %s", p.describe())
	if err := op.reach(StepLocked); err != nil {
		held.release()
		closeSides(p)
		return none, nil, err
	}
	return p, held, nil
}

// moveState is what the filesystem shows of a move: the states a move goes through, in
// order, which is also what a rerun resumes from.
type moveState int

const (
	// moveFresh: the folder is only in --from. A fresh move, or one interrupted before
	// the copy was renamed into --to (a partial copy in staging is thrown away).
	moveFresh moveState = iota
	// moveBoth: the folder is in both dirs with the same content. The copy was placed;
	// the checkpoint updates, the checks or the removal of the source are left.
	moveBoth
	// moveTargetOnly: the folder is only in --to. The source was removed (the
	// checkpoints were updated before); the trash and staging directories are left.
	moveTargetOnly
)

func (s moveState) String() string {
	switch s {
	case moveFresh:
		return "the folder is only in --from: copying it"
	case moveBoth:
		return "the folder is in both dirs, with the same content: an earlier run placed the copy; finishing"
	default:
		return "the folder is only in --to: an earlier run removed the source; finishing"
	}
}

// movePlan is what Move is to do, read from the filesystem.
type movePlan struct {
	tp       TP
	src, dst *side
	state    moveState
	want     wanted   // the entries --to ends with: those of --from (or already moved)
	source   Manifest // of the source folder, in state moveBoth
}

// planMove runs every check of Move and reads its state, changing nothing. probe checks
// that no process holds a .lock; it must be false once this process holds them (see
// ProbeLock).
func planMove(tp TP, opts Options, probe bool) (_ *movePlan, err error) {
	src, dst, err := openSides(opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			src.close()
			dst.close()
		}
	}()
	if err := sameDir(src, dst); err != nil {
		return nil, err
	}
	if err := sameBroker(src, dst); err != nil {
		return nil, err
	}
	for _, s := range []*side{src, dst} {
		if probe {
			if err := s.lockFree("its broker"); err != nil {
				return nil, err
			}
		}
	}
	if err := offlineMoveAllowed(src, dst); err != nil {
		return nil, err
	}
	if err := checkBoth(tp, src, dst); err != nil {
		return nil, err
	}
	p := &movePlan{tp: tp, src: src, dst: dst}
	if err := p.readState(); err != nil {
		return nil, err
	}
	return p, nil
}

// offlineMoveAllowed is the KRaft rule of Move. On a KRaft broker with several log dirs
// (Kafka 3.7 and later, KIP-858) each dir's meta.properties has a directory.id, and the
// controller records which directory holds each replica. The broker is the authority when
// they disagree: at start-up it loads every log from whichever of its dirs holds it, and
// for a log found elsewhere than the metadata says it sends AssignReplicasToDirs, and the
// controller records the new directory (ReplicaManager.maybeUpdateTopicAssignment,
// KIP-858: "the partition might have been moved to a different log directory whilst the
// broker was offline"). So a move between two dirs of one KRaft broker is supported, on
// the conditions Move enforces anyway (a move, not a copy: one folder in the end; no
// pending -future folder) and these: both dirs carry a directory.id, and different ones
// (a dir with none next to one with one was not formatted for this broker's JBOD; two
// equal ids are one dir cloned). Both dirs must be in the broker's log.dirs and online
// when it starts: were the target missing, the broker would create an empty log in the
// directory the metadata names. Recover is not subject to this rule.
func offlineMoveAllowed(src, dst *side) error {
	a, b := src.meta.DirectoryID(), dst.meta.DirectoryID()
	switch {
	case a == "" && b == "":
		return nil
	case a == "" || b == "":
		with, without := src.dir, dst.dir
		if a == "" {
			with, without = dst.dir, src.dir
		}
		return refusef("%s has a directory.id in meta.properties and %s has none: they are not two log dirs of one KRaft "+
			"broker as Kafka formats them (check the broker's log.dirs)", with, without)
	case a == b:
		return refusef("%s and %s have the same directory.id %s: one is a copy of the other, not two log dirs of the broker", src.dir, dst.dir, a)
	}
	return nil
}

// sameBroker is a Refusal unless both dirs name the same broker and cluster.
func sameBroker(src, dst *side) error {
	srcBroker, srcCluster, err := needIdentity(src)
	if err != nil {
		return err
	}
	dstBroker, dstCluster, err := needIdentity(dst)
	if err != nil {
		return err
	}
	if srcBroker != dstBroker || srcCluster != dstCluster {
		return refusef("--from %s (broker %s, cluster.id %s) and --to %s (broker %s, cluster.id %s) are not log dirs of "+
			"the same broker; to copy a replica from another broker use recover", src.dir, srcBroker, srcCluster,
			dst.dir, dstBroker, dstCluster)
	}
	return nil
}

// checkBoth runs the checks Move and Recover share once the identities are settled.
func checkBoth(tp TP, src, dst *side) error {
	for _, s := range []*side{src, dst} {
		if err := s.readCheckpoints(); err != nil {
			return err
		}
		if err := noFuture(s, tp); err != nil {
			return err
		}
	}
	if err := recoveryNotSkipped(src, dst); err != nil {
		return err
	}
	if err := dst.stagingOnSameFS(); err != nil {
		return err
	}
	if err := dst.owner.canGive(); err != nil {
		return refusef("%v", err)
	}
	return nil
}

// readState finds the state of the move, and the entries --to must end with.
func (p *movePlan) readState() error {
	if err := p.src.stagingOnSameFS(); err != nil {
		return err
	}
	srcHas, err := p.src.hasFolder(p.tp)
	if err != nil {
		return err
	}
	dstHas, err := p.dst.hasFolder(p.tp)
	if err != nil {
		return err
	}
	switch {
	case !srcHas && !dstHas:
		return refusef("%s is in neither %s nor %s", p.tp, p.src.dir, p.dst.dir)
	case srcHas && !dstHas:
		p.state = moveFresh
		if err := roomFor(p.src, p.dst, p.tp); err != nil {
			return err
		}
	case srcHas && dstHas:
		m, diff, err := matches(p.src, p.dst, p.tp)
		if err != nil {
			return err
		}
		if diff != "" {
			return refusef("%s already has a %s folder that differs from the one in %s (%s): "+
				"this tool does not choose between two copies", p.dst.dir, p.tp, p.src.dir, diff)
		}
		p.state, p.source = moveBoth, m
	default:
		p.state = moveTargetOnly
	}
	return p.readEntries()
}

// readEntries sets want: per file, the entry of --from, or, where --from has none (an
// earlier run removed it), the one --to has. Once the source folder is gone (the
// checkpoints were done before), an entry left in --from must agree with --to.
func (p *movePlan) readEntries() error {
	for i, name := range CheckpointFiles {
		s, d := p.src.entry(name, p.tp), p.dst.entry(name, p.tp)
		switch {
		case s != nil && d != nil && *s != *d && p.state == moveTargetOnly:
			return refusef("%s is only in %s, but %s lists it with offset %d and %s with offset %d: "+
				"this tool does not choose between them", p.tp, p.dst.dir, filepath.Join(p.src.dir, name), s.Offset,
				filepath.Join(p.dst.dir, name), d.Offset)
		case s != nil:
			p.want[i] = s
		case p.state != moveFresh:
			p.want[i] = d
		}
	}
	return nil
}

// move carries out the plan from its state on.
func (op *operation) move(p *movePlan) (*Result, error) {
	res := &Result{Partition: p.tp, Entries: p.want.count()}
	for _, s := range []*side{p.src, p.dst} {
		if err := op.removeLeftoverTmp(s); err != nil {
			return nil, err
		}
	}
	m := p.source
	if p.state == moveFresh {
		// Entries of the partition in --to that --from does not have are stale: take them
		// out before the folder lands, so that --to ends with the entries of --from only.
		if err := op.writeEdits(p.dst, staleEdits(p.dst, p.tp, p.want), checkpointSteps{}); err != nil {
			return nil, err
		}
		var err error
		if m, err = op.stageAndPlace(p.src, p.dst, p.tp); err != nil {
			return nil, err
		}
		res.Copied = true
	}
	toDst := setEdits(p.dst, p.tp, p.want, false)
	if err := op.writeEdits(p.dst, toDst, checkpointSteps{StepTargetTmp, StepTargetPartial, StepTargetCheckpoints}); err != nil {
		return nil, err
	}
	fromSrc := removeEdits(p.src, p.tp)
	if err := op.writeEdits(p.src, fromSrc, checkpointSteps{StepSourceTmp, StepSourcePartial, StepSourceCheckpoints}); err != nil {
		return nil, err
	}
	if err := op.verifyMove(p, m); err != nil {
		return nil, err
	}
	trashed, err := op.trashSource(p)
	if err != nil {
		return nil, err
	}
	if err := op.removeStaged(p.dst, p.tp.String()); err != nil {
		return nil, err
	}
	if err := op.removeStaged(p.src); err != nil {
		return nil, err
	}
	if err := op.reach(StepDone); err != nil {
		return nil, err
	}
	res.Files, res.Bytes, err = countFolder(p.dst.d, p.tp.String())
	if err != nil {
		return nil, err
	}
	res.Nothing = p.state == moveTargetOnly && len(toDst) == 0 && len(fromSrc) == 0 && !trashed
	res.Summary = fmt.Sprintf("moved %s from %s to %s: %d files, %d bytes, %d checkpoint entries",
		p.tp, p.src.dir, p.dst.dir, res.Files, res.Bytes, res.Entries)
	if res.Nothing {
		res.Summary = fmt.Sprintf("nothing to do: %s is already in %s, and no checkpoint file of %s lists it",
			p.tp, p.dst.dir, p.src.dir)
	}
	fmt.Fprintln(op.out, res.Summary)
	return res, nil
}

// staleEdits take out of s the entries of tp in the files where w has none.
func staleEdits(s *side, tp TP, w wanted) []edit {
	var out []edit
	for i, name := range CheckpointFiles {
		if _, has := s.cps[name].Lookup(tp); has && w[i] == nil {
			out = append(out, removeEdit(s, name, tp, "removed the stale entry"))
		}
	}
	return out
}

// verifyMove checks the target folder against the source's manifest (when this run read
// the source; once it is gone, it was checked before its removal) and both dirs'
// checkpoint files, before anything is removed.
func (op *operation) verifyMove(p *movePlan, m Manifest) error {
	if m != nil {
		if err := verifyFolder(p.dst, p.tp, m); err != nil {
			return fmt.Errorf("verification failed, the source is left in place: %w", err)
		}
	}
	if err := checkEntries(p.dst, p.tp, p.want, false); err != nil {
		return fmt.Errorf("verification failed, the source is left in place: %w", err)
	}
	if err := checkEntries(p.src, p.tp, wanted{}, true); err != nil {
		return fmt.Errorf("verification failed, the source is left in place: %w", err)
	}
	if m != nil {
		op.logf("verified %s (%d files, SHA-256) and the checkpoint entries of both dirs", p.dst.folder(p.tp), m.Files())
	} else {
		op.logf("verified the checkpoint entries of both dirs")
	}
	return op.reach(StepVerified)
}

// trashSource renames the source folder out of the log dir, into its staging directory
// (one atomic rename: the log dir never shows a partial folder), and removes it there.
// A trash left by an interrupted run is removed too. It reports whether there was
// anything to remove.
func (op *operation) trashSource(p *movePlan) (bool, error) {
	name := trashPrefix + p.tp.String()
	trash := filepath.Join(p.src.staging, name)
	var stage *dir
	var err error
	if p.state != moveTargetOnly {
		if stage, err = p.src.makeStaging(); err != nil {
			return false, err
		}
		defer stage.close()
		if err := stage.removeTree(name); err != nil {
			return false, err
		}
		if err := rename(p.src.d, p.tp.String(), stage, name); err != nil {
			return false, fmt.Errorf("rename the source out of the log dir: %w", err)
		}
		if err := p.src.d.sync(); err != nil {
			return false, err
		}
		if err := stage.sync(); err != nil {
			return false, err
		}
		op.logf("renamed the source %s to %s", p.src.folder(p.tp), trash)
	} else {
		if stage, err = p.src.openStaging(); err != nil || stage == nil {
			if err == nil {
				err = op.reach(StepTrashed)
			}
			return false, err
		}
		defer stage.close()
	}
	if err := op.reach(StepTrashed); err != nil {
		return false, err
	}
	ok, err := stage.exists(name)
	if err != nil || !ok {
		return p.state != moveTargetOnly, err
	}
	if err := stage.removeTree(name); err != nil {
		return false, fmt.Errorf("remove %s: %w", trash, err)
	}
	op.logf("removed %s", trash)
	return true, nil
}
