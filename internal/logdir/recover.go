package logdir

import (
	"fmt"
)

// Recover copies the folder of one partition from opts.From, a log dir of a healthy
// broker holding a replica of it (a follower), into opts.To, a log dir of the broken
// broker that lost its replica, and gives opts.To the checkpoint entries opts.From has for
// it. Both brokers must be stopped, of the same cluster, and different. Nothing in
// opts.From is changed or removed. It refuses when opts.To already holds the partition,
// unless that is an identical copy from an interrupted run, which it finishes.
//
// The KRaft rule of Move (offlineMoveAllowed) does not apply: Recover restores a missing
// replica into a directory the broker already uses. On a KRaft broker with several log
// dirs, recover into the directory the controller records for the replica.
func Recover(opts Options) (*Result, error) {
	op, err := newOperation("recover", opts, RecoverSteps)
	if err != nil {
		return nil, err
	}
	tp, err := parseTarget(opts.Partition)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(op.out, "recover %s from %s into %s\n", tp, opts.From, opts.To)
	p, held, err := lockedPlan(op, func(probe bool) (*recoverPlan, error) { return planRecover(tp, opts, probe) })
	if err != nil {
		return nil, err
	}
	defer held.release()
	defer closeSides(p)
	return op.recover(p)
}

func (p *recoverPlan) sides() (src, dst *side) { return p.src, p.dst }

func (p *recoverPlan) describe() string {
	if p.placed {
		return fmt.Sprintf("%s already holds an identical copy: an earlier run placed it; finishing", p.dst.folder(p.tp))
	}
	return fmt.Sprintf("%s has no %s folder: copying it", p.dst.dir, p.tp)
}

// recoverPlan is what Recover is to do, read from the filesystem.
type recoverPlan struct {
	tp       TP
	src, dst *side
	placed   bool     // --to has an identical copy already
	source   Manifest // of the source folder, when placed
	want     wanted   // the entries of --from, which --to ends with
}

// planRecover runs every check of Recover and reads its state, changing nothing. probe
// checks that no process holds a .lock (false once this process holds them).
func planRecover(tp TP, opts Options, probe bool) (_ *recoverPlan, err error) {
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
	if err := otherBroker(src, dst); err != nil {
		return nil, err
	}
	if probe {
		if err := src.lockFree("the healthy broker (--from)"); err != nil {
			return nil, err
		}
		if err := dst.lockFree("the broker being recovered (--to)"); err != nil {
			return nil, err
		}
	}
	if err := checkBoth(tp, src, dst); err != nil {
		return nil, err
	}
	p := &recoverPlan{tp: tp, src: src, dst: dst}
	if err := p.readState(); err != nil {
		return nil, err
	}
	return p, nil
}

// otherBroker is a Refusal unless both dirs are of the same cluster and of different
// brokers.
func otherBroker(src, dst *side) error {
	srcBroker, srcCluster, err := needIdentity(src)
	if err != nil {
		return err
	}
	dstBroker, dstCluster, err := needIdentity(dst)
	if err != nil {
		return err
	}
	if srcCluster != dstCluster {
		return refusef("--from %s is of cluster.id %s and --to %s of cluster.id %s: recover copies a replica "+
			"between brokers of one cluster", src.dir, srcCluster, dst.dir, dstCluster)
	}
	if srcBroker == dstBroker {
		return refusef("--from %s and --to %s are both of broker %s: recover copies a replica from another "+
			"broker; to move one between the dirs of a broker use move", src.dir, dst.dir, srcBroker)
	}
	return nil
}

// readState checks that --from has the folder and --to has none (or an identical one),
// and reads the entries --to must get.
func (p *recoverPlan) readState() error {
	srcHas, err := p.src.hasFolder(p.tp)
	if err != nil {
		return err
	}
	if !srcHas {
		return refusef("--from %s has no %s folder: nothing to recover from", p.src.dir, p.tp)
	}
	dstHas, err := p.dst.hasFolder(p.tp)
	if err != nil {
		return err
	}
	if dstHas {
		m, diff, err := matches(p.src, p.dst, p.tp)
		if err != nil {
			return err
		}
		if diff != "" {
			return refusef("--to %s already has %s, and it differs from the one in %s (%s): recover only restores "+
				"a missing replica", p.dst.dir, p.tp, p.src.dir, diff)
		}
		p.placed, p.source = true, m
	} else if err := roomFor(p.src, p.dst, p.tp); err != nil {
		return err
	}
	for i, name := range CheckpointFiles {
		p.want[i] = p.src.entry(name, p.tp)
	}
	return nil
}

// recover carries out the plan from its state on.
func (op *operation) recover(p *recoverPlan) (*Result, error) {
	res := &Result{Partition: p.tp, Entries: p.want.count()}
	if err := op.removeLeftoverTmp(p.dst); err != nil {
		return nil, err
	}
	m := p.source
	if !p.placed {
		var err error
		if m, err = op.stageAndPlace(p.src, p.dst, p.tp); err != nil {
			return nil, err
		}
		res.Copied = true
	}
	edits := setEdits(p.dst, p.tp, p.want, true)
	if err := op.writeEdits(p.dst, edits, checkpointSteps{StepTargetTmp, StepTargetPartial, StepTargetCheckpoints}); err != nil {
		return nil, err
	}
	if len(edits) == 0 {
		op.logf("the checkpoint files of %s have the entries of %s already", p.dst.dir, p.src.dir)
	}
	if err := op.verifyRecover(p, m); err != nil {
		return nil, err
	}
	if err := op.removeStaged(p.dst, p.tp.String()); err != nil {
		return nil, err
	}
	if err := op.reach(StepDone); err != nil {
		return nil, err
	}
	res.Files, res.Bytes = m.Files(), m.Bytes()
	res.Nothing = p.placed && len(edits) == 0
	res.Summary = fmt.Sprintf("recovered %s into %s from %s: %d files, %d bytes, %d checkpoint entries; nothing changed in %s",
		p.tp, p.dst.dir, p.src.dir, res.Files, res.Bytes, res.Entries, p.src.dir)
	if res.Nothing {
		res.Summary = fmt.Sprintf("nothing to do: %s already holds an identical %s with the checkpoint entries of %s",
			p.dst.dir, p.tp, p.src.dir)
	}
	fmt.Fprintln(op.out, res.Summary)
	return res, nil
}

// verifyRecover checks the copy against the source's manifest, the target's entries
// against the source's, and that the source's checkpoint files are as they were read.
func (op *operation) verifyRecover(p *recoverPlan, m Manifest) error {
	if err := verifyFolder(p.dst, p.tp, m); err != nil {
		return fmt.Errorf("verification failed: %w", err)
	}
	if err := checkEntries(p.dst, p.tp, p.want, true); err != nil {
		return fmt.Errorf("verification failed: %w", err)
	}
	if err := p.src.checkpointsUnchanged(); err != nil {
		return fmt.Errorf("verification failed: %w", err)
	}
	op.logf("verified %s (%d files, SHA-256), its checkpoint entries, and that %s is unchanged",
		p.dst.folder(p.tp), m.Files(), p.src.dir)
	return op.reach(StepVerified)
}
