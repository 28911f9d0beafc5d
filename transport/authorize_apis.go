package transport

// Per API, Kafka's checks (KafkaApis.scala): which operation on which
// resource each request needs, as pure functions of the decoded request and
// a check (the principal's rights). Each returns either an answer to send
// instead of running the handler (everything denied), or a request filtered
// of what is denied plus a patch that adds the denied parts, with their
// errors, to the handler's response. The README's ACL table lists the same.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/acl"
)

var (
	errTopicAuth   = kerr.TopicAuthorizationFailed.Code
	errGroupAuth   = kerr.GroupAuthorizationFailed.Code
	errClusterAuth = kerr.ClusterAuthorizationFailed.Code
	errTxnAuth     = kerr.TransactionalIDAuthorizationFailed.Code
)

// authCheck answers for one request's principal and host.
type authCheck struct {
	a               *acl.Authorizer
	principal, host string
	// topicName resolves a topic ID (DeleteTopics v6); ok false: unknown.
	topicName func(id [16]byte) (string, bool)
	// topicExists says whether a topic exists (Metadata's auto-creation).
	topicExists func(name string) bool
	// latest returns the current authorizer, for a check after a wait (a
	// long-polling Fetch answers with the ACLs of when it answers); nil:
	// a stays.
	latest func() *acl.Authorizer
}

func (c authCheck) ok(op acl.Operation, t acl.ResourceType, name string) bool {
	return c.a.Authorize(c.principal, c.host, op, acl.Resource{Type: t, Name: name})
}
func (c authCheck) topic(op acl.Operation, name string) bool {
	return c.ok(op, acl.ResourceTopic, name)
}
func (c authCheck) group(op acl.Operation, name string) bool {
	return c.ok(op, acl.ResourceGroup, name)
}
func (c authCheck) cluster(op acl.Operation) bool {
	return c.ok(op, acl.ResourceCluster, acl.ClusterName)
}
func (c authCheck) txn(op acl.Operation, id string) bool {
	return c.ok(op, acl.ResourceTransactionalID, id)
}

// supportedOps are the operations Kafka reports in authorized-operations
// fields, per resource type (AclEntry.supportedOperations).
var supportedOps = map[acl.ResourceType][]acl.Operation{
	acl.ResourceTopic: {acl.OpRead, acl.OpWrite, acl.OpCreate, acl.OpDescribe, acl.OpDelete, acl.OpAlter,
		acl.OpDescribeConfigs, acl.OpAlterConfigs},
	acl.ResourceGroup: {acl.OpRead, acl.OpDescribe, acl.OpDelete},
	acl.ResourceCluster: {acl.OpCreate, acl.OpClusterAction, acl.OpDescribeConfigs, acl.OpAlterConfigs,
		acl.OpIdempotentWrite, acl.OpAlter, acl.OpDescribe},
}

// authorizedOps is the bit field of the supported operations the principal
// may do on a resource (bit n: operation code n), as Metadata,
// DescribeGroups and DescribeCluster answer when asked.
func (c authCheck) authorizedOps(t acl.ResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOps[t] {
		if c.ok(op, t, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// patch changes a handler's response (a kmsg.Response, or *fetchResponse).
// It replaces slices rather than filtering them in place: a handler may
// answer with a slice it shares (Metadata's topics come from a cache).
type patch func(resp any)

// authRule is one API's check: an answer instead of the handler, or a patch
// (nil: nothing to add) after it, the request having been filtered in place.
type authRule func(c authCheck, req kmsg.Request) (deny kmsg.Response, p patch)

// finish ends a rule that split a request's items into kept and denied
// ones: nothing denied, nothing to do; everything denied, an answer of the
// denied items instead of the handler; otherwise the request keeps the
// allowed items (*field = kept) and add puts the denied ones into the
// handler's response.
func finish[I, D any](req kmsg.Request, field *[]I, kept []I, denied []D, add func(resp any, denied []D)) (kmsg.Response, patch) {
	if len(denied) == 0 {
		return nil, nil
	}
	p := func(resp any) { add(resp, denied) }
	if len(kept) == 0 {
		resp := req.ResponseKind()
		p(resp)
		return resp, nil
	}
	*field = kept
	return nil, p
}

// authRules are the checks of every API served; an API missing here is
// refused whole under an authorizer (TestAuthRulesCoverEveryAPI keeps the
// table complete).
var authRules = map[int16]authRule{
	0:  authProduce,
	2:  authListOffsets,
	3:  authMetadata,
	8:  authOffsetCommit,
	9:  authOffsetFetch,
	10: authFindCoordinator,
	11: groupOnly(acl.OpRead, func(r kmsg.Request) string { return r.(*kmsg.JoinGroupRequest).Group },
		func(resp kmsg.Response) { resp.(*kmsg.JoinGroupResponse).ErrorCode = errGroupAuth }),
	12: groupOnly(acl.OpRead, func(r kmsg.Request) string { return r.(*kmsg.HeartbeatRequest).Group },
		func(resp kmsg.Response) { resp.(*kmsg.HeartbeatResponse).ErrorCode = errGroupAuth }),
	13: groupOnly(acl.OpRead, func(r kmsg.Request) string { return r.(*kmsg.LeaveGroupRequest).Group },
		func(resp kmsg.Response) { resp.(*kmsg.LeaveGroupResponse).ErrorCode = errGroupAuth }),
	14: groupOnly(acl.OpRead, func(r kmsg.Request) string { return r.(*kmsg.SyncGroupRequest).Group },
		func(resp kmsg.Response) { resp.(*kmsg.SyncGroupResponse).ErrorCode = errGroupAuth }),
	15: authDescribeGroups,
	16: authListGroups,
	17: nil, // SaslHandshake: everyone
	18: nil, // ApiVersions: everyone
	19: authCreateTopics,
	20: authDeleteTopics,
	21: authDeleteRecords,
	22: authInitProducerID,
	23: authOffsetForLeaderEpoch,
	24: authAddPartitionsToTxn,
	25: authAddOffsetsToTxn,
	26: authEndTxn,
	27: authWriteTxnMarkers,
	28: authTxnOffsetCommit,
	29: clusterOnly(acl.OpDescribe, func(resp kmsg.Response) {
		r := resp.(*kmsg.DescribeACLsResponse)
		r.ErrorCode = errClusterAuth
	}),
	30: authCreateACLs,
	31: authDeleteACLs,
	32: authDescribeConfigs,
	33: authAlterConfigs,
	35: clusterOnly(acl.OpDescribe, func(resp kmsg.Response) {
		resp.(*kmsg.DescribeLogDirsResponse).ErrorCode = errClusterAuth
	}),
	36: nil, // SaslAuthenticate: everyone
	37: authCreatePartitions,
	42: authDeleteGroups,
	44: authIncrementalAlterConfigs,
	47: authOffsetDelete,
	50: authDescribeUserScram,
	51: authAlterUserScram,
	60: authDescribeCluster,
	61: authDescribeProducers,
	65: authDescribeTransactions,
	66: authListTransactions,
	68: authConsumerGroupHeartbeat,
	69: authConsumerGroupDescribe,
}

// groupOnly: the request names one group and needs op on it; denied, the
// response gets GROUP_AUTHORIZATION_FAILED.
func groupOnly(op acl.Operation, group func(kmsg.Request) string, fail func(kmsg.Response)) authRule {
	return func(c authCheck, req kmsg.Request) (kmsg.Response, patch) {
		if c.group(op, group(req)) {
			return nil, nil
		}
		resp := req.ResponseKind()
		fail(resp)
		return resp, nil
	}
}

// clusterOnly: the request needs op on the cluster.
func clusterOnly(op acl.Operation, fail func(kmsg.Response)) authRule {
	return func(c authCheck, req kmsg.Request) (kmsg.Response, patch) {
		if c.cluster(op) {
			return nil, nil
		}
		resp := req.ResponseKind()
		fail(resp)
		return resp, nil
	}
}
