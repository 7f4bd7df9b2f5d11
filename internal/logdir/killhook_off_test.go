//go:build !kafkamender_testhooks

package logdir_test

import (
	"testing"

	"github.com/kafkamender/kafkamender/internal/logdir"
	lt "github.com/kafkamender/kafkamender/internal/logdir/logdirtest"
)

// A build without the tag kafkamender_testhooks (a release) ignores the crash hook's
// variable: a move told to die at a step (were the hook there, this test process would be
// SIGKILLed) or at no step at all finishes.
func TestLogDirKillHookIgnoredWithoutTag(t *testing.T) {
	for _, step := range []string{logdir.StepLocked, logdir.StepPlaced, "nope"} {
		t.Run(step, func(t *testing.T) {
			_, d1, d2 := twoDirs(t)
			c := lt.NewMoveCase(t, d1, d2, moved)
			t.Setenv(logdir.KillEnv, step)
			if _, err := logdir.Move(moveOpts(d1, d2, nil)); err != nil {
				t.Fatal(err)
			}
			c.CheckDone(t)
		})
	}
}
