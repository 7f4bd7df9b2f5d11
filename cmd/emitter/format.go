package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
)

// writeResultTable prints a result for people: a summary, then the changes,
// the skipped partitions and the partitions that were already as asked.
// stored says the result was read from the results stream because the event
// id had been published before.
func writeResultTable(w io.Writer, r *events.Result, stored bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "event %s: %s\n", r.ID, r.Status)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	field := func(name, value string) {
		lines := strings.Split(strings.TrimRight(value, "\n"), "\n")
		fmt.Fprintf(tw, "%s:\t%s\n", name, lines[0])
		for _, l := range lines[1:] { // errors.Join puts one error a line
			fmt.Fprintf(tw, "\t%s\n", l)
		}
	}
	field("cluster", orDash(r.Cluster))
	field("type", orDash(r.Type))
	field("strategy", orDash(r.Strategy))
	field("attempt", strconv.Itoa(r.Attempt))
	field("worker", orDash(r.Worker))
	if !r.StartedAt.IsZero() {
		field("started", r.StartedAt.UTC().Format(time.RFC3339))
	}
	field("duration", duration(r.StartedAt, r.FinishedAt))
	field("controller failover", yesNo(r.ControllerFailover))
	if r.Error != "" {
		field("error", r.Error)
	}
	if r.Reason != "" {
		field("reason", r.Reason)
	}
	if r.Note != "" {
		field("note", r.Note)
	}
	if r.PreviousEvent != "" {
		field("previous event", r.PreviousEvent)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case r.Replayed:
		b.WriteString("(replayed: this event id ran before; this is its earlier result)\n")
	case stored:
		b.WriteString("(stored: this event id was published before; this is its earlier result)\n")
	}

	b.WriteString("\n")
	if len(r.Changes) == 0 {
		b.WriteString("changes: none\n")
	} else {
		switch r.Status {
		case events.StatusPlanned:
			fmt.Fprintf(&b, "planned changes (dry run: nothing was changed): %d\n", len(r.Changes))
		case events.StatusFailed:
			fmt.Fprintf(&b, "changes made before the failure: %d\n", len(r.Changes))
		default:
			fmt.Fprintf(&b, "changes: %d\n", len(r.Changes))
		}
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		if r.Type == events.TypeLogDirMoveRequested {
			fmt.Fprintln(tw, "PARTITION\tBROKER\tDIR BEFORE\tDIR AFTER\tBYTES")
			for _, c := range r.Changes {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", c.TopicPartition, brokerOf(c.Broker), orDash(c.DirBefore), orDash(c.DirAfter), c.Bytes)
			}
		} else {
			// A replication-factor raise says how many bytes each partition's new replicas copied.
			copied := slices.ContainsFunc(r.Changes, func(c events.Change) bool { return c.Bytes > 0 })
			// A replaced broker's partition may say why it spans fewer racks (broker-failed,
			// broker-drain).
			noted := slices.ContainsFunc(r.Changes, func(c events.Change) bool { return c.Note != "" })
			// An unclean election (partition-offline) says which offsets it put at risk.
			lost := slices.ContainsFunc(r.Changes, func(c events.Change) bool { return c.LostOffsets != nil })
			header := "PARTITION\tREPLICAS BEFORE\tREPLICAS AFTER\tLEADER BEFORE\tLEADER AFTER"
			if copied {
				header += "\tBYTES COPIED"
			}
			if lost {
				header += "\tLOST OFFSETS"
			}
			if noted {
				header += "\tNOTE"
			}
			fmt.Fprintln(tw, header)
			for _, c := range r.Changes {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s", c.TopicPartition, replicas(c.ReplicasBefore),
					replicas(c.ReplicasAfter), leader(c.LeaderBefore), leader(c.LeaderAfter))
				if copied {
					fmt.Fprintf(tw, "\t%s", formatBytes(c.Bytes))
				}
				if lost {
					fmt.Fprintf(tw, "\t%s", offsetRange(c.LostOffsets))
				}
				if noted {
					fmt.Fprintf(tw, "\t%s", orDash(strings.ReplaceAll(c.Note, "\n", "; ")))
				}
				fmt.Fprintln(tw)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if r.Type == events.TypeBrokerOverloaded {
			b.WriteString(leadersMoved(r.Status, r.Changes))
		}
	}

	if len(r.Skipped) > 0 {
		fmt.Fprintf(&b, "\nskipped: %d\n", len(r.Skipped))
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		codes := slices.ContainsFunc(r.Skipped, func(s events.Skip) bool { return s.Code != "" })
		if codes {
			fmt.Fprintln(tw, "PARTITION\tCODE\tREASON")
		} else {
			fmt.Fprintln(tw, "PARTITION\tREASON")
		}
		for _, s := range r.Skipped {
			reason := strings.ReplaceAll(s.Reason, "\n", "; ")
			if codes {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.TopicPartition, orDash(string(s.Code)), reason)
			} else {
				fmt.Fprintf(tw, "%s\t%s\n", s.TopicPartition, reason)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	if len(r.Noop) > 0 {
		fmt.Fprintf(&b, "\nalready as asked (noop): %s\n", partitionList(r.Noop))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// leadersMoved is the summary line of the changes of a broker-overloaded
// result: how many partitions change leader, and how many of them each broker
// leads after, by broker id. A change that keeps its leader (the overloaded
// broker headed the assigned replicas without leading) counts in neither.
func leadersMoved(status events.Status, changes []events.Change) string {
	moved := 0
	perBroker := map[int32]int{}
	for _, c := range changes {
		if c.LeaderAfter < 0 || c.LeaderAfter == c.LeaderBefore {
			continue
		}
		moved++
		perBroker[c.LeaderAfter]++
	}
	var b strings.Builder
	if status == events.StatusPlanned {
		fmt.Fprintf(&b, "leaders to move: %d", moved)
	} else {
		fmt.Fprintf(&b, "leaders moved: %d", moved)
	}
	if moved > 0 {
		b.WriteString("; per broker after:")
		for _, id := range slices.Sorted(maps.Keys(perBroker)) {
			fmt.Fprintf(&b, " %d=%d", id, perBroker[id])
		}
	}
	b.WriteString("\n")
	return b.String()
}

func brokerOf(b *int32) string {
	if b == nil {
		return "-"
	}
	return fmt.Sprint(*b)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// duration is finished - started, or "-" when either is unknown.
func duration(started, finished time.Time) string {
	if started.IsZero() || finished.IsZero() || finished.Before(started) {
		return "-"
	}
	return finished.Sub(started).Round(time.Millisecond).String()
}

func replicas(r []int32) string {
	if len(r) == 0 {
		return "-"
	}
	return joinInt32(r, ",")
}

// leader prints a partition leader; Kafka says -1 for none.
func leader(id int32) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(int(id))
}

func partitionList(tps []events.TopicPartition) string {
	names := make([]string, len(tps))
	for i, tp := range tps {
		names[i] = tp.String()
	}
	return strings.Join(names, ", ")
}

// offsetRange shows the offsets an unclean election put at risk: "1200 to 1350", "1200 to ?"
// when the end could not be read, "-" for none.
func offsetRange(r *events.OffsetRange) string {
	switch {
	case r == nil:
		return "-"
	case r.To == nil:
		return fmt.Sprintf("%d to ?", r.From)
	}
	return fmt.Sprintf("%d to %d", r.From, *r.To)
}
