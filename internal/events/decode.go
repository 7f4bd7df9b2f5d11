package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultMaxBytes is the largest event body accepted. Requests are small; a larger body is
// a mistake or an attack, and is rejected before it is parsed.
const DefaultMaxBytes = 1 << 20

// Event is a decoded and validated event.
type Event struct {
	Envelope
	// Cluster and Type come from the subject (and were checked against the envelope).
	Cluster string
	// Payload is *BrokerOverloaded, *ReplicaChange, *LogDirMove, *BrokerFailed,
	// *BrokerDrain, *BrokerAdded, *PartitionOffline, *ClusterPause, *ClusterResume,
	// *OperationCancel or *PlanDecision, by Type.
	Payload any
}

// Expired reports whether the event carries an expiresat that has passed.
func (e *Event) Expired(now time.Time) bool {
	return !e.ExpiresAt.IsZero() && now.After(e.ExpiresAt)
}

// DryRun reports whether the request asks only for the plan.
func (e *Event) DryRun() bool {
	switch p := e.Payload.(type) {
	case *BrokerOverloaded:
		return p.DryRun
	case *ReplicaChange:
		return p.DryRun
	case *LogDirMove:
		return p.DryRun
	case *BrokerFailed:
		return p.DryRun
	case *BrokerDrain:
		return p.DryRun
	case *BrokerAdded:
		return p.DryRun
	case *PartitionOffline:
		return p.DryRun
	}
	return false
}

// BrokerOverloaded is the data of a broker-overloaded event.
type BrokerOverloaded struct {
	Cluster       string   `json:"cluster,omitempty"`
	Broker        *int32   `json:"broker"`
	Topics        []string `json:"topics,omitempty"`
	ExcludeTopics []string `json:"exclude_topics,omitempty"`
	MaxPartitions int      `json:"max_partitions,omitempty"`
	DemoteToEnd   bool     `json:"demote_to_end,omitempty"`
	DryRun        bool     `json:"dry_run,omitempty"`
	// Approval "required" asks that a person approve the plan before it runs (plan-approved),
	// whatever the configuration's approval policy says; "" leaves it to the policy.
	Approval string `json:"approval,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// ReplicaChange is the data of a replica-change-requested event: exactly one of
// PreferredLeader and ReplicationFactor is set.
type ReplicaChange struct {
	Cluster             string   `json:"cluster,omitempty"`
	Topic               string   `json:"topic"`
	Partitions          []int32  `json:"partitions,omitempty"`
	PreferredLeader     *int32   `json:"preferred_leader,omitempty"`
	ReplicationFactor   *int     `json:"replication_factor,omitempty"`
	Strategy            string   `json:"strategy,omitempty"`
	ThrottleBytesPerSec int64    `json:"throttle_bytes_per_sec,omitempty"`
	Timeout             Duration `json:"timeout,omitzero"`
	DryRun              bool     `json:"dry_run,omitempty"`
	// Approval "required" asks that a person approve the plan before it runs (plan-approved),
	// whatever the configuration's approval policy says; "" leaves it to the policy.
	Approval string `json:"approval,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// LogDirMove is the data of a logdir-move-requested event.
type LogDirMove struct {
	Cluster             string `json:"cluster,omitempty"`
	Broker              *int32 `json:"broker"`
	Topic               string `json:"topic,omitempty"`
	Partition           *int32 `json:"partition,omitempty"`
	FromDir             string `json:"from_dir,omitempty"`
	ToDir               string `json:"to_dir,omitempty"`
	ThrottleBytesPerSec int64  `json:"throttle_bytes_per_sec,omitempty"`
	// Timeout bounds the whole move across retries (default: the worker's logdir.timeout).
	Timeout Duration `json:"timeout,omitzero"`
	DryRun  bool     `json:"dry_run,omitempty"`
	// Approval "required" asks that a person approve the plan before it runs (plan-approved),
	// whatever the configuration's approval policy says; "" leaves it to the policy.
	Approval string `json:"approval,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// BrokerFailed is the data of a broker-failed event.
type BrokerFailed struct {
	Cluster string `json:"cluster,omitempty"`
	Broker  *int32 `json:"broker"`
	// Rack is the failed broker's rack, when known: the broker is gone from the metadata,
	// and its replacements go to its rack where that keeps each partition's rack spread.
	Rack string `json:"rack,omitempty"`
	// Topics, when given, limits the repair to these topics (the critical ones first; a
	// later event without it does the rest). Default: every topic.
	Topics              []string `json:"topics,omitempty"`
	ThrottleBytesPerSec int64    `json:"throttle_bytes_per_sec,omitempty"`
	// Timeout bounds the whole repair across retries (default: the worker's
	// replication_factor.timeout).
	Timeout Duration `json:"timeout,omitzero"`
	DryRun  bool     `json:"dry_run,omitempty"`
	// Approval "required" asks that a person approve the plan before it runs (plan-approved),
	// whatever the configuration's approval policy says; "" leaves it to the policy.
	Approval string `json:"approval,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// BrokerDrain is the data of a broker-drain event.
type BrokerDrain struct {
	Cluster string `json:"cluster,omitempty"`
	Broker  *int32 `json:"broker"`
	// Topics, when given, limits the drain to these topics (a partial drain). Default:
	// every topic.
	Topics              []string `json:"topics,omitempty"`
	ThrottleBytesPerSec int64    `json:"throttle_bytes_per_sec,omitempty"`
	// Timeout bounds the whole drain across retries (default: the worker's
	// replication_factor.timeout).
	Timeout Duration `json:"timeout,omitzero"`
	DryRun  bool     `json:"dry_run,omitempty"`
	// Approval "required" asks that a person approve the plan before it runs (plan-approved),
	// whatever the configuration's approval policy says; "" leaves it to the policy.
	Approval string `json:"approval,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// BrokerAdded is the data of a broker-added event: Broker or Brokers (exactly one).
type BrokerAdded struct {
	Cluster string  `json:"cluster,omitempty"`
	Broker  *int32  `json:"broker,omitempty"`
	Brokers []int32 `json:"brokers,omitempty"`
	// Topics, when given, limits the move to these topics: only their replicas count and
	// only they move (spread some topics onto the new brokers). Default: every topic.
	Topics              []string `json:"topics,omitempty"`
	ThrottleBytesPerSec int64    `json:"throttle_bytes_per_sec,omitempty"`
	// Timeout bounds the whole rebalance across retries (default: the worker's
	// replication_factor.timeout).
	Timeout Duration `json:"timeout,omitzero"`
	DryRun  bool     `json:"dry_run,omitempty"`
	// Approval "required" asks that a person approve the plan before it runs (plan-approved),
	// whatever the configuration's approval policy says; "" leaves it to the policy.
	Approval string `json:"approval,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// PartitionOffline is the data of a partition-offline event.
type PartitionOffline struct {
	Cluster string `json:"cluster,omitempty"`
	// Topic, when given, limits the election to this topic's partitions. Default: every
	// partition without a leader.
	Topic string `json:"topic,omitempty"`
	// Partitions, when given (only with Topic), limits it to these partitions of Topic.
	// Default: every partition of Topic without a leader.
	Partitions []int32 `json:"partitions,omitempty"`
	// AllowUnclean allows an unclean election (a live replica outside the last in-sync
	// replicas becomes leader; the records only the last in-sync replicas held are lost)
	// where no in-sync replica is alive. The worker's configuration must allow it too
	// (partition_offline.allow_unclean); else such partitions are refused.
	AllowUnclean bool `json:"allow_unclean,omitempty"`
	DryRun       bool `json:"dry_run,omitempty"`
	// Approval "required" asks that a person approve the plan before it runs (plan-approved),
	// whatever the configuration's approval policy says; "" leaves it to the policy.
	Approval string `json:"approval,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// ClusterPause is the data of a cluster-pause event.
type ClusterPause struct {
	Cluster string `json:"cluster,omitempty"`
	// Reason says why the automation is off (required: it is shown to whoever finds the
	// cluster paused, and on every event held).
	Reason string `json:"reason"`
	// Until, when given, is when the pause ends by itself (RFC 3339); it must be in the
	// future when the pause is handled, and at most MaxPause ahead.
	Until string `json:"until,omitempty"`
}

// UntilTime returns Until parsed (zero when not given); validate checked it parses.
func (p *ClusterPause) UntilTime() time.Time {
	t, _ := parseTime(p.Until)
	return t
}

// ClusterResume is the data of a cluster-resume event.
type ClusterResume struct {
	Cluster string `json:"cluster,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// OperationCancel is the data of an operation-cancel event.
type OperationCancel struct {
	Cluster string `json:"cluster,omitempty"`
	// ID is the id of the event to cancel, an event of the same cluster (running,
	// waiting, or left in the journal by a worker that is gone).
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

func (p *OperationCancel) validate() error {
	errs := []error{checkReason(p.Reason)}
	switch {
	case p.ID == "":
		errs = append(errs, errors.New("data.id: required: the id of the event to cancel"))
	default:
		if err := CheckID(p.ID); err != nil {
			errs = append(errs, fmt.Errorf("data.id: %s: %w", clip(p.ID), err))
		}
	}
	return errors.Join(errs...)
}

// PlanDecision is the data of a plan-approved or plan-denied event: a person's answer to a
// plan that waits for approval (result awaiting_approval, which names the plan).
type PlanDecision struct {
	Cluster string `json:"cluster,omitempty"`
	// PlanID is the plan_id of the awaiting_approval result.
	PlanID string `json:"plan_id"`
	// Reason says why (required to deny: it is the denied event's error).
	Reason string `json:"reason,omitempty"`
}

func (p *PlanDecision) validate(typ string) error {
	errs := []error{checkReason(p.Reason)}
	switch {
	case p.PlanID == "":
		errs = append(errs, errors.New("data.plan_id: required: the plan_id of the awaiting_approval result"))
	default:
		if err := CheckID(p.PlanID); err != nil {
			errs = append(errs, fmt.Errorf("data.plan_id: %s: %w", clip(p.PlanID), err))
		}
	}
	if typ == TypePlanDenied && strings.TrimSpace(p.Reason) == "" {
		errs = append(errs, errors.New("data.reason: required to deny a plan: it becomes the denied event's error"))
	}
	return errors.Join(errs...)
}

// ApprovalRequired is the only value of a request's approval field.
const ApprovalRequired = "required"

func checkApproval(v string) error {
	if v != "" && v != ApprovalRequired {
		return fmt.Errorf("data.approval: %s: want %q (or leave it out)", clip(v), ApprovalRequired)
	}
	return nil
}

// AsksApproval reports whether the request asks for a person's approval itself
// (data.approval "required").
func (e *Event) AsksApproval() bool {
	v := reflect.ValueOf(e.Payload)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return false
	}
	f := v.Elem().FieldByName("Approval")
	return f.IsValid() && f.Kind() == reflect.String && f.String() == ApprovalRequired
}

// MaxPause is how far ahead a cluster-pause's until may be: a pause meant for longer is
// one without until, ended by a cluster-resume.
const MaxPause = 30 * 24 * time.Hour

// Added returns the brokers a broker-added event names (Broker or Brokers).
func (p *BrokerAdded) Added() []int32 {
	if p.Broker != nil {
		return []int32{*p.Broker}
	}
	return p.Brokers
}

// Duration is a Go duration written as a string ("90s", "15m").
type Duration struct{ time.Duration }

func (d Duration) IsZero() bool { return d.Duration == 0 }

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"15m\"")
	}
	v, err := time.ParseDuration(s)
	switch {
	case err != nil && strings.Contains(err.Error(), "invalid duration") && durationRE.MatchString(s):
		return fmt.Errorf("%s is out of the range of a duration (1ns to %s)", clip(s), time.Duration(math.MaxInt64))
	case err != nil:
		return fmt.Errorf("%s is not a duration (e.g. \"90s\", \"15m\")", clip(s))
	case v == 0 && strings.ContainsAny(s, "123456789"):
		return fmt.Errorf("%s is out of the range of a duration (1ns to %s)", clip(s), time.Duration(math.MaxInt64))
	case v <= 0:
		return fmt.Errorf("%s: must be positive", clip(s))
	}
	d.Duration = v
	return nil
}

// Header is a NATS message's header: names, case-sensitive as NATS has them, to their
// values (nats.Header is one).
type Header = map[string][]string

// first returns the first value of name in h, as nats.Header's Get does.
func first(h Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// DecodeOptions configures Decode.
type DecodeOptions struct {
	// Clusters are the cluster names the worker knows; an event for another is rejected.
	Clusters []string
	// MaxBytes bounds the body. Default DefaultMaxBytes.
	MaxBytes int
}

// Rejection is a decoding or validation failure: the event is invalid and will never be
// acted on. It carries what could be read of the event, so the result can name it.
type Rejection struct {
	ID, Type, Cluster string
	Err               error
}

func (r *Rejection) Error() string { return r.Err.Error() }
func (r *Rejection) Unwrap() error { return r.Err }

// Decode reads an event from a NATS message on subject: structured mode (the body is the
// CloudEvents JSON envelope), or binary mode (ce- headers carry the attributes and the
// body is the data). Every problem found is reported, each naming its field; the error is
// always a *Rejection.
func Decode(subject string, h Header, body []byte, opts DecodeOptions) (*Event, error) {
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	rej := &Rejection{}
	fail := func(errs ...error) (*Event, error) {
		rej.Err = joinBounded(errs...)
		return nil, rej
	}
	// The rejection carries only what is valid: it names the event's result.
	cluster, typ, err := parseSubject(subject)
	rej.Cluster, rej.Type = cluster, typ
	if err != nil {
		return fail(err)
	}
	if len(body) > opts.MaxBytes {
		return fail(fmt.Errorf("event body is %d bytes, more than the limit of %d", len(body), opts.MaxBytes))
	}
	var ev Event
	if first(h, "ce-specversion") != "" {
		err = fromBinary(&ev.Envelope, h, body)
	} else {
		err = fromStructured(&ev.Envelope, body)
	}
	if ValidID(ev.ID) {
		rej.ID = ev.ID
	}
	if err != nil {
		return fail(err)
	}
	ev.Cluster = cluster
	var errs []error
	if err := ev.Envelope.Validate(); err != nil {
		errs = append(errs, err)
	}
	if ev.Type != "" && ev.Type != typ {
		errs = append(errs, fmt.Errorf("type: %s does not match the subject's type %q", clip(ev.Type), typ))
	}
	if len(opts.Clusters) > 0 && !slices.Contains(opts.Clusters, cluster) {
		errs = append(errs, fmt.Errorf("subject: unknown cluster %q (this worker knows %s)", cluster, strings.Join(opts.Clusters, ", ")))
	}
	if len(errs) > 0 {
		return fail(errs...)
	}
	payload, err := decodeData(typ, ev.Data)
	if err != nil {
		return fail(err)
	}
	if c := dataCluster(payload); c != "" {
		if err := CheckClusterName(c); err != nil {
			return fail(fmt.Errorf("data.cluster: %s: %w", clip(c), err))
		}
		if c != cluster {
			return fail(fmt.Errorf("data.cluster: %q does not match the subject's cluster %q", c, cluster))
		}
	}
	ev.Payload = payload
	return &ev, nil
}

// parseSubject reads the cluster and the type of an event subject. Each is returned only
// when valid (a cluster name, a known type), for the rejection to name the event by.
func parseSubject(subject string) (cluster, typ string, err error) {
	if len(subject) > MaxSubjectLength {
		return "", "", fmt.Errorf("subject: %d bytes, over the limit of %d", len(subject), MaxSubjectLength)
	}
	parts := strings.Split(subject, ".")
	if len(parts) != 4 || parts[0]+"."+parts[1] != EventsSubjectPrefix {
		return "", "", fmt.Errorf("subject: %s is not %s.<cluster>.<type>", clip(subject), EventsSubjectPrefix)
	}
	var errs []error
	if err := CheckClusterName(parts[2]); err != nil {
		errs = append(errs, fmt.Errorf("subject: cluster %s: %w", clip(parts[2]), err))
	} else {
		cluster = parts[2]
	}
	if KnownType(parts[3]) {
		typ = parts[3]
	} else {
		errs = append(errs, fmt.Errorf("subject: unknown event type %s", clip(parts[3])))
	}
	return cluster, typ, errors.Join(errs...)
}

func fromStructured(env *Envelope, body []byte) error {
	if err := CheckObject(body); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	body, strictErr := strictJSON(body, "") // valid JSON, by CheckObject
	if body == nil {
		return strictErr
	}
	// Envelope attributes: known ones typed, extensions (other attributes) tolerated as
	// CloudEvents requires, but their names must be valid.
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(body, &attrs); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	if raw, ok := attrs["id"]; ok {
		_ = json.Unmarshal(raw, &env.ID) // for the rejection, before other checks
	}
	if strictErr != nil {
		return strictErr
	}
	var errs []error
	for name, raw := range attrs {
		if err := setAttr(env, name, raw); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func setAttr(env *Envelope, name string, raw json.RawMessage) error {
	str := func(dst *string) error {
		if err := json.Unmarshal(raw, dst); err != nil {
			return fmt.Errorf("%s: want a string, got %s", name, truncate(raw))
		}
		return nil
	}
	tm := func(dst *time.Time) error {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("%s: want an RFC 3339 time string, got %s", name, truncate(raw))
		}
		t, err := parseTime(s)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		*dst = t
		return nil
	}
	switch name {
	case "specversion":
		return str(&env.SpecVersion)
	case "id":
		return str(&env.ID)
	case "source":
		return str(&env.Source)
	case "type":
		return str(&env.Type)
	case "datacontenttype":
		return str(&env.DataContentType)
	case "time":
		return tm(&env.Time)
	case "expiresat":
		return tm(&env.ExpiresAt)
	case "data":
		env.Data = raw
		return nil
	case "data_base64":
		return errors.New("data_base64: binary data is not accepted; send data as a JSON object")
	case "subject", "dataschema":
		var s string
		if err := str(&s); err != nil {
			return err
		}
		if err := checkText(s, MaxTextLength); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	if !validExtensionName(name) {
		return fmt.Errorf("%s: not a valid CloudEvents attribute name (lower-case letters and digits, at most 20)", clip(name))
	}
	return checkExtension(name, raw)
}

// checkExtension checks the value of an extension attribute: one of the CloudEvents types
// as its JSON format writes them (a string, which also holds a URI, a timestamp or base64
// binary; an integer of 32 bits; a boolean), or null (absent).
func checkExtension(name string, raw json.RawMessage) error {
	switch raw[0] {
	case 'n', 't', 'f':
		return nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := checkText(s, MaxTextLength); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	case '{', '[':
		return fmt.Errorf("%s: an object or a list is no CloudEvents attribute value (want a string, an integer or a boolean)", name)
	}
	if _, err := strconv.ParseInt(string(raw), 10, 32); err != nil { // an integer is written as one, by strictJSON
		return fmt.Errorf("%s: %s is no CloudEvents integer (%d to %d)", name, truncate(raw), math.MinInt32, math.MaxInt32)
	}
	return nil
}

func validExtensionName(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || unicode.IsDigit(r) && r < 128) {
			return false
		}
	}
	return true
}

// fromBinary reads the binary mode of the CloudEvents NATS binding.
func fromBinary(env *Envelope, h Header, body []byte) error {
	env.SpecVersion = first(h, "ce-specversion")
	env.ID = first(h, "ce-id")
	env.Source = first(h, "ce-source")
	env.Type = first(h, "ce-type")
	env.DataContentType = first(h, "Content-Type")
	if env.DataContentType == "" {
		env.DataContentType = first(h, "ce-datacontenttype")
	}
	errs := checkHeaders(h)
	for _, a := range []struct {
		name string
		dst  *time.Time
	}{{"time", &env.Time}, {"expiresat", &env.ExpiresAt}} {
		v := first(h, "ce-"+a.name)
		if v == "" {
			continue
		}
		t, err := parseTime(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("ce-%s: %w", a.name, err))
			continue
		}
		*a.dst = t
	}
	env.Data = bytes.TrimSpace(body)
	if json.Valid(env.Data) { // else Validate says what is wrong with it
		data, err := strictJSON(env.Data, "data")
		if data != nil {
			env.Data = data
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkHeaders holds binary mode's ce- headers to the rules of structured mode's members:
// each attribute given once (as a member name is), "ce-subject", "ce-dataschema" and the
// extensions' values text, the extensions' names CloudEvents attribute names. The values of
// the attributes the worker reads are checked where they are read (Envelope.Validate).
func checkHeaders(h Header) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(h)) {
		attr, ok := strings.CutPrefix(name, "ce-")
		if !ok && name != "Content-Type" {
			continue // not CloudEvents' (Nats-Msg-Id, a tracing header): not ours to judge
		}
		if n := len(h[name]); n != 1 {
			errs = append(errs, fmt.Errorf("header %s: given %d times; an attribute is given once", clip(name), n))
			continue
		}
		v := h[name][0]
		switch attr {
		case "specversion", "id", "source", "type", "datacontenttype", "time", "expiresat":
		case "subject", "dataschema":
			if err := checkText(v, MaxTextLength); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		default:
			if !ok {
				break // Content-Type
			}
			if !validExtensionName(attr) {
				errs = append(errs, fmt.Errorf("header %s: not a valid CloudEvents attribute name (lower-case letters and digits, at most 20)", clip(name)))
			} else if err := checkText(v, MaxTextLength); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	}
	return errs
}

// newPayload returns a new, empty data struct of events of type typ, or nil for an
// unknown type.
func newPayload(typ string) any {
	switch typ {
	case TypeBrokerOverloaded:
		return &BrokerOverloaded{}
	case TypeReplicaChangeRequested:
		return &ReplicaChange{}
	case TypeLogDirMoveRequested:
		return &LogDirMove{}
	case TypeBrokerFailed:
		return &BrokerFailed{}
	case TypeBrokerDrain:
		return &BrokerDrain{}
	case TypeBrokerAdded:
		return &BrokerAdded{}
	case TypePartitionOffline:
		return &PartitionOffline{}
	case TypeClusterPause:
		return &ClusterPause{}
	case TypeClusterResume:
		return &ClusterResume{}
	case TypeOperationCancel:
		return &OperationCancel{}
	case TypePlanApproved, TypePlanDenied:
		return &PlanDecision{}
	}
	return nil
}

func decodeData(typ string, data json.RawMessage) (any, error) {
	payload := newPayload(typ)
	if payload == nil {
		return nil, fmt.Errorf("type: unknown event type %q", typ)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err == nil { // else the decoding below says why
		if err := exactFieldNames(typ, members); err != nil {
			return nil, err
		}
		if err := checkLists(typ, members); err != nil {
			return nil, err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(payload); err != nil {
		return nil, dataError(err)
	}
	if dec.More() {
		return nil, errors.New("data: more than one JSON value")
	}
	var err error
	switch p := payload.(type) {
	case *BrokerOverloaded:
		err = p.validate()
	case *ReplicaChange:
		err = p.validate()
	case *LogDirMove:
		err = p.validate()
	case *BrokerFailed:
		err = p.validate()
	case *BrokerDrain:
		err = p.validate()
	case *BrokerAdded:
		err = p.validate()
	case *PartitionOffline:
		err = p.validate()
	case *ClusterPause:
		err = p.validate()
	case *ClusterResume:
		err = checkReason(p.Reason)
	case *OperationCancel:
		err = p.validate()
	case *PlanDecision:
		err = p.validate(typ)
	}
	return payload, err
}

// exactFieldNames rejects every member of data whose name is not exactly the name of a
// field of events of type typ. encoding/json matches member names to fields without regard
// to case ("Broker", even "ſtrategy" with a long s, would set a field), which
// DisallowUnknownFields lets through; the contract names each field exactly, and a name that
// is almost right is a typo to reject, not one to guess at.
func exactFieldNames(typ string, members map[string]json.RawMessage) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(members)) {
		if _, ok := DataField(typ, name); ok {
			continue
		}
		if like := fieldLike(typ, name); like != "" {
			errs = append(errs, fmt.Errorf("data: unknown field %s (field names are case-sensitive: %q)", clip(name), like))
		} else {
			errs = append(errs, fmt.Errorf("data: unknown field %s", clip(name)))
		}
	}
	return errors.Join(errs...)
}

// checkLists checks the lists of the data's members (its known fields, by exactFieldNames)
// for what decoding them into Go would hide: a null entry (it would read as 0 or "") and
// more entries than the field's cap.
func checkLists(typ string, members map[string]json.RawMessage) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(members)) {
		if kind, _ := DataField(typ, name); !strings.HasPrefix(string(kind), "[]") {
			continue
		}
		n, nulls, ok := listEntries(members[name])
		if !ok {
			continue // null, or not a list: the decoding that follows says so
		}
		if limit := listCaps[name]; n > limit {
			errs = append(errs, fmt.Errorf("data.%s: %d entries, over the limit of %d", name, n, limit))
			continue
		}
		for _, i := range nulls {
			errs = append(errs, fmt.Errorf("data.%s[%d]: null: a list holds no nulls", name, i))
		}
	}
	return errors.Join(errs...)
}

// fieldLike returns the JSON name of the data field of events of type typ that name
// matches without regard to case, or "".
func fieldLike(typ, name string) string {
	t := payloadType(typ)
	if t == nil {
		return ""
	}
	for i := range t.NumField() {
		field, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if strings.EqualFold(field, name) {
			return field
		}
	}
	return ""
}

// dataError names the field of a JSON decoding error.
func dataError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "(value)"
		}
		if lit, ok := strings.CutPrefix(te.Value, "number "); ok && integral(lit) {
			r := intRanges[field]
			return fmt.Errorf("data.%s: %s is out of range (%d to %d)", field, truncate([]byte(lit)), r[0], r[1])
		}
		return fmt.Errorf("data.%s: want %s, got %s", field, goTypeName(te.Type.String()), truncate([]byte(te.Value)))
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("data: unknown field %s", f)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("data: invalid JSON at byte %d: %v", se.Offset, err)
	}
	// Errors from our own UnmarshalJSON (durations) arrive without the field name.
	return fmt.Errorf("data: %v", err)
}

func goTypeName(t string) string {
	switch strings.TrimPrefix(t, "*") {
	case "int32", "int", "int64":
		return "an integer"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "[]int32":
		return "an array of integers"
	case "[]string":
		return "an array of strings"
	}
	return t
}

func dataCluster(p any) string {
	switch p := p.(type) {
	case *BrokerOverloaded:
		return p.Cluster
	case *ReplicaChange:
		return p.Cluster
	case *LogDirMove:
		return p.Cluster
	case *BrokerFailed:
		return p.Cluster
	case *BrokerDrain:
		return p.Cluster
	case *BrokerAdded:
		return p.Cluster
	case *PartitionOffline:
		return p.Cluster
	case *ClusterPause:
		return p.Cluster
	case *ClusterResume:
		return p.Cluster
	case *OperationCancel:
		return p.Cluster
	case *PlanDecision:
		return p.Cluster
	}
	return ""
}

// checkThrottle checks the throttle_bytes_per_sec of a request: 0 (the worker's default)
// or more, at most MaxSafeInteger.
func checkThrottle(v int64) []error {
	var errs []error
	if v < 0 {
		errs = append(errs, fmt.Errorf("data.throttle_bytes_per_sec: %d: must not be negative", v))
	}
	if err := overMax("throttle_bytes_per_sec", v); err != nil {
		errs = append(errs, fmt.Errorf("%w (2^53-1, the largest integer every JSON reader holds exactly)", err))
	}
	return errs
}

// checkBroker checks the broker id of data.<field>, which is required.
func checkBroker(field string, broker *int32) error {
	switch {
	case broker == nil:
		return fmt.Errorf("data.%s: required", field)
	case *broker < 0:
		return fmt.Errorf("data.%s: %d is not a broker id", field, *broker)
	}
	return nil
}

// checkPartitions checks a partitions list, if given: not empty (absent means every
// partition), partition numbers.
func checkPartitions(partitions []int32) []error {
	var errs []error
	if partitions != nil && len(partitions) == 0 {
		errs = append(errs, errors.New("data.partitions: empty list (omit it to mean every partition)"))
	}
	for _, part := range partitions {
		if part < 0 {
			errs = append(errs, fmt.Errorf("data.partitions: %d is not a partition number", part))
		}
	}
	return errs
}

// checkReason checks the reason of a request, if it has one.
func checkReason(reason string) error {
	if err := checkText(reason, MaxTextLength); err != nil {
		return fmt.Errorf("data.reason: %w", err)
	}
	return nil
}

func (p *BrokerOverloaded) validate() error {
	errs := []error{checkReason(p.Reason), checkApproval(p.Approval)}
	if p.Broker == nil {
		errs = append(errs, errors.New("data.broker: required"))
	} else if *p.Broker < 0 {
		errs = append(errs, fmt.Errorf("data.broker: %d is not a broker id", *p.Broker))
	}
	if p.MaxPartitions < 0 {
		errs = append(errs, fmt.Errorf("data.max_partitions: %d: must be 0 (all) or more", p.MaxPartitions))
	}
	if err := overMax("max_partitions", int64(p.MaxPartitions)); err != nil {
		errs = append(errs, err)
	}
	for i, t := range p.Topics {
		if err := CheckTopicName(t); err != nil {
			errs = append(errs, fmt.Errorf("data.topics[%d]: %s: %w", i, clip(t), err))
		}
	}
	for i, t := range p.ExcludeTopics {
		if err := CheckTopicName(t); err != nil {
			errs = append(errs, fmt.Errorf("data.exclude_topics[%d]: %s: %w", i, clip(t), err))
		}
	}
	excluded := make(map[string]bool, len(p.ExcludeTopics))
	for _, t := range p.ExcludeTopics {
		excluded[t] = true
	}
	for _, t := range p.Topics {
		if excluded[t] {
			errs = append(errs, fmt.Errorf("data.exclude_topics: %s is also in data.topics", clip(t)))
			excluded[t] = false // once
		}
	}
	return errors.Join(errs...)
}

func (p *ReplicaChange) validate() error {
	errs := []error{checkReason(p.Reason), checkApproval(p.Approval)}
	if p.Topic == "" {
		errs = append(errs, errors.New("data.topic: required"))
	} else if err := CheckTopicName(p.Topic); err != nil {
		errs = append(errs, fmt.Errorf("data.topic: %s: %w", clip(p.Topic), err))
	}
	errs = append(errs, checkPartitions(p.Partitions)...)
	switch {
	case p.PreferredLeader == nil && p.ReplicationFactor == nil:
		errs = append(errs, errors.New("data: one of preferred_leader or replication_factor is required"))
	case p.PreferredLeader != nil && p.ReplicationFactor != nil:
		errs = append(errs, errors.New("data: preferred_leader and replication_factor are exclusive: send two events"))
	case p.PreferredLeader != nil && *p.PreferredLeader < 0:
		errs = append(errs, fmt.Errorf("data.preferred_leader: %d is not a broker id", *p.PreferredLeader))
	case p.ReplicationFactor != nil && *p.ReplicationFactor < 1:
		errs = append(errs, fmt.Errorf("data.replication_factor: %d: must be at least 1", *p.ReplicationFactor))
	case p.ReplicationFactor != nil:
		if err := overMax("replication_factor", int64(*p.ReplicationFactor)); err != nil {
			errs = append(errs, fmt.Errorf("%w (Kafka's largest replication factor)", err))
		}
	}
	switch p.Strategy {
	case "", "auto", "api", "zk-reassign", "zk-nudge":
	default:
		errs = append(errs, fmt.Errorf("data.strategy: unknown strategy %s (want auto, api, zk-reassign or zk-nudge)", clip(p.Strategy)))
	}
	errs = append(errs, checkThrottle(p.ThrottleBytesPerSec)...)
	return errors.Join(errs...)
}

func (p *LogDirMove) validate() error {
	errs := []error{checkReason(p.Reason), checkApproval(p.Approval)}
	if p.Broker == nil {
		errs = append(errs, errors.New("data.broker: required"))
	} else if *p.Broker < 0 {
		errs = append(errs, fmt.Errorf("data.broker: %d: must not be negative", *p.Broker))
	}
	if p.Topic != "" {
		if err := CheckTopicName(p.Topic); err != nil {
			errs = append(errs, fmt.Errorf("data.topic: %s: %w", clip(p.Topic), err))
		}
	}
	for _, d := range []struct{ name, dir string }{{"from_dir", p.FromDir}, {"to_dir", p.ToDir}} {
		if d.dir == "" {
			continue
		}
		if err := checkDir(d.dir); err != nil {
			errs = append(errs, fmt.Errorf("data.%s: %w", d.name, err))
		}
	}
	single := p.Topic != "" || p.Partition != nil
	switch {
	case single && p.FromDir != "":
		errs = append(errs, errors.New("data: give either topic+partition (one replica) or from_dir (balance a disk), not both"))
	case single && (p.Topic == "" || p.Partition == nil):
		errs = append(errs, errors.New("data: topic and partition go together"))
	case single && p.ToDir == "":
		errs = append(errs, errors.New("data.to_dir: required to move one replica"))
	case single && *p.Partition < 0:
		errs = append(errs, fmt.Errorf("data.partition: %d: must not be negative", *p.Partition))
	case !single && p.FromDir != "" && p.FromDir == p.ToDir:
		errs = append(errs, fmt.Errorf("data: from_dir and to_dir are the same directory %s", clip(p.FromDir)))
	}
	errs = append(errs, checkThrottle(p.ThrottleBytesPerSec)...)
	return errors.Join(errs...)
}

func (p *BrokerFailed) validate() error {
	errs := []error{checkReason(p.Reason), checkApproval(p.Approval), checkBroker("broker", p.Broker)}
	if err := checkText(p.Rack, MaxTextLength); err != nil {
		errs = append(errs, fmt.Errorf("data.rack: %w", err))
	}
	errs = append(errs, checkTopicNames(p.Topics)...)
	errs = append(errs, checkThrottle(p.ThrottleBytesPerSec)...)
	return errors.Join(errs...)
}

func (p *BrokerDrain) validate() error {
	errs := []error{checkReason(p.Reason), checkApproval(p.Approval), checkBroker("broker", p.Broker)}
	errs = append(errs, checkTopicNames(p.Topics)...)
	errs = append(errs, checkThrottle(p.ThrottleBytesPerSec)...)
	return errors.Join(errs...)
}

// checkTopicNames checks the names of a topics list.
func checkTopicNames(topics []string) []error {
	var errs []error
	for i, t := range topics {
		if err := CheckTopicName(t); err != nil {
			errs = append(errs, fmt.Errorf("data.topics[%d]: %s: %w", i, clip(t), err))
		}
	}
	return errs
}

func (p *BrokerAdded) validate() error {
	errs := []error{checkReason(p.Reason), checkApproval(p.Approval)}
	switch {
	case p.Broker != nil && p.Brokers != nil:
		errs = append(errs, errors.New("data.broker and data.brokers: give one of them"))
	case p.Broker == nil && p.Brokers == nil:
		errs = append(errs, errors.New("data.broker or data.brokers: required"))
	}
	if p.Broker != nil {
		errs = append(errs, checkBroker("broker", p.Broker))
	}
	if p.Brokers != nil && len(p.Brokers) == 0 {
		errs = append(errs, errors.New("data.brokers: empty list (name at least one broker)"))
	}
	seen := make(map[int32]int, len(p.Brokers))
	for i, b := range p.Brokers {
		if b < 0 {
			errs = append(errs, fmt.Errorf("data.brokers[%d]: %d is not a broker id", i, b))
			continue
		}
		if seen[b]++; seen[b] == 2 { // once for any number of repeats
			errs = append(errs, fmt.Errorf("data.brokers: broker %d is listed twice", b))
		}
	}
	errs = append(errs, checkTopicNames(p.Topics)...)
	errs = append(errs, checkThrottle(p.ThrottleBytesPerSec)...)
	return errors.Join(errs...)
}

func (p *PartitionOffline) validate() error {
	errs := []error{checkReason(p.Reason), checkApproval(p.Approval)}
	if p.Topic != "" {
		if err := CheckTopicName(p.Topic); err != nil {
			errs = append(errs, fmt.Errorf("data.topic: %s: %w", clip(p.Topic), err))
		}
	} else if p.Partitions != nil {
		errs = append(errs, errors.New("data.partitions: needs data.topic (partitions are numbered within a topic)"))
	}
	errs = append(errs, checkPartitions(p.Partitions)...)
	return errors.Join(errs...)
}

func (p *ClusterPause) validate() error {
	errs := []error{checkReason(p.Reason)}
	if strings.TrimSpace(p.Reason) == "" {
		errs = append(errs, errors.New("data.reason: required: say why the automation is off (it is shown on every event held)"))
	}
	if p.Until != "" {
		// The contract's one rule of times (parseTime), as time and expiresat: the schemas
		// state it, and time.Parse's RFC 3339 reading differs from it at its edges.
		if _, err := parseTime(p.Until); err != nil {
			errs = append(errs, fmt.Errorf("data.until: %w", err))
		}
	}
	return errors.Join(errs...)
}

// truncate returns raw JSON (or a number) for a message: cut to 60 bytes, at a character.
func truncate(b []byte) string {
	if len(b) > 60 {
		cut := 60
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		return string(b[:cut]) + "…"
	}
	return string(b)
}
