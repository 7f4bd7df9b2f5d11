package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMissingOps(t *testing.T) {
	bits := func(ops ...kmsg.ACLOperation) int32 {
		var b int32
		for _, op := range ops {
			b |= 1 << uint(op)
		}
		return b
	}
	tests := []struct {
		name string
		ops  int32
		want []kmsg.ACLOperation
	}{
		{"everything", bits(kmsg.ACLOperationDescribe, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationRead), nil},
		{"nothing", 0, ClusterPermissions},
		{"no alter", bits(kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs), []kmsg.ACLOperation{kmsg.ACLOperationAlter}},
		{"configs only", bits(kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs), []kmsg.ACLOperation{kmsg.ACLOperationDescribe, kmsg.ACLOperationAlter}},
	}
	for _, tt := range tests {
		if got := missingOps(tt.ops, ClusterPermissions); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: missingOps = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPermissionError(t *testing.T) {
	topics := map[string][]kmsg.ACLOperation{}
	for _, t := range []string{"a", "b", "c", "d", "e"} {
		topics[t] = []kmsg.ACLOperation{kmsg.ACLOperationAlterConfigs}
	}
	topics["a"] = []kmsg.ACLOperation{kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs}
	tests := []struct {
		name        string
		err         *PermissionError
		want        string
		wantMissing string
	}{
		{"cluster", &PermissionError{Cluster: []kmsg.ACLOperation{kmsg.ACLOperationAlter}},
			"missing Kafka permission Alter on Cluster", "[Alter on Cluster]"},
		{"cluster and topics, some left out", &PermissionError{Cluster: []kmsg.ACLOperation{kmsg.ACLOperationDescribe, kmsg.ACLOperationAlterConfigs}, Topics: topics, TopicsChecked: 9},
			"missing Kafka permission Describe on Cluster; missing Kafka permission AlterConfigs on Cluster; " +
				"missing Kafka permission DescribeConfigs, AlterConfigs on Topic a; missing Kafka permission AlterConfigs on Topic b; " +
				"missing Kafka permission AlterConfigs on Topic c (and 2 more of 9 topics)",
			"[Describe on Cluster AlterConfigs on Cluster DescribeConfigs on Topic AlterConfigs on Topic]"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%s: Error() =\n%s\nwant\n%s", tt.name, got, tt.want)
		}
		if got := fmt.Sprint(tt.err.Missing()); got != tt.wantMissing {
			t.Errorf("%s: Missing() = %s, want %s", tt.name, got, tt.wantMissing)
		}
	}
	if got := fmt.Sprint(RequiredPermissions()); got != "[Describe on Cluster Alter on Cluster DescribeConfigs on Cluster AlterConfigs on Cluster "+
		"Describe on Topic DescribeConfigs on Topic AlterConfigs on Topic]" {
		t.Errorf("RequiredPermissions() = %s", got)
	}
}
