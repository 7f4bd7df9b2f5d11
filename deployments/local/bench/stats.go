package main

// The bench's pure logic: summaries of repeated runs, the order contenders run in, the
// table, and parsing what Kafka's tools and `go test -bench` print. No I/O here.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// summary is what repeated runs of one contender came to.
type summary struct {
	n                int
	median, min, max time.Duration
}

// summarize returns the median, min and max of runs (the median of an even count is the
// mean of the middle two). An empty input gives the zero summary.
func summarize(runs []time.Duration) summary {
	n, m, lo, hi := medianRange(runs)
	return summary{n: n, median: m, min: lo, max: hi}
}

// medianRange returns the count, median (the mean of the middle two for an even count),
// minimum and maximum of vs; zeros when it is empty.
func medianRange[T time.Duration | float64](vs []T) (n int, median, lo, hi T) {
	if len(vs) == 0 {
		return 0, 0, 0, 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	median = s[len(s)/2]
	if len(s)%2 == 0 {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return len(s), median, s[0], s[len(s)-1]
}

// spread is the range of the runs around the median, as a share of it: (max-min)/median.
func (s summary) spread() float64 {
	if s.median <= 0 {
		return 0
	}
	return float64(s.max-s.min) / float64(s.median)
}

// String is "median (min–max, n runs)" with durations rounded for reading.
func (s summary) String() string {
	if s.n == 0 {
		return "—"
	}
	return fmt.Sprintf("%s (%s–%s)", short(s.median), short(s.min), short(s.max))
}

// short rounds a duration to three significant digits or so: 1.23s, 456ms, 7.8ms.
func short(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// order is the order the contenders run in, in run number run (0-based): rotated by one
// each run, so that each goes first, in the middle and last as often as the runs allow
// (a cluster warmed by the one before, or a JVM's page cache, favours none of them).
func order[T any](run int, contenders []T) []T {
	n := len(contenders)
	out := make([]T, 0, n)
	for i := range n {
		out = append(out, contenders[(i+run)%n])
	}
	return out
}

// ratio is a/b as "1.23×", or "—" when either is missing.
func ratio(a, b summary) string {
	if a.n == 0 || b.n == 0 || b.median <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", float64(a.median)/float64(b.median))
}

// table renders rows as a Markdown table whose first row is the header, each column
// padded to its widest cell.
func table(rows [][]string) string {
	if len(rows) == 0 {
		return ""
	}
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], len([]rune(c)))
			}
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			b.WriteString(" " + c + strings.Repeat(" ", width[i]-len([]rune(c))) + " |")
		}
		b.WriteString("\n")
	}
	line(rows[0])
	sep := make([]string, len(width))
	for i, w := range width {
		sep[i] = strings.Repeat("-", w)
	}
	line(sep)
	for _, r := range rows[1:] {
		line(r)
	}
	return b.String()
}

// benchMetrics parses the result line of one Go benchmark from `go test -bench` output
// ("BenchmarkX-2   1   123 ns/op   4.5 events/s ..."): each value by its unit. It returns
// one map per result line of the named benchmark, in order.
func benchMetrics(out, name string) []map[string]float64 {
	var all []map[string]float64
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || (f[0] != name && !strings.HasPrefix(f[0], name+"-")) {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // a log line naming the benchmark, not its result
		}
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			m[f[i+1]] = v
		}
		all = append(all, m)
	}
	return all
}

// reassignmentDone reports whether the output of kafka-reassign-partitions --verify says
// every partition's reassignment is complete: Kafka prints "... is still in progress." for
// each one that is not, "... is completed." for each that is, and "There is no active
// reassignment of partition ..., but replica set is ... rather than ..." for one that the
// broker asked does not show as asked (not done: on KRaft, that broker's metadata may
// still lag the controller; the caller runs --verify again).
func reassignmentDone(out string) bool {
	return !strings.Contains(out, "still in progress") && !strings.Contains(out, "There is no active reassignment") &&
		strings.Contains(out, "is completed")
}

// kafkaCall is one request of the worker's Kafka client, as its debug log reports it:
// "wrote <Kind> v<N>" when a request was written, "read <Kind> v<N>" when its response was read.
type kafkaCall struct {
	at      time.Time
	cluster string
	write   bool
	kind    string
	phase   bool // an engine phase (kind names it), not a Kafka request
}

// parseKafkaLog recognises franz-go's per-request debug lines.
func parseKafkaLog(msg string) (kind string, write, ok bool) {
	f := strings.Fields(msg)
	if len(f) != 3 || !strings.HasPrefix(f[2], "v") {
		return "", false, false
	}
	switch f[0] {
	case "wrote":
		return f[1], true, true
	case "read":
		return f[1], false, true
	}
	return "", false, false
}

// mutating are the requests that change partition placement or leadership.
var mutating = map[string]bool{"AlterPartitionAssignments": true, "ElectLeaders": true, "IncrementalAlterConfigs": true, "AlterReplicaLogDirs": true}

// overhead is kafkamender's own time around one event, from the requests its Kafka client
// made on cluster: from received (the worker's receipt, the result's started_at) to the
// first mutating request written, and from the last response read before published (the
// result heard) to published. ok is false when calls hold no mutating write in that span.
func overhead(calls []kafkaCall, cluster string, received, published time.Time) (before, after time.Duration, ok bool) {
	var first, last time.Time
	for _, c := range calls {
		if c.phase || c.cluster != cluster || c.at.Before(received) || c.at.After(published) {
			continue
		}
		if c.write && mutating[c.kind] && (first.IsZero() || c.at.Before(first)) {
			first = c.at
		}
		if !c.write && c.at.After(last) {
			last = c.at
		}
	}
	if first.IsZero() || last.IsZero() {
		return 0, 0, false
	}
	return first.Sub(received), published.Sub(last), true
}

// fsummary is what repeated runs came to, for a measure other than a duration.
type fsummary struct {
	n                int
	median, min, max float64
}

func summarizeF(vs []float64) fsummary {
	n, m, lo, hi := medianRange(vs)
	return fsummary{n: n, median: m, min: lo, max: hi}
}

// format is "median (min–max)" with each value in verb.
func (s fsummary) format(verb string) string {
	if s.n == 0 {
		return "—"
	}
	return fmt.Sprintf(verb+" ("+verb+"–"+verb+")", s.median, s.min, s.max)
}
