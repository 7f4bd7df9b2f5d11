package main

// Showing the progress reports a worker publishes while it waits for replicas
// to copy (kafkamender.progress.<id>): a live progress bar on a terminal, one
// plain line per report otherwise, and the report as it came when it is of a
// shape the emitter does not know.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/kafkamender/kafkamender/internal/events"
)

// progressReport is a progress report of a copy, as the worker publishes it (the
// contract's events.Progress), with the emitter's ways of showing it.
type progressReport events.Progress

// parseProgress reads a progress report of a replica copy: a JSON object with
// partitions_total. ok is false for any other payload.
func parseProgress(raw []byte) (p progressReport, ok bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return p, false
	}
	if _, ok := fields["partitions_total"]; !ok {
		return p, false
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, false
	}
	return p, true
}

// text describes the report in a few words:
//
//	3/8 partitions  120.0 MiB / 300.0 MiB  batch 2/3
//
// The sizes are left out when the worker could not tell them (0), the batch
// when there are no batches.
func (p progressReport) text() string {
	parts := []string{fmt.Sprintf("%d/%d partitions", p.PartitionsDone, p.PartitionsTotal)}
	switch {
	case p.BytesExpected > 0:
		parts = append(parts, formatBytes(p.BytesCopied)+" / "+formatBytes(p.BytesExpected))
	case p.BytesCopied > 0:
		parts = append(parts, formatBytes(p.BytesCopied)+" copied")
	}
	if p.Batches > 0 {
		parts = append(parts, fmt.Sprintf("batch %d/%d", p.Batch, p.Batches))
	}
	return strings.Join(parts, "  ")
}

// fraction is how much of the copy is done, from 0 to 1: by bytes when the
// worker knows how many to expect, else by partitions. It is 1 only when
// every partition is done (bytes can all be there before the reassignment
// completes).
func (p progressReport) fraction() float64 {
	done := p.PartitionsTotal > 0 && p.PartitionsDone >= p.PartitionsTotal
	var f float64
	switch {
	case done:
		return 1
	case p.BytesExpected > 0:
		f = float64(p.BytesCopied) / float64(p.BytesExpected)
	case p.PartitionsTotal > 0:
		f = float64(p.PartitionsDone) / float64(p.PartitionsTotal)
	}
	return min(max(f, 0), 0.999)
}

// Widths of the live progress line.
const (
	progressBarWidth    = 24 // between the brackets
	progressBarMinWidth = 10
	progressLineMax     = 79 // a line longer than the terminal wraps, and \r no longer redraws it
)

// barLine is the report as a progress bar and its text:
//
//	[========>               ] 3/8 partitions  120.0 MiB / 300.0 MiB  batch 2/3
//
// The bar narrows when the text is long, so that the line fits in 79 columns.
func (p progressReport) barLine() string {
	text := p.text()
	width := progressBarWidth
	if over := 2 + width + 1 + utf8.RuneCountInString(text) - progressLineMax; over > 0 {
		width = max(width-over, progressBarMinWidth)
	}
	return progressBar(p.fraction(), width) + " " + text
}

// progressBar draws fraction f of width cells: "[=====>    ]".
func progressBar(f float64, width int) string {
	n := min(int(f*float64(width)), width)
	switch {
	case n <= 0:
		return "[" + strings.Repeat(" ", width) + "]"
	case n == width:
		return "[" + strings.Repeat("=", width) + "]"
	default:
		return "[" + strings.Repeat("=", n-1) + ">" + strings.Repeat(" ", width-n) + "]"
	}
}

// formatBytes writes a size in bytes with a binary unit: "512 B", "120.0 MiB".
func formatBytes(n int64) string { return events.BytesText(n) }

// progressPrinter prints the progress reports of one event on w. Live, it
// redraws one line with carriage returns (for a terminal); otherwise it
// prints a line per report.
type progressPrinter struct {
	w     io.Writer
	live  bool
	shown int // columns of the live line on screen; 0: none is
}

// report prints a progress report as it came on the progress subject.
func (p *progressPrinter) report(raw []byte) {
	rep, ok := parseProgress(raw)
	switch {
	case !ok:
		p.endLine()
		fmt.Fprintf(p.w, "progress: %s\n", bytes.TrimSpace(raw))
	case !p.live:
		fmt.Fprintf(p.w, "progress: %s\n", rep.text())
	default:
		line := rep.barLine()
		n := utf8.RuneCountInString(line)
		// Blank what a longer earlier line left.
		fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", max(p.shown-n, 0)))
		p.shown = max(n, 1)
	}
}

// endLine ends the live line, if one is shown, so that what is printed next
// starts on a line of its own. The last bar stays on screen.
func (p *progressPrinter) endLine() {
	if p.shown > 0 {
		fmt.Fprintln(p.w)
		p.shown = 0
	}
}
