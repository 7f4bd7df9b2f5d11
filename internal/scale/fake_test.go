package scale

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
)

var small = Shape{Partitions: 600, PerTopic: 50, Big: 100, Racks: 3, PerRack: 2, RF: 3, Skewed: 1, Seed: 7}

// The model reads back as the shape says: racks, one replica per rack, the skew.
func TestShapeReadsBack(t *testing.T) {
	fc, err := Start(small)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	cl, err := fc.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := kafka.ReadSnapshot(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Brokers) != 6 || s.Brokers[1].Rack != "r1" || s.Brokers[2].Rack != "r1" || s.Brokers[6].Rack != "r3" {
		t.Fatalf("brokers %v", s.Brokers)
	}
	if len(s.Topics) != 11 || len(s.Topics[BigTopic]) != 100 {
		t.Fatalf("%d topics, %d partitions of %s", len(s.Topics), len(s.Topics[BigTopic]), BigTopic)
	}
	n, led, offHead := 0, 0, 0
	for _, ps := range s.Topics {
		for _, p := range ps {
			n++
			racks := map[string]bool{}
			for _, r := range p.Replicas {
				racks[s.Brokers[r].Rack] = true
			}
			if len(p.Replicas) != 3 || len(racks) != 3 || !p.InSync(p.Leader) || p.Reassigning() {
				t.Fatalf("%s: replicas %v, isr %v, leader %d", p.TopicPartition, p.Replicas, p.ISR, p.Leader)
			}
			if p.Leader == 1 {
				led++
			}
			if p.Leader != p.Replicas[0] {
				offHead++
			}
		}
	}
	if n != 600 || led < 120 || led > 180 || offHead == 0 {
		t.Fatalf("%d partitions, broker 1 leads %d (want about a quarter), %d led off their head", n, led, offHead)
	}
}

// The hooks answer as Kafka would: preferred elections, reassignments, configs.
func TestHooksAnswerAsKafka(t *testing.T) {
	fc, err := Start(small)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	cl, err := fc.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := t.Context()
	s, err := kafka.ReadSnapshot(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var offHead, leading, lagging model.Partition // led off its head; led by its head; head out of sync
	for _, ps := range s.Topics {
		for _, p := range ps {
			switch {
			case p.Leader != p.Replicas[0] && offHead.Topic == "":
				offHead = p
			case p.Leader == p.Replicas[0] && leading.Topic == "" && len(p.ISR) == 3:
				leading = p
			}
		}
	}
	// A partition whose head is out of sync: make one by reordering its lagging replica first.
	for _, ps := range s.Topics {
		for _, p := range ps {
			if len(p.ISR) < len(p.Replicas) && lagging.Topic == "" && p.TopicPartition != offHead.TopicPartition {
				lagging = p
			}
		}
	}
	out := append([]int32{lagging.Replicas[2]}, lagging.Replicas[:2]...)
	if err := kafka.SubmitReassignment(ctx, cl, map[model.TopicPartition][]int32{lagging.TopicPartition: out}); err != nil {
		t.Fatal(err)
	}

	set := kadm.TopicsSet{}
	for _, p := range []model.Partition{offHead, leading, lagging} {
		set.Add(p.Topic, p.Partition)
	}
	set.Add("nope", 0)
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    model.TopicPartition
		want error
	}{{offHead.TopicPartition, nil}, {leading.TopicPartition, kerr.ElectionNotNeeded},
		{lagging.TopicPartition, kerr.PreferredLeaderNotAvailable}, {model.TopicPartition{Topic: "nope"}, kerr.UnknownTopicOrPartition}} {
		if got := res[c.p.Topic][c.p.Partition].Err; !errors.Is(got, c.want) && got != c.want {
			t.Errorf("elect %s: %v, want %v", c.p, got, c.want)
		}
	}

	// Reassignments: validated, then complete at once with the new replicas in sync.
	p := leading
	var fresh int32
	for id := int32(1); id <= 6; id++ {
		if !slices.Contains(p.Replicas, id) {
			fresh = id
			break
		}
	}
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign(p.Topic, p.Partition, append(slices.Clone(p.Replicas), fresh))
	req.Assign(offHead.Topic, offHead.Partition, []int32{offHead.Replicas[0], offHead.Replicas[0]})
	req.Assign(lagging.Topic, lagging.Partition, []int32{lagging.Replicas[0], 99})
	// A partition of lagging's topic that no other entry of the request names (two entries
	// for one partition would make the outcome depend on the request's order).
	cancel := int32(0)
	for slices.ContainsFunc([]model.Partition{p, offHead, lagging}, func(q model.Partition) bool {
		return q.Topic == lagging.Topic && q.Partition == cancel
	}) {
		cancel++
	}
	req.CancelAssign(lagging.Topic, cancel)
	ares, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    model.TopicPartition
		want error
	}{{p.TopicPartition, nil}, {offHead.TopicPartition, kerr.InvalidReplicaAssignment},
		{lagging.TopicPartition, kerr.InvalidReplicaAssignment}, {model.TopicPartition{Topic: lagging.Topic, Partition: cancel}, kerr.NoReassignmentInProgress}} {
		if got := ares[c.p.Topic][c.p.Partition].Err; !errors.Is(got, c.want) && got != c.want {
			t.Errorf("reassign %s: %v, want %v", c.p, got, c.want)
		}
	}
	after, err := kafka.ReadSnapshot(ctx, cl, p.Topic, offHead.Topic)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := after.Partition(p.TopicPartition)
	if !slices.Equal(q.Replicas, append(slices.Clone(p.Replicas), fresh)) || !q.InSync(fresh) || q.Leader != p.Leader || q.Reassigning() {
		t.Errorf("after the raise %s: replicas %v, isr %v, leader %d", q.TopicPartition, q.Replicas, q.ISR, q.Leader)
	}
	if q, _ := after.Partition(offHead.TopicPartition); q.Leader != offHead.Replicas[0] || q.LeaderEpoch != offHead.LeaderEpoch+1 {
		t.Errorf("after the election %s: leader %d epoch %d", q.TopicPartition, q.Leader, q.LeaderEpoch)
	}

	// Configs: the model's for its topics, unknown otherwise.
	rcs, err := adm.DescribeTopicConfigs(ctx, BigTopic, "nope")
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := rcs.On(BigTopic, nil); err != nil || rc.Err != nil || len(rc.Configs) != 1 || rc.Configs[0].Key != "min.insync.replicas" || *rc.Configs[0].Value != "2" {
		t.Errorf("configs of %s: %+v, %v", BigTopic, rc, err)
	}
	if rc, _ := rcs.On("nope", nil); !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("configs of an unknown topic: %v", rc.Err)
	}
}
