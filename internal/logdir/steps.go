package logdir

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// KillEnv names the crash-test hook: when the environment variable holds a step name,
// the process SIGKILLs itself as soon as it reaches that step (once the step is done), so
// that tests can interrupt a move or a recovery between any two steps. Only a build with
// the tag kafkamender_testhooks has the hook (killhook_on.go); any other build ignores
// the variable, so that nothing in a release can be made to stop half-way by its
// environment.
const KillEnv = "KAFKAMENDER_LOGDIR_KILL_AT"

// TestHooksTag is the build tag that compiles the crash-test hook in.
const TestHooksTag = "kafkamender_testhooks"

// The steps of a move and a recovery, in order. Each is reached once it is done.
const (
	StepLocked            = "locked"             // both .lock files held, the state read again under the locks
	StepCopying           = "copying"            // the first file copied into the staging directory (a partial copy)
	StepStaged            = "staged"             // the copy complete, fsynced and verified, not yet renamed into place
	StepPlaced            = "placed"             // the copy renamed into the target log dir, which is fsynced
	StepTargetTmp         = "target-tmp"         // the first target checkpoint's .tmp written and fsynced, not renamed
	StepTargetPartial     = "target-partial"     // the first target checkpoint file replaced, the others not yet
	StepTargetCheckpoints = "target-checkpoints" // every target checkpoint file has the partition's entries
	StepSourceTmp         = "source-tmp"         // the first source checkpoint's .tmp written, not renamed
	StepSourcePartial     = "source-partial"     // the first source checkpoint file replaced, the others not yet
	StepSourceCheckpoints = "source-checkpoints" // no source checkpoint file lists the partition any more
	StepVerified          = "verified"           // the target folder and every checkpoint file checked
	StepTrashed           = "trashed"            // the source folder renamed into <from>.kafkamender/trash-<tp>
	StepDone              = "done"               // the trash and the staging directories removed
)

// MoveSteps are the steps of Move, in order.
var MoveSteps = []string{
	StepLocked, StepCopying, StepStaged, StepPlaced,
	StepTargetTmp, StepTargetPartial, StepTargetCheckpoints,
	StepSourceTmp, StepSourcePartial, StepSourceCheckpoints,
	StepVerified, StepTrashed, StepDone,
}

// RecoverSteps are the steps of Recover, in order.
var RecoverSteps = []string{
	StepLocked, StepCopying, StepStaged, StepPlaced,
	StepTargetTmp, StepTargetPartial, StepTargetCheckpoints,
	StepVerified, StepDone,
}

// Options are the arguments of Move and Recover.
type Options struct {
	From      string    // the log dir that holds the partition
	To        string    // the log dir that gets it
	Partition string    // "<topic>-<partition>"
	Out       io.Writer // where each step is told; nil for nowhere

	stopAt string            // tests: return errStopped at this step
	onStep func(step string) // tests: called at each step reached
}

// Result is what a Move or Recover did.
type Result struct {
	Partition TP
	Files     int   // files in the partition folder
	Bytes     int64 // their total size
	Copied    bool  // this run copied the folder (false when an earlier run had)
	Entries   int   // checkpoint entries the target got (or had already)
	Nothing   bool  // there was nothing left to do
	Summary   string
}

// Refusal is a check that failed before anything was changed (or, on a rerun, a state
// the tool cannot resolve safely). Its Reason says what and what to do.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

func refusef(format string, args ...any) error { return &Refusal{Reason: fmt.Sprintf(format, args...)} }

// errStopped is what an operation returns at Options.stopAt (tests only).
var errStopped = errors.New("stopped at the test's step")

// operation is one run of Move or Recover: its options, its steps and its output.
type operation struct {
	name  string // "move" or "recover"
	opts  Options
	steps []string
	out   io.Writer
	kill  string // the step of KillEnv, "" for none (always, without the test hooks)
}

func newOperation(name string, opts Options, steps []string) (*operation, error) {
	op := &operation{name: name, opts: opts, steps: steps, out: opts.Out, kill: killStep()}
	if op.out == nil {
		op.out = io.Discard
	}
	if op.kill != "" && !slices.Contains(steps, op.kill) {
		return nil, fmt.Errorf("%s=%q is not a step of %s (steps: %s)", KillEnv, op.kill, name, strings.Join(steps, ", "))
	}
	return op, nil
}

// reach marks a step done: the crash hook fires here. The step "" is none.
func (op *operation) reach(step string) error {
	if step == "" {
		return nil
	}
	if !slices.Contains(op.steps, step) {
		return fmt.Errorf("internal error: %q is not a step of %s", step, op.name)
	}
	if op.kill == step {
		op.killSelf(step)
	}
	if op.opts.onStep != nil {
		op.opts.onStep(step)
	}
	if op.opts.stopAt == step {
		return errStopped
	}
	return nil
}

// once returns a hook that reaches step the first time it is called.
func (op *operation) once(step string) func() error {
	done := false
	return func() error {
		if done {
			return nil
		}
		done = true
		return op.reach(step)
	}
}

func (op *operation) logf(format string, args ...any) {
	fmt.Fprintf(op.out, "  "+format+"\n", args...)
}
