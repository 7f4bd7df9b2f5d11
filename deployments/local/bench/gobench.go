package main

// Scenarios storm and scale: the project's own Go benchmarks, run -runs times with
// `go test -bench` and parsed, so that their numbers sit in the same table.

import (
	"context"
	"fmt"
	"os/exec"
	"time"
)

// goBench runs benchmark name of ./internal/handlers -runs times (one iteration each) and
// returns the metrics of each run.
func (b *bench) goBench(ctx context.Context, name string) ([]map[string]float64, error) {
	b.logf("go test -bench %s, %d runs", name, b.opts.runs)
	cmd := exec.CommandContext(ctx, "go", "test", "-count", fmt.Sprint(b.opts.runs), "-run", "^$", "-bench", "^"+name+"$",
		"-benchtime", "1x", "-timeout", "30m", "./internal/handlers")
	cmd.Dir = b.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", name, err, lastLines(string(out), 30))
	}
	ms := benchMetrics(string(out), name)
	if len(ms) != b.opts.runs {
		return nil, fmt.Errorf("%s: %d result lines for %d runs:\n%s", name, len(ms), b.opts.runs, lastLines(string(out), 30))
	}
	return ms, nil
}

// values returns metric unit of each run; an error names a run without it.
func values(ms []map[string]float64, unit string) ([]float64, error) {
	out := make([]float64, len(ms))
	for i, m := range ms {
		v, ok := m[unit]
		if !ok {
			return nil, fmt.Errorf("run %d reports no %s", i+1, unit)
		}
		out[i] = v
	}
	return out, nil
}

func seconds(vs []float64) []time.Duration {
	out := make([]time.Duration, len(vs))
	for i, v := range vs {
		out[i] = time.Duration(v * float64(time.Second))
	}
	return out
}

// storm: 10,000 broker-overloaded alerts for one broker, two workers (BenchmarkAlertStorm).
func (b *bench) storm(ctx context.Context) error {
	ms, err := b.goBench(ctx, "BenchmarkAlertStorm")
	if err != nil {
		return err
	}
	rate, err := values(ms, "events/s")
	if err != nil {
		return err
	}
	noops, err := values(ms, "noops/s")
	if err != nil {
		return err
	}
	ops, err := values(ms, "operations")
	if err != nil {
		return err
	}
	after, err := values(ms, "kafka-requests-after-shed")
	if err != nil {
		return err
	}
	r, n, o, a := summarizeF(rate), summarizeF(noops), summarizeF(ops), summarizeF(after)
	b.rows = append(b.rows, []string{"alert storm: 10,000 alerts for one broker, two workers", "kraft (Kafka " + b.clusters["kraft"].Version + ")",
		fmt.Sprintf("%s events/s, %s noops/s once shed; operations run: %s; Kafka requests after the shed: %s", r.format("%.0f"), n.format("%.0f"), o.format("%.0f"), a.format("%.0f")),
		"", "", "", "", fmt.Sprintf("one operation: %s", met(o.max == 1 && o.min == 1))})
	return nil
}

// scale: read, plan and verify on 100,000 partitions served by an in-process fake
// (BenchmarkScale100k).
func (b *bench) scale(ctx context.Context) error {
	ms, err := b.goBench(ctx, "BenchmarkScale100k")
	if err != nil {
		return err
	}
	total, err := values(ms, "total-s")
	if err != nil {
		return err
	}
	peak, err := values(ms, "peak-heap-MB")
	if err != nil {
		return err
	}
	applyPeak, err := values(ms, "apply-peak-heap-MB")
	if err != nil {
		return err
	}
	t, p, ap := summarize(seconds(total)), summarizeF(peak), summarizeF(applyPeak)
	b.rows = append(b.rows, []string{"100,000 partitions: read + plan + verify (in-process fake)", "—",
		fmt.Sprintf("%s; peak heap %s MB (%s MB while applying)", t, p.format("%.0f"), ap.format("%.0f")),
		"", "", "", "", fmt.Sprintf("< 2s and < 500 MB: %s", met(t.max < 2*time.Second && p.max < 500))})
	return nil
}
