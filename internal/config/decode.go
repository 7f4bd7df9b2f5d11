package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeStrict decodes data into cfg, refusing unknown and duplicated keys,
// and rewrites yaml.v3's errors, which name Go types and line numbers, into
// errors that name the field path, keeping the line number as a hint.
func decodeStrict(data []byte, cfg *Config) error {
	// The node tree gives syntax errors, and later maps line numbers back
	// to field paths.
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("parse yaml: %w", err)
	}
	if len(doc.Content) == 0 {
		return errors.New("config is empty")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("config: want a mapping at the top level, got %s (line %d)", describeTag(root.ShortTag()), root.Line)
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(cfg)
	var te *yaml.TypeError
	switch {
	case errors.As(err, &te):
		idx := indexNodes(root)
		errs := make([]error, 0, len(te.Errors))
		for _, msg := range te.Errors {
			errs = append(errs, idx.translate(msg))
		}
		return errors.Join(errs...)
	case err != nil:
		return fmt.Errorf("parse yaml: %w", err)
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return errors.New("config holds more than one YAML document")
	}
	return nil
}

// nodeRef places one node of the document: a mapping key (key != "") or a
// value.
type nodeRef struct {
	line int
	path string // the key's mapping for a key, the value's own path otherwise
	key  string
	node *yaml.Node
}

type nodeIndex struct{ refs []nodeRef }

func indexNodes(root *yaml.Node) *nodeIndex {
	idx := &nodeIndex{}
	idx.walk(root, "")
	return idx
}

func (idx *nodeIndex) walk(n *yaml.Node, path string) {
	idx.refs = append(idx.refs, nodeRef{line: n.Line, path: path, node: n})
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			idx.refs = append(idx.refs, nodeRef{line: k.Line, path: path, key: k.Value, node: k})
			idx.walk(v, pathJoin(path, k.Value))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			idx.walk(c, fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// key finds the mapping key named name on line.
func (idx *nodeIndex) key(line int, name string) (nodeRef, bool) {
	for _, r := range idx.refs {
		if r.key != "" && r.line == line && r.key == name {
			return r, true
		}
	}
	return nodeRef{}, false
}

// value finds the value node on line that yaml.v3 described by its tag and
// (for scalars) its possibly truncated value.
func (idx *nodeIndex) value(line int, tag, shown string) (nodeRef, bool) {
	var fallback *nodeRef
	for i, r := range idx.refs {
		if r.key != "" || r.line != line || r.node.ShortTag() != tag {
			continue
		}
		if r.node.Kind != yaml.ScalarNode || shown == "" || shownValue(r.node.Value) == shown {
			return r, true
		}
		if fallback == nil {
			fallback = &idx.refs[i]
		}
	}
	if fallback != nil {
		return *fallback, true
	}
	return nodeRef{}, false
}

// at finds the value node at line and column.
func (idx *nodeIndex) at(line, col int) (nodeRef, bool) {
	for _, r := range idx.refs {
		if r.key == "" && r.line == line && r.node.Column == col {
			return r, true
		}
	}
	return nodeRef{}, false
}

// shownValue truncates a scalar the way yaml.v3 does in its messages.
func shownValue(v string) string {
	if len(v) > 10 {
		return v[:7] + "..."
	}
	return v
}

var (
	reLine      = regexp.MustCompile(`^line (\d+): (.*)$`)
	reNotFound  = regexp.MustCompile(`^field (.+) not found in type \S+$`)
	reSetTwice  = regexp.MustCompile(`^field (.+) already set in type \S+$`)
	reDuplicate = regexp.MustCompile(`^mapping key "(.*)" already defined at line (\d+)$`)
	reUnmarshal = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `(.*)`)? into (\\S+)$")
	reColumn    = regexp.MustCompile(`^(.+) \(column (\d+)\)$`) // Secret.UnmarshalYAML's
)

// translate rewrites one message of a yaml.TypeError. Messages it does not
// recognise are kept as they are.
func (idx *nodeIndex) translate(msg string) error {
	m := reLine.FindStringSubmatch(msg)
	if m == nil {
		return errors.New(msg)
	}
	line, _ := strconv.Atoi(m[1])
	rest := m[2]
	at := fmt.Sprintf(" (line %d)", line)

	if m := reNotFound.FindStringSubmatch(rest); m != nil {
		if r, ok := idx.key(line, m[1]); ok {
			return &fieldError{path: r.path, err: fmt.Errorf("unknown field %q%s", m[1], at)}
		}
	}
	if m := reDuplicate.FindStringSubmatch(rest); m != nil {
		if r, ok := idx.key(line, m[1]); ok {
			return &fieldError{path: r.path, err: fmt.Errorf("duplicate key %q (lines %s and %d)", m[1], m[2], line)}
		}
	}
	if m := reSetTwice.FindStringSubmatch(rest); m != nil {
		if r, ok := idx.key(line, m[1]); ok {
			return &fieldError{path: r.path, err: fmt.Errorf("duplicate key %q%s", m[1], at)}
		}
	}
	if m := reColumn.FindStringSubmatch(rest); m != nil {
		col, _ := strconv.Atoi(m[2])
		if r, ok := idx.at(line, col); ok {
			if m[1] == errSecretInFile {
				return &fieldError{path: r.path, err: fmt.Errorf("%s: use %s_file or %s%s", errSecretInFile, r.path, envName(r.path), at)}
			}
			return &fieldError{path: r.path, err: fmt.Errorf("%s%s", m[1], at)}
		}
	}
	if m := reUnmarshal.FindStringSubmatch(rest); m != nil {
		tag, shown, goType := m[1], m[2], m[3]
		if r, ok := idx.value(line, tag, shown); ok {
			return &fieldError{path: r.path, err: mismatch(r.node, goType, at)}
		}
	}
	return fmt.Errorf("line %d: %s", line, rest)
}

// mismatch explains a value of the wrong type.
func mismatch(n *yaml.Node, goType, at string) error {
	if goType == "time.Duration" {
		if n.Kind == yaml.ScalarNode {
			return fmt.Errorf("bad duration %q (want a number with a unit, such as 10s or 5m)%s", n.Value, at)
		}
		return fmt.Errorf("want a duration such as 10s or 5m, got %s%s", describeTag(n.ShortTag()), at)
	}
	return fmt.Errorf("want %s, got %s%s", describeGoType(goType), describeTag(n.ShortTag()), at)
}

func describeGoType(t string) string {
	switch {
	case t == "string" || t == "config.Strategy" || t == "config.LockBackend" || t == "config.Secret" || t == "config.NATSURLs":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case strings.HasPrefix(t, "config.") || strings.HasPrefix(t, "*config."):
		return "a mapping"
	default:
		return t
	}
}

func describeTag(tag string) string {
	switch tag {
	case "!!map":
		return "a mapping"
	case "!!seq":
		return "a list"
	case "!!str":
		return "a string"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "nothing"
	default:
		return tag
	}
}
