package config

import (
	"fmt"
	"time"
)

// The sections that tune the operations. The handlers take them as they are
// (handlers.Config), so that an option is declared once, here, with its default and its
// validation. Each SetDefaults fills what is unset, for the configuration and for the
// handlers built without one (tests).

// notNegative adds a problem with the field at path when v is negative.
func notNegative[T int | int64 | time.Duration](p *problems, path string, v T) {
	if v < 0 {
		p.add(path, fmt.Errorf("%v: must not be negative", v))
	}
}

// BrokerOverloaded tunes the handling of broker-overloaded events.
type BrokerOverloaded struct {
	// CoolDown: another alert for a broker shed less than this ago is a noop that names
	// the event that acted (alerting systems re-send alerts every minute). Default 10m.
	CoolDown time.Duration `yaml:"cool_down"`
	// ElectionBatchSize caps the partitions of one preferred-election request; 0 (the
	// default) sends them all in one.
	ElectionBatchSize int `yaml:"election_batch_size"`
	// WaitForReassignment waits (up to a minute) for partitions under reassignment
	// instead of skipping them at once. Default false.
	WaitForReassignment bool `yaml:"wait_for_reassignment"`
}

// SetDefaults fills the unset fields with their defaults.
func (o *BrokerOverloaded) SetDefaults() {
	if o.CoolDown == 0 {
		o.CoolDown = 10 * time.Minute
	}
}

func (o *BrokerOverloaded) validate(p *problems) {
	notNegative(p, "broker_overloaded.cool_down", o.CoolDown)
	if o.ElectionBatchSize < 0 {
		p.add("broker_overloaded.election_batch_size", fmt.Errorf("%d: must be 0 (one request) or more", o.ElectionBatchSize))
	}
}

// ReplicationFactor tunes replication-factor changes.
type ReplicationFactor struct {
	// ThrottleBytesPerSec is the replication throttle when an event sets none; 0: none.
	ThrottleBytesPerSec int64 `yaml:"throttle_bytes_per_sec"`
	// Timeout bounds a change, across attempts, when the event sets none; unfinished
	// copies are then cancelled. Default 1h.
	Timeout time.Duration `yaml:"timeout"`
	// MaxMovesPerBroker caps the copies in or out of one broker at a time: a broker
	// receiving a replica, the leader it copies from, and a live broker leaving the
	// replica set each count one. Default 5 (Cruise Control's
	// num.concurrent.partition.movements.per.broker).
	MaxMovesPerBroker int `yaml:"max_moves_per_broker"`
	// ForeignWait is how long to wait for reassignments started by someone else before
	// failing with their list. Default 1m.
	ForeignWait time.Duration `yaml:"foreign_wait"`
	// AllowInternal lets the factor of internal topics (__consumer_offsets, …) change.
	AllowInternal bool `yaml:"allow_internal_topics"`
	// ThrottleSettle is the wait between setting throttles and starting the copy (log-dir
	// moves too). Brokers apply throttle configs asynchronously (ZooKeeper change
	// notifications, KRaft metadata publication), some time after DescribeConfigs shows
	// them; a copy started at once runs unthrottled until then, and a small partition
	// copies whole before the throttle bites. Default 2s.
	ThrottleSettle time.Duration `yaml:"throttle_settle"`
}

// SetDefaults fills the unset fields with their defaults.
func (o *ReplicationFactor) SetDefaults() {
	if o.Timeout == 0 {
		o.Timeout = time.Hour
	}
	if o.MaxMovesPerBroker == 0 {
		o.MaxMovesPerBroker = 5
	}
	if o.ForeignWait == 0 {
		o.ForeignWait = time.Minute
	}
	if o.ThrottleSettle == 0 {
		o.ThrottleSettle = 2 * time.Second
	}
}

func (o *ReplicationFactor) validate(p *problems) {
	notNegative(p, "replication_factor.throttle_bytes_per_sec", o.ThrottleBytesPerSec)
	notNegative(p, "replication_factor.timeout", o.Timeout)
	notNegative(p, "replication_factor.max_moves_per_broker", o.MaxMovesPerBroker)
	notNegative(p, "replication_factor.foreign_wait", o.ForeignWait)
	notNegative(p, "replication_factor.throttle_settle", o.ThrottleSettle)
}

// LogDir tunes moves of replicas between the log directories (disks) of a broker.
type LogDir struct {
	// ThrottleBytesPerSec is the broker's replica.alter.log.dirs.io.max.bytes.per.second
	// while a move runs, when the event sets none; 0: none.
	ThrottleBytesPerSec int64 `yaml:"throttle_bytes_per_sec"`
	// Timeout bounds a move, across attempts, when the event sets none; unfinished copies
	// are then cancelled. Default 1h.
	Timeout time.Duration `yaml:"timeout"`
	// Tolerance is how close a balance leaves the two directories, as a fraction of their
	// combined size. Default 0.1; must be in [0, 1). A pointer, so that an explicit 0
	// (balance as exactly as possible) is kept.
	Tolerance *float64 `yaml:"tolerance"`
}

// SetDefaults fills the unset fields with their defaults.
func (o *LogDir) SetDefaults() {
	if o.Timeout == 0 {
		o.Timeout = time.Hour
	}
	if o.Tolerance == nil {
		t := 0.1
		o.Tolerance = &t
	}
}

func (o *LogDir) validate(p *problems) {
	notNegative(p, "logdir.throttle_bytes_per_sec", o.ThrottleBytesPerSec)
	notNegative(p, "logdir.timeout", o.Timeout)
	if t := o.Tolerance; t != nil && (*t < 0 || *t >= 1) {
		p.add("logdir.tolerance", fmt.Errorf("%g: must be at least 0 and less than 1", *t))
	}
}

// PartitionOffline tunes the handling of partition-offline events.
type PartitionOffline struct {
	// AllowUnclean lets an event with allow_unclean: true elect a replica outside the last
	// in-sync replicas where none of them is alive (an unclean election: the records only
	// they held are lost). Default false: every unclean election is refused, whatever the
	// event says.
	AllowUnclean bool `yaml:"allow_unclean"`
}
