package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/retry"
)

// FencedWriter runs a ZooKeeper transaction that fails unless the caller still holds its
// lock (locks.Held.Multi puts a check of the lock node first).
type FencedWriter interface {
	Multi(ctx context.Context, ops ...any) ([]zk.MultiResponse, error)
}

// ZKConfig configures the ZooKeeper backends.
type ZKConfig struct {
	Conn   *zk.Conn // connection to the cluster's ZooKeeper, without chroot
	Chroot string   // the cluster's chroot ("/kafka"), or ""
	Writer FencedWriter
	Client *kgo.Client // for metadata checks and, where supported, API elections
	Caps   Capabilities
	// ForeignWait bounds how long to wait for a reassignment or election znode that someone
	// else created before giving up with ErrReassignmentInProgress. Default 30s.
	ForeignWait time.Duration
	// Nudge keeps zk-nudge progress durably (the operation journal), so that one event
	// never fails the controller over twice. Default: kept in memory, for one backend.
	Nudge NudgeJournal
	// NudgeApplyWait bounds the wait, after the failover, for metadata to show the new
	// order before the topic znodes are put back. Default 60s.
	NudgeApplyWait time.Duration
	// Limits bounds each write of /admin/reassign_partitions and
	// /admin/preferred_replica_election (entries and bytes) and each ElectLeaders
	// request. Zero fields: the defaults.
	Limits Limits
}

// kafkaTreeACL is the ACL to create a znode under parent with: the parent's. Kafka gives
// every znode of its tree the same ACL (open without zookeeper.set.acl; with it, its own
// identity's and read for everyone), and its controller rewrites and deletes the admin
// znodes the ZooKeeper strategies create, so they get that ACL whichever identity the
// worker authenticated as (clusters.<name>.zookeeper_auth).
func kafkaTreeACL(conn *zk.Conn, parent string) ([]zk.ACL, error) {
	acl, _, err := conn.GetACL(parent)
	if err != nil {
		return nil, fmt.Errorf("read the ACL of %s: %w", parent, err)
	}
	if len(acl) == 0 {
		return zk.WorldACL(zk.PermAll), nil
	}
	return acl, nil
}

// ZKBackend is the zk-reassign or zk-nudge strategy.
type ZKBackend struct {
	cfg      ZKConfig
	strategy Strategy
	adm      *kadm.Client
	failover bool
}

// NewZKBackend returns the zk-reassign or zk-nudge strategy.
func NewZKBackend(strategy Strategy, cfg ZKConfig) (*ZKBackend, error) {
	if strategy != StrategyZKReassign && strategy != StrategyZKNudge {
		return nil, fmt.Errorf("zookeeper backend: strategy %q", strategy)
	}
	if cfg.Conn == nil || cfg.Writer == nil || cfg.Client == nil {
		return nil, errors.New("zookeeper backend: Conn, Writer and Client are required")
	}
	if cfg.ForeignWait == 0 {
		cfg.ForeignWait = 30 * time.Second
	}
	if cfg.Nudge == nil {
		cfg.Nudge = &memNudge{}
	}
	if cfg.NudgeApplyWait == 0 {
		cfg.NudgeApplyWait = time.Minute
	}
	cfg.Limits = cfg.Limits.withDefaults()
	return &ZKBackend{cfg: cfg, strategy: strategy, adm: controllerAdmin(cfg.Client)}, nil
}

func (b *ZKBackend) Strategy() Strategy       { return b.strategy }
func (b *ZKBackend) ControllerFailover() bool { return b.failover }

func (b *ZKBackend) p(parts ...string) string {
	return path.Join(append([]string{"/", b.cfg.Chroot}, parts...)...)
}

func (b *ZKBackend) reassignPath() string { return b.p("admin", "reassign_partitions") }
func (b *ZKBackend) electionPath() string { return b.p("admin", "preferred_replica_election") }

// Reorder stores the new orders: through /admin/reassign_partitions (zk-reassign), or by
// rewriting the topic znodes and failing the controller over (zk-nudge).
func (b *ZKBackend) Reorder(ctx context.Context, orders map[TopicPartition][]int32) (err error) {
	defer func() { err = classify(err) }()
	if len(orders) == 0 {
		return nil
	}
	topics := map[string]*TopicZnode{}
	for _, t := range topicsOf(orders) {
		z, err := ReadTopicZnode(b.cfg.Conn, b.cfg.Chroot, t)
		if err != nil {
			return err
		}
		topics[t] = z
	}
	for _, tp := range sortedKeys(orders) {
		z := topics[tp.Topic]
		cur, err := z.Replicas(tp.Partition)
		if err != nil {
			return err
		}
		if err := checkPermutation(tp, cur, orders[tp]); err != nil {
			return err
		}
		if z.Reassigning(tp.Partition) {
			return fmt.Errorf("reorder %s: %w (adding/removing replicas in the topic znode)", tp, ErrReassignmentInProgress)
		}
	}
	if b.strategy == StrategyZKReassign {
		return b.reorderByReassignZnode(ctx, orders)
	}
	return b.reorderByNudge(ctx, orders, topics)
}

// reorderByReassignZnode writes the new orders to /admin/reassign_partitions, in as many
// znodes as Limits asks, each once the controller has carried out the one before
// (writeReassignZnodes).
func (b *ZKBackend) reorderByReassignZnode(ctx context.Context, orders map[TopicPartition][]int32) error {
	create := func(ctx context.Context, data []byte) error { return b.createAdminZnode(ctx, b.reassignPath(), data) }
	if err := writeReassignZnodes(ctx, b.cfg.Conn, b.cfg.Chroot, orders, b.cfg.Limits, create, true); err != nil {
		return err
	}
	return WaitForOrders(ctx, b.cfg.Client, orders)
}

// writeAdminZnodes writes entries to the admin znode at p (/admin/preferred_replica_election),
// split by Limits, one znode after the other: each is created (createAdminZnode) once the
// one before is gone, and this returns once the controller has deleted the last (once it
// ran the elections: the controller deletes it once per election, and a znode lost would
// show as an election not done). what names the controller's work in errors.
func (b *ZKBackend) writeAdminZnodes(ctx context.Context, p string, entries []reassignPartDoc, what string) error {
	batches, err := splitAdminZnode(entries, b.cfg.Limits)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	for i, batch := range batches {
		which := ""
		if len(batches) > 1 {
			which = fmt.Sprintf(" (znode %d of %d, %d partitions)", i+1, len(batches), len(batch.tps))
		}
		if err := b.createAdminZnode(ctx, p, batch.data); err != nil {
			return fmt.Errorf("%w%s", err, which)
		}
		if err := waitAbsent(ctx, b.cfg.Conn, p); err != nil {
			return fmt.Errorf("wait for the controller to %s %s%s: %w", what, p, which, err)
		}
	}
	return nil
}

// createAdminZnode waits for a foreign znode at p to go (bounded by ForeignWait), then
// creates p with data in a fenced transaction, unless a KRaft controller owns the cluster.
func (b *ZKBackend) createAdminZnode(ctx context.Context, p string, data []byte) error {
	wctx, cancel := context.WithTimeout(ctx, b.cfg.ForeignWait)
	defer cancel()
	for {
		if err := waitAbsent(wctx, b.cfg.Conn, p); err != nil {
			if ctx.Err() != nil {
				return err
			}
			owner, _, _ := b.cfg.Conn.Get(p)
			return fmt.Errorf("%s exists (someone else's: %s) after waiting %s: %w", p, truncate(owner, 300), b.cfg.ForeignWait, ErrReassignmentInProgress)
		}
		if err := CheckZKController(ctx, b.cfg.Conn, b.cfg.Chroot); err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
		acl, err := kafkaTreeACL(b.cfg.Conn, path.Dir(p))
		if err != nil {
			return err
		}
		_, err = b.cfg.Writer.Multi(ctx, &zk.CreateRequest{Path: p, Data: data, Acl: acl})
		if errors.Is(err, zk.ErrNodeExists) {
			continue // lost a race with another writer: wait for theirs
		}
		if errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("create %s: parent missing or lock lost: %w", p, err)
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
		return nil
	}
}

// ElectPreferred runs the preferred elections: through the API when every broker has
// ElectLeaders (Kafka 2.2+: it answers per partition), else through
// /admin/preferred_replica_election; either in batches (Limits).
func (b *ZKBackend) ElectPreferred(ctx context.Context, tps []TopicPartition) (res map[TopicPartition]error, err error) {
	defer func() { res, err = classifyEach(res), classify(err) }()
	if len(tps) == 0 {
		return nil, ErrEmptyElection
	}
	if b.cfg.Caps.ElectLeaders {
		return electViaAPI(ctx, b.adm, tps, b.cfg.Limits.Partitions)
	}
	tps = uniqueSorted(tps)
	entries, err := electionEntries(tps)
	if err != nil {
		return nil, err
	}
	if err := b.writeAdminZnodes(ctx, b.electionPath(), entries, "run"); err != nil {
		return nil, err
	}
	// The znode gives no per-partition result: the controller has written each
	// partition's state before deleting it, so compare leaders with preferred replicas.
	out := make(map[TopicPartition]error, len(tps))
	for _, tp := range tps {
		z, err := ReadTopicZnode(b.cfg.Conn, b.cfg.Chroot, tp.Topic)
		if err != nil {
			out[tp] = err
			continue
		}
		ar, err := z.Replicas(tp.Partition)
		if err != nil {
			out[tp] = err
			continue
		}
		st, err := ReadPartitionState(b.cfg.Conn, b.cfg.Chroot, tp)
		if err != nil {
			out[tp] = err
			continue
		}
		if len(ar) == 0 || st.Leader != ar[0] {
			out[tp] = fmt.Errorf("elect %s: leader is %d, preferred %v: %w", tp, st.Leader, ar, ErrPreferredNotAvailable)
		} else {
			out[tp] = nil // elected, as the API answers
		}
	}
	return out, nil
}

// waitAbsent returns when the znode at p does not exist, or ctx ends.
func waitAbsent(ctx context.Context, conn *zk.Conn, p string) error {
	for {
		ok, _, ch, err := conn.ExistsW(p)
		if err != nil {
			return fmt.Errorf("exists %s: %w", p, err)
		}
		if !ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still exists: %w", p, ctx.Err())
		case <-ch:
		case <-time.After(time.Second): // watches can be lost across reconnects
		}
	}
}

// TopicZnode is /brokers/topics/<t>, decoded into a generic map so that rewriting it keeps
// every field: version, topic_id, adding_replicas, removing_replicas and any unknown one.
type TopicZnode struct {
	Path string
	Stat *zk.Stat
	doc  map[string]any
}

// ReadTopicZnode reads and decodes a topic znode.
func ReadTopicZnode(conn *zk.Conn, chroot, topic string) (_ *TopicZnode, err error) {
	defer func() { err = classify(err) }()
	p := topicPath(chroot, topic)
	data, stat, err := conn.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("topic %s: %w", topic, kerr.UnknownTopicOrPartition)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	z, err := DecodeTopicZnode(data)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", p, err)
	}
	z.Path, z.Stat = p, stat
	return z, nil
}

// topicPath is /brokers/topics/<topic> under chroot.
func topicPath(chroot, topic string) string {
	return path.Join("/", chroot, "brokers", "topics", topic)
}

// DecodeTopicZnode decodes the JSON of a topic znode, numbers kept exact.
func DecodeTopicZnode(data []byte) (*TopicZnode, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if _, ok := doc["partitions"].(map[string]any); !ok {
		return nil, fmt.Errorf("no partitions object in %s", truncate(data, 200))
	}
	return &TopicZnode{doc: doc}, nil
}

// Encode renders the znode's JSON with every field it was read with.
func (z *TopicZnode) Encode() ([]byte, error) { return json.Marshal(z.doc) }

// Field returns a top-level field (e.g. "topic_id") as read.
func (z *TopicZnode) Field(name string) any { return z.doc[name] }

// Replicas returns partition p's assigned replicas.
func (z *TopicZnode) Replicas(p int32) ([]int32, error) {
	parts := z.doc["partitions"].(map[string]any)
	raw, ok := parts[strconv.Itoa(int(p))]
	if !ok {
		return nil, classify(fmt.Errorf("partition %d: %w", p, kerr.UnknownTopicOrPartition))
	}
	return int32s(raw)
}

// SetReplicas replaces partition p's assigned replicas.
func (z *TopicZnode) SetReplicas(p int32, replicas []int32) {
	list := make([]any, len(replicas))
	for i, r := range replicas {
		list[i] = json.Number(strconv.Itoa(int(r)))
	}
	z.doc["partitions"].(map[string]any)[strconv.Itoa(int(p))] = list
}

// Reassigning reports whether the znode (v2+) records adding or removing replicas for p.
func (z *TopicZnode) Reassigning(p int32) bool {
	for _, f := range []string{"adding_replicas", "removing_replicas"} {
		m, ok := z.doc[f].(map[string]any)
		if !ok {
			continue
		}
		if l, _ := m[strconv.Itoa(int(p))].([]any); len(l) > 0 {
			return true
		}
	}
	return false
}

func int32s(raw any) ([]int32, error) {
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("replica list %v is not an array", raw)
	}
	out := make([]int32, len(list))
	for i, v := range list {
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("replica %v is not a number", v)
		}
		x, err := strconv.ParseInt(n.String(), 10, 32)
		if err != nil {
			return nil, err
		}
		out[i] = int32(x)
	}
	return out, nil
}

// Controller is /controller: {"version":1|2,"brokerid":N,"timestamp":"…"[,"kraftControllerEpoch":E]}.
type Controller struct {
	BrokerID             int32  `json:"brokerid"`
	Version              int    `json:"version"`
	KRaftControllerEpoch *int32 `json:"kraftControllerEpoch,omitempty"`
	Stat                 *zk.Stat
}

// KRaft reports whether a KRaft controller owns the cluster (ZooKeeper migration).
func (c *Controller) KRaft() bool {
	return c.KRaftControllerEpoch != nil && *c.KRaftControllerEpoch != -1
}

// ParseController decodes the data of /controller. A KRaft controller that took a cluster
// over in a ZooKeeper migration (Kafka 3.4+) writes itself there with its epoch
// (kraftControllerEpoch); a ZooKeeper controller leaves the field out (before 3.4) or
// writes -1.
func ParseController(data []byte) (*Controller, error) {
	var c Controller
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("decode /controller %s: %w", truncate(data, 200), err)
	}
	if c.Version < 1 {
		return nil, fmt.Errorf("decode /controller %s: no version", truncate(data, 200))
	}
	return &c, nil
}

// CheckZKController is the guard of every ZooKeeper write that a controller acts on
// (/admin/…, topic and config znodes): it fails with ErrKRaftController when /controller
// names a KRaft controller, which ignores them. While no controller is elected (the next
// one could be either) it waits for one (WaitController), then fails with ErrNoController
// (transient).
func CheckZKController(ctx context.Context, conn ZKReader, chroot string) error {
	c, err := WaitController(ctx, conn, chroot)
	if err != nil {
		return err
	}
	if c.KRaft() {
		return fmt.Errorf("/controller names KRaft controller %d (kraftControllerEpoch %d): %w", c.BrokerID, *c.KRaftControllerEpoch, ErrKRaftController)
	}
	return nil
}

// ErrNoController: no controller is elected right now (transient: it carries package
// retry's marker).
var ErrNoController error = retry.Transient(errors.New("no controller is elected right now"))

// controllerWait bounds how long WaitController waits for a controller to be elected: a
// failover takes a moment.
const controllerWait = 10 * time.Second

// WaitController reads /controller, and reads it again while no controller is elected, for
// up to 10 seconds (or ctx); then it fails with ErrNoController.
func WaitController(ctx context.Context, conn ZKReader, chroot string) (*Controller, error) {
	ctx, cancel := context.WithTimeout(ctx, controllerWait)
	defer cancel()
	for {
		c, err := ReadController(conn, chroot)
		if !errors.Is(err, ErrNoController) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ReadController reads /controller.
func ReadController(conn ZKReader, chroot string) (_ *Controller, err error) {
	defer func() { err = classify(err) }()
	p := path.Join("/", chroot, "controller")
	data, stat, err := conn.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, ErrNoController
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	c, err := ParseController(data)
	if err != nil {
		return nil, err
	}
	c.Stat = stat
	return c, nil
}

func readControllerEpoch(conn *zk.Conn, chroot string) (int64, error) {
	p := path.Join("/", chroot, "controller_epoch")
	data, _, err := conn.Get(p)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", p, err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// PartitionState is /brokers/topics/<t>/partitions/<p>/state.
type PartitionState struct {
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ControllerEpoch int32   `json:"controller_epoch"`
	ISR             []int32 `json:"isr"`
}

// ReadPartitionState reads a partition's state znode.
func ReadPartitionState(conn *zk.Conn, chroot string, tp TopicPartition) (_ *PartitionState, err error) {
	defer func() { err = classify(err) }()
	p := path.Join("/", chroot, "brokers", "topics", tp.Topic, "partitions", strconv.Itoa(int(tp.Partition)), "state")
	data, _, err := conn.Get(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	var st PartitionState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("decode %s: %w", p, err)
	}
	return &st, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
