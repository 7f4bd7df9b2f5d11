// Command stackctl runs kafkamender's local stack of real servers (ZooKeeper, Kafka 3.9 in
// ZooKeeper mode, Kafka 4.x in KRaft mode, a three-node NATS cluster with JetStream). The Taskfile's stack:*
// tasks call it; see internal/stack for what each command guarantees.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/stack"
)

const usage = `usage: stackctl <command> [args]

commands:
  prepare          resolve the Kafka jars (Maven) and build nats-server, start nothing
  up               start every server that is not running; wait until all answer
  down             stop every server of the stack and remove its data and logs
  status           list the servers, their pids and whether they answer (exit 1 unless all do)
  logs [-n N] [S]  print the last N lines (default 40) of each server's log, or of server S
  stop S           stop server S gracefully (SIGTERM) and wait for it to exit
  kill S           kill server S (SIGKILL) and wait for it to exit
  start S          start server S and wait until it answers
  restart S        stop, then start server S
  verify-down      exit 1 if any server process of the stack is still running
  reserve-ports    add the stack's ports to net.ipv4.ip_local_reserved_ports (root), so that
                   no client connection takes one as its ephemeral port (CI does this)
  topic C T [P R]  create topic T on cluster C (local or kraft) with P partitions (default 4)
                   of R replicas (default 2), placed by Kafka; harmless when it exists

servers: ` + "%s\n" + `(stop, kill, start and restart also take "nats": every node of the NATS cluster)
`

func main() {
	flag.Usage = func() { fmt.Fprintf(os.Stderr, usage, strings.Join(stack.ServerNames(), ", ")) }
	flag.Parse()
	if flag.NArg() < 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, flag.Arg(0), flag.Args()[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "stackctl:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cmd string, args []string) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := stack.FindRoot(wd)
	if err != nil {
		return err
	}
	st, err := stack.New(stack.Options{Root: root, Logf: func(f string, a ...any) {
		fmt.Printf("%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(f, a...))
	}})
	if err != nil {
		return err
	}
	one := func() (string, error) {
		if len(args) != 1 {
			return "", fmt.Errorf("%s needs one server name (%s)", cmd, strings.Join(stack.ServerNames(), ", "))
		}
		return args[0], nil
	}
	switch cmd {
	case "prepare":
		return st.Prepare(ctx)
	case "up":
		return st.Up(ctx)
	case "down":
		return st.Down(ctx)
	case "status":
		return status(ctx, st)
	case "logs":
		return logs(st, args)
	case "stop", "kill", "start", "restart":
		name, err := one()
		if err != nil {
			return err
		}
		switch cmd {
		case "stop":
			return st.Stop(ctx, name)
		case "kill":
			return st.Kill(ctx, name)
		case "start":
			return st.Start(ctx, name)
		default:
			return st.Restart(ctx, name)
		}
	case "topic":
		return topic(ctx, args)
	case "reserve-ports":
		return reservePorts()
	case "verify-down":
		running, err := st.Running()
		if err != nil {
			return err
		}
		if len(running) > 0 {
			return fmt.Errorf("still running: %v", running)
		}
		fmt.Println("no server of the stack is running")
		return nil
	default:
		flag.Usage()
		return fmt.Errorf("unknown command %q", cmd)
	}
}

func status(ctx context.Context, st *stack.Stack) error {
	sts, err := st.Status(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SERVER\tADDRESS\tPID\tSTATE")
	bad := 0
	for _, s := range sts {
		state := "ready"
		if s.Ready != nil {
			state = s.Ready.Error()
			bad++
		}
		pid := "-"
		if s.PID != 0 {
			pid = fmt.Sprint(s.PID)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", s.Name, s.Addr, pid, state)
	}
	w.Flush()
	fmt.Printf("state, data and logs: %s\n", st.StateDir())
	if bad > 0 {
		return fmt.Errorf("%d of %d servers are not ready", bad, len(sts))
	}
	return nil
}

func logs(st *stack.Stack, args []string) error {
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	n := fs.Int("n", 40, "lines per server")
	if err := fs.Parse(args); err != nil {
		return err
	}
	names := fs.Args()
	if len(names) == 0 {
		names = stack.ServerNames()
	}
	for _, name := range names {
		fmt.Printf("==> %s <==\n%s\n\n", st.LogPath(name), stack.Tail(st.LogPath(name), *n))
	}
	return nil
}

// topic creates a topic for trying the worker by hand (README: "Ask for a change").
func topic(ctx context.Context, args []string) error {
	if len(args) != 2 && len(args) != 4 {
		return errors.New("topic needs CLUSTER TOPIC [PARTITIONS REPLICAS]")
	}
	c, err := stack.ClusterByName(args[0])
	if err != nil {
		return err
	}
	partitions, replicas := 4, 2
	if len(args) == 4 {
		if partitions, err = strconv.Atoi(args[2]); err != nil || partitions < 1 {
			return fmt.Errorf("partitions %q: want a positive number", args[2])
		}
		if replicas, err = strconv.Atoi(args[3]); err != nil || replicas < 1 || replicas > len(c.Brokers) {
			return fmt.Errorf("replicas %q: want 1 to %d", args[3], len(c.Brokers))
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), int16(replicas), nil, args[1])
	if errors.Is(err, kerr.TopicAlreadyExists) {
		fmt.Printf("topic %s exists on cluster %s\n", args[1], c.Name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("create topic %s on cluster %s: %w", args[1], c.Name, err)
	}
	fmt.Printf("created topic %s on cluster %s: %d partitions of %d replicas\n", args[1], c.Name, partitions, replicas)
	return nil
}

// reservePorts adds the stack's ports to the kernel's reserved local ports, keeping those
// already reserved: the fixed ports lie in Linux's ephemeral range, and a client that got
// one for its end of a connection would keep a server from starting.
func reservePorts() error {
	const path = "/proc/sys/net/ipv4/ip_local_reserved_ports"
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	ports := stack.Ports()
	if cur := strings.TrimSpace(string(raw)); cur != "" {
		ports = append([]string{cur}, ports...)
	}
	if err := os.WriteFile(path, []byte(strings.Join(ports, ",")+"\n"), 0o644); err != nil {
		return fmt.Errorf("reserve the stack's ports (needs root): %w", err)
	}
	fmt.Println("reserved local ports:", strings.Join(stack.Ports(), ","))
	return nil
}
