package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/kafkamender/kafkamender/internal/retry"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CancelReassignments cancels the reassignments of tps (KIP-455: each replica set goes
// back to what it was). A partition with none in progress is fine; other per-partition
// errors are joined; a request that fails is transient.
func CancelReassignments(ctx context.Context, cl *kgo.Client, tps []TopicPartition) error {
	if len(tps) == 0 {
		return nil
	}
	req := kadm.AlterPartitionAssignmentsReq{}
	for _, tp := range tps {
		req.CancelAssign(tp.Topic, tp.Partition)
	}
	resp, err := kadm.NewClient(cl).AlterPartitionAssignments(ctx, req)
	if err != nil {
		return retry.Transient(fmt.Errorf("cancel reassignments: %w", err))
	}
	var errs []error
	resp.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		if r.Err != nil && !errors.Is(r.Err, kerr.NoReassignmentInProgress) {
			errs = append(errs, fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, r.Err))
		}
	})
	return errors.Join(errs...)
}
