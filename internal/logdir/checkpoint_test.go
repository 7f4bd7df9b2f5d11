package logdir_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/logdir"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func tp(topic string, p int32) logdir.TP { return logdir.TP{Topic: topic, Partition: p} }

func entry(topic string, p int32, off int64) logdir.Entry {
	return logdir.Entry{TP: tp(topic, p), Offset: off}
}

// Every way a checkpoint file can be malformed is an error naming the file and the line.
func TestCheckpointParseErrors(t *testing.T) {
	const name = "recovery-point-offset-checkpoint"
	for _, tc := range []struct {
		name, data, want string
	}{
		{"wrong version", "1\n0\n", name + `:1: want format version "0"`},
		{"version with a sign", "+0\n0\n", name + `:1: want format version "0"`},
		{"blank first line", "\n0\n", name + `:1: want format version "0"`},
		{"only the version", "0\n", name + ":2: want the number of entries, got the end of the file"},
		{"negative count", "0\n-1\n", name + `:2: want the number of entries (a non-negative integer)`},
		{"count not a number", "0\nx\n", name + `:2: want the number of entries (a non-negative integer)`},
		{"count with spaces", "0\n 1\nt 0 1\n", name + `:2: want the number of entries (a non-negative integer)`},
		{"count too big", "0\n99999999999\n", name + `:2: want the number of entries (a non-negative integer)`},
		{"too few entries", "0\n2\nt 0 1\n", name + ":4: the file ends after 1 entries, but line 2 announces 2"},
		{"too few, no entries", "0\n1\n", name + ":3: the file ends after 0 entries, but line 2 announces 1"},
		{"too many entries", "0\n1\nt 0 1\nt 1 1\n", name + ":4: more entries than the 1 that line 2 announces"},
		{"two fields", "0\n1\nx y\n", name + `:3: want "<topic> <partition> <offset>": three fields separated by single spaces`},
		{"four fields", "0\n1\nt 0 1 2\n", name + `:3: want "<topic> <partition> <offset>": three fields separated by single spaces`},
		{"two spaces", "0\n1\nt  0 1\n", name + `:3: want "<topic> <partition> <offset>": three fields separated by single spaces`},
		{"trailing space", "0\n1\nt 0 1 \n", name + `:3: want "<topic> <partition> <offset>": three fields separated by single spaces`},
		{"tab", "0\n1\nt\t0 1\n", name + `:3: want "<topic> <partition> <offset>": three fields separated by single spaces`},
		{"blank entry line", "0\n2\nt 0 1\n\nt 1 1\n", name + `:4: blank line: want "<topic> <partition> <offset>"`},
		{"blank line at the end", "0\n1\nt 0 1\n\n", name + ":4: more entries than the 1 that line 2 announces"},
		{"CRLF", "0\r\n0\r\n", name + `:1: carriage return: line ends must be "\n"`},
		{"CR in an entry", "0\n1\nt 0 1\r\n", name + `:3: carriage return: line ends must be "\n"`},
		{"negative partition", "0\n1\nt -1 5\n", name + `:3: bad partition: want a non-negative int32 in canonical decimal`},
		{"partition too big", "0\n1\nt 2147483648 5\n", name + `:3: bad partition: want a non-negative int32 in canonical decimal`},
		{"partition with a leading zero", "0\n1\nt 07 5\n", name + `:3: bad partition: want a non-negative int32 in canonical decimal`},
		{"partition not a number", "0\n1\nt p 5\n", name + `:3: bad partition: want a non-negative int32 in canonical decimal`},
		{"offset not a number", "0\n1\nt 0 five\n", name + `:3: bad offset: want an int64`},
		{"offset with a plus", "0\n1\nt 0 +5\n", name + `:3: bad offset: want an int64`},
		{"offset too big", "0\n1\nt 0 9223372036854775808\n", name + `:3: bad offset: want an int64`},
		{"offset a lone minus", "0\n1\nt 0 -\n", name + `:3: bad offset: want an int64`},
		{"bad topic character", "0\n1\nt/x 0 5\n", name + `:3: bad topic: character 2 is not in [a-zA-Z0-9._-]`},
		{"topic dot-dot", "0\n1\n.. 0 5\n", name + `:3: bad topic: want 1 to 249 characters of [a-zA-Z0-9._-], not "." or ".."`},
		{"topic too long", "0\n1\n" + strings.Repeat("a", 250) + " 0 5\n", name + `:3: bad topic: want 1 to 249 characters of [a-zA-Z0-9._-], not "." or ".."`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp, err := logdir.ParseCheckpoint(name, []byte(tc.data))
			if err == nil {
				t.Fatalf("parsed %q as %+v, want an error", tc.data, cp)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n  %s\nwant\n  %s", err, tc.want)
			}
			var pe *logdir.ParseError
			if !errors.As(err, &pe) || pe.File != name || pe.Line < 1 {
				t.Errorf("not a ParseError with the file and line: %#v", err)
			}
		})
	}
}

// A parse error names the file, the line and what is wrong, never the content: a
// checkpoint file may hold (or be a link to) something this tool must not disclose.
func TestCheckpointParseErrorsHideContent(t *testing.T) {
	const secret = "hunter2-TOPSECRET"
	for _, data := range []string{
		secret,
		secret + "\n0\n",
		"0\n" + secret + "\n",
		"0\n1\n" + secret + "\n",
		"0\n1\n" + secret + " 0 1 2\n",
		"0\n1\nt " + secret + " 5\n",
		"0\n1\nt 0 " + secret + "\n",
		"0\n1\n" + secret + "/x 0 5\n",
		"0\n1\n" + secret + "\r\n",
		"0\n1\n" + strings.Repeat(secret, 20) + " 0 5\n",
	} {
		_, err := logdir.ParseCheckpoint("f", []byte(data))
		if err == nil {
			t.Fatalf("%q parsed", data)
		}
		for _, part := range []string{secret, "hunter2", "TOPSECRET"} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("the error for %q quotes the content: %v", data, err)
			}
		}
	}
}

func TestCheckpointParse(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []logdir.Entry
	}{
		{"empty file (Kafka creates its checkpoint files empty)", "", nil},
		{"no entries", "0\n0\n", nil},
		{"no entries, no final newline", "0\n0", nil},
		{"entries", "0\n3\norders 0 5\norders 1 0\nmy.topic-with-dashes 12 9223372036854775807\n",
			[]logdir.Entry{entry("orders", 0, 5), entry("orders", 1, 0), entry("my.topic-with-dashes", 12, 9223372036854775807)}},
		{"no final newline", "0\n1\nt 0 5", []logdir.Entry{entry("t", 0, 5)}},
		{"negative offset", "0\n1\nt 0 -1\n", []logdir.Entry{entry("t", 0, -1)}},
		{"duplicates are kept, in order", "0\n3\nt 0 5\nu 0 1\nt 0 7\n", []logdir.Entry{entry("t", 0, 5), entry("u", 0, 1), entry("t", 0, 7)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp, err := logdir.ParseCheckpoint("f", []byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if cp.Version != 0 || !slices.Equal(cp.Entries, tc.want) {
				t.Errorf("parsed %+v, want %v", cp, tc.want)
			}
		})
	}
}

// Duplicates parse, and Problems names the file and the line of each repeat.
func TestCheckpointProblems(t *testing.T) {
	cp, err := logdir.ParseCheckpoint("replication-offset-checkpoint", []byte("0\n4\nt 0 5\nu 0 1\nt 0 7\nt 0 9\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"replication-offset-checkpoint:5: t-0 is listed again (first on line 3)",
		"replication-offset-checkpoint:6: t-0 is listed again (first on line 3)",
	}
	if got := cp.Problems("replication-offset-checkpoint"); !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
	if got := (&logdir.Checkpoint{Entries: []logdir.Entry{entry("t", 0, 1)}}).Problems("f"); got != nil {
		t.Errorf("problems of a clean checkpoint: %q", got)
	}
}

// The writer's output is Kafka's format byte for byte (golden files), and Set and Remove
// keep the other entries' order.
func TestCheckpointWriteGolden(t *testing.T) {
	cp := &logdir.Checkpoint{Entries: []logdir.Entry{
		entry("orders", 0, 1200), entry("orders", 1, 1187), entry("__consumer_offsets", 17, 0), entry("my.events-v2", 3, 42),
	}}
	golden(t, "checkpoint/written.golden", cp.Bytes())
	golden(t, "checkpoint/empty.golden", (&logdir.Checkpoint{}).Bytes())

	edited := cp.Clone()
	edited.Set(entry("orders", 1, 2000)) // replaced in place
	edited.Set(entry("payments", 0, 7))  // appended
	if !edited.Remove(tp("__consumer_offsets", 17)) || edited.Remove(tp("absent", 0)) {
		t.Error("Remove reported the wrong presence")
	}
	golden(t, "checkpoint/edited.golden", edited.Bytes())
	if slices.Equal(cp.Entries, edited.Entries) {
		t.Error("Clone shares the entries")
	}

	// Golden files are valid checkpoints that write back to themselves.
	for _, name := range []string{"written", "empty", "edited"} {
		data, err := os.ReadFile(filepath.Join("testdata", "checkpoint", name+".golden"))
		if err != nil {
			t.Fatal(err)
		}
		back, err := logdir.ParseCheckpoint(name, data)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back.Bytes(), data) {
			t.Errorf("%s does not write back to itself", name)
		}
	}
}

// A nil Checkpoint is an absent file: no entries, and it clones to an empty one.
func TestCheckpointNil(t *testing.T) {
	var cp *logdir.Checkpoint
	if _, ok := cp.Lookup(tp("t", 0)); ok || cp.Line(tp("t", 0)) != 0 || cp.Problems("f") != nil {
		t.Error("a nil Checkpoint has entries")
	}
	c := cp.Clone()
	c.Set(entry("t", 0, 1))
	if got := string(c.Bytes()); got != "0\n1\nt 0 1\n" {
		t.Errorf("new file %q", got)
	}
}

func TestCheckpointParseTP(t *testing.T) {
	for in, want := range map[string]logdir.TP{
		"orders-0":              tp("orders", 0),
		"my-topic.v2-17":        tp("my-topic.v2", 17),
		"__consumer_offsets-49": tp("__consumer_offsets", 49),
		"a--1":                  tp("a-", 1),
	} {
		got, err := logdir.ParseTP(in)
		if err != nil || got != want {
			t.Errorf("ParseTP(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// Partition numbers are canonical decimal, as Kafka names its folders: "t-07" is not
	// "t-7", and no sign or space is accepted.
	for _, in := range []string{"orders", "orders-", "-0", "orders-x", "orders-2147483648", "a/b-0", "orders-+1",
		"orders-07", "orders-00", "orders-007", "orders- 7", "orders-7 ", "orders-0x7"} {
		if got, err := logdir.ParseTP(in); err == nil {
			t.Errorf("ParseTP(%q) = %v, want an error", in, got)
		}
	}
}

func TestCheckpointClassifyFolder(t *testing.T) {
	for name, want := range map[string]logdir.FolderKind{
		"orders-0":                     logdir.KindPartition,
		"my.topic-with-dashes-12":      logdir.KindPartition,
		"__cluster_metadata-0":         logdir.KindMetadata,
		"orders-0.9f1c2a0b3d4e-delete": logdir.KindDelete,
		"orders-0.9f1c2a0b3d4e-future": logdir.KindFuture,
		"orders-0.9f1c2a0b3d4e-stray":  logdir.KindStray,
		"orders-01":                    logdir.KindUnknown,
		"lost+found":                   logdir.KindUnknown,
		"tmp":                          logdir.KindUnknown,
		"orders-0.kafkamender":         logdir.KindUnknown,
	} {
		if got, _ := logdir.ClassifyFolder(name); got != want {
			t.Errorf("ClassifyFolder(%q) = %s, want %s", name, got, want)
		}
	}
	if _, got := logdir.ClassifyFolder("my.topic-3.abc-future"); got != tp("my.topic", 3) {
		t.Errorf("future folder's partition: %v", got)
	}
	// A non-canonical partition number names no partition: "orders-07.abc-future" is not
	// an online move of orders-7.
	for _, name := range []string{"orders-07.abc-future", "orders-00.abc-delete", "orders-+7.abc-stray"} {
		if kind, got := logdir.ClassifyFolder(name); got != (logdir.TP{}) {
			t.Errorf("ClassifyFolder(%q) = %s, %v; want no partition", name, kind, got)
		}
	}
}

// FuzzParseCheckpoint: nothing panics, and whatever parses writes back to a file that
// parses to the same entries and writes back to the same bytes.
func FuzzParseCheckpoint(f *testing.F) {
	for _, seed := range []string{
		"", "0\n0\n", "0\n1\nt 0 5\n", "0\n2\norders 0 1200\nmy.topic-x 3 -1", "0\n1\nt 0 5\r\n", "1\n0\n",
		"0\n2\nt 0 1\nt 0 2\n", "0\n1\nx y\n", "0\n-1\n", "0\n1\nt 2147483647 9223372036854775807\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cp, err := logdir.ParseCheckpoint("f", data)
		if err != nil {
			var pe *logdir.ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		out := cp.Bytes()
		back, err := logdir.ParseCheckpoint("f", out)
		if err != nil {
			t.Fatalf("written file does not parse: %v\n%q", err, out)
		}
		if !slices.Equal(back.Entries, cp.Entries) || back.Version != cp.Version {
			t.Fatalf("round trip changed the entries: %v -> %v", cp.Entries, back.Entries)
		}
		if !bytes.Equal(back.Bytes(), out) {
			t.Fatalf("writing is not stable: %q -> %q", out, back.Bytes())
		}
	})
}

// A partition name parses only when it is the canonical name of what it parses to (the
// folder Kafka would make: "t-07" is not "t-7"), with a topic Kafka allows and a partition
// that is not negative; ClassifyFolder says the same of a folder so named.
func FuzzParseTP(f *testing.F) {
	for _, s := range []string{"orders-0", "orders-7", "t-07", "t--1", "a.b-c-12", "-1", "t-", "t-2147483647", "t-2147483648",
		"t-+1", "t- 1", "t-1 ", "..-0", ".-0", "__cluster_metadata-0", "t-1.abc-future", strings.Repeat("x", 250) + "-0", "ü-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := logdir.ParseTP(s)
		if err != nil {
			if kind, _ := logdir.ClassifyFolder(s); kind == logdir.KindPartition || kind == logdir.KindMetadata {
				t.Fatalf("logdir.ClassifyFolder(%q) = %s, but ParseTP refuses it: %v", s, kind, err)
			}
			return
		}
		if tp.String() != s {
			t.Fatalf("logdir.ParseTP(%q) = %v, whose name is %q", s, tp, tp.String())
		}
		if tp.Partition < 0 || tp.Topic == "" || len(tp.Topic) > 249 || tp.Topic == "." || tp.Topic == ".." ||
			strings.IndexFunc(tp.Topic, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
			}) >= 0 {
			t.Fatalf("logdir.ParseTP(%q) = %+v: not a partition Kafka can have", s, tp)
		}
	})
}
