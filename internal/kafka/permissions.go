package kafka

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Permission is an ACL operation on a Kafka resource type: what an ACL grants a principal.
type Permission struct {
	Resource  kmsg.ACLResourceType // ACLResourceTypeCluster or ACLResourceTypeTopic
	Operation kmsg.ACLOperation
}

// String is "Alter on Cluster", as kafka-acls.sh and Kafka's errors name them.
func (p Permission) String() string {
	return operationName(p.Operation) + " on " + resourceName(p.Resource)
}

// Permissions the worker's requests need (docs/security.md lists each request and what it
// needs):
//   - Cluster Describe: ListPartitionReassignments, DescribeLogDirs, DescribeCluster's
//     authorized operations;
//   - Cluster Alter: AlterPartitionReassignments, ElectLeaders, AlterReplicaLogDirs;
//   - Cluster DescribeConfigs, AlterConfigs: DescribeConfigs and IncrementalAlterConfigs
//     of broker configs (throttles);
//   - Topic Describe: Metadata of topics;
//   - Topic DescribeConfigs, AlterConfigs: DescribeConfigs (min.insync.replicas) and
//     IncrementalAlterConfigs (throttled replicas) of topic configs.
//
// Every topic: an event may name any topic of the cluster.
var (
	ClusterPermissions = []kmsg.ACLOperation{
		kmsg.ACLOperationDescribe, kmsg.ACLOperationAlter,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs,
	}
	TopicPermissions = []kmsg.ACLOperation{
		kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs,
	}
)

// RequiredPermissions returns every permission the worker needs, cluster ones first.
func RequiredPermissions() []Permission {
	var out []Permission
	for _, op := range ClusterPermissions {
		out = append(out, Permission{kmsg.ACLResourceTypeCluster, op})
	}
	for _, op := range TopicPermissions {
		out = append(out, Permission{kmsg.ACLResourceTypeTopic, op})
	}
	return out
}

// PermissionError says which needed permissions the cluster denies the worker. It is
// permanent: an operator has to grant them.
type PermissionError struct {
	// Cluster lists the operations missing on the Cluster resource.
	Cluster []kmsg.ACLOperation
	// Topics maps topics to the operations missing on them, and TopicsChecked is how many
	// topics were looked at.
	Topics        map[string][]kmsg.ACLOperation
	TopicsChecked int
}

// maxTopicsShown bounds the topics a PermissionError names.
const maxTopicsShown = 3

// Error is "missing Kafka permission Alter on Cluster; missing Kafka permission
// AlterConfigs on Topic orders (and 12 more of 40 topics)".
func (e *PermissionError) Error() string {
	var parts []string
	for _, op := range e.Cluster {
		parts = append(parts, "missing Kafka permission "+Permission{kmsg.ACLResourceTypeCluster, op}.String())
	}
	topics := make([]string, 0, len(e.Topics))
	for t := range e.Topics {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	for i, t := range topics {
		if i == maxTopicsShown {
			parts[len(parts)-1] += fmt.Sprintf(" (and %d more of %d topics)", len(topics)-maxTopicsShown, e.TopicsChecked)
			break
		}
		var ops []string
		for _, op := range e.Topics[t] {
			ops = append(ops, operationName(op))
		}
		parts = append(parts, fmt.Sprintf("missing Kafka permission %s on Topic %s", strings.Join(ops, ", "), t))
	}
	return strings.Join(parts, "; ")
}

// Missing lists the missing permissions, each once (a topic permission missing on any
// topic counts), in the order of RequiredPermissions.
func (e *PermissionError) Missing() []Permission {
	var out []Permission
	for _, op := range e.Cluster {
		out = append(out, Permission{kmsg.ACLResourceTypeCluster, op})
	}
	for _, op := range TopicPermissions {
		for _, ops := range e.Topics {
			if slices.Contains(ops, op) {
				out = append(out, Permission{kmsg.ACLResourceTypeTopic, op})
				break
			}
		}
	}
	return out
}

// PermissionReport is what a check found when nothing is missing.
type PermissionReport struct {
	// ClusterChecked: the cluster told its operations (DescribeCluster, Kafka 2.8+, or
	// Metadata v8–v10, Kafka 2.3+); false for older clusters, which cannot say.
	ClusterChecked bool
	// TopicsChecked is how many topics' operations were looked at (0 when not asked, or
	// when the worker may describe no topic).
	TopicsChecked int
}

// CheckPermissions asks the cluster which operations the worker's principal may do on the
// Cluster resource (DescribeCluster with its authorized operations, KIP-700; Metadata v8–v10
// on clusters without it) and, when topics is true, on every topic it may describe (Metadata
// with topic authorized operations; a topic without Describe is not listed at all). A
// missing permission returns a *PermissionError. A cluster without an authorizer grants
// everything, and says so.
func CheckPermissions(ctx context.Context, cl *kgo.Client, topics bool) (_ PermissionReport, err error) {
	defer func() { err = classify(err) }()
	var rep PermissionReport
	perr := &PermissionError{}

	ops, ok, err := clusterOperations(ctx, cl)
	if err != nil {
		return rep, err
	}
	if ok {
		rep.ClusterChecked = true
		perr.Cluster = missingOps(ops, ClusterPermissions)
	}
	if topics {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = nil // every topic
		req.IncludeTopicAuthorizedOperations = true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return rep, fmt.Errorf("metadata: %w", err)
		}
		for _, t := range resp.Topics {
			if t.Topic == nil || kerr.ErrorForCode(t.ErrorCode) != nil || t.AuthorizedOperations == math.MinInt32 {
				continue // not told: a broker older than v8 answered
			}
			rep.TopicsChecked++
			if miss := missingOps(t.AuthorizedOperations, TopicPermissions); len(miss) > 0 {
				if perr.Topics == nil {
					perr.Topics = map[string][]kmsg.ACLOperation{}
				}
				perr.Topics[*t.Topic] = miss
			}
		}
		perr.TopicsChecked = rep.TopicsChecked
	}
	if len(perr.Cluster) > 0 || len(perr.Topics) > 0 {
		return rep, perr
	}
	return rep, nil
}

// clusterOperations returns the operations the worker may do on the Cluster resource; ok
// is false when the cluster cannot tell.
func clusterOperations(ctx context.Context, cl *kgo.Client) (ops int32, ok bool, err error) {
	dreq := kmsg.NewPtrDescribeClusterRequest()
	dreq.IncludeClusterAuthorizedOperations = true
	dresp, err := dreq.RequestWith(ctx, cl)
	switch {
	case err == nil:
		if err := kerr.ErrorForCode(dresp.ErrorCode); err != nil {
			return 0, false, fmt.Errorf("describe cluster: %w", err)
		}
		return dresp.ClusterAuthorizedOperations, dresp.ClusterAuthorizedOperations != math.MinInt32, nil
	case !isUnsupported(err):
		return 0, false, fmt.Errorf("describe cluster: %w", err)
	}
	// Kafka 2.3–2.7: Metadata v8–v10 tells the cluster's operations (v11 dropped it for
	// DescribeCluster).
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Topics = []kmsg.MetadataRequestTopic{}
	mreq.IncludeClusterAuthorizedOperations = true
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return 0, false, fmt.Errorf("metadata: %w", err)
	}
	if mresp.Version < 8 || mresp.Version > 10 || mresp.AuthorizedOperations == math.MinInt32 {
		return 0, false, nil
	}
	return mresp.AuthorizedOperations, true, nil
}

// missingOps returns the operations of want that the bit field ops (bit n: operation n)
// does not grant.
func missingOps(ops int32, want []kmsg.ACLOperation) []kmsg.ACLOperation {
	var out []kmsg.ACLOperation
	for _, op := range want {
		if ops&(1<<uint(op)) == 0 {
			out = append(out, op)
		}
	}
	return out
}

func operationName(op kmsg.ACLOperation) string {
	switch op {
	case kmsg.ACLOperationDescribe:
		return "Describe"
	case kmsg.ACLOperationAlter:
		return "Alter"
	case kmsg.ACLOperationDescribeConfigs:
		return "DescribeConfigs"
	case kmsg.ACLOperationAlterConfigs:
		return "AlterConfigs"
	case kmsg.ACLOperationRead:
		return "Read"
	case kmsg.ACLOperationWrite:
		return "Write"
	case kmsg.ACLOperationCreate:
		return "Create"
	case kmsg.ACLOperationDelete:
		return "Delete"
	case kmsg.ACLOperationClusterAction:
		return "ClusterAction"
	case kmsg.ACLOperationIdempotentWrite:
		return "IdempotentWrite"
	}
	return op.String()
}

func resourceName(r kmsg.ACLResourceType) string {
	switch r {
	case kmsg.ACLResourceTypeCluster:
		return "Cluster"
	case kmsg.ACLResourceTypeTopic:
		return "Topic"
	}
	return r.String()
}
