package worker

import (
	"fmt"
	"testing"

	"github.com/kafkamender/kafkamender/internal/locks"
)

// Each ZooKeeper session authenticates as the identities its znodes need: the lock
// ZooKeeper as the lock's; a cluster's own as the lock's (its lock lives there) and as the
// one Kafka's znodes were created with.
func TestZooKeeperIdentities(t *testing.T) {
	tests := []struct {
		name        string
		lock, kafka string // users; their passwords are <user>-pw
		wantLock    string
		wantCluster string
	}{
		{"none", "", "", "[]", "[]"},
		{"lock only", "kafkamender", "", "[{kafkamender kafkamender-pw}]", "[{kafkamender kafkamender-pw}]"},
		{"kafka only", "", "kafka", "[]", "[{kafka kafka-pw}]"},
		{"both", "kafkamender", "kafka", "[{kafkamender kafkamender-pw}]", "[{kafkamender kafkamender-pw} {kafka kafka-pw}]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lockAuthYAML, clusterAuthYAML := "", ""
			var environ []string
			if tt.lock != "" {
				lockAuthYAML = fmt.Sprintf(", zookeeper_auth: {user: %s}", tt.lock)
				environ = append(environ, "KAFKAMENDER_LOCK_ZOOKEEPER_AUTH_PASSWORD="+tt.lock+"-pw")
			}
			if tt.kafka != "" {
				clusterAuthYAML = fmt.Sprintf(", zookeeper_auth: {user: %s}", tt.kafka)
				environ = append(environ, "KAFKAMENDER_CLUSTERS_LOCAL_ZOOKEEPER_AUTH_PASSWORD="+tt.kafka+"-pw")
			}
			cfg := natsConfigWith(t, fmt.Sprintf(`
nats: {url: "nats://127.0.0.1:4222"}
lock: {zookeeper: "127.0.0.1:2181"%s}
clusters: {local: {bootstrap_servers: ["127.0.0.1:9092"], zookeeper: "127.0.0.1:2181/kafka"%s}}
`, lockAuthYAML, clusterAuthYAML), environ...)
			if got := fmt.Sprint(nonNil(lockAuth(cfg))); got != tt.wantLock {
				t.Errorf("lock ZooKeeper: %s, want %s", got, tt.wantLock)
			}
			if got := fmt.Sprint(nonNil(clusterZKAuth(cfg, cfg.Clusters["local"]))); got != tt.wantCluster {
				t.Errorf("cluster's ZooKeeper: %s, want %s", got, tt.wantCluster)
			}
		})
	}
}

func nonNil(a []locks.DigestAuth) []struct{ User, Password string } {
	out := []struct{ User, Password string }{}
	for _, x := range a {
		out = append(out, struct{ User, Password string }{x.User, x.Password})
	}
	return out
}
