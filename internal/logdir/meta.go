package logdir

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// MetaFile is the file that identifies a log dir: the broker, the cluster and (KRaft,
// Kafka 3.7 and later) the directory.
const MetaFile = "meta.properties"

// Meta is a parsed meta.properties (a Java properties file of key=value lines).
type Meta struct {
	Props map[string]string
}

// ReadMeta reads dir/meta.properties; a missing file is an error that satisfies
// errors.Is(err, fs.ErrNotExist).
func ReadMeta(dir string) (*Meta, error) {
	data, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		return nil, err
	}
	return ParseMeta(data), nil
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

// String shows the identifying keys, in a fixed order.
func (m *Meta) String() string {
	var parts []string
	for _, k := range []string{"broker.id", "node.id", "cluster.id", "directory.id", "version"} {
		if v, ok := m.Props[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s", k, v))
		}
	}
	if len(parts) == 0 {
		return "(no broker.id, node.id, cluster.id or directory.id)"
	}
	return strings.Join(parts, " ")
}
