package testenv

import (
	"fmt"
	"sync/atomic"
)

// The tally of a test process: what its fault tests did, counted where it happens, so
// that a run can report its totals (go test -v prints them from TestMain, see Report).
// Faults injected through this package (a broker stopped, killed or paused, NATS
// restarted, a ZooKeeper connection cut) count themselves; tests count the faults they
// inject by other means (a worker process killed, a handler made to panic) with
// CountFault.
var tally struct {
	events, results, faults, checks, leftovers atomic.Int64
}

// CountEvent counts an event published.
func CountEvent() { tally.events.Add(1) }

// CountResult counts a result received.
func CountResult() { tally.results.Add(1) }

// CountFault counts a fault injected.
func CountFault() { tally.faults.Add(1) }

// Report is the process's tally, one line, for TestMain to print after the tests ran.
func Report() string {
	return fmt.Sprintf("fault tally: events published %d, results received %d, faults injected %d, leftover checks %d, leftovers found %d",
		tally.events.Load(), tally.results.Load(), tally.faults.Load(), tally.checks.Load(), tally.leftovers.Load())
}
