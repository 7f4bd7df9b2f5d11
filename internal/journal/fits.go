package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
)

// MaxEntryBytes bounds an entry as encoded (JSON). Entries of any size up to it are stored
// (in chunks beyond one message); a shed of 25,000 partitions with a request of 1 MiB is
// about 5 MiB. The bound keeps a runaway plan from filling the bucket and the workers'
// memory.
const MaxEntryBytes = 64 << 20

// maxSubjectBytes bounds a subject that an operation's storage uses (a journal chunk, a
// result part): a longer one would make the server drop the connection (its control-line
// limit is 4 KiB, with the verb, reply subject and sizes).
const maxSubjectBytes = 3840

// ErrTooLarge: what an operation would store cannot be stored, however often it is tried
// (permanent): the event should be rejected. CheckFits and writes of an entry over
// MaxEntryBytes return errors that wrap it.
var ErrTooLarge = errors.New("too large to store")

type tooLarge struct {
	what      string
	size, max int
}

func (e *tooLarge) Error() string {
	return fmt.Sprintf("%s is %d bytes, over the limit of %d: %s", e.what, e.size, e.max, ErrTooLarge)
}

func (e *tooLarge) Unwrap() error { return ErrTooLarge }

// Rejection marks the error as a rejection of the event: nothing was changed (see
// operation.IsRejection).
func (e *tooLarge) Rejection() bool { return true }

// CheckFits reports, at plan time, whether the operation e describes (its event, request
// and plan: Changes, Skipped, Noop) can be journaled as it runs and its result stored:
// nil, or an error wrapping ErrTooLarge that says what does not fit, for a rejection. It
// counts what an entry gains while the operation runs (each change's reassignment and
// what it left), and checks the names that storage derives from the cluster and the event
// id. A dry run, which journals nothing, may check its result's names the same way.
func CheckFits(e *Entry) error {
	var errs []error
	if s := "$KV." + Bucket + "." + chunkKey(e.Cluster, strings.Repeat("N", nonceLen), MaxEntryBytes); len(s) > maxSubjectBytes {
		errs = append(errs, &tooLarge{what: fmt.Sprintf("cluster name %.40q… in a journal subject", e.Cluster), size: len(s), max: maxSubjectBytes})
	}
	if s := events.ResultPartSubject(e.Event, strings.Repeat("N", nonceLen), MaxEntryBytes); len(s) > maxSubjectBytes {
		errs = append(errs, &tooLarge{what: fmt.Sprintf("event id %.40q… in a result subject", e.Event), size: len(s), max: maxSubjectBytes})
	}
	if n := grownSize(e); n > MaxEntryBytes {
		errs = append(errs, &tooLarge{what: fmt.Sprintf("the journal entry of %d changes, as it grows while they run,", len(e.Changes)), size: n, max: MaxEntryBytes})
	}
	return errors.Join(errs...)
}

// nonceLen is the length of rand.Text(), the nonce of a chunk set.
const nonceLen = 26

// grownSize is the size of e's encoding once each change has its reassignment recorded
// and what it left (as Changes' …After says).
func grownSize(e *Entry) int {
	g := *e
	if len(g.Reassignments) < len(g.Changes) {
		g.Reassignments = make([]model.TopicPartition, len(g.Changes))
		for i, c := range g.Changes {
			g.Reassignments[i] = c.TopicPartition
		}
	}
	if len(g.Left) < len(g.Changes) {
		g.Left = make([]model.Seen, len(g.Changes))
		for i, c := range g.Changes {
			g.Left[i] = model.Seen{TopicPartition: c.TopicPartition, Replicas: c.ReplicasAfter, Leader: c.LeaderAfter, LeaderEpoch: 1 << 30}
		}
	}
	raw, err := json.Marshal(&g)
	if err != nil {
		return 0
	}
	return len(raw)
}
