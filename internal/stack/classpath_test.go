package stack

import (
	"path/filepath"
	"testing"
)

// Each cluster's classpath is the jar folder its brokers run from: the CLIs must run the
// same Kafka version as the cluster they act on.
func TestClasspathIsTheBrokers(t *testing.T) {
	root := t.TempDir()
	s := &Stack{root: root, cacheDir: filepath.Join(root, ".cache")}
	want := map[string]string{"local": "kafka-3.9", "kraft": "kafka-4", "legacy": "kafka-2.3"}
	for _, c := range Clusters() {
		got := s.Classpath(c)
		if exp := filepath.Join(root, ".cache", want[c.Name], "libs", "*"); got != exp {
			t.Errorf("%s: classpath %s, want %s", c.Name, got, exp)
		}
		for _, b := range c.Brokers {
			argv := s.argv(server{kind: kindKafka, cluster: c, broker: b})
			found := false
			for i := range argv[:len(argv)-1] {
				if argv[i] == "-cp" && argv[i+1] == got {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: broker %d runs with %v, not classpath %s", c.Name, b.ID, argv, got)
			}
		}
	}
}
