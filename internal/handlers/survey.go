package handlers

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/plan"
)

var _ operation.Surveyor = (*Handlers)(nil)

// Survey implements operation.Surveyor: the fingerprint of the state a plan of changes
// depends on, read afresh (at least as new as floor), and (bytes) the bytes its new
// replicas copy.
// The fingerprint holds each touched partition's replicas, ISR, leader and ongoing
// reassignment, for log-dir moves the moving replica's directory (and a future one in
// flight), each touched topic's min.insync.replicas (the configuration the plans read:
// pacing, and the brokers' room), and the brokers with their racks (placement and rack
// spreading read them).
func (h *Handlers) Survey(ctx context.Context, cluster string, changes []events.Change, floor []model.Seen, bytes bool) (approval.Fingerprint, int64, error) {
	var fp approval.Fingerprint
	c, ok := h.cfg.Clusters[cluster]
	if !ok {
		return fp, 0, fmt.Errorf("unknown cluster %q", cluster)
	}
	_, caps, err := h.strategyFor(ctx, c, "")
	if err != nil {
		return fp, 0, err
	}
	topics := topicsOf(changes)
	snap, err := newFreshReader(c.reader(caps), floor, h.cfg.VerifyTimeout, h.log).Snapshot(ctx, topics...)
	if err != nil {
		return fp, 0, transient(fmt.Errorf("read the cluster for the plan's fingerprint: %w", err))
	}
	dirs := map[int32][]dirReplica{} // broker → its replicas' directories, for log-dir moves
	for _, ch := range changes {
		if ch.Broker != nil && dirs[*ch.Broker] == nil {
			ds, err := describeDirs(ctx, c, *ch.Broker)
			if err != nil {
				return fp, 0, err
			}
			dirs[*ch.Broker] = flattenDirs(ds)
		}
	}
	seen := map[model.TopicPartition]int{}
	for _, ch := range changes {
		i, ok := seen[ch.TopicPartition]
		if !ok {
			ps := approval.PartitionState{TopicPartition: ch.TopicPartition, Leader: -1}
			if p, ok := snap.Partition(ch.TopicPartition); ok {
				ps.Replicas, ps.ISR, ps.Leader = slices.Clone(p.Replicas), slices.Clone(p.ISR), p.Leader
				ps.Adding, ps.Removing = slices.Clone(p.Adding), slices.Clone(p.Removing)
				if len(p.Target) > 0 && len(ps.Adding) == 0 { // before Kafka 2.4: the target is what is known
					ps.Adding = slices.Clone(p.Target)
				}
			}
			i = len(fp.Partitions)
			seen[ch.TopicPartition] = i
			fp.Partitions = append(fp.Partitions, ps)
		}
		if ch.Broker != nil {
			ps := &fp.Partitions[i]
			if ps.Dirs == nil {
				ps.Dirs = map[int32]string{}
			}
			ps.Dirs[*ch.Broker] = dirOf(dirs[*ch.Broker], ch.TopicPartition)
		}
	}
	for _, b := range snap.Brokers {
		fp.Brokers = append(fp.Brokers, approval.Broker{ID: b.ID, Rack: b.Rack})
	}
	mins, err := minInsyncReplicasOf(ctx, c, topics)
	if err != nil {
		return fp, 0, err
	}
	fp.Configs = map[string]string{}
	for _, t := range topics {
		v := ""
		if n, ok := mins[t]; ok {
			v = strconv.Itoa(n)
		}
		fp.Configs["topic "+t+" min.insync.replicas"] = v
	}
	fp = fp.Sorted()
	var copied int64
	if bytes && needsCopy(changes) {
		copied = expectedBytes(ctx, kadm.NewClient(c.Client), changes)
	}
	return fp, copied, nil
}

// needsCopy reports whether any change adds a replica.
func needsCopy(changes []events.Change) bool {
	for _, ch := range changes {
		if ch.Broker == nil && len(minus(ch.ReplicasAfter, ch.ReplicasBefore)) > 0 {
			return true
		}
	}
	return false
}

type dirReplica struct {
	tp     model.TopicPartition
	dir    string
	future bool
}

func flattenDirs(ds []plan.LogDir) []dirReplica {
	var out []dirReplica
	for _, d := range ds {
		for _, r := range d.Replicas {
			out = append(out, dirReplica{tp: r.TopicPartition, dir: d.Path, future: r.Future})
		}
	}
	return out
}

// dirOf is the directory of the broker's replica of tp ("" unknown), with "→<dir>"
// appended while a move of it to dir is in flight: the state a log-dir plan depends on.
func dirOf(rs []dirReplica, tp model.TopicPartition) string {
	cur, fut := "", ""
	for _, r := range rs {
		if r.tp != tp {
			continue
		}
		if r.future {
			fut = r.dir
		} else {
			cur = r.dir
		}
	}
	if fut != "" {
		return cur + "→" + fut
	}
	return cur
}
