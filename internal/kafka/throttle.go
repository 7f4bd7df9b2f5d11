package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/retry"

	"github.com/kafkamender/kafkamender/internal/events"
)

// Replication throttle configs.
const (
	LeaderThrottledRate       = "leader.replication.throttled.rate"
	FollowerThrottledRate     = "follower.replication.throttled.rate"
	LeaderThrottledReplicas   = "leader.replication.throttled.replicas"
	FollowerThrottledReplicas = "follower.replication.throttled.replicas"
	// AlterLogDirsThrottledRate throttles, per broker, the copies of replicas moving
	// between its log directories (AlterReplicaLogDirs).
	AlterLogDirsThrottledRate = "replica.alter.log.dirs.io.max.bytes.per.second"
)

// Entities of a ThrottleKey.
const (
	EntityBroker = "broker"
	EntityTopic  = "topic"
)

// ThrottleSpec is what to throttle for the moving replicas of some topics.
type ThrottleSpec struct {
	Rate   int64 // bytes per second, on every broker concerned
	Topics map[string]ThrottledReplicas
}

// ThrottledReplicas are one topic's moving replicas: Leaders[p] are the replicas
// partition p copies from (its current replicas), Followers[p] the replicas being added.
type ThrottledReplicas struct {
	Leaders   map[int32][]int32
	Followers map[int32][]int32
}

// OneTopic is the spec of one topic's moving replicas.
func OneTopic(topic string, rate int64, leaders, followers map[int32][]int32) ThrottleSpec {
	return ThrottleSpec{Rate: rate, Topics: map[string]ThrottledReplicas{topic: {Leaders: leaders, Followers: followers}}}
}

// ThrottleKey is one dynamic config that a throttle sets, and KeptThrottle one found
// holding someone else's value (package events: they are part of the result format and
// of the journal).
type (
	ThrottleKey  = events.ThrottleKey
	KeptThrottle = events.KeptThrottle
)

// settleTimeout bounds how long Apply and Restore wait for the brokers to show what they
// wrote.
var settleTimeout = 30 * time.Second

// ConfigMechanism is how a cluster's dynamic throttle configs are read and written.
type ConfigMechanism string

const (
	// ConfigZnodes reads /config/brokers/<id> and /config/topics/<t> in the cluster's
	// ZooKeeper and writes them, each with a change notification
	// (/config/changes/config_change_, {"version":2,"entity_path":"topics/<t>"}) that the
	// brokers act on, in one ZooKeeper transaction fenced by the caller's lock and checked
	// against the znode versions read: a real compare-and-set. Any ZooKeeper-mode version
	// (replication throttles exist since 0.10.1); never under a KRaft controller.
	ConfigZnodes ConfigMechanism = "config-znodes"
	// ConfigIncremental reads with DescribeConfigs and writes only our keys with
	// IncrementalAlterConfigs (Kafka 2.3+). Brokers before 2.5.1 report per-broker throttle
	// rates as sensitive and hide their values (KAFKA-9625): such a value cannot be compared,
	// so it is refused (ErrHiddenConfig), nothing of ours left set.
	ConfigIncremental ConfigMechanism = "incremental-alter-configs"
)

// ErrHiddenConfig: a broker reports a throttle config as sensitive and does not show its
// value (brokers before 2.5.1: KAFKA-9625), so compare-and-restore through the admin API is
// impossible.
var ErrHiddenConfig = errors.New("the broker hides the value (reports it as sensitive, as brokers before Kafka 2.5.1 do: KAFKA-9625), so it cannot be compared and restored through the admin API: configure the cluster's zookeeper, whose config znodes hold it")

// ChooseConfigs picks how to read and write throttles: the config znodes when zk (the
// worker has the cluster's ZooKeeper, the cluster is in ZooKeeper mode under a ZooKeeper
// controller: the znodes are the truth there, and only they allow a compare-and-set), else
// IncrementalAlterConfigs. Without both there is no safe way: AlterConfigs (0.11+) replaces
// every dynamic config of the entity, so it must write back values the brokers before 2.3
// hide (their throttle rates among them, see ErrHiddenConfig), which would erase them.
func ChooseConfigs(caps Capabilities, zk bool) (ConfigMechanism, error) {
	switch {
	case zk:
		return ConfigZnodes, nil
	case caps.IncrementalAlterConfigs:
		return ConfigIncremental, nil
	}
	return "", fmt.Errorf("throttles need IncrementalAlterConfigs (Kafka 2.3+) or the cluster's zookeeper in the config (its config znodes): AlterConfigs would erase the throttle rates that brokers before 2.3 hide: %w", ErrUnsupported)
}

// Throttler plans, applies and restores replication throttles through one mechanism.
type Throttler struct {
	Client    *kgo.Client // DescribeConfigs (every mechanism: to see what the brokers apply) and the API writes
	Mechanism ConfigMechanism
	// ZK, Chroot and Writer are the cluster's ZooKeeper (paths without chroot), its chroot,
	// and the fence of ZooKeeper writes (the cluster's lock): ConfigZnodes needs them.
	ZK     ZKReader
	Chroot string
	Writer FencedWriter
}

// APIThrottler is the Throttler of a cluster through IncrementalAlterConfigs.
func APIThrottler(cl *kgo.Client) Throttler {
	return Throttler{Client: cl, Mechanism: ConfigIncremental}
}

func (t Throttler) check() error {
	switch t.Mechanism {
	case ConfigIncremental:
	case ConfigZnodes:
		if t.ZK == nil || t.Writer == nil {
			return errors.New("throttles through the config znodes need the cluster's zookeeper and the lock that fences its writes")
		}
	default:
		return fmt.Errorf("throttle mechanism %q unknown", t.Mechanism)
	}
	if t.Client == nil {
		return errors.New("throttles need a client of the cluster")
	}
	return nil
}

// read returns the dynamic values of refs: from the config znodes, or from DescribeConfigs
// (refused when a broker hides one: ErrHiddenConfig).
func (t Throttler) read(ctx context.Context, refs []configRef) (dynamicConfigs, error) {
	if err := t.check(); err != nil {
		return dynamicConfigs{}, err
	}
	if t.Mechanism == ConfigZnodes {
		return readConfigZnodes(t.ZK, t.Chroot, refs)
	}
	cur, err := readDynamic(ctx, t.Client, refs, -1)
	if err != nil {
		return cur, err
	}
	for _, r := range refs {
		if cur.hidden[r] {
			return cur, fmt.Errorf("%s: %w", r, ErrHiddenConfig)
		}
	}
	return cur, nil
}

// PlanThrottles reads the current dynamic configs concerned by spec and returns the keys
// that throttling spec sets, each with the dynamic value it holds now (Before) and the
// value to set (Ours): leader.replication.throttled.rate on every broker that is a
// leader (source) in spec.Leaders, follower.replication.throttled.rate on every broker in
// spec.Followers, and the topic's leader/follower.replication.throttled.replicas, whose
// Ours is the list already there merged with ours (so another operation's throttle keeps
// working; "*" stays "*"). Only dynamic values count as set (per-broker for brokers,
// per-topic for topics): a static or cluster-default value is not ours to restore, and
// deleting our dynamic value brings it back. A key that already holds Ours is left out:
// there is nothing to set or restore. Nothing is written. The keys are sorted by entity
// (brokers first, by id), name and key.
func (t Throttler) PlanThrottles(ctx context.Context, spec ThrottleSpec) (keys []ThrottleKey, err error) {
	defer func() { err = classify(err) }()
	topics := slices.Sorted(maps.Keys(spec.Topics))
	if len(topics) == 0 {
		return nil, errors.New("plan throttles: no topic")
	}
	if spec.Rate <= 0 {
		return nil, fmt.Errorf("plan throttles of %s: rate %d is not positive", strings.Join(topics, ", "), spec.Rate)
	}
	rate := strconv.FormatInt(spec.Rate, 10)
	ours := map[configRef]func(before *string) string{}
	var refs []configRef
	add := func(r configRef, f func(*string) string) {
		refs = append(refs, r)
		ours[r] = f
	}
	var allLeaders, allFollowers []int32
	for _, topic := range topics {
		allLeaders = append(allLeaders, brokersOf(spec.Topics[topic].Leaders)...)
		allFollowers = append(allFollowers, brokersOf(spec.Topics[topic].Followers)...)
	}
	slices.Sort(allLeaders)
	slices.Sort(allFollowers)
	for _, b := range slices.Compact(allLeaders) {
		add(configRef{EntityBroker, strconv.Itoa(int(b)), LeaderThrottledRate}, func(*string) string { return rate })
	}
	for _, b := range slices.Compact(allFollowers) {
		add(configRef{EntityBroker, strconv.Itoa(int(b)), FollowerThrottledRate}, func(*string) string { return rate })
	}
	for _, topic := range topics {
		tr := spec.Topics[topic]
		if len(brokersOf(tr.Leaders)) > 0 {
			add(configRef{EntityTopic, topic, LeaderThrottledReplicas}, func(b *string) string { return mergeReplicas(b, tr.Leaders) })
		}
		if len(brokersOf(tr.Followers)) > 0 {
			add(configRef{EntityTopic, topic, FollowerThrottledReplicas}, func(b *string) string { return mergeReplicas(b, tr.Followers) })
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	cur, err := t.read(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("plan throttles of %s: %w", strings.Join(topics, ", "), err)
	}
	for _, topic := range topics {
		if cur.missing[topic] {
			return nil, fmt.Errorf("plan throttles: topic %s: %w", topic, kerr.UnknownTopicOrPartition)
		}
	}
	for _, r := range refs {
		before := cur.values[r]
		o := ours[r](before)
		if sameValue(r.key, before, &o) {
			continue
		}
		keys = append(keys, ThrottleKey{Entity: r.entity, Name: r.name, Key: r.key, Before: before, Ours: o})
	}
	sortThrottleKeys(keys)
	return keys, nil
}

// PlanBrokerThrottle is PlanThrottles for one broker config: the key that sets key to rate
// on broker, with the broker's dynamic value now as Before; none when it holds rate
// already. Nothing is written.
func (t Throttler) PlanBrokerThrottle(ctx context.Context, broker int32, key string, rate int64) (keys []ThrottleKey, err error) {
	defer func() { err = classify(err) }()
	if rate <= 0 {
		return nil, fmt.Errorf("plan throttle %s of broker %d: rate %d is not positive", key, broker, rate)
	}
	r := configRef{EntityBroker, strconv.Itoa(int(broker)), key}
	cur, err := t.read(ctx, []configRef{r})
	if err != nil {
		return nil, fmt.Errorf("plan throttle %s of broker %d: %w", key, broker, err)
	}
	ours := strconv.FormatInt(rate, 10)
	if before := cur.values[r]; !sameValue(key, before, &ours) {
		keys = append(keys, ThrottleKey{Entity: r.entity, Name: r.name, Key: key, Before: before, Ours: ours})
	}
	return keys, nil
}

// ApplyThrottles sets the planned keys, but only those that still hold their Before value:
// a key that holds Ours already is left (nothing to do), a key that holds anything else was
// changed by someone since the plan and is left as it is, and returned in kept (record it:
// RestoreThrottles will find it not Ours and leave it too). It is idempotent: calling it
// again, e.g. after a crash between the journal write and the config write, sets only what
// is not set yet. On error some keys may be set: call RestoreThrottles, which puts back
// exactly those.
//
// Through the config znodes the compare and the write are one transaction: each entity's
// znode is written only if it still has the version read (else it is read and compared
// again). Through the API they are two requests, batched (one DescribeConfigs per entity
// kind, one IncrementalAlterConfigs for all keys, which franz-go sends each broker's part
// to that broker): Kafka has no conditional config write. A value someone else writes
// between our read and our write, one round trip of a few milliseconds, is overwritten,
// and then restored to Before later. That is acceptable: throttles are changed by people
// and reassignment tools, rarely and on a human time scale, so a collision within one
// round trip is very unlikely; other kafkamender workers do not write the cluster
// meanwhile (they hold the cluster's lock to do so); and the alternative, writing without
// comparing, overwrites any change made at any time, as Kafka's own tool does.
//
// It returns once the brokers show the values it wrote (brokers apply config changes a
// moment after accepting them; the topic's values are checked on every live broker), so
// that the copy that follows is throttled. A broker that hides a value (ErrHiddenConfig)
// shows only that one is set.
func (t Throttler) ApplyThrottles(ctx context.Context, keys []ThrottleKey) (kept []KeptThrottle, err error) {
	defer func() { err = classify(err) }()
	return t.compareAndWrite(ctx, keys, false)
}

// RestoreThrottles puts back the Before values of the keys that still hold Ours: it sets
// Before, or deletes our dynamic value when Before is nil (the static or default value
// applies again). A key that holds its Before value is restored already (or was never
// set): nothing to do, and not reported. A key that holds anything else was changed by
// someone since we set it: it is left as it is and returned in kept. Keys of a topic that
// does not exist any more are skipped: its configs went with it. It is idempotent, so it
// can be called on every way out (success, failure, timeout, cancel, a restarted worker
// reading its journal), with a context that is still alive.
//
// Like ApplyThrottles it compares and writes in one transaction (config znodes) or two
// requests (API), and returns once the brokers show what it wrote.
func (t Throttler) RestoreThrottles(ctx context.Context, keys []ThrottleKey) (kept []KeptThrottle, err error) {
	defer func() { err = classify(err) }()
	return t.compareAndWrite(ctx, keys, true)
}

// errConfigChanged: a config znode changed between our read and our write (the
// transaction's version check failed): read and compare again.
var errConfigChanged = errors.New("a config znode changed since it was read")

// compareAndWrite is ApplyThrottles (restore false) and RestoreThrottles (restore true).
func (t Throttler) compareAndWrite(ctx context.Context, keys []ThrottleKey, restore bool) ([]KeptThrottle, error) {
	what := "set throttles"
	if restore {
		what = "restore throttles"
	}
	if err := checkThrottleKeys(keys); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	refs := make([]configRef, len(keys))
	for i, k := range keys {
		refs[i] = refOf(k)
	}
	for attempt := 1; ; attempt++ {
		cur, err := t.read(ctx, refs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		var (
			writes []configWrite
			kept   []KeptThrottle
		)
		for _, k := range keys {
			if k.Entity == EntityTopic && cur.missing[k.Name] {
				// The topic is gone (deleted meanwhile): its configs went with it, and none
				// of its replicas will copy.
				continue
			}
			c := cur.values[refOf(k)]
			ours := &k.Ours
			switch {
			case sameValue(k.Key, k.Before, ours):
				// Nothing to set, nothing to restore.
			case !restore && sameValue(k.Key, c, ours):
				// Set already (a second call).
			case !restore && sameValue(k.Key, c, k.Before):
				writes = append(writes, configWrite{ref: refOf(k), value: ours, prev: c})
			case restore && sameValue(k.Key, c, ours):
				writes = append(writes, configWrite{ref: refOf(k), value: k.Before, prev: c})
			case restore && sameValue(k.Key, c, k.Before):
				// Restored already.
			default:
				kept = append(kept, KeptThrottle{ThrottleKey: k, Current: c})
			}
		}
		if t.Mechanism == ConfigZnodes {
			err = writeConfigZnodes(ctx, t.ZK, t.Chroot, t.Writer, cur, writes)
			if errors.Is(err, errConfigChanged) && attempt < 5 {
				continue
			}
			if err == nil {
				err = settle(ctx, t.Client, writes)
			}
		} else {
			err = writeAndSettle(ctx, t.Client, writes, restore)
			if err == nil && !restore {
				err = t.refuseHidden(ctx, writes)
			}
		}
		if err != nil {
			return kept, fmt.Errorf("%s: %w", what, err)
		}
		return kept, nil
	}
}

// refuseHidden, after an API write of writes, looks whether a broker now hides one of
// them (ErrHiddenConfig: it could not be compared, so never restored): then it writes the
// values before back at once, without a compare (the same one-round-trip window as any API
// write), and fails, leaving nothing of ours set.
func (t Throttler) refuseHidden(ctx context.Context, writes []configWrite) error {
	var refs []configRef
	for _, w := range writes {
		if w.ref.entity == EntityBroker {
			refs = append(refs, w.ref)
		}
	}
	if len(refs) == 0 {
		return nil
	}
	cur, err := readDynamic(ctx, t.Client, refs, -1)
	if err != nil {
		return err
	}
	var hidden []string
	for _, r := range refs {
		if cur.hidden[r] {
			hidden = append(hidden, r.String())
		}
	}
	if len(hidden) == 0 {
		return nil
	}
	back := make([]configWrite, len(writes))
	for i, w := range writes {
		back[i] = configWrite{ref: w.ref, value: w.prev, prev: w.value}
	}
	if err := writeAndSettle(ctx, t.Client, back, true); err != nil {
		return fmt.Errorf("%s: %w; putting the values before back failed: %v", strings.Join(hidden, ", "), ErrHiddenConfig, err)
	}
	return fmt.Errorf("%s: %w (the values before were put back)", strings.Join(hidden, ", "), ErrHiddenConfig)
}

func refOf(k ThrottleKey) configRef { return configRef{k.Entity, k.Name, k.Key} }

// checkThrottleKeys rejects keys that cannot be from PlanThrottles (a damaged journal)
// before anything is written.
func checkThrottleKeys(keys []ThrottleKey) error {
	seen := map[configRef]bool{}
	for _, k := range keys {
		switch k.Entity {
		case EntityBroker:
			if id, err := strconv.ParseInt(k.Name, 10, 32); err != nil || id < 0 {
				return fmt.Errorf("key %s: broker id %q is not a broker id", k, k.Name)
			}
		case EntityTopic:
			if k.Name == "" {
				return fmt.Errorf("key %s: no topic name", k)
			}
		default:
			return fmt.Errorf("key %s: entity %q is neither %q nor %q", k, k.Entity, EntityBroker, EntityTopic)
		}
		if k.Key == "" {
			return fmt.Errorf("key %s: no config name", k)
		}
		if seen[refOf(k)] {
			return fmt.Errorf("key %s is listed twice", k)
		}
		seen[refOf(k)] = true
	}
	return nil
}

func sortThrottleKeys(keys []ThrottleKey) {
	slices.SortFunc(keys, func(a, b ThrottleKey) int {
		if c := cmp.Compare(a.Entity, b.Entity); c != 0 {
			return c
		}
		if a.Entity == EntityBroker {
			x, _ := strconv.Atoi(a.Name)
			y, _ := strconv.Atoi(b.Name)
			if c := cmp.Compare(x, y); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
}

// configRef names one config of one broker or topic.
type configRef struct{ entity, name, key string }

func (r configRef) String() string { return r.entity + " " + r.name + " " + r.key }

// resourceRef names one broker or topic.
type resourceRef struct{ entity, name string }

func (r configRef) resource() resourceRef { return resourceRef{r.entity, r.name} }

func resourceType(entity string) kmsg.ConfigResourceType {
	if entity == EntityBroker {
		return kmsg.ConfigResourceTypeBroker
	}
	return kmsg.ConfigResourceTypeTopic
}

// dynamicSource is the config source whose values are the entity's own dynamic ones.
func dynamicSource(entity string) kmsg.ConfigSource {
	if entity == EntityBroker {
		return kmsg.ConfigSourceDynamicBrokerConfig
	}
	return kmsg.ConfigSourceDynamicTopicConfig
}

// dynamicConfigs is what readDynamic found.
type dynamicConfigs struct {
	values  map[configRef]*string // the dynamic value; absent: none set
	missing map[string]bool       // topics that do not exist
	// hidden are dynamic values the broker reports as sensitive, without a value
	// (DescribeConfigs only; ErrHiddenConfig).
	hidden map[configRef]bool
	// znodes are the config znodes read (ConfigZnodes only), by entity.
	znodes map[resourceRef]*configZnode
}

// readDynamic reads the dynamic values of refs: one DescribeConfigs for the brokers
// (franz-go asks each broker for its own configs) and one for the topics, asked of any
// broker, or of broker via when via >= 0 (then refs must all be topics: a broker answers
// only for its own broker configs).
func readDynamic(ctx context.Context, cl *kgo.Client, refs []configRef, via int32) (dynamicConfigs, error) {
	out := dynamicConfigs{values: map[configRef]*string{}, missing: map[string]bool{}, hidden: map[configRef]bool{}}
	byEntity := map[string]map[string][]string{} // entity -> name -> keys
	for _, r := range refs {
		if byEntity[r.entity] == nil {
			byEntity[r.entity] = map[string][]string{}
		}
		if !slices.Contains(byEntity[r.entity][r.name], r.key) {
			byEntity[r.entity][r.name] = append(byEntity[r.entity][r.name], r.key)
		}
	}
	if via >= 0 && len(byEntity[EntityBroker]) > 0 {
		return out, errors.New("describe configs: broker configs are asked of each broker, not of one")
	}
	var errs []error
	for _, entity := range []string{EntityBroker, EntityTopic} {
		names := byEntity[entity]
		if len(names) == 0 {
			continue
		}
		req := kmsg.NewPtrDescribeConfigsRequest()
		for _, name := range slices.Sorted(maps.Keys(names)) {
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType = resourceType(entity)
			rr.ResourceName = name
			rr.ConfigNames = names[name]
			req.Resources = append(req.Resources, rr)
		}
		var shards []kgo.ResponseShard
		if via >= 0 {
			resp, err := req.RequestWith(ctx, cl.Broker(int(via)))
			shards = []kgo.ResponseShard{{Meta: kgo.BrokerMetadata{NodeID: via}, Req: req, Resp: resp, Err: err}}
		} else {
			shards = cl.RequestSharded(ctx, req)
		}
		answered := map[string]bool{}
		for _, sh := range shards {
			if sh.Err != nil {
				errs = append(errs, fmt.Errorf("describe %s configs (broker %d): %w", entity, sh.Meta.NodeID, sh.Err))
				sent := req
				if r, ok := sh.Req.(*kmsg.DescribeConfigsRequest); ok && r != nil {
					sent = r
				}
				for _, rr := range sent.Resources {
					answered[rr.ResourceName] = true // failed, said so
				}
				continue
			}
			for _, r := range sh.Resp.(*kmsg.DescribeConfigsResponse).Resources {
				answered[r.ResourceName] = true
				if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
					if entity == EntityTopic && errors.Is(err, kerr.UnknownTopicOrPartition) {
						out.missing[r.ResourceName] = true
						continue
					}
					errs = append(errs, fmt.Errorf("describe configs of %s %s: %w", entity, r.ResourceName, errWithMessage(err, r.ErrorMessage)))
					continue
				}
				for _, c := range r.Configs {
					if c.Source != dynamicSource(entity) {
						continue
					}
					ref := configRef{entity, r.ResourceName, c.Name}
					if c.Value == nil {
						out.hidden[ref] = c.IsSensitive
						continue
					}
					v := *c.Value
					out.values[ref] = &v
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(names)) {
			if !answered[name] {
				errs = append(errs, fmt.Errorf("describe configs of %s %s: not in the response", entity, name))
			}
		}
	}
	return out, errors.Join(errs...)
}

// configWrite sets (value non-nil) or deletes (value nil) one config that held prev when
// it was compared.
type configWrite struct {
	ref   configRef
	value *string
	prev  *string
}

// writeAndSettle sends writes in one IncrementalAlterConfigs request (franz-go sends each
// broker's resources to that broker, topics to any), checks every shard's and every
// resource's error, then waits until the brokers show the writes that succeeded. With
// goneTopicOK, a topic that does not exist (deleted since it was read) is no error.
func writeAndSettle(ctx context.Context, cl *kgo.Client, writes []configWrite, goneTopicOK bool) error {
	if len(writes) == 0 {
		return nil
	}
	byResource := map[resourceRef][]configWrite{}
	for _, w := range writes {
		byResource[w.ref.resource()] = append(byResource[w.ref.resource()], w)
	}
	resources := make([]resourceRef, 0, len(byResource))
	for r := range byResource {
		resources = append(resources, r)
	}
	slices.SortFunc(resources, func(a, b resourceRef) int {
		return cmp.Or(cmp.Compare(a.entity, b.entity), cmp.Compare(a.name, b.name))
	})
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, r := range resources {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType = resourceType(r.entity)
		rr.ResourceName = r.name
		for _, w := range byResource[r] {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name = w.ref.key
			c.Op = kmsg.IncrementalAlterConfigOpDelete
			if w.value != nil {
				c.Op = kmsg.IncrementalAlterConfigOpSet
				c.Value = kmsg.StringPtr(*w.value)
			}
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
	}
	entityOf := func(t kmsg.ConfigResourceType) string {
		if t == kmsg.ConfigResourceTypeBroker {
			return EntityBroker
		}
		return EntityTopic
	}
	var errs []error
	failed := map[resourceRef]bool{}
	answered := map[resourceRef]bool{}
	for _, sh := range cl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			sent := req
			if r, ok := sh.Req.(*kmsg.IncrementalAlterConfigsRequest); ok && r != nil {
				sent = r
			}
			for _, rr := range sent.Resources {
				r := resourceRef{entityOf(rr.ResourceType), rr.ResourceName}
				failed[r], answered[r] = true, true
				errs = append(errs, fmt.Errorf("%s %s: %w", r.entity, r.name, sh.Err))
			}
			continue
		}
		for _, rr := range sh.Resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
			r := resourceRef{entityOf(rr.ResourceType), rr.ResourceName}
			answered[r] = true
			if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
				failed[r] = true
				if goneTopicOK && r.entity == EntityTopic && errors.Is(err, kerr.UnknownTopicOrPartition) {
					continue
				}
				errs = append(errs, fmt.Errorf("%s %s: %w", r.entity, r.name, errWithMessage(err, rr.ErrorMessage)))
			}
		}
	}
	var done []configWrite
	for _, r := range resources {
		switch {
		case !answered[r]:
			// Not in the response: it may or may not have applied. Wait for it like
			// the others, and report it.
			errs = append(errs, fmt.Errorf("%s %s: no answer in the response", r.entity, r.name))
		case failed[r]:
			continue
		}
		done = append(done, byResource[r]...)
	}
	if err := settle(ctx, cl, done); err != nil && len(errs) == 0 {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// settle waits until the brokers show the writes: a broker's config on that broker, a
// topic's config on every live broker (in KRaft mode each broker applies the change when it
// replays the metadata log; in ZooKeeper mode a broker's dynamic config changes when it
// processes the change notification). A write is shown once the config no longer holds
// the value it was compared with. It gives up after settleTimeout with a transient error.
func settle(ctx context.Context, cl *kgo.Client, writes []configWrite) error {
	if len(writes) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	// A value a broker hides shows only whether it is set: a set is shown when it is
	// set, a delete when it is not.
	shown := func(w configWrite, cur *string, hidden bool) bool {
		if hidden {
			return w.value != nil
		}
		return sameValue(w.ref.key, cur, w.value) || !sameValue(w.ref.key, cur, w.prev)
	}
	var brokerRefs, topicRefs []configRef
	byRef := map[configRef]configWrite{}
	for _, w := range writes {
		byRef[w.ref] = w
		if w.ref.entity == EntityBroker {
			brokerRefs = append(brokerRefs, w.ref)
		} else {
			topicRefs = append(topicRefs, w.ref)
		}
	}
	for {
		var pending []string
		var lastErr error
		if len(brokerRefs) > 0 {
			cur, err := readDynamic(ctx, cl, brokerRefs, -1)
			if err != nil {
				lastErr = err
			}
			for _, r := range brokerRefs {
				if err != nil || !shown(byRef[r], cur.values[r], cur.hidden[r]) {
					pending = append(pending, r.String())
				}
			}
		}
		if len(topicRefs) > 0 {
			p, err := topicsPending(ctx, cl, topicRefs, func(r configRef, cur *string, hidden bool) bool { return shown(byRef[r], cur, hidden) })
			if err != nil {
				lastErr = err
			}
			pending = append(pending, p...)
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("written, but not shown by the brokers after %s: %s", settleTimeout, strings.Join(pending, ", "))
			if lastErr != nil {
				msg += fmt.Sprintf(" (last read: %v)", lastErr)
			}
			return retry.Transient(fmt.Errorf("%s: %w", msg, context.Cause(ctx)))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// topicsPending asks every live broker for the topic configs of refs and lists those that
// some broker does not show yet. A broker that does not answer is skipped (it answers no
// one else either); when none answers, every ref is pending.
func topicsPending(ctx context.Context, cl *kgo.Client, refs []configRef, shown func(configRef, *string, bool) bool) ([]string, error) {
	md, err := BrokerMetadata(ctx, cl)
	if err != nil {
		return refNames(refs), err
	}
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		pending  = map[configRef]bool{}
		answered int
		errs     []error
	)
	for _, b := range md.Brokers {
		wg.Go(func() {
			cur, err := readDynamic(ctx, cl, refs, b.NodeID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			answered++
			for _, r := range refs {
				if !cur.missing[r.name] && !shown(r, cur.values[r], cur.hidden[r]) {
					pending[r] = true
				}
			}
		})
	}
	wg.Wait()
	if answered == 0 {
		return refNames(refs), errors.Join(errs...)
	}
	var out []string
	for _, r := range refs {
		if pending[r] {
			out = append(out, r.String())
		}
	}
	return out, errors.Join(errs...)
}

func refNames(refs []configRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	return out
}

// sameValue compares two dynamic values of key (nil: unset). Replica lists compare as sets
// ("0:1,1:2" is "1:2, 0:1"); other values as trimmed strings.
func sameValue(key string, a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if key == LeaderThrottledReplicas || key == FollowerThrottledReplicas {
		return mergeReplicas(a, nil) == mergeReplicas(b, nil)
	}
	return strings.TrimSpace(*a) == strings.TrimSpace(*b)
}

// brokersOf returns the distinct brokers of a partition -> replicas map, sorted.
func brokersOf(m map[int32][]int32) []int32 {
	var out []int32
	for _, rs := range m {
		out = append(out, rs...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// mergeReplicas renders "p:b,p:b" for the union of the entries in prev and ours; "*"
// (every replica) stays "*".
func mergeReplicas(prev *string, ours map[int32][]int32) string {
	set := map[string]bool{}
	if prev != nil {
		for _, e := range strings.Split(*prev, ",") {
			e = strings.TrimSpace(e)
			if e == "*" {
				return "*"
			}
			if e != "" {
				set[e] = true
			}
		}
	}
	for p, bs := range ours {
		for _, b := range bs {
			set[fmt.Sprintf("%d:%d", p, b)] = true
		}
	}
	out := make([]string, 0, len(set))
	for e := range set {
		out = append(out, e)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
