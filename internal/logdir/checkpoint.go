package logdir

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kafkamender/kafkamender/internal/events"
)

// The four offset checkpoint files at the root of every Kafka log dir. All four use
// format version 0.
const (
	CleanerOffsetCheckpoint     = "cleaner-offset-checkpoint"
	LogStartOffsetCheckpoint    = "log-start-offset-checkpoint"
	RecoveryPointCheckpoint     = "recovery-point-offset-checkpoint"
	ReplicationOffsetCheckpoint = "replication-offset-checkpoint"
)

// CheckpointFiles lists the four checkpoint files in the order the tool reads, writes and
// prints them.
var CheckpointFiles = [...]string{
	CleanerOffsetCheckpoint,
	LogStartOffsetCheckpoint,
	RecoveryPointCheckpoint,
	ReplicationOffsetCheckpoint,
}

// CheckpointVersion is the only format version of the four checkpoint files.
const CheckpointVersion = 0

// entryFormat is how a checkpoint entry line looks; error messages quote it.
const entryFormat = "<topic> <partition> <offset>"

// firstEntryLine is the 1-based line of the first entry: line 1 is the version, line 2
// the number of entries.
const firstEntryLine = 3

// TP names a topic partition, as Kafka names its folder: "<topic>-<partition>".
type TP struct {
	Topic     string
	Partition int32
}

// String is the folder name of the partition, "<topic>-<partition>".
func (tp TP) String() string { return tp.Topic + "-" + strconv.FormatInt(int64(tp.Partition), 10) }

// ParseTP parses "<topic>-<partition>". Topic names may contain '-' and '.': the
// partition is what follows the last '-', in canonical decimal ("t-07" is an error, not
// "t-7").
func ParseTP(s string) (TP, error) {
	i := strings.LastIndexByte(s, '-')
	if i < 0 {
		return TP{}, fmt.Errorf("partition %q: want <topic>-<partition>", s)
	}
	topic, part := s[:i], s[i+1:]
	if err := validTopic(topic); err != nil {
		return TP{}, fmt.Errorf("partition %q: %w", s, err)
	}
	p, err := parsePartition(part)
	if err != nil {
		return TP{}, fmt.Errorf("partition %q: %w", s, err)
	}
	return TP{Topic: topic, Partition: p}, nil
}

// Entry is one line of a checkpoint file: a partition and its offset.
type Entry struct {
	TP
	Offset int64
}

// Checkpoint is a parsed checkpoint file. Entries keep the file's order, duplicates
// included (see Problems).
type Checkpoint struct {
	Version int
	Entries []Entry
}

// ParseError is a malformed checkpoint file: the file, the 1-based line and what is wrong.
// Msg never quotes the file's bytes: a checkpoint file may be a link to (or the copy of)
// a file this process must not disclose, and errors end up in logs and terminals.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// ParseCheckpoint parses a checkpoint file strictly: version 0, the number of entries,
// then exactly that many "<topic> <partition> <offset>" lines with single spaces and '\n'
// line ends (the last one may be missing). Blank lines, CR characters, extra fields, a
// partition that is not a non-negative int32 in canonical decimal and an offset that is
// not an int64 are errors naming the file, the line and what is wrong, never the content.
// An empty file is an empty checkpoint: Kafka creates its checkpoint files empty and reads
// them so.
func ParseCheckpoint(name string, data []byte) (*Checkpoint, error) {
	if len(data) == 0 {
		return &Checkpoint{Version: CheckpointVersion}, nil
	}
	lines := strings.Split(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	fail := func(line int, format string, args ...any) error {
		return &ParseError{File: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	for i, l := range lines {
		if strings.ContainsRune(l, '\r') {
			return nil, fail(i+1, "carriage return: line ends must be \"\\n\"")
		}
	}
	if len(lines) == 0 || lines[0] != strconv.Itoa(CheckpointVersion) {
		return nil, fail(1, "want format version \"%d\"", CheckpointVersion)
	}
	if len(lines) < 2 {
		return nil, fail(2, "want the number of entries, got the end of the file")
	}
	count, err := parseCount(lines[1])
	if err != nil {
		return nil, fail(2, "want the number of entries (a non-negative integer)")
	}
	cp := &Checkpoint{Version: CheckpointVersion}
	for i, l := range lines[2:] {
		line := i + firstEntryLine
		if i == count {
			return nil, fail(line, "more entries than the %d that line 2 announces", count)
		}
		e, err := parseEntry(l)
		if err != nil {
			return nil, fail(line, "%v", err)
		}
		cp.Entries = append(cp.Entries, e)
	}
	if len(cp.Entries) < count {
		return nil, fail(len(lines)+1, "the file ends after %d entries, but line 2 announces %d", len(cp.Entries), count)
	}
	return cp, nil
}

func parseEntry(l string) (Entry, error) {
	f := strings.Split(l, " ")
	if l == "" {
		return Entry{}, fmt.Errorf("blank line: want %q", entryFormat)
	}
	if len(f) != 3 || slices.Contains(f, "") {
		return Entry{}, fmt.Errorf("want %q: three fields separated by single spaces", entryFormat)
	}
	if err := validTopic(f[0]); err != nil {
		return Entry{}, err
	}
	p, err := parsePartition(f[1])
	if err != nil {
		return Entry{}, err
	}
	off, err := parseOffset(f[2])
	if err != nil {
		return Entry{}, err
	}
	return Entry{TP: TP{Topic: f[0], Partition: p}, Offset: off}, nil
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parseCount(s string) (int, error) {
	if !digits(s) {
		return 0, errors.New("not a non-negative integer")
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// canonical reports whether s is a non-negative integer in canonical decimal: digits
// only, and no leading zero but in "0" itself. Kafka writes partition numbers so, in
// folder names and checkpoint files alike; "07" is not partition 7 to this tool.
func canonical(s string) bool {
	return digits(s) && (s == "0" || s[0] != '0')
}

func parsePartition(s string) (int32, error) {
	if !canonical(s) {
		return 0, errBadPartition
	}
	p, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, errBadPartition
	}
	return int32(p), nil
}

func parseOffset(s string) (int64, error) {
	if !digits(strings.TrimPrefix(s, "-")) {
		return 0, errBadOffset
	}
	off, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errBadOffset
	}
	return off, nil
}

// The errors of the fields of a checkpoint entry (and of ParseTP): they say what is
// wrong, not what the field holds.
var (
	errBadPartition = errors.New("bad partition: want a non-negative int32 in canonical decimal")
	errBadOffset    = errors.New("bad offset: want an int64")
)

// validTopic applies Kafka's rules for topic names (events.CheckTopicName): 1 to 249
// characters of [a-zA-Z0-9._-], and not "." or "..". The error gives the position of a bad
// character, not the character.
func validTopic(t string) error {
	if t == "" || t == "." || t == ".." || len(t) > events.MaxTopicNameLength {
		return fmt.Errorf("bad topic: want 1 to %d characters of [a-zA-Z0-9._-], not \".\" or \"..\"", events.MaxTopicNameLength)
	}
	for i := 0; i < len(t); i++ {
		if !events.IsTopicNameByte(t[i]) {
			return fmt.Errorf("bad topic: character %d is not in [a-zA-Z0-9._-]", i+1)
		}
	}
	return nil
}

// Bytes is the file as Kafka writes it: the version, the number of entries and one
// "<topic> <partition> <offset>" line per entry, each line ending in '\n'.
func (c *Checkpoint) Bytes() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", c.Version, len(c.Entries))
	for _, e := range c.Entries {
		fmt.Fprintf(&b, "%s %d %d\n", e.Topic, e.Partition, e.Offset)
	}
	return b.Bytes()
}

// Clone returns a deep copy; a nil Checkpoint (an absent file) clones to an empty one.
func (c *Checkpoint) Clone() *Checkpoint {
	if c == nil {
		return &Checkpoint{Version: CheckpointVersion}
	}
	return &Checkpoint{Version: c.Version, Entries: slices.Clone(c.Entries)}
}

// Lookup returns the first entry of tp. A nil Checkpoint has no entries.
func (c *Checkpoint) Lookup(tp TP) (Entry, bool) {
	if c == nil {
		return Entry{}, false
	}
	for _, e := range c.Entries {
		if e.TP == tp {
			return e, true
		}
	}
	return Entry{}, false
}

// Line returns the 1-based line of tp's first entry, or 0.
func (c *Checkpoint) Line(tp TP) int {
	if c == nil {
		return 0
	}
	for i, e := range c.Entries {
		if e.TP == tp {
			return i + firstEntryLine
		}
	}
	return 0
}

// Set replaces the entry of e's partition in place, or appends e when there is none.
func (c *Checkpoint) Set(e Entry) {
	for i := range c.Entries {
		if c.Entries[i].TP == e.TP {
			c.Entries[i] = e
			return
		}
	}
	c.Entries = append(c.Entries, e)
}

// Remove deletes every entry of tp and reports whether there was one. The other entries
// keep their order.
func (c *Checkpoint) Remove(tp TP) bool {
	n := len(c.Entries)
	c.Entries = slices.DeleteFunc(c.Entries, func(e Entry) bool { return e.TP == tp })
	return len(c.Entries) != n
}

// Problems lists what is inconsistent in a checkpoint that parsed: partitions listed more
// than once, each naming the file and the line of the repeat. Kafka keeps the last
// value; this tool refuses to edit such a file.
func (c *Checkpoint) Problems(name string) []string {
	if c == nil {
		return nil
	}
	seen := map[TP]int{}
	var out []string
	for i, e := range c.Entries {
		line := i + firstEntryLine
		if firstLine, ok := seen[e.TP]; ok {
			out = append(out, fmt.Sprintf("%s:%d: %s is listed again (first on line %d)", name, line, e.TP, firstLine))
			continue
		}
		seen[e.TP] = line
	}
	return out
}
