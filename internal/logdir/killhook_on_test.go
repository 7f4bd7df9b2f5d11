//go:build kafkamender_testhooks

package logdir_test

import (
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/logdir"
)

// With the test hooks built in, an unknown step name in the crash hook is an error, not
// a run without the hook.
func TestLogDirKillHookUnknownStep(t *testing.T) {
	_, d1, d2 := twoDirs(t)
	t.Setenv(logdir.KillEnv, "nope")
	_, err := logdir.Move(moveOpts(d1, d2, nil))
	if err == nil || !strings.Contains(err.Error(), `KAFKAMENDER_LOGDIR_KILL_AT="nope" is not a step of move`) {
		t.Errorf("error %v", err)
	}
}
