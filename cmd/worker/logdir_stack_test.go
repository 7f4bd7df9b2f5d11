package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// logDirOf returns the directory of broker that holds topic-p (current replica), or "".
func logDirOf(t *testing.T, adm *kadm.Client, broker int32, topic string, p int32) string {
	t.Helper()
	var dir string
	testenv.Eventually(t, 60*time.Second, func() error {
		ds, err := adm.DescribeBrokerLogDirs(context.Background(), broker, nil)
		if err != nil {
			return err
		}
		for d, ld := range ds {
			if rp, ok := ld.Topics.Lookup(topic, p); ok && !rp.IsFuture {
				dir = d
				return nil
			}
		}
		return fmt.Errorf("%s-%d not on broker %d yet", topic, p, broker)
	})
	return dir
}

// readAll consumes topic from the start and fails unless exactly n records come back.
func readAll(t *testing.T, env *testenv.Env, cluster, topic string, n int) {
	t.Helper()
	cl := env.Kafka(t, cluster, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", got, n, topic)
		}
		fs.EachRecord(func(*kgo.Record) { got++ })
	}
	if got != n {
		t.Fatalf("read %d records of %s, want %d", got, topic, n)
	}
}

// runLogdir runs `worker logdir args...` and returns its exit code and output.
func runLogdir(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"logdir"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// logSince returns what a server logged after offset.
func logSince(t *testing.T, path string, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) < offset {
		return string(b)
	}
	return string(b[offset:])
}

func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// noErrorsAbout fails on an ERROR line of the log that names topic. One is Kafka's own
// on any restart of a broker whose partition had no leader meanwhile (ZooKeeper mode: the
// controller first sends the partition's state with leader -1, then elects): not about
// the partition's data, and left out.
func noErrorsAbout(t *testing.T, log, topic string) {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "cannot become follower since the new leader -1 is unavailable") {
			continue
		}
		if strings.Contains(line, "ERROR") && strings.Contains(line, topic) {
			t.Errorf("the broker logged an error about %s: %s", topic, line)
		}
	}
}

// Offline move between the two log directories of a stopped broker (broker 1 of `local`,
// ZooKeeper mode, and node 1 of `kraft`, JBOD): after the restart DescribeLogDirs shows the
// partition in the new directory, every record is readable from that broker (it leads the
// only replica), and the broker logs no error about the partition.
func TestOfflineMove(t *testing.T) {
	env := testenv.GetExclusive(t)
	bin := buildWorker(t)
	for _, cluster := range []string{"local", "kraft"} {
		t.Run(cluster, func(t *testing.T) {
			c := env.Cluster(t, cluster)
			dirs := env.TwoLogDirs(t, cluster, 1)
			cl := env.Kafka(t, cluster, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			adm := kadm.NewClient(cl)
			topic := testenv.Name(t, "off")
			testenv.CreateTopic(t, cl, topic, [][]int32{{1}}, nil)
			testenv.Produce(t, cl, topic, 1, 300, 1000)
			from := logDirOf(t, adm, 1, topic, 0)
			to := testenv.OtherLogDir(dirs, from)
			tp := topic + "-0"

			// Refused while the broker holds the directory, and nothing changes.
			code, out := runLogdir(t, bin, "move", "--from", from, "--to", to, "--partition", tp)
			if code == 0 || !strings.Contains(out, "pid") {
				t.Fatalf("move on a running broker: exit %d, output:\n%s", code, out)
			}
			if _, err := os.Stat(filepath.Join(to, tp)); err == nil {
				t.Fatalf("a refused move created %s", filepath.Join(to, tp))
			}

			env.StopBroker(t, cluster, 1) // GetExclusive starts it again if the test stops early
			code, out = runLogdir(t, bin, "move", "--from", from, "--to", to, "--partition", tp)
			if code != 0 {
				t.Fatalf("move: exit %d, output:\n%s", code, out)
			}
			t.Logf("worker logdir move:\n%s", out)
			if _, err := os.Stat(filepath.Join(from, tp)); !os.IsNotExist(err) {
				t.Errorf("%s still exists after the move (%v)", filepath.Join(from, tp), err)
			}
			logPath := env.Stack.LogPath(c.ServerName(1))
			offset := logSize(logPath)
			env.StartBroker(t, cluster, 1)
			if got := logDirOf(t, adm, 1, topic, 0); got != to {
				t.Errorf("after the restart %s is in %s, want %s", tp, got, to)
			}
			readAll(t, env, cluster, topic, 300)
			noErrorsAbout(t, logSince(t, logPath, offset), topic)
			if c.Mode == stack.ModeKRaft {
				// The broker found the log elsewhere than the controller's record and told it
				// (AssignReplicasToDirs, KIP-858).
				testenv.Eventually(t, 30*time.Second, func() error {
					if !strings.Contains(logSince(t, logPath, offset), "maybeSendAssignments: sending") {
						return fmt.Errorf("kraft node 1 has not sent the directory assignment to the controller")
					}
					return nil
				})
			}
		})
	}
}

// Recovery from a follower's copy: broker 1 of `local` loses a partition's folder while
// stopped; the tool copies broker 2's replica into place; broker 1 starts, leads the
// partition, and every record is readable; broker 2's copy is untouched.
func TestOfflineRecover(t *testing.T) {
	env := testenv.GetExclusive(t)
	bin := buildWorker(t)
	c := env.Cluster(t, "local")
	cl := env.Kafka(t, "local", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	topic := testenv.Name(t, "rec")
	// Both replicas in sync while the records are produced (acks=all: each record is in
	// both logs when acknowledged), then broker 2 stops first (broker 1 stays the only ISR
	// member), then broker 1: on its restart it is elected leader from the ISR. (No
	// min.insync.replicas=2: a leader under it does not advance its high watermark, so
	// the last records the follower's checkpoint does not cover would stay invisible.)
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}}, nil)
	testenv.Eventually(t, 60*time.Second, func() error {
		p := testenv.Partitions(t, cl, topic)[0]
		if len(p.ISR) != 2 {
			return fmt.Errorf("isr %v", p.ISR)
		}
		return nil
	})
	testenv.Produce(t, cl, topic, 1, 200, 1000)
	tp := topic + "-0"
	target := logDirOf(t, adm, 1, topic, 0)
	source := logDirOf(t, adm, 2, topic, 0)
	env.StopBroker(t, "local", 2) // GetExclusive starts them again if the test stops early
	env.StopBroker(t, "local", 1)
	// The disk lost the partition.
	if err := os.RemoveAll(filepath.Join(target, tp)); err != nil {
		t.Fatal(err)
	}
	srcBefore := treeDigest(t, filepath.Join(source, tp))
	code, out := runLogdir(t, bin, "recover", "--from", source, "--to", target, "--partition", tp)
	if code != 0 {
		t.Fatalf("recover: exit %d, output:\n%s", code, out)
	}
	t.Logf("worker logdir recover:\n%s", out)
	if got := treeDigest(t, filepath.Join(source, tp)); got != srcBefore {
		t.Errorf("recover changed the source copy")
	}
	logPath := env.Stack.LogPath(c.ServerName(1))
	offset := logSize(logPath)
	env.StartBroker(t, "local", 1)
	testenv.Eventually(t, 90*time.Second, func() error {
		p := testenv.Partitions(t, cl, topic)[0]
		if p.Leader != 1 {
			return fmt.Errorf("leader %d, want 1", p.Leader)
		}
		return nil
	})
	readAll(t, env, "local", topic, 200)
	noErrorsAbout(t, logSince(t, logPath, offset), topic)
	env.StartBroker(t, "local", 2)
}

// treeDigest is a digest of a directory's file names, sizes and contents.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if info.IsDir() {
			fmt.Fprintf(&b, "d %s\n", rel)
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "f %s %d %x\n", rel, len(data), data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
