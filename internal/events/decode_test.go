package events

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

const subj = "kafkamender.events.local.replica-change-requested"

func structured(data string) string {
	return `{"specversion":"1.0","id":"a1b2","source":"alertmanager/prod","type":"replica-change-requested",
 "time":"2026-11-29T10:00:00Z","datacontenttype":"application/json","data":` + data + `}`
}

func TestDecodeValid(t *testing.T) {
	opts := DecodeOptions{Clusters: []string{"local", "kraft"}}
	ev, err := Decode(subj, nil, []byte(structured(`{"topic":"orders","partitions":[1],"preferred_leader":2}`)), opts)
	if err != nil {
		t.Fatal(err)
	}
	p := ev.Payload.(*ReplicaChange)
	if ev.ID != "a1b2" || ev.Cluster != "local" || p.Topic != "orders" || *p.PreferredLeader != 2 || len(p.Partitions) != 1 || p.Partitions[0] != 1 {
		t.Fatalf("decoded %+v / %+v", ev, p)
	}
	if ev.Expired(time.Now()) {
		t.Error("no expiresat must not be expired")
	}

	h := Header{"ce-specversion": {"1.0"}, "ce-id": {"b-1"}, "ce-source": {"test"}, "ce-type": {"broker-overloaded"},
		"ce-expiresat": {"2000-01-01T00:00:00Z"}, "Content-Type": {"application/json"}, "ce-traceparent": {"00-ab-cd-01"}}
	ev, err = Decode("kafkamender.events.kraft.broker-overloaded", h, []byte(`{"broker":3,"demote_to_end":true}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	bo := ev.Payload.(*BrokerOverloaded)
	if ev.ID != "b-1" || *bo.Broker != 3 || !bo.DemoteToEnd || !ev.Expired(time.Now()) {
		t.Fatalf("binary mode decoded %+v / %+v", ev, bo)
	}

	ev, err = Decode(subj, nil, []byte(structured(`{"topic":"orders","replication_factor":3,"timeout":"15m","throttle_bytes_per_sec":1048576}`)), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rc := ev.Payload.(*ReplicaChange); *rc.ReplicationFactor != 3 || rc.Timeout.Duration != 15*time.Minute {
		t.Fatalf("decoded %+v", rc)
	}
}

func TestDecodeRejections(t *testing.T) {
	big := structured(`{"topic":"` + strings.Repeat("x", DefaultMaxBytes) + `","preferred_leader":1}`)
	for _, tc := range []struct {
		name, subject, body, want, id string
	}{
		{"malformed JSON", subj, `{"specversion":"1.0",`, "body: not valid JSON", ""},
		{"not an object", subj, `[1,2]`, "body: want a JSON object, got an array", ""},
		{"unknown data field", subj, structured(`{"topic":"o","preferred_leader":1,"leader":2}`), `data: unknown field "leader"`, "a1b2"},
		{"field name in another case", subj, structured(`{"Topic":"o","preferred_leader":1}`), `data: unknown field "Topic" (field names are case-sensitive: "topic")`, "a1b2"},
		{"field name with a long s", subj, structured(`{"topic":"o","preferred_leader":1,"ſtrategy":"api"}`), `data: unknown field "ſtrategy" (field names are case-sensitive: "strategy")`, "a1b2"},
		{"every unknown field", subj, structured(`{"topic":"o","preferred_leader":1,"leader":2,"PREFERRED_LEADER":3}`), "data: unknown field \"PREFERRED_LEADER\" (field names are case-sensitive: \"preferred_leader\")\ndata: unknown field \"leader\"", "a1b2"},
		{"wrong type", subj, structured(`{"topic":"o","preferred_leader":"2"}`), "data.preferred_leader: want an integer, got string", "a1b2"},
		{"wrong type in list", subj, structured(`{"topic":"o","partitions":["1"],"preferred_leader":2}`), "data.partitions: want", "a1b2"},
		{"missing topic", subj, structured(`{"preferred_leader":1}`), "data.topic: required", "a1b2"},
		{"neither operation", subj, structured(`{"topic":"o"}`), "one of preferred_leader or replication_factor is required", "a1b2"},
		{"both operations", subj, structured(`{"topic":"o","preferred_leader":1,"replication_factor":3}`), "exclusive", "a1b2"},
		{"empty partition list", subj, structured(`{"topic":"o","partitions":[],"preferred_leader":1}`), "data.partitions: empty list", "a1b2"},
		{"bad strategy", subj, structured(`{"topic":"o","preferred_leader":1,"strategy":"yolo"}`), `data.strategy: unknown strategy "yolo"`, "a1b2"},
		{"bad timeout", subj, structured(`{"topic":"o","replication_factor":2,"timeout":"soon"}`), `"soon" is not a duration`, "a1b2"},
		{"subject/type mismatch", "kafkamender.events.local.broker-overloaded", structured(`{"broker":1}`), `type: "replica-change-requested" does not match the subject's type "broker-overloaded"`, "a1b2"},
		{"unknown type in subject", "kafkamender.events.local.reboot", structured(`{}`), `subject: unknown event type "reboot"`, ""},
		{"short subject", "kafkamender.events.local", structured(`{}`), "is not kafkamender.events.<cluster>.<type>", ""},
		{"subject over its limit", "kafkamender.events." + strings.Repeat("c", 300) + ".broker-overloaded", structured(`{}`), "subject: 337 bytes, over the limit of 256", ""},
		{"cluster over its limit", "kafkamender.events." + strings.Repeat("c", 65) + ".replica-change-requested", structured(`{"topic":"o","preferred_leader":1}`), "subject: cluster \"" + strings.Repeat("c", 65) + "\": 65 characters, over the limit of 64", ""},
		{"cluster not a token", "kafkamender.events.a*b.replica-change-requested", structured(`{"topic":"o","preferred_leader":1}`), `subject: cluster "a*b": not a valid subject token`, ""},
		{"id over its limit", subj, strings.Replace(structured(`{"topic":"o","preferred_leader":1}`), `"a1b2"`, `"`+strings.Repeat("i", 129)+`"`, 1), "id: \"" + strings.Repeat("i", 128) + "\"…: 129 characters, over the limit of 128", ""},
		{"unknown cluster", "kafkamender.events.prod.replica-change-requested", structured(`{"topic":"o","preferred_leader":1}`), `subject: unknown cluster "prod"`, "a1b2"},
		{"data.cluster mismatch", subj, structured(`{"cluster":"kraft","topic":"o","preferred_leader":1}`), `data.cluster: "kraft" does not match the subject's cluster "local"`, "a1b2"},
		{"oversized", subj, big, "more than the limit", ""},
		{"bad expiresat", subj, strings.Replace(structured(`{"topic":"o","preferred_leader":1}`), `"time"`, `"expiresat":"tomorrow","time"`, 1), `expiresat: "tomorrow" is not an RFC 3339 time`, "a1b2"},
		{"bad specversion", subj, strings.Replace(structured(`{"topic":"o","preferred_leader":1}`), `"1.0"`, `"0.3"`, 1), "specversion", "a1b2"},
		{"missing id", subj, strings.Replace(structured(`{"topic":"o","preferred_leader":1}`), `"id":"a1b2",`, "", 1), "id: required", ""},
		{"id not a subject token", subj, strings.Replace(structured(`{"topic":"o","preferred_leader":1}`), `"a1b2"`, `"a.b"`, 1), "id: \"a.b\": not a valid subject token", ""},
		{"data not an object", subj, structured(`[1]`), "data: want a JSON object", "a1b2"},
		{"duplicate member", subj, structured(`{"topic":"o","topic":"p","preferred_leader":1}`), `data: member "topic" appears twice`, "a1b2"},
		{"duplicate id", subj, strings.Replace(structured(`{"topic":"o","preferred_leader":1}`), `"id":"a1b2",`, `"id":"a1b2","id":"a1b2",`, 1), `body: member "id" appears twice`, "a1b2"},
		{"not UTF-8", subj, structured("{\"topic\":\"o\xff\",\"preferred_leader\":1}"), "body: not UTF-8 (the byte at offset", ""},
		{"null in a list", subj, structured(`{"topic":"o","partitions":[0,null],"preferred_leader":1}`), "data.partitions[1]: null: a list holds no nulls", "a1b2"},
		{"list over its cap", subj, structured(`{"topic":"o","partitions":[` + strings.Repeat("0,", MaxListedPartitions) + `0],"preferred_leader":1}`), "data.partitions: 100001 entries, over the limit of 100000", "a1b2"},
		{"replication factor 0", subj, structured(`{"topic":"o","replication_factor":0}`), "data.replication_factor: 0: must be at least 1", "a1b2"},
		{"replication factor over Kafka's", subj, structured(`{"topic":"o","replication_factor":40000}`), "data.replication_factor: 40000 is over the limit of 32767 (Kafka's largest replication factor)", "a1b2"},
		{"replication factor beyond int64", subj, structured(`{"topic":"o","replication_factor":1e40}`), "data.replication_factor: 1e40 is out of range (1 to 32767)", "a1b2"},
		{"partition beyond int32", subj, structured(`{"topic":"o","partitions":[2147483648],"preferred_leader":1}`), "data.partitions: 2147483648 is out of range (0 to 2147483647)", "a1b2"},
		{"throttle over 2^53-1", subj, structured(`{"topic":"o","replication_factor":2,"throttle_bytes_per_sec":9007199254740992}`), "data.throttle_bytes_per_sec: 9007199254740992 is over the limit of 9007199254740991 (2^53-1,", "a1b2"},
		{"a fraction", subj, structured(`{"topic":"o","preferred_leader":1.5}`), "data.preferred_leader: want an integer, got number 1.5", "a1b2"},
		{"source over its limit", subj, strings.Replace(structured(`{"topic":"o","preferred_leader":1}`), `"alertmanager/prod"`, `"`+strings.Repeat("s", 1025)+`"`, 1), "source: 1025 characters, over the limit of 1024", "a1b2"},
		{"reason with a newline", subj, structured(`{"topic":"o","preferred_leader":1,"reason":"a\nb"}`), "data.reason: a control character (U+000A) at byte 1", "a1b2"},
		{"extension an object", subj, strings.Replace(structured(`{"topic":"o","preferred_leader":1}`), `"time"`, `"trace":{"a":1},"time"`, 1), "trace: an object or a list is no CloudEvents attribute value", "a1b2"},
		{"extension beyond 32 bits", subj, strings.Replace(structured(`{"topic":"o","preferred_leader":1}`), `"time"`, `"n":3e9,"time"`, 1), "n: 3000000000 is no CloudEvents integer (-2147483648 to 2147483647)", "a1b2"},
		{"topic not Kafka's", subj, structured(`{"topic":"my topic","preferred_leader":1}`), `data.topic: "my topic": ' ' is not allowed in a Kafka topic name (letters, digits, '.', '_' and '-')`, "a1b2"},
		{"topic over Kafka's limit", subj, structured(`{"topic":"` + strings.Repeat("t", 250) + `","preferred_leader":1}`), "data.topic: \"" + strings.Repeat("t", 128) + "\"…: longer than Kafka's limit of 249 characters (250)", "a1b2"},
		{"binary data", subj, strings.Replace(structured(`{}`), `"data":`, `"data_base64":"eA==","x":`, 1), "data_base64", "a1b2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.subject, nil, []byte(tc.body), DecodeOptions{Clusters: []string{"local", "kraft"}})
			var rej *Rejection
			if !errors.As(err, &rej) {
				t.Fatalf("err = %v, want a *Rejection", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to contain %q", err, tc.want)
			}
			if rej.ID != tc.id {
				t.Errorf("rejection id = %q, want %q", rej.ID, tc.id)
			}
		})
	}
}

// Binary mode's ce- headers are held to the rules of structured mode's members: each given
// once, text bounded, extension names CloudEvents'. Headers that are not CloudEvents' are
// not judged.
func TestBinaryHeadersAreMembers(t *testing.T) {
	body := []byte(`{"broker":3}`)
	base := func(extra Header) Header {
		h := Header{"ce-specversion": {"1.0"}, "ce-id": {"b-1"}, "ce-source": {"test"}, "ce-type": {"broker-overloaded"}}
		maps.Copy(h, extra)
		return h
	}
	long := strings.Repeat("x", MaxTextLength+1)
	for _, tc := range []struct {
		name string
		h    Header
		want string // "" accepted
	}{
		{"extension", base(Header{"ce-traceparent": {"00-ab-cd-01"}, "ce-priority": {"7"}}), ""},
		{"subject and dataschema", base(Header{"ce-subject": {"orders-1"}, "ce-dataschema": {"https://example.com/s"}}), ""},
		{"other headers are not judged", base(Header{"Nats-Msg-Id": {"a", "b"}, "X-Trace": {long}, "CE-ID": {"x y"}}), ""},
		{"an attribute twice", base(Header{"ce-id": {"b-1", "b-2"}}), `header "ce-id": given 2 times; an attribute is given once`},
		{"content type twice", base(Header{"Content-Type": {"application/json", "text/plain"}}), `header "Content-Type": given 2 times`},
		{"an extension twice", base(Header{"ce-foo": {"1", "2"}}), `header "ce-foo": given 2 times`},
		{"over-long extension", base(Header{"ce-foo": {long}}), "ce-foo: 1025 characters, over the limit of 1024"},
		{"control character in an extension", base(Header{"ce-foo": {"a\x01b"}}), "ce-foo: a control character (U+0001) at byte 1"},
		{"over-long subject", base(Header{"ce-subject": {long}}), "ce-subject: 1025 characters, over the limit of 1024"},
		{"bad extension name", base(Header{"ce-Foo_Bar": {"1"}}), `header "ce-Foo_Bar": not a valid CloudEvents attribute name`},
		{"long extension name", base(Header{"ce-" + strings.Repeat("a", 21): {"1"}}), "not a valid CloudEvents attribute name"},
		{"empty extension name", base(Header{"ce-": {"1"}}), `header "ce-": not a valid CloudEvents attribute name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("kafkamender.events.kraft.broker-overloaded", tc.h, body, DecodeOptions{Clusters: []string{"kraft"}})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var rej *Rejection
			if !errors.As(err, &rej) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a rejection containing %q", err, tc.want)
			}
			if rej.ID != "b-1" {
				t.Errorf("rejection id = %q, want b-1", rej.ID)
			}
		})
	}
}

func logdirEvent(data string) string {
	return strings.Replace(structured(data), `"type":"replica-change-requested"`, `"type":"logdir-move-requested"`, 1)
}

const logdirSubj = "kafkamender.events.local.logdir-move-requested"

func TestDecodeLogDirMove(t *testing.T) {
	opts := DecodeOptions{Clusters: []string{"local"}}
	for _, tc := range []struct{ name, data, want string }{
		{"explicit", `{"broker":1,"topic":"o","partition":2,"to_dir":"/b","timeout":"10m"}`, ""},
		{"balance between two", `{"broker":1,"from_dir":"/a","to_dir":"/b","throttle_bytes_per_sec":1000}`, ""},
		{"balance fullest to emptiest", `{"broker":1}`, ""},
		{"balance to a dir", `{"broker":1,"to_dir":"/b"}`, ""},
		{"no broker", `{"from_dir":"/a"}`, "data.broker: required"},
		{"negative broker", `{"broker":-1}`, "data.broker: -1: must not be negative"},
		{"explicit without target", `{"broker":1,"topic":"o","partition":2}`, "data.to_dir: required to move one replica"},
		{"topic alone", `{"broker":1,"topic":"o","to_dir":"/b"}`, "topic and partition go together"},
		{"both kinds", `{"broker":1,"topic":"o","partition":1,"from_dir":"/a","to_dir":"/b"}`, "not both"},
		{"same dirs", `{"broker":1,"from_dir":"/a","to_dir":"/a"}`, `from_dir and to_dir are the same directory "/a"`},
		{"negative partition", `{"broker":1,"topic":"o","partition":-2,"to_dir":"/b"}`, "data.partition: -2"},
		{"negative throttle", `{"broker":1,"throttle_bytes_per_sec":-5}`, "must not be negative"},
		{"relative dir", `{"broker":1,"to_dir":"data"}`, `data.to_dir: "data" is not an absolute path`},
		{"a .. element", `{"broker":1,"from_dir":"/a/../b"}`, `data.from_dir: "/a/../b" has a ".." element`},
		{"a control character", `{"broker":1,"from_dir":"/a\tb"}`, `data.from_dir: a control character (U+0009) at byte 2`},
		{"excluded topic", `{"broker":1,"topic":"o o","partition":1,"to_dir":"/b"}`, `data.topic: "o o": ' ' is not allowed in a Kafka topic name`},
		{"unknown field", `{"broker":1,"disk":"/a"}`, `data: unknown field "disk"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Decode(logdirSubj, nil, []byte(logdirEvent(tc.data)), opts)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := ev.Payload.(*LogDirMove); !ok {
					t.Fatalf("payload %T", ev.Payload)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// A rejection names the event only by what is valid of it: its result is published under
// them (results.<id>, the result's cluster and type).
func TestRejectionNamesOnlyValidParts(t *testing.T) {
	for _, tc := range []struct {
		name, subject, body string
		id, typ, cluster    string
	}{
		{"cluster over its limit", "kafkamender.events." + strings.Repeat("c", 65) + ".replica-change-requested", structured(`{"topic":"o","preferred_leader":1}`), "", TypeReplicaChangeRequested, ""},
		{"unknown type", "kafkamender.events.local.reboot", structured(`{}`), "", "", "local"},
		{"id over its limit", subj, strings.Replace(structured(`{"topic":"o","preferred_leader":1}`), `"a1b2"`, `"`+strings.Repeat("i", 129)+`"`, 1), "", TypeReplicaChangeRequested, "local"},
		{"id not a token", subj, strings.Replace(structured(`{"topic":"o","preferred_leader":1}`), `"a1b2"`, `"a b"`, 1), "", TypeReplicaChangeRequested, "local"},
		{"bad data, valid id", subj, structured(`{"topic":"o"}`), "a1b2", TypeReplicaChangeRequested, "local"},
	} {
		_, err := Decode(tc.subject, nil, []byte(tc.body), DecodeOptions{})
		var rej *Rejection
		if !errors.As(err, &rej) {
			t.Fatalf("%s: err = %v, want a *Rejection", tc.name, err)
		}
		if rej.ID != tc.id || rej.Type != tc.typ || rej.Cluster != tc.cluster {
			t.Errorf("%s: rejection of id %q, type %q, cluster %q; want %q, %q, %q", tc.name, rej.ID, rej.Type, rej.Cluster, tc.id, tc.typ, tc.cluster)
		}
	}
	if got := DeadSubject(strings.Repeat("c", 65)); got != DeadSubjectPrefix+"."+DeadUnknownCluster {
		t.Errorf("DeadSubject of a name over the limit = %s", got)
	}
}

// The largest event the limits allow: 100,000 partitions, about 600 KB.
func BenchmarkDecodeLargestEvent(b *testing.B) {
	body := []byte(mkEvent(tRC, `{"topic":"o","preferred_leader":1,"partitions":[`+repeatJSON(`99999`, MaxListedPartitions)+`]}`))
	for b.Loop() {
		if _, err := Decode(Subject("local", tRC), nil, body, schemaDecodeOptions); err != nil {
			b.Fatal(err)
		}
	}
}

// A rejection quotes at most a little of any value: its message goes into results and log
// lines.
func TestRejectionMessagesAreBounded(t *testing.T) {
	huge := strings.Repeat("x", 20_000)
	str := `"` + huge + `"`
	for _, tc := range []schemaCase{
		{"specversion", tBO, mkEvent(tBO, `{"broker":1}`, `"specversion":`+str)},
		{"type", tBO, mkEvent(tBO, `{"broker":1}`, `"type":`+str)},
		{"id", tBO, mkEvent(tBO, `{"broker":1}`, `"id":`+str)},
		{"source", tBO, mkEvent(tBO, `{"broker":1}`, `"source":`+str)},
		{"datacontenttype", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":`+str)},
		{"time", tBO, mkEvent(tBO, `{"broker":1}`, `"time":`+str)},
		{"expiresat", tBO, mkEvent(tBO, `{"broker":1}`, `"expiresat":`+str)},
		{"subject", tBO, mkEvent(tBO, `{"broker":1}`, `"subject":`+str)},
		{"extension name", tBO, mkEvent(tBO, `{"broker":1}`, str+`:1`)},
		{"extension value", tBO, mkEvent(tBO, `{"broker":1}`, `"x":`+str)},
		{"extension number", tBO, mkEvent(tBO, `{"broker":1}`, `"x":1`+strings.Repeat("0", 20_000))},
		{"duplicate member", tBO, mkEvent(tBO, `{"broker":1,`+str+`:1,`+str+`:1}`)},
		{"unknown field", tBO, mkEvent(tBO, `{"broker":1,`+str+`:1}`)},
		{"cluster", tBO, mkEvent(tBO, `{"broker":1,"cluster":`+str+`}`)},
		{"topics", tBO, mkEvent(tBO, `{"broker":1,"topics":[`+str+`]}`)},
		{"exclude_topics", tBO, mkEvent(tBO, `{"broker":1,"topics":[`+str+`],"exclude_topics":[`+str+`]}`)},
		{"reason", tBO, mkEvent(tBO, `{"broker":1,"reason":`+str+`}`)},
		{"broker", tBO, mkEvent(tBO, `{"broker":1`+strings.Repeat("0", 20_000)+`}`)},
		{"broker a fraction", tBO, mkEvent(tBO, `{"broker":1.`+strings.Repeat("5", 20_000)+`}`)},
		{"topic", tRC, mkEvent(tRC, `{"topic":`+str+`,"preferred_leader":1}`)},
		{"strategy", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"strategy":`+str+`}`)},
		{"timeout", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":2,"timeout":`+str+`}`)},
		{"timeout out of range", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":2,"timeout":"`+strings.Repeat("9", 20_000)+`h"}`)},
		{"dirs", tLD, mkEvent(tLD, `{"broker":1,"from_dir":"/`+huge+`","to_dir":"/`+huge+`"}`)},
		{"relative dir", tLD, mkEvent(tLD, `{"broker":1,"to_dir":`+str+`}`)},
		{"rack", tBF, mkEvent(tBF, `{"broker":1,"rack":`+str+`}`)},
		{"brokers", tBA, mkEvent(tBA, `{"brokers":[1`+strings.Repeat("0", 20_000)+`]}`)},
	} {
		_, err := Decode(Subject("local", tc.typ), nil, []byte(tc.body), DecodeOptions{})
		if err == nil {
			t.Errorf("%s: Decode takes it", tc.name)
		} else if len(err.Error()) > 2048 {
			t.Errorf("%s: a message of %d bytes: %.300s…", tc.name, len(err.Error()), err)
		}
	}
	// many is n members or entries of format, each with its number.
	many := func(format string, n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, format, i)
		}
		return b.String()
	}
	for _, tc := range []schemaCase{
		{"many bad topics", tBO, mkEvent(tBO, `{"broker":1,"topics":[`+many(`"a %d"`, MaxListedTopics)+`]}`)},
		{"many repeated brokers", tBA, mkEvent(tBA, `{"brokers":[`+repeatJSON(`7`, MaxListedBrokers/2)+`,`+many(`-%d`, MaxListedBrokers/2)+`]}`)},
		{"many nulls", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"partitions":[`+repeatJSON(`null`, MaxListedPartitions)+`]}`)},
		{"many unknown fields", tBO, mkEvent(tBO, `{"broker":1,`+many(`"x%d":1`, 10_000)+`}`)},
		{"many repeated members", tBO, mkEvent(tBO, `{"broker":1}`, many(`"a%[1]d":1,"a%[1]d":2`, 10_000))},
		{"many bad extensions", tBO, mkEvent(tBO, `{"broker":1}`, many(`"A%d":1`, 10_000))},
	} {
		_, err := Decode(Subject("local", tc.typ), nil, []byte(tc.body), DecodeOptions{})
		if err == nil {
			t.Errorf("%s: Decode takes it", tc.name)
		} else if lines := strings.Count(err.Error(), "\n") + 1; lines > maxProblems+1 || !strings.HasSuffix(err.Error(), "more problems)") {
			t.Errorf("%s: a message of %d lines, ending %q", tc.name, lines, err.Error()[max(0, len(err.Error())-60):])
		}
	}
	if _, err := Decode("kafkamender.events."+huge+".broker-overloaded", nil, []byte(mkEvent(tBO, `{"broker":1}`)), DecodeOptions{}); err == nil || len(err.Error()) > 2048 {
		t.Errorf("subject: %.300v", err)
	}
}

// broker-failed, broker-drain and broker-added: what each takes, and every problem of what
// it refuses, each in its words.
func TestDecodeBrokerEvents(t *testing.T) {
	opts := DecodeOptions{Clusters: []string{"local"}}
	for _, tc := range []struct {
		name, typ, data string
		want            []string // the rejection's lines; none: accepted
	}{
		{"failed", tBF, `{"broker":3,"rack":"eu-west-1a","throttle_bytes_per_sec":1048576,"timeout":"4h","dry_run":true,"reason":"gone"}`, nil},
		{"failed, broker only", tBF, `{"broker":0}`, nil},
		{"failed, no broker", tBF, `{"rack":"a"}`, []string{"data.broker: required"}},
		{"failed, negative broker", tBF, `{"broker":-1}`, []string{"data.broker: -1 is not a broker id"}},
		{"failed, rack with a newline", tBF, `{"broker":3,"rack":"a\nb"}`, []string{"data.rack: a control character (U+000A) at byte 1"}},
		{"failed, rack over its limit", tBF, `{"broker":3,"rack":"` + strings.Repeat("r", MaxTextLength+1) + `"}`, []string{"data.rack: 1025 characters, over the limit of 1024"}},
		{"failed, negative throttle", tBF, `{"broker":3,"throttle_bytes_per_sec":-5}`, []string{"data.throttle_bytes_per_sec: -5: must not be negative"}},
		{"failed, throttle over 2^53-1", tBF, `{"broker":3,"throttle_bytes_per_sec":9007199254740992}`,
			[]string{"data.throttle_bytes_per_sec: 9007199254740992 is over the limit of 9007199254740991 (2^53-1, the largest integer every JSON reader holds exactly)"}},
		{"failed, broker beyond int32", tBF, `{"broker":2147483648}`, []string{"data.broker: 2147483648 is out of range (0 to 2147483647)"}},
		{"failed, zero timeout", tBF, `{"broker":3,"timeout":"0s"}`, []string{`data: "0s": must be positive`}},
		{"failed, every problem", tBF, `{"broker":-2,"rack":"\u0000","throttle_bytes_per_sec":-1,"reason":"a\tb"}`, []string{
			"data.reason: a control character (U+0009) at byte 1", "data.broker: -2 is not a broker id",
			"data.rack: a control character (U+0000) at byte 0", "data.throttle_bytes_per_sec: -1: must not be negative"}},
		{"drain", tBD, `{"broker":2,"throttle_bytes_per_sec":1000,"timeout":"90m","reason":"maintenance"}`, nil},
		{"drain, no broker", tBD, `{}`, []string{"data.broker: required"}},
		{"drain, negative broker and throttle", tBD, `{"broker":-1,"throttle_bytes_per_sec":-1}`, []string{
			"data.broker: -1 is not a broker id", "data.throttle_bytes_per_sec: -1: must not be negative"}},
		{"drain, rack", tBD, `{"broker":2,"rack":"a"}`, []string{`data: unknown field "rack"`}},
		{"added, one broker", tBA, `{"broker":4,"throttle_bytes_per_sec":1000,"timeout":"3h"}`, nil},
		{"added, brokers", tBA, `{"brokers":[4,5,6],"dry_run":true}`, nil},
		{"added, neither", tBA, `{"reason":"r"}`, []string{"data.broker or data.brokers: required"}},
		{"added, both", tBA, `{"broker":4,"brokers":[5]}`, []string{"data.broker and data.brokers: give one of them"}},
		{"added, negative broker", tBA, `{"broker":-4}`, []string{"data.broker: -4 is not a broker id"}},
		{"added, empty list", tBA, `{"brokers":[]}`, []string{"data.brokers: empty list (name at least one broker)"}},
		{"added, negative listed broker", tBA, `{"brokers":[4,-1]}`, []string{"data.brokers[1]: -1 is not a broker id"}},
		{"added, listed twice", tBA, `{"brokers":[3,4,3,3,4]}`, []string{"data.brokers: broker 3 is listed twice", "data.brokers: broker 4 is listed twice"}},
		{"added, listed broker beyond int32", tBA, `{"brokers":[2147483648]}`, []string{"data.brokers: 2147483648 is out of range (0 to 2147483647)"}},
		{"added, null in the list", tBA, `{"brokers":[4,null]}`, []string{"data.brokers[1]: null: a list holds no nulls"}},
		{"added, over the cap", tBA, `{"brokers":[` + repeatJSON(`1`, MaxListedBrokers+1) + `]}`, []string{"data.brokers: 1001 entries, over the limit of 1000"}},
		{"added, every problem", tBA, `{"broker":-1,"brokers":[-2,5,5],"throttle_bytes_per_sec":-3}`, []string{
			"data.broker and data.brokers: give one of them", "data.broker: -1 is not a broker id",
			"data.brokers[0]: -2 is not a broker id", "data.brokers: broker 5 is listed twice",
			"data.throttle_bytes_per_sec: -3: must not be negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Decode(Subject("local", tc.typ), nil, []byte(mkEvent(tc.typ, tc.data)), opts)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprintf("%T", ev.Payload); got != fmt.Sprintf("%T", newPayload(tc.typ)) {
					t.Errorf("payload %s", got)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode takes %s", tc.data)
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tc.want) {
				t.Errorf("rejection:\n%s\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// The payloads of the broker events read back as sent: DryRun, data.cluster, Added.
func TestBrokerEventPayloads(t *testing.T) {
	opts := DecodeOptions{Clusters: []string{"local"}}
	decode := func(typ, data string) *Event {
		t.Helper()
		ev, err := Decode(Subject("local", typ), nil, []byte(mkEvent(typ, data)), opts)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	ev := decode(tBF, `{"cluster":"local","broker":3,"rack":"r1","throttle_bytes_per_sec":100,"timeout":"2h","dry_run":true,"reason":"x"}`)
	bf := ev.Payload.(*BrokerFailed)
	if *bf.Broker != 3 || bf.Rack != "r1" || bf.ThrottleBytesPerSec != 100 || bf.Timeout.Duration != 2*time.Hour || !ev.DryRun() || bf.Reason != "x" || dataCluster(bf) != "local" {
		t.Errorf("broker-failed: %+v", bf)
	}
	ev = decode(tBD, `{"cluster":"local","broker":2,"dry_run":true}`)
	if bd := ev.Payload.(*BrokerDrain); *bd.Broker != 2 || !ev.DryRun() || dataCluster(bd) != "local" {
		t.Errorf("broker-drain: %+v", bd)
	}
	ev = decode(tBA, `{"cluster":"local","broker":4}`)
	if ba := ev.Payload.(*BrokerAdded); !slices.Equal(ba.Added(), []int32{4}) || ev.DryRun() || dataCluster(ba) != "local" {
		t.Errorf("broker-added: %+v, added %v", ba, ba.Added())
	}
	ev = decode(tBA, `{"brokers":[6,4,5],"dry_run":true}`)
	if ba := ev.Payload.(*BrokerAdded); !slices.Equal(ba.Added(), []int32{6, 4, 5}) || !ev.DryRun() {
		t.Errorf("broker-added: %+v, added %v", ba, ba.Added())
	}
	if _, err := Decode(Subject("local", tBD), nil, []byte(mkEvent(tBD, `{"cluster":"kraft","broker":2}`)), opts); err == nil ||
		!strings.Contains(err.Error(), `data.cluster: "kraft" does not match the subject's cluster "local"`) {
		t.Errorf("data.cluster of another cluster: %v", err)
	}
}

// partition-offline: what it takes, and every problem of what it refuses, each in its
// words.
func TestDecodePartitionOffline(t *testing.T) {
	opts := DecodeOptions{Clusters: []string{"local"}}
	for _, tc := range []struct {
		name, data string
		want       []string // the rejection's lines; none: accepted
	}{
		{"every offline partition", `{}`, nil},
		{"everything", `{"cluster":"local","topic":"orders","partitions":[0,3],"allow_unclean":true,"dry_run":true,"reason":"brokers 1 and 2 lost"}`, nil},
		{"a topic", `{"topic":"orders"}`, nil},
		{"unclean allowed, every topic", `{"allow_unclean":true}`, nil},
		{"empty topic (as absent)", `{"topic":""}`, nil},
		{"null partitions without a topic", `{"partitions":null}`, nil},
		{"partitions without a topic", `{"partitions":[0]}`, []string{"data.partitions: needs data.topic (partitions are numbered within a topic)"}},
		{"partitions with an empty topic", `{"topic":"","partitions":[0]}`, []string{"data.partitions: needs data.topic (partitions are numbered within a topic)"}},
		{"empty partitions", `{"topic":"orders","partitions":[]}`, []string{"data.partitions: empty list (omit it to mean every partition)"}},
		{"negative partition", `{"topic":"orders","partitions":[1,-1]}`, []string{"data.partitions: -1 is not a partition number"}},
		{"partition beyond int32", `{"topic":"orders","partitions":[2147483648]}`, []string{"data.partitions: 2147483648 is out of range (0 to 2147483647)"}},
		{"null in the list", `{"topic":"orders","partitions":[0,null]}`, []string{"data.partitions[1]: null: a list holds no nulls"}},
		{"over the cap", `{"topic":"orders","partitions":[` + repeatJSON(`0`, MaxListedPartitions+1) + `]}`, []string{"data.partitions: 100001 entries, over the limit of 100000"}},
		{"topic not Kafka's", `{"topic":"my topic"}`, []string{`data.topic: "my topic": ' ' is not allowed in a Kafka topic name (letters, digits, '.', '_' and '-')`}},
		{"allow_unclean a string", `{"allow_unclean":"yes"}`, []string{`data.allow_unclean: want true or false, got string`}},
		{"no throttle", `{"throttle_bytes_per_sec":1000}`, []string{`data: unknown field "throttle_bytes_per_sec"`}},
		{"no timeout", `{"timeout":"1h"}`, []string{`data: unknown field "timeout"`}},
		{"no broker", `{"broker":1}`, []string{`data: unknown field "broker"`}},
		{"field in another case", `{"allow_Unclean":true}`, []string{`data: unknown field "allow_Unclean" (field names are case-sensitive: "allow_unclean")`}},
		{"every problem", `{"topic":"a/b","partitions":[-2,-3],"reason":"a\tb"}`, []string{
			"data.reason: a control character (U+0009) at byte 1", `data.topic: "a/b": '/' is not allowed in a Kafka topic name (letters, digits, '.', '_' and '-')`,
			"data.partitions: -2 is not a partition number", "data.partitions: -3 is not a partition number"}},
		{"partitions, no topic, negative", `{"partitions":[-1],"allow_unclean":true}`, []string{
			"data.partitions: needs data.topic (partitions are numbered within a topic)", "data.partitions: -1 is not a partition number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Decode(Subject("local", tPO), nil, []byte(mkEvent(tPO, tc.data)), opts)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := ev.Payload.(*PartitionOffline); !ok {
					t.Errorf("payload %T", ev.Payload)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode takes %s", tc.data)
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tc.want) {
				t.Errorf("rejection:\n%s\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// The payload of a partition-offline event reads back as sent: DryRun, data.cluster.
func TestPartitionOfflinePayload(t *testing.T) {
	opts := DecodeOptions{Clusters: []string{"local"}}
	ev, err := Decode(Subject("local", tPO), nil, []byte(mkEvent(tPO,
		`{"cluster":"local","topic":"orders","partitions":[3,0],"allow_unclean":true,"dry_run":true,"reason":"x"}`)), opts)
	if err != nil {
		t.Fatal(err)
	}
	po := ev.Payload.(*PartitionOffline)
	if po.Topic != "orders" || !slices.Equal(po.Partitions, []int32{3, 0}) || !po.AllowUnclean || !ev.DryRun() || po.Reason != "x" || dataCluster(po) != "local" {
		t.Errorf("partition-offline: %+v", po)
	}
	ev, err = Decode(Subject("local", tPO), nil, []byte(mkEvent(tPO, `{}`)), opts)
	if err != nil {
		t.Fatal(err)
	}
	if po := ev.Payload.(*PartitionOffline); po.Topic != "" || po.Partitions != nil || po.AllowUnclean || ev.DryRun() || dataCluster(po) != "" {
		t.Errorf("partition-offline of every partition: %+v", po)
	}
	if _, err := Decode(Subject("local", tPO), nil, []byte(mkEvent(tPO, `{"cluster":"kraft"}`)), opts); err == nil ||
		!strings.Contains(err.Error(), `data.cluster: "kraft" does not match the subject's cluster "local"`) {
		t.Errorf("data.cluster of another cluster: %v", err)
	}
}

// cluster-pause and cluster-resume: what each takes, and every problem of what it refuses,
// each in its words.
func TestDecodeClusterPauseResume(t *testing.T) {
	opts := DecodeOptions{Clusters: []string{"local"}}
	const blank = "data.reason: required: say why the automation is off (it is shown on every event held)"
	for _, tc := range []struct {
		name, typ, data string
		want            []string // the rejection's lines; none: accepted
	}{
		{"pause", tCP, `{"reason":"rack b maintenance"}`, nil},
		{"pause until", tCP, `{"cluster":"local","reason":"rack b maintenance","until":"2026-12-04T18:00:00Z"}`, nil},
		{"pause until, an offset and a fraction", tCP, `{"reason":"r","until":"2026-12-04T19:00:00.5+01:00"}`, nil},
		{"pause until null", tCP, `{"reason":"r","until":null}`, nil},
		{"pause until empty (as absent)", tCP, `{"reason":"r","until":""}`, nil},
		{"pause until with lower-case t and z", tCP, `{"reason":"r","until":"2026-12-04t18:00:00z"}`, nil},
		{"pause, until with a one-digit hour", tCP, `{"reason":"r","until":"2026-12-04T9:00:00Z"}`, []string{`data.until: "2026-12-04T9:00:00Z" ` + errNotTime.Error()}},
		{"pause until in the past (refused when handled, not when read)", tCP, `{"reason":"r","until":"2000-01-01T00:00:00Z"}`, nil},
		{"pause, no reason", tCP, `{}`, []string{blank}},
		{"pause, no reason, an until", tCP, `{"until":"2026-12-04T18:00:00Z"}`, []string{blank}},
		{"pause, null reason", tCP, `{"reason":null}`, []string{blank}},
		{"pause, empty reason", tCP, `{"reason":""}`, []string{blank}},
		{"pause, blank reason", tCP, `{"reason":"   "}`, []string{blank}},
		{"pause, reason of Unicode white space", tCP, `{"reason":"\u00a0\u2003\u3000"}`, []string{blank}},
		{"pause, reason of a tab", tCP, `{"reason":"\t"}`, []string{"data.reason: a control character (U+0009) at byte 0", blank}},
		{"pause, reason with a newline", tCP, `{"reason":"a\nb"}`, []string{"data.reason: a control character (U+000A) at byte 1"}},
		{"pause, reason over its limit", tCP, `{"reason":"` + strings.Repeat("r", MaxTextLength+1) + `"}`, []string{"data.reason: 1025 characters, over the limit of 1024"}},
		{"pause, reason a number", tCP, `{"reason":5}`, []string{"data.reason: want a string, got number"}},
		{"pause, until not a time", tCP, `{"reason":"r","until":"tomorrow"}`, []string{`data.until: "tomorrow" ` + errNotTime.Error()}},
		{"pause, until without zone", tCP, `{"reason":"r","until":"2026-12-04T18:00:00"}`, []string{`data.until: "2026-12-04T18:00:00" ` + errNotTime.Error()}},
		{"pause, until a date", tCP, `{"reason":"r","until":"2026-12-04"}`, []string{`data.until: "2026-12-04" ` + errNotTime.Error()}},
		{"pause, until a number", tCP, `{"reason":"r","until":1796180400}`, []string{"data.until: want a string, got number"}},
		{"pause, no reason and until not a time", tCP, `{"until":"2h"}`, []string{blank, `data.until: "2h" ` + errNotTime.Error()}},
		{"pause, dry_run", tCP, `{"reason":"r","dry_run":true}`, []string{`data: unknown field "dry_run"`}},
		{"pause, unknown field", tCP, `{"reason":"r","for":"2h"}`, []string{`data: unknown field "for"`}},
		{"pause, field in another case", tCP, `{"reason":"r","Until":"2026-12-04T18:00:00Z"}`, []string{`data: unknown field "Until" (field names are case-sensitive: "until")`}},
		{"resume", tCR, `{"reason":"rack b back"}`, nil},
		{"resume, empty data", tCR, `{}`, nil},
		{"resume, nulls", tCR, `{"cluster":null,"reason":null}`, nil},
		{"resume, blank reason (optional)", tCR, `{"reason":" "}`, nil},
		{"resume, reason with a tab", tCR, `{"reason":"a\tb"}`, []string{"data.reason: a control character (U+0009) at byte 1"}},
		{"resume, until", tCR, `{"until":"2026-12-04T18:00:00Z"}`, []string{`data: unknown field "until"`}},
		{"resume, unknown field", tCR, `{"reason":"r","dry_run":true}`, []string{`data: unknown field "dry_run"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Decode(Subject("local", tc.typ), nil, []byte(mkEvent(tc.typ, tc.data)), opts)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprintf("%T", ev.Payload); got != fmt.Sprintf("%T", newPayload(tc.typ)) {
					t.Errorf("payload %s", got)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode takes %s", tc.data)
			}
			var rej *Rejection
			if !errors.As(err, &rej) || rej.ID != "a1b2" || rej.Type != tc.typ || rej.Cluster != "local" {
				t.Errorf("rejection %#v, want one naming event a1b2 of type %s of cluster local", rej, tc.typ)
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tc.want) {
				t.Errorf("rejection:\n%s\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// The payloads of cluster-pause and cluster-resume read back as sent: Reason, Until and
// UntilTime, data.cluster; neither is a dry run.
func TestClusterPauseResumePayloads(t *testing.T) {
	opts := DecodeOptions{Clusters: []string{"local"}}
	decode := func(typ, data string) *Event {
		t.Helper()
		ev, err := Decode(Subject("local", typ), nil, []byte(mkEvent(typ, data)), opts)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	ev := decode(tCP, `{"cluster":"local","reason":"rack b maintenance","until":"2026-12-04T19:00:00.5+01:00"}`)
	cp := ev.Payload.(*ClusterPause)
	if want := time.Date(2026, 12, 4, 18, 0, 0, 5e8, time.UTC); cp.Reason != "rack b maintenance" || !cp.UntilTime().Equal(want) || ev.DryRun() || dataCluster(cp) != "local" {
		t.Errorf("cluster-pause: %+v, until %v", cp, cp.UntilTime())
	}
	ev = decode(tCP, `{"reason":"r","until":"2026-12-04t18:00:00z"}`)
	if cp := ev.Payload.(*ClusterPause); !cp.UntilTime().Equal(time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)) {
		t.Errorf("cluster-pause until in lower case: %+v, until %v", cp, cp.UntilTime())
	}
	ev = decode(tCP, `{"reason":"r"}`)
	if cp := ev.Payload.(*ClusterPause); cp.Until != "" || !cp.UntilTime().IsZero() || dataCluster(cp) != "" {
		t.Errorf("cluster-pause without until: %+v, until %v", cp, cp.UntilTime())
	}
	// In binary mode too: the body is the data.
	ev, err := Decode(Subject("local", tCP), binaryHeader(tCP), []byte(`{"reason":"r","until":"2026-12-04T18:00:00Z"}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if cp := ev.Payload.(*ClusterPause); !cp.UntilTime().Equal(time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)) {
		t.Errorf("cluster-pause in binary mode: %+v", cp)
	}
	ev = decode(tCR, `{}`)
	if cr := ev.Payload.(*ClusterResume); cr.Reason != "" || ev.DryRun() || dataCluster(cr) != "" {
		t.Errorf("cluster-resume of empty data: %+v", cr)
	}
	ev = decode(tCR, `{"cluster":"local","reason":"rack b back"}`)
	if cr := ev.Payload.(*ClusterResume); cr.Reason != "rack b back" || dataCluster(cr) != "local" {
		t.Errorf("cluster-resume: %+v", cr)
	}
	for _, typ := range []string{tCP, tCR} {
		if _, err := Decode(Subject("local", typ), nil, []byte(mkEvent(typ, `{"cluster":"kraft","reason":"r"}`)), opts); err == nil ||
			!strings.Contains(err.Error(), `data.cluster: "kraft" does not match the subject's cluster "local"`) {
			t.Errorf("%s: data.cluster of another cluster: %v", typ, err)
		}
	}
	if MaxPause != 30*24*time.Hour {
		t.Errorf("MaxPause = %v, want 30 days (docs/contract.md and the schema say so)", MaxPause)
	}
}

// operation-cancel: what it takes, and every problem of what it refuses, each in its
// words. Its id is an event id, checked as the envelope's id is.
func TestDecodeOperationCancel(t *testing.T) {
	opts := DecodeOptions{Clusters: []string{"local"}}
	const missing = "data.id: required: the id of the event to cancel"
	const notToken = "not a valid subject token (want letters, digits, '-' or '_')"
	long := strings.Repeat("i", MaxIDLength+1)
	for _, tc := range []struct {
		name, data string
		want       []string // the rejection's lines; none: accepted
	}{
		{"an id", `{"id":"bd-2"}`, nil},
		{"everything", `{"cluster":"local","id":"bd-2","reason":"wrong broker, drain 4 instead"}`, nil},
		{"nulls", `{"cluster":null,"id":"bd-2","reason":null}`, nil},
		{"empty cluster and reason", `{"cluster":"","id":"bd-2","reason":""}`, nil},
		{"blank reason (optional)", `{"id":"bd-2","reason":"  "}`, nil},
		{"an id of 128 characters", `{"id":"` + strings.Repeat("i", MaxIDLength) + `"}`, nil},
		{"an id of letters, digits, - and _", `{"id":"Am-9650cb59630f1ddc_1796119200000000000"}`, nil},
		{"its own id (refused when handled, not when read)", `{"id":"a1b2"}`, nil},
		{"no id", `{}`, []string{missing}},
		{"no id, a reason", `{"reason":"r"}`, []string{missing}},
		{"null id", `{"id":null}`, []string{missing}},
		{"empty id", `{"id":""}`, []string{missing}},
		{"id with a dot", `{"id":"bd.2"}`, []string{`data.id: "bd.2": ` + notToken}},
		{"id with a space", `{"id":"bd 2"}`, []string{`data.id: "bd 2": ` + notToken}},
		{"id a wildcard", `{"id":"*"}`, []string{`data.id: "*": ` + notToken}},
		{"id not ASCII", `{"id":"bd-ü"}`, []string{`data.id: "bd-ü": ` + notToken}},
		{"id over its limit", `{"id":"` + long + `"}`, []string{`data.id: "` + long[:128] + `"…: 129 characters, over the limit of 128`}},
		{"id a number", `{"id":2}`, []string{"data.id: want a string, got number"}},
		{"id a list", `{"id":["bd-2"]}`, []string{"data.id: want a string, got array"}},
		{"reason with a tab", `{"id":"bd-2","reason":"a\tb"}`, []string{"data.reason: a control character (U+0009) at byte 1"}},
		{"bad id and bad reason", `{"id":"a b","reason":"a\nb"}`, []string{"data.reason: a control character (U+000A) at byte 1", `data.id: "a b": ` + notToken}},
		{"dry_run", `{"id":"bd-2","dry_run":true}`, []string{`data: unknown field "dry_run"`}},
		{"unknown field", `{"id":"bd-2","event":"bd-3"}`, []string{`data: unknown field "event"`}},
		{"field in another case", `{"ID":"bd-2"}`, []string{`data: unknown field "ID" (field names are case-sensitive: "id")`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Decode(Subject("local", tOC), nil, []byte(mkEvent(tOC, tc.data)), opts)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := ev.Payload.(*OperationCancel); !ok {
					t.Errorf("payload %T", ev.Payload)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode takes %s", tc.data)
			}
			var rej *Rejection
			if !errors.As(err, &rej) || rej.ID != "a1b2" || rej.Type != tOC || rej.Cluster != "local" {
				t.Errorf("rejection %#v, want one naming event a1b2 of type %s of cluster local", rej, tOC)
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tc.want) {
				t.Errorf("rejection:\n%s\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// The payload of operation-cancel reads back as sent: ID, Reason, data.cluster; it is no
// dry run, and a control event.
func TestOperationCancelPayload(t *testing.T) {
	opts := DecodeOptions{Clusters: []string{"local"}}
	ev, err := Decode(Subject("local", tOC), nil, []byte(mkEvent(tOC, `{"cluster":"local","id":"bd-2","reason":"wrong broker"}`)), opts)
	if err != nil {
		t.Fatal(err)
	}
	if oc := ev.Payload.(*OperationCancel); oc.ID != "bd-2" || oc.Reason != "wrong broker" || ev.DryRun() || dataCluster(oc) != "local" {
		t.Errorf("operation-cancel: %+v", oc)
	}
	// In binary mode too: the body is the data.
	ev, err = Decode(Subject("local", tOC), binaryHeader(tOC), []byte(`{"id":"bd-2"}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if oc := ev.Payload.(*OperationCancel); oc.ID != "bd-2" || oc.Reason != "" || dataCluster(oc) != "" {
		t.Errorf("operation-cancel in binary mode: %+v", oc)
	}
	if _, err := Decode(Subject("local", tOC), nil, []byte(mkEvent(tOC, `{"cluster":"kraft","id":"bd-2"}`)), opts); err == nil ||
		!strings.Contains(err.Error(), `data.cluster: "kraft" does not match the subject's cluster "local"`) {
		t.Errorf("data.cluster of another cluster: %v", err)
	}
	if !ControlType(TypeOperationCancel) {
		t.Error("operation-cancel is not a control type")
	}
}
