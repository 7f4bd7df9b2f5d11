package logdir

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// MetaFile is the file that identifies a log dir: the broker, the cluster and (KRaft,
// Kafka 3.7 and later) the directory.
const MetaFile = "meta.properties"

// Meta is a parsed meta.properties (a Java properties file of key=value lines).
type Meta struct {
	Props map[string]string
}

// ParseMeta parses the key=value (or key:value) lines of a properties file; blank lines
// and comments ('#', '!') are skipped. Line continuations and escapes, which Kafka never
// writes in this file, are not decoded.
func ParseMeta(data []byte) *Meta {
	m := &Meta{Props: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			m.Props[line] = ""
			continue
		}
		m.Props[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	return m
}

// BrokerID is node.id (KRaft) or else broker.id (ZooKeeper mode), with the key it came
// from; "" when there is neither.
func (m *Meta) BrokerID() (id, key string) {
	for _, k := range []string{"node.id", "broker.id"} {
		if v, ok := m.Props[k]; ok {
			return v, k
		}
	}
	return "", ""
}

// ClusterID is cluster.id, "" when absent.
func (m *Meta) ClusterID() string { return m.Props["cluster.id"] }

// DirectoryID is directory.id (KIP-858, KRaft brokers of Kafka 3.7 and later), "" when
// absent.
func (m *Meta) DirectoryID() string { return m.Props["directory.id"] }

// metaKeys are the identifying keys of meta.properties, in the order String shows them.
var metaKeys = []string{"broker.id", "node.id", "cluster.id", "directory.id", "version"}

// validMetaValue reports whether v is a value Kafka writes for key: a non-negative integer
// in canonical decimal for the ids and the version, an id of 1 to 64 characters of
// [A-Za-z0-9_-] (Kafka's base64 UUIDs are 22) for cluster.id and directory.id. Only such
// values are ever shown: meta.properties may be something else than Kafka wrote, and its
// bytes are not repeated in errors or reports.
func validMetaValue(key, v string) bool {
	switch key {
	case "cluster.id", "directory.id":
		if v == "" || len(v) > 64 {
			return false
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
				return false
			}
		}
		return true
	default:
		if !canonical(v) {
			return false
		}
		_, err := strconv.ParseInt(v, 10, 32)
		return err == nil
	}
}

// Problems lists the identifying keys whose values Kafka does not write, naming the key
// and what it must be, not the value.
func (m *Meta) Problems() []string {
	var out []string
	for _, k := range metaKeys {
		if v, ok := m.Props[k]; ok && !validMetaValue(k, v) {
			want := "a non-negative integer"
			if k == "cluster.id" || k == "directory.id" {
				want = "1 to 64 characters of [A-Za-z0-9_-]"
			}
			out = append(out, fmt.Sprintf("%s: %s is not what Kafka writes (want %s)", MetaFile, k, want))
		}
	}
	return out
}

// String shows the identifying keys, in a fixed order; a value Kafka would not write is
// shown as "(invalid)".
func (m *Meta) String() string {
	var parts []string
	for _, k := range metaKeys {
		if v, ok := m.Props[k]; ok {
			if !validMetaValue(k, v) {
				v = "(invalid)"
			}
			parts = append(parts, fmt.Sprintf("%s=%s", k, v))
		}
	}
	if len(parts) == 0 {
		return "(no broker.id, node.id, cluster.id or directory.id)"
	}
	return strings.Join(parts, " ")
}
