package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitReady polls the server until it answers, its process dies, or the ready timeout
// passes. The error carries the tail of the server's log.
func (s *Stack) waitReady(ctx context.Context, srv server) error {
	ctx, cancel := context.WithTimeout(ctx, s.readyTimeout)
	defer cancel()
	var last error
	gone := 0
	for {
		pid, err := s.pid(srv)
		if err != nil {
			return err
		}
		if pid == 0 && gone < 3 {
			// Seen once, right after a restart, without a reason found: look again
			// before calling the process gone.
			gone++
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if pid == 0 {
			return fmt.Errorf("%s exited while starting; last lines of %s:\n%s", srv.name, s.LogPath(srv.name), Tail(s.LogPath(srv.name), 40))
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = s.check(cctx, srv)
		ccancel()
		if last == nil {
			s.logf("%s is ready", srv.name)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not become ready within %s (last check: %v); last lines of %s:\n%s",
				srv.name, s.readyTimeout, last, s.LogPath(srv.name), Tail(s.LogPath(srv.name), 40))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// check asks the server whether it serves: ZooKeeper's ruok, NATS /healthz, and for a
// broker, the cluster's metadata listing it.
func (s *Stack) check(ctx context.Context, srv server) error {
	switch srv.kind {
	case kindZooKeeper:
		return ZooKeeperOK(ctx, ZooKeeperAddr)
	case kindNATS:
		return natsHealthy(ctx, srv.node)
	case kindNATSSecure:
		return httpOK(ctx, SecureNATSMonitorURL+"/healthz")
	case kindAlertmanager:
		return httpOK(ctx, AlertmanagerURL+"/-/ready")
	default:
		return BrokersListed(ctx, srv.cluster, srv.broker.ID)
	}
}

// ZooKeeperOK sends the four-letter word ruok and expects imok.
func ZooKeeperOK(ctx context.Context, addr string) error {
	out, err := FourLetterWord(ctx, addr, "ruok")
	if err != nil {
		return err
	}
	if out != "imok" {
		return fmt.Errorf("zookeeper %s answered ruok with %q", addr, out)
	}
	return nil
}

// FourLetterWord sends a ZooKeeper four-letter command and returns the whole answer.
func FourLetterWord(ctx context.Context, addr, cmd string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("zookeeper %s %s: %w", addr, cmd, err)
	}
	return string(out), nil
}

// natsHealthy asks a node of the NATS cluster for /healthz: ok once it serves clients and
// its JetStream is current with the cluster (its streams caught up). That is not yet
// serving: /healthz also passes a replica that knows no leader of its stream, and after
// the whole cluster restarted a stream it hosts could go unanswered for seconds more
// (CI, TestOutagesLoseNoEvent). So the node must also know the meta leader and a leader
// of every stream and consumer it hosts.
func natsHealthy(ctx context.Context, n NATSNode) error {
	if err := httpOK(ctx, n.MonitorURL+"/healthz"); err != nil {
		return err
	}
	return natsLed(ctx, n)
}

// natsLed reads the node's /jsz and fails unless it knows the meta leader and a leader of
// every stream and consumer it hosts.
func natsLed(ctx context.Context, n NATSNode) error {
	type cluster struct {
		Leader string `json:"leader"`
	}
	var jsz struct {
		Meta     *cluster `json:"meta_cluster"`
		Accounts []struct {
			Name    string `json:"name"`
			Streams []struct {
				Name      string   `json:"name"`
				Cluster   *cluster `json:"cluster"`
				Consumers []struct {
					Name    string   `json:"name"`
					Cluster *cluster `json:"cluster"`
				} `json:"consumer_detail"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := getOK(ctx, n.MonitorURL+"/jsz?accounts=true&streams=true&consumers=true", &jsz); err != nil {
		return err
	}
	if jsz.Meta == nil || jsz.Meta.Leader == "" {
		return fmt.Errorf("%s knows no JetStream meta leader yet", n.Name)
	}
	for _, a := range jsz.Accounts {
		for _, st := range a.Streams {
			if st.Cluster != nil && st.Cluster.Leader == "" {
				return fmt.Errorf("%s knows no leader of stream %s (account %s) yet", n.Name, st.Name, a.Name)
			}
			for _, c := range st.Consumers {
				if c.Cluster != nil && c.Cluster.Leader == "" {
					return fmt.Errorf("%s knows no leader of consumer %s of stream %s (account %s) yet", n.Name, c.Name, st.Name, a.Name)
				}
			}
		}
	}
	return nil
}

// httpOK expects 200 from a GET of url.
func httpOK(ctx context.Context, url string) error { return getOK(ctx, url, nil) }

// getOK expects 200 from a GET of url and decodes the body's JSON into into, unless nil.
func getOK(ctx context.Context, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	if into == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}

// BrokersListed asks the cluster for its metadata and checks that it lists the given
// brokers (all of the cluster's brokers when none are given) and names a controller.
func BrokersListed(ctx context.Context, c Cluster, ids ...int32) error {
	if len(ids) == 0 {
		for _, b := range c.Brokers {
			ids = append(ids, b.ID)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.DialTimeout(2*time.Second),
		kgo.RetryTimeout(3*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("%s metadata: %w", c.Name, err)
	}
	have := md.Brokers.NodeIDs()
	var missing []int32
	for _, id := range ids {
		if !slices.Contains(have, id) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s metadata lists brokers %v, not yet %v", c.Name, have, missing)
	}
	if md.Controller < 0 {
		return errors.New(c.Name + " has no controller yet")
	}
	// Listed is not serving: a broker registers before it accepts requests (Kafka opens
	// its listeners' request processing after the registration), so ask each one itself.
	for _, id := range ids {
		if _, err := cl.Broker(int(id)).Request(ctx, kmsg.NewPtrApiVersionsRequest()); err != nil {
			return fmt.Errorf("%s broker %d is listed but does not answer yet: %w", c.Name, id, err)
		}
	}
	return nil
}
