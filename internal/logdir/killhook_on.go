//go:build kafkamender_testhooks

package logdir

import (
	"os"
	"syscall"
	"time"
)

// The crash hook of the tests, built in only with the tag kafkamender_testhooks: the
// crash tests build the worker with it ("go build -tags kafkamender_testhooks").

// killStep is the step named by KillEnv, "" for none.
func killStep() string { return os.Getenv(KillEnv) }

// killSelf SIGKILLs this process at step.
func (op *operation) killSelf(step string) {
	op.logf("%s=%s: killing this process (SIGKILL)", KillEnv, step)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Minute) // SIGKILL cannot be caught; this only waits for it
}
