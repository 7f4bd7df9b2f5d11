package kafka

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/kafkamender/kafkamender/internal/retry"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KnownBy asks every live broker, each with a metadata request of its own, which of
// topics it knows, and returns for each topic some broker that knows it. A broker learns a
// new topic from the controller some time after its creation: one whose metadata lags says
// UNKNOWN_TOPIC_OR_PARTITION, which must not be taken for "the topic does not exist" while
// another broker knows it. It fails only when no broker answers.
func KnownBy(ctx context.Context, cl *kgo.Client, topics []string) (map[string]int32, error) {
	md, err := BrokerMetadata(ctx, cl)
	if err != nil {
		return nil, classify(err)
	}
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		known   = map[string]int32{}
		answers int
		errs    []error
	)
	for _, b := range md.Brokers {
		wg.Go(func() {
			req := kmsg.NewPtrMetadataRequest() // one each: the client sets its version
			for _, t := range topics {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(t)
				req.Topics = append(req.Topics, rt)
			}
			resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("broker %d: %w", b.NodeID, err))
				return
			}
			answers++
			for _, t := range resp.Topics {
				if t.Topic != nil && kerr.ErrorForCode(t.ErrorCode) == nil {
					if _, ok := known[*t.Topic]; !ok || b.NodeID < known[*t.Topic] {
						known[*t.Topic] = b.NodeID
					}
				}
			}
		})
	}
	wg.Wait()
	if answers == 0 {
		sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
		return nil, retry.Transient(fmt.Errorf("metadata of each broker: no broker answered: %v", errs))
	}
	return known, nil
}
