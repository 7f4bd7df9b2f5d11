package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
)

const mib = 1 << 20

func TestFormatBytes(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{120 * mib, "120.0 MiB"},
		{300*mib + 512*1024, "300.5 MiB"},
		{5 << 30, "5.0 GiB"},
		{1 << 40, "1.0 TiB"},
		{math.MaxInt64, "8.0 EiB"},
	} {
		if got := formatBytes(tt.n); got != tt.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestParseProgress(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		ok   bool
		want progressReport
	}{
		{`{"id":"ev-1","batch":2,"batches":3,"partitions_done":3,"partitions_total":8,"bytes_copied":10,"bytes_expected":20}`, true,
			progressReport{ID: "ev-1", Batch: 2, Batches: 3, PartitionsDone: 3, PartitionsTotal: 8, BytesCopied: 10, BytesExpected: 20}},
		{`{"partitions_total":4,"new_field":"tolerated"}`, true, progressReport{PartitionsTotal: 4}},
		{`{"id":"ev-1","step":"plan","partitions":1}`, false, progressReport{}},
		{`{"partitions_total":"four"}`, false, progressReport{}},
		{`[1,2]`, false, progressReport{}},
		{`null`, false, progressReport{}},
		{`not json`, false, progressReport{}},
	} {
		got, ok := parseProgress([]byte(tt.raw))
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("parseProgress(%s) = %+v, %v; want %+v, %v", tt.raw, got, ok, tt.want, tt.ok)
		}
	}
}

// TestProgressLines has the golden lines of a few reports: the plain line
// (stderr not a terminal) and the bar (a terminal).
func TestProgressLines(t *testing.T) {
	for _, tt := range []struct {
		name  string
		p     progressReport
		plain string
		bar   string
	}{
		{"midway",
			progressReport{Batch: 2, Batches: 3, PartitionsDone: 3, PartitionsTotal: 8, BytesCopied: 120 * mib, BytesExpected: 300 * mib},
			"3/8 partitions  120.0 MiB / 300.0 MiB  batch 2/3",
			"[========>               ] 3/8 partitions  120.0 MiB / 300.0 MiB  batch 2/3"},
		{"nothing yet, sizes unknown, no batches",
			progressReport{PartitionsTotal: 4},
			"0/4 partitions",
			"[                        ] 0/4 partitions"},
		{"sizes unknown: the bar counts partitions",
			progressReport{Batch: 1, Batches: 2, PartitionsDone: 1, PartitionsTotal: 2},
			"1/2 partitions  batch 1/2",
			"[===========>            ] 1/2 partitions  batch 1/2"},
		{"expected size unknown, some copied",
			progressReport{Batch: 1, Batches: 1, PartitionsDone: 0, PartitionsTotal: 3, BytesCopied: 512},
			"0/3 partitions  512 B copied  batch 1/1",
			"[                        ] 0/3 partitions  512 B copied  batch 1/1"},
		{"bytes all there, partitions not done: the bar is not full",
			progressReport{Batch: 3, Batches: 3, PartitionsDone: 7, PartitionsTotal: 8, BytesCopied: 300 * mib, BytesExpected: 300 * mib},
			"7/8 partitions  300.0 MiB / 300.0 MiB  batch 3/3",
			"[======================> ] 7/8 partitions  300.0 MiB / 300.0 MiB  batch 3/3"},
		{"done",
			progressReport{Batch: 3, Batches: 3, PartitionsDone: 8, PartitionsTotal: 8, BytesCopied: 290 * mib, BytesExpected: 300 * mib},
			"8/8 partitions  290.0 MiB / 300.0 MiB  batch 3/3",
			"[========================] 8/8 partitions  290.0 MiB / 300.0 MiB  batch 3/3"},
		{"more copied than expected",
			progressReport{Batch: 1, Batches: 1, PartitionsDone: 0, PartitionsTotal: 1, BytesCopied: 3 * mib, BytesExpected: 2 * mib},
			"0/1 partitions  3.0 MiB / 2.0 MiB  batch 1/1",
			"[======================> ] 0/1 partitions  3.0 MiB / 2.0 MiB  batch 1/1"},
		{"long text: the bar narrows to fit 79 columns",
			progressReport{Batch: 12, Batches: 34, PartitionsDone: 1234, PartitionsTotal: 5678, BytesCopied: 1023 << 30, BytesExpected: 2 << 40},
			"1234/5678 partitions  1023.0 GiB / 2.0 TiB  batch 12/34",
			"[=========>           ] 1234/5678 partitions  1023.0 GiB / 2.0 TiB  batch 12/34"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.text(); got != tt.plain {
				t.Errorf("text:\n got %q\nwant %q", got, tt.plain)
			}
			got := tt.p.barLine()
			if got != tt.bar {
				t.Errorf("bar:\n got %q\nwant %q", got, tt.bar)
			}
			if n := len(got); n > progressLineMax {
				t.Errorf("bar line is %d columns, more than %d", n, progressLineMax)
			}
		})
	}
}

// progressJSON is a progress report as the worker publishes it.
func progressJSON(done, total int, copied, expected int64, batch, batches int) []byte {
	return fmt.Appendf(nil, `{"id":"ev-1","batch":%d,"batches":%d,"partitions_done":%d,"partitions_total":%d,"bytes_copied":%d,"bytes_expected":%d}`,
		batch, batches, done, total, copied, expected)
}

func TestProgressPrinterPlain(t *testing.T) {
	var w bytes.Buffer
	p := &progressPrinter{w: &w}
	p.report(progressJSON(3, 8, 120*mib, 300*mib, 2, 3))
	p.report([]byte(`{"id":"ev-1","step":"plan","partitions":1}` + "\n"))
	p.report(progressJSON(8, 8, 300*mib, 300*mib, 3, 3))
	p.endLine()
	want := "progress: 3/8 partitions  120.0 MiB / 300.0 MiB  batch 2/3\n" +
		`progress: {"id":"ev-1","step":"plan","partitions":1}` + "\n" +
		"progress: 8/8 partitions  300.0 MiB / 300.0 MiB  batch 3/3\n"
	if got := w.String(); got != want {
		t.Errorf("plain output:\n got %q\nwant %q", got, want)
	}
}

// TestProgressPrinterLive: on a terminal the bar is redrawn in place with \r,
// a shorter line blanks what the longer one left, a report of unknown shape
// goes on a line of its own, and endLine ends the bar's line once.
func TestProgressPrinterLive(t *testing.T) {
	var w bytes.Buffer
	p := &progressPrinter{w: &w, live: true}
	p.endLine() // nothing shown: nothing to end
	p.report(progressJSON(3, 8, 120*mib, 300*mib, 2, 3))
	p.report(progressJSON(4, 8, 0, 0, 2, 3))
	p.report([]byte(`{"id":"ev-1","step":"verify"}`))
	p.report(progressJSON(8, 8, 300*mib, 300*mib, 3, 3))
	p.endLine()
	p.endLine()

	first := "[========>               ] 3/8 partitions  120.0 MiB / 300.0 MiB  batch 2/3"
	second := "[===========>            ] 4/8 partitions  batch 2/3"
	want := "\r" + first +
		"\r" + second + strings.Repeat(" ", len(first)-len(second)) +
		"\n" + `progress: {"id":"ev-1","step":"verify"}` + "\n" +
		"\r[========================] 8/8 partitions  300.0 MiB / 300.0 MiB  batch 3/3" +
		"\n"
	if got := w.String(); got != want {
		t.Errorf("live output:\n got %q\nwant %q", got, want)
	}
}
