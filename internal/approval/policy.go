// Package approval holds what a plan that waits for a person's approval needs: the
// policy that says which plans wait (the configuration's approval section), the size of a
// plan the policy measures, the fingerprint of the cluster state a plan depends on and its
// differences, and the plans themselves, stored in the JetStream key-value bucket
// events.PlansBucket (never in a worker's memory: a restart of the whole fleet loses none).
//
// The engine (package operation) plans under the cluster's lock, asks the Policy, and
// stores a Plan with its Fingerprint instead of running it; a plan-approved event runs
// exactly the stored plan, under the lock, only if a fresh fingerprint shows no Difference.
//
// The policy and the fingerprint are pure: no I/O, no clock of their own.
package approval

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
)

// Requirement says when a rule wants approval.
type Requirement string

const (
	Never  Requirement = "never"  // the plan runs at once
	Always Requirement = "always" // every plan waits (a plan that changes nothing runs: there is nothing to approve)
	Above  Requirement = "above"  // a plan over one of the rule's thresholds waits
)

// DefaultExpiry is how long a plan waits for an answer when approval.expiry is not set.
const DefaultExpiry = time.Hour

// MaxExpiry bounds approval.expiry: plans are kept in their bucket KeepFor, a little
// longer, so that an answer to an expired plan still finds it and says so.
const MaxExpiry = 7 * 24 * time.Hour

// Wildcard, in approval.approvers, lets any source approve; in a rule's clusters or types
// it matches every one.
const Wildcard = "*"

// Policy is the configuration's approval section. Zero: no plan waits, and nobody can
// approve (an event asking approval itself is then rejected: it could never run).
type Policy struct {
	// Approvers are the CloudEvents sources allowed to send plan-approved and plan-denied
	// (exact match; "*": any source).
	Approvers []string `yaml:"approvers"`
	// Expiry is how long a plan waits for an answer (default DefaultExpiry): its event then
	// ends expired.
	Expiry time.Duration `yaml:"expiry"`
	// Rules say which plans wait: the first rule whose clusters and types match the event
	// decides; no rule matching: Never.
	Rules []Rule `yaml:"rules"`
}

// Rule is one line of the policy.
type Rule struct {
	// Clusters and Types the rule applies to; empty or "*": every one.
	Clusters []string `yaml:"clusters"`
	Types    []string `yaml:"types"`
	// Require: never, always or above.
	Require Requirement `yaml:"require"`
	// Thresholds of Above (0 or false: not a reason): more partitions touched, more bytes
	// to copy, more leaders moved than these; any partition's replication factor lowered;
	// any unclean election.
	Partitions               int   `yaml:"partitions"`
	Bytes                    int64 `yaml:"bytes"`
	LeadersMoved             int   `yaml:"leaders_moved"`
	ReplicationFactorLowered bool  `yaml:"replication_factor_lowered"`
	Unclean                  bool  `yaml:"unclean"`
}

// Clone is a deep copy.
func (p Policy) Clone() Policy {
	p.Approvers = slices.Clone(p.Approvers)
	rules := make([]Rule, len(p.Rules))
	for i, r := range p.Rules {
		r.Clusters, r.Types = slices.Clone(r.Clusters), slices.Clone(r.Types)
		rules[i] = r
	}
	if p.Rules != nil {
		p.Rules = rules
	}
	return p
}

// ExpiryOrDefault is Expiry, or DefaultExpiry when it is not set.
func (p *Policy) ExpiryOrDefault() time.Duration {
	if p.Expiry <= 0 {
		return DefaultExpiry
	}
	return p.Expiry
}

// Problem is what is wrong with one field of the policy (Field: its path in the
// configuration).
type Problem struct {
	Field string
	Err   error
}

// Problems lists what is wrong with p, given the clusters the worker serves.
func (p *Policy) Problems(clusters []string) []Problem {
	var out []Problem
	add := func(field string, err error) { out = append(out, Problem{Field: field, Err: err}) }
	for i, a := range p.Approvers {
		if strings.TrimSpace(a) == "" {
			add(fmt.Sprintf("approval.approvers[%d]", i), errors.New("empty source"))
		}
	}
	if p.Expiry < 0 || p.Expiry > MaxExpiry {
		add("approval.expiry", fmt.Errorf("%s: must be between 0 (default %s) and %s", p.Expiry, DefaultExpiry, MaxExpiry))
	}
	for i, r := range p.Rules {
		field := fmt.Sprintf("approval.rules[%d]", i)
		for j, c := range r.Clusters {
			if c != Wildcard && !slices.Contains(clusters, c) {
				add(fmt.Sprintf("%s.clusters[%d]", field, j), fmt.Errorf("%q is not a configured cluster", c))
			}
		}
		for j, t := range r.Types {
			if t != Wildcard && !Approvable(t) {
				add(fmt.Sprintf("%s.types[%d]", field, j), fmt.Errorf("%q: plans of this type cannot wait for approval (want one of %s)", t, strings.Join(ApprovableTypes(), ", ")))
			}
		}
		switch r.Require {
		case Never, Always:
		case Above:
			if r.Partitions < 0 || r.Bytes < 0 || r.LeadersMoved < 0 {
				add(field, errors.New("thresholds must be 0 (not a reason) or more"))
			}
			if r.Partitions == 0 && r.Bytes == 0 && r.LeadersMoved == 0 && !r.ReplicationFactorLowered && !r.Unclean {
				add(field+".require", errors.New("above needs at least one threshold (partitions, bytes, leaders_moved, replication_factor_lowered, unclean)"))
			}
		default:
			add(field+".require", fmt.Errorf("%q: want never, always or above", r.Require))
		}
		if r.Require != Never && len(p.Approvers) == 0 {
			add(field+".require", errors.New("plans would wait for approval, but approval.approvers lists no source that may give it"))
		}
	}
	return out
}

// ApprovableTypes are the event types whose plans can wait for approval: those that
// change a cluster.
func ApprovableTypes() []string {
	var out []string
	for _, t := range events.Types() {
		switch t.Name {
		case events.TypePlanApproved, events.TypePlanDenied:
			continue
		}
		if !events.ControlType(t.Name) {
			out = append(out, t.Name)
		}
	}
	return out
}

// Approvable reports whether plans of events of type typ can wait for approval.
func Approvable(typ string) bool { return slices.Contains(ApprovableTypes(), typ) }

// Approver reports whether source may approve or deny plans.
func (p *Policy) Approver(source string) bool {
	return slices.Contains(p.Approvers, Wildcard) || slices.Contains(p.Approvers, source)
}

// Rule returns the rule that decides for events of typ on cluster, nil when none does.
func (p *Policy) Rule(cluster, typ string) *Rule {
	for i := range p.Rules {
		r := &p.Rules[i]
		if matches(r.Clusters, cluster) && matches(r.Types, typ) {
			return r
		}
	}
	return nil
}

func matches(list []string, v string) bool {
	return len(list) == 0 || slices.Contains(list, Wildcard) || slices.Contains(list, v)
}

// Measures reports whether the plan of an event of typ on cluster must be measured (Size)
// to know whether it waits: asked is whether the event asks approval itself.
func (p *Policy) Measures(cluster, typ string, asked bool) bool {
	if asked {
		return true
	}
	r := p.Rule(cluster, typ)
	return r != nil && r.Require != Never
}

// Requires says why a plan of the given size, of an event of typ on cluster, waits for
// approval; "" when it does not. asked: the event asks approval itself (it can never
// skip one the policy demands, nor is it refused one the policy does not).
func (p *Policy) Requires(cluster, typ string, asked bool, s Size) string {
	if s.Partitions == 0 {
		return "" // nothing to approve
	}
	var why []string
	if asked {
		why = append(why, "the event asks for approval (data.approval)")
	}
	if r := p.Rule(cluster, typ); r != nil {
		switch r.Require {
		case Always:
			why = append(why, "the policy requires approval of every plan of "+typ+" on "+cluster)
		case Above:
			if r.Partitions > 0 && s.Partitions > r.Partitions {
				why = append(why, fmt.Sprintf("%d partitions touched, over %d", s.Partitions, r.Partitions))
			}
			if r.Bytes > 0 && s.Bytes > r.Bytes {
				why = append(why, fmt.Sprintf("%d bytes to copy, over %d", s.Bytes, r.Bytes))
			}
			if r.LeadersMoved > 0 && s.LeadersMoved > r.LeadersMoved {
				why = append(why, fmt.Sprintf("%d leaders moved, over %d", s.LeadersMoved, r.LeadersMoved))
			}
			if r.ReplicationFactorLowered && s.ReplicationFactorLowered > 0 {
				why = append(why, fmt.Sprintf("the replication factor of %d partitions lowered", s.ReplicationFactorLowered))
			}
			if r.Unclean && s.Unclean > 0 {
				why = append(why, fmt.Sprintf("%d unclean elections", s.Unclean))
			}
		}
	}
	return strings.Join(why, "; ")
}

// Size is what the policy measures of a plan.
type Size struct {
	Partitions               int   `json:"partitions"`
	Bytes                    int64 `json:"bytes"` // to copy: new replicas, and log-dir moves
	LeadersMoved             int   `json:"leaders_moved"`
	ReplicationFactorLowered int   `json:"replication_factor_lowered"` // partitions
	Unclean                  int   `json:"unclean"`                    // unclean elections
}

// SizeOf measures a plan's changes; copied is the bytes its new replicas copy (read from
// the cluster by the caller: the changes do not say it, but for log-dir moves).
func SizeOf(changes []events.Change, copied int64) Size {
	s := Size{Partitions: len(changes), Bytes: copied}
	for _, c := range changes {
		if c.Broker != nil { // a log-dir move: its bytes, no replica or leader change
			s.Bytes += c.Bytes
			continue
		}
		if c.LeaderAfter != c.LeaderBefore {
			s.LeadersMoved++
		}
		if len(c.ReplicasAfter) < len(c.ReplicasBefore) {
			s.ReplicationFactorLowered++
		}
		if c.LostOffsets != nil {
			s.Unclean++
		}
	}
	return s
}
