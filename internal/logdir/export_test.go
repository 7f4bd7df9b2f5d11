package logdir

// Test hooks for the external tests of this package.

// StopAt makes Move or Recover return an error at step, as if the process died there
// (without the deferred release of the locks happening any later than a death would).
func StopAt(opts Options, step string) Options {
	opts.stopAt = step
	return opts
}

// OnStep makes Move or Recover call fn at each step reached.
func OnStep(opts Options, fn func(step string)) Options {
	opts.onStep = fn
	return opts
}

// ErrStopped is what Move and Recover return at the step of StopAt.
var ErrStopped = errStopped

// LockDirs takes the locks Move and Recover take; release drops them.
func LockDirs(dirs ...string) (release func(), err error) {
	var sides []*side
	defer func() {
		for _, s := range sides {
			s.close()
		}
	}()
	for _, path := range dirs {
		parent, d, err := openLogDir(path)
		if err != nil {
			return nil, err
		}
		sides = append(sides, &side{dir: d.path, d: d, parent: parent})
	}
	l, err := lockDirs(sides...)
	if err != nil {
		return nil, err
	}
	return l.release, nil
}
