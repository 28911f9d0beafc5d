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
	68: groupOnly(acl.OpRead, func(r kmsg.Request) string { return r.(*kmsg.ConsumerGroupHeartbeatRequest).Group },
		func(resp kmsg.Response) { resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode = errGroupAuth }),
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

// authProduce: Write on each topic (and on the transactional id of a
// transactional produce). A topic that does not exist is auto-created by
// Produce only for a principal with Create on the cluster or the topic;
// for others it answers UNKNOWN_TOPIC_OR_PARTITION, as Kafka, which never
// creates topics on Produce.
func authProduce(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.ProduceRequest)
	txnDenied := req.TransactionID != nil && !c.txn(acl.OpWrite, *req.TransactionID)
	var denied []kmsg.ProduceResponseTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		code := int16(0)
		switch {
		case txnDenied:
			code = errTxnAuth
		case !c.topic(acl.OpWrite, t.Topic):
			code = errTopicAuth
		case c.topicExists != nil && !c.topicExists(t.Topic) && !c.cluster(acl.OpCreate) && !c.topic(acl.OpCreate, t.Topic):
			code = kerr.UnknownTopicOrPartition.Code
		}
		if code == 0 {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	if len(denied) == 0 {
		return nil, nil
	}
	add := func(resp any) {
		if resp, ok := resp.(*kmsg.ProduceResponse); ok {
			resp.Topics = append(resp.Topics, denied...)
		}
	}
	if len(kept) == 0 {
		if req.Acks == 0 {
			// No answer with acks=0; nothing is written. The handler
			// sees no topics and answers nothing.
			req.Topics = kept
			return nil, nil
		}
		resp := req.ResponseKind()
		add(resp)
		return resp, nil
	}
	req.Topics = kept
	return nil, add
}

// authFetch filters a Fetch: a follower (ReplicaID >= 0) needs ClusterAction
// on the cluster, a consumer Read on each topic; denied partitions answer
// TOPIC_AUTHORIZATION_FAILED (and never join a fetch session). When every
// partition asked for is denied, the answer is those errors alone (deny).
// The patch checks again every partition answered, with the ACLs of when
// the answer is made (they may have changed while the fetch waited, or
// since a partition of an incremental fetch joined its session): those no
// longer allowed answer the error instead of their records. (An
// incremental fetch answers only the partitions that changed, so a client
// sees the error with the first change after a revocation.)
func authFetch(c authCheck, req *kmsg.FetchRequest) (deny *fetchResponse, p patch) {
	follower := req.ReplicaID >= 0 && !c.cluster(acl.OpClusterAction)
	allowed := func(topic string) bool { return !follower && c.topic(acl.OpRead, topic) }
	var denied []fetchTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		if allowed(t.Topic) {
			kept = append(kept, t)
			continue
		}
		ft := fetchTopic{name: t.Topic}
		for _, fp := range t.Partitions {
			ft.parts = append(ft.parts, fetchPart{index: fp.Partition, errCode: errTopicAuth, hw: -1, lso: -1, logStart: -1})
		}
		denied = append(denied, ft)
	}
	req.Topics = kept
	if len(kept) == 0 && len(denied) > 0 {
		return &fetchResponse{version: req.Version, topics: denied}, nil
	}
	return nil, func(resp any) {
		r, ok := resp.(*fetchResponse)
		if !ok || r.errCode != 0 {
			return
		}
		if c.latest != nil { // the ACLs may have changed while it waited
			c.a = c.latest()
			follower = req.ReplicaID >= 0 && !c.cluster(acl.OpClusterAction)
		}
		for _, t := range r.topics {
			if allowed(t.name) {
				continue
			}
			for i := range t.parts {
				fp := &t.parts[i]
				fp.records.Release()
				fp.aborted = nil
				fp.errCode, fp.hw, fp.lso, fp.logStart = errTopicAuth, -1, -1, -1
			}
		}
		r.topics = append(r.topics, denied...)
	}
}

func authListOffsets(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.ListOffsetsRequest)
	var denied []kmsg.ListOffsetsResponseTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		if c.topic(acl.OpDescribe, t.Topic) {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, errTopicAuth
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	if len(denied) == 0 {
		return nil, nil
	}
	add := func(resp any) {
		resp.(*kmsg.ListOffsetsResponse).Topics = append(resp.(*kmsg.ListOffsetsResponse).Topics, denied...)
	}
	if len(kept) == 0 {
		resp := req.ResponseKind()
		add(resp)
		return resp, nil
	}
	req.Topics = kept
	return nil, add
}

// authMetadata: topics the principal may not Describe are hidden from an
// "every topic" answer and answer TOPIC_AUTHORIZATION_FAILED when named; a
// named topic that does not exist is auto-created only with Create on the
// cluster or the topic (otherwise TOPIC_AUTHORIZATION_FAILED).
func authMetadata(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.MetadataRequest)
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	var denied []string
	if !all {
		kept := req.Topics[:0:0]
		for _, t := range req.Topics {
			if t.Topic == nil { // by ID: the answer names it; masked below
				kept = append(kept, t)
				continue
			}
			name := *t.Topic
			ok := c.topic(acl.OpDescribe, name)
			if ok && req.AllowAutoTopicCreation && !c.topicExists(name) {
				ok = c.cluster(acl.OpCreate) || c.topic(acl.OpCreate, name)
			}
			if ok {
				kept = append(kept, t)
			} else {
				denied = append(denied, name)
			}
		}
		if len(kept) == 0 {
			// Every topic denied: an empty list would mean "every topic"
			// (v0), so ask for them with no auto-creation, and mask.
			req.AllowAutoTopicCreation = false
		} else {
			req.Topics = kept
		}
	}
	return nil, func(resp any) {
		r := resp.(*kmsg.MetadataResponse)
		kept := make([]kmsg.MetadataResponseTopic, 0, len(r.Topics)) // never in place: the handler may answer from a cache
		seen := map[string]bool{}
		for _, t := range r.Topics {
			if t.Topic == nil || c.topic(acl.OpDescribe, *t.Topic) {
				if t.Topic == nil || !contains(denied, *t.Topic) {
					kept = append(kept, t)
					continue
				}
			}
			if all {
				continue // hidden
			}
			seen[*t.Topic] = true
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = t.Topic, errTopicAuth
			kept = append(kept, mt)
		}
		for _, name := range denied {
			if !seen[name] {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.ErrorCode = kmsg.StringPtr(name), errTopicAuth
				kept = append(kept, mt)
				seen[name] = true
			}
		}
		if req.IncludeTopicAuthorizedOperations {
			for i := range kept {
				if t := &kept[i]; t.Topic != nil && t.ErrorCode != errTopicAuth {
					t.AuthorizedOperations = c.authorizedOps(acl.ResourceTopic, *t.Topic)
				}
			}
		}
		if req.IncludeClusterAuthorizedOperations {
			r.AuthorizedOperations = c.authorizedOps(acl.ResourceCluster, acl.ClusterName)
		}
		r.Topics = kept
	}
}

// authDescribeCluster: everyone may (as Kafka); the cluster's authorized
// operations are filled in when asked.
func authDescribeCluster(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	if !r.(*kmsg.DescribeClusterRequest).IncludeClusterAuthorizedOperations {
		return nil, nil
	}
	return nil, func(resp any) {
		resp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations = c.authorizedOps(acl.ResourceCluster, acl.ClusterName)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func authOffsetCommit(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.OffsetCommitRequest)
	groupOK := c.group(acl.OpRead, req.Group)
	var denied []kmsg.OffsetCommitResponseTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		code := int16(0)
		switch {
		case !groupOK:
			code = errGroupAuth
		case !c.topic(acl.OpRead, t.Topic):
			code = errTopicAuth
		}
		if code == 0 {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	if len(denied) == 0 && groupOK {
		return nil, nil
	}
	add := func(resp any) {
		r := resp.(*kmsg.OffsetCommitResponse)
		r.Topics = append(r.Topics, denied...)
	}
	if len(kept) == 0 {
		resp := req.ResponseKind()
		add(resp)
		return resp, nil
	}
	req.Topics = kept
	return nil, add
}

// authOffsetFetch: Describe on the group (else GROUP_AUTHORIZATION_FAILED:
// per partition in v0-1, for the request in v2-7, per group in v8+), then
// Describe on each topic: a named one answers TOPIC_AUTHORIZATION_FAILED, an
// "every topic" answer leaves it out.
func authOffsetFetch(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.OffsetFetchRequest)
	deniedParts := func(topic string, parts []int32, code int16) kmsg.OffsetFetchResponseGroupTopic {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = topic
		for _, p := range parts {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	// filterTopics filters a named topic list; the patch adds the denied.
	type topicList = []kmsg.OffsetFetchRequestGroupTopic
	filter := func(topics topicList) (topicList, []kmsg.OffsetFetchResponseGroupTopic) {
		if topics == nil {
			return nil, nil
		}
		kept := topics[:0:0]
		var denied []kmsg.OffsetFetchResponseGroupTopic
		for _, t := range topics {
			if c.topic(acl.OpDescribe, t.Topic) {
				kept = append(kept, t)
			} else {
				denied = append(denied, deniedParts(t.Topic, t.Partitions, errTopicAuth))
			}
		}
		return kept, denied
	}
	visible := func(topics []kmsg.OffsetFetchResponseGroupTopic) []kmsg.OffsetFetchResponseGroupTopic {
		kept := make([]kmsg.OffsetFetchResponseGroupTopic, 0, len(topics))
		for _, t := range topics {
			if c.topic(acl.OpDescribe, t.Topic) {
				kept = append(kept, t)
			}
		}
		return kept
	}
	if req.Version >= 8 {
		var deniedGroups []kmsg.OffsetFetchResponseGroup
		deniedTopics := map[string][]kmsg.OffsetFetchResponseGroupTopic{}
		kept := req.Groups[:0:0]
		for _, g := range req.Groups {
			if !c.group(acl.OpDescribe, g.Group) {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group, rg.ErrorCode = g.Group, errGroupAuth
				deniedGroups = append(deniedGroups, rg)
				continue
			}
			var d []kmsg.OffsetFetchResponseGroupTopic
			g.Topics, d = filter(g.Topics)
			deniedTopics[g.Group] = d
			kept = append(kept, g)
		}
		add := func(resp any) {
			r := resp.(*kmsg.OffsetFetchResponse)
			for i := range r.Groups {
				g := &r.Groups[i]
				g.Topics = append(visible(g.Topics), deniedTopics[g.Group]...)
			}
			r.Groups = append(r.Groups, deniedGroups...)
		}
		if len(kept) == 0 && len(deniedGroups) > 0 {
			resp := req.ResponseKind()
			add(resp)
			return resp, nil
		}
		req.Groups = kept
		return nil, add
	}
	// v0-7: one group. The request's topics share the group topic's shape.
	if !c.group(acl.OpDescribe, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		if req.Version >= 2 {
			resp.ErrorCode = errGroupAuth
			return resp, nil
		}
		for _, t := range req.Topics {
			g := deniedParts(t.Topic, t.Partitions, errGroupAuth)
			resp.Topics = append(resp.Topics, fromGroupTopic(g))
		}
		return resp, nil
	}
	var named topicList
	if req.Topics != nil {
		named = make(topicList, len(req.Topics))
		for i, t := range req.Topics {
			named[i] = kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions}
		}
	}
	kept, denied := filter(named)
	if req.Topics != nil {
		req.Topics = req.Topics[:0:0]
		for _, t := range kept {
			req.Topics = append(req.Topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	return nil, func(resp any) {
		r := resp.(*kmsg.OffsetFetchResponse)
		kept := make([]kmsg.OffsetFetchResponseTopic, 0, len(r.Topics))
		for _, t := range r.Topics {
			if c.topic(acl.OpDescribe, t.Topic) {
				kept = append(kept, t)
			}
		}
		for _, d := range denied {
			kept = append(kept, fromGroupTopic(d))
		}
		r.Topics = kept
	}
}

func fromGroupTopic(g kmsg.OffsetFetchResponseGroupTopic) kmsg.OffsetFetchResponseTopic {
	t := kmsg.NewOffsetFetchResponseTopic()
	t.Topic = g.Topic
	for _, p := range g.Partitions {
		tp := kmsg.NewOffsetFetchResponseTopicPartition()
		tp.Partition, tp.Offset, tp.LeaderEpoch, tp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.ErrorCode
		t.Partitions = append(t.Partitions, tp)
	}
	return t
}

// authFindCoordinator: Describe on the group (key type 0) or transactional
// id (1).
func authFindCoordinator(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.FindCoordinatorRequest)
	check := func(key string) int16 {
		switch req.CoordinatorType {
		case 0:
			if !c.group(acl.OpDescribe, key) {
				return errGroupAuth
			}
		case 1:
			if !c.txn(acl.OpDescribe, key) {
				return errTxnAuth
			}
		}
		return 0
	}
	if req.Version < 4 {
		if code := check(req.CoordinatorKey); code != 0 {
			resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
			resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
			return resp, nil
		}
		return nil, nil
	}
	var denied []kmsg.FindCoordinatorResponseCoordinator
	kept := req.CoordinatorKeys[:0:0]
	for _, k := range req.CoordinatorKeys {
		if code := check(k); code != 0 {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key, rc.ErrorCode, rc.NodeID, rc.Port = k, code, -1, -1
			denied = append(denied, rc)
			continue
		}
		kept = append(kept, k)
	}
	return finish(req, &req.CoordinatorKeys, kept, denied, func(resp any, d []kmsg.FindCoordinatorResponseCoordinator) {
		r := resp.(*kmsg.FindCoordinatorResponse)
		r.Coordinators = append(r.Coordinators, d...)
	})
}

func authDescribeGroups(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.DescribeGroupsRequest)
	var denied []kmsg.DescribeGroupsResponseGroup
	kept := req.Groups[:0:0]
	for _, g := range req.Groups {
		if c.group(acl.OpDescribe, g) {
			kept = append(kept, g)
			continue
		}
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, errGroupAuth
		denied = append(denied, rg)
	}
	if len(denied) == 0 && !req.IncludeAuthorizedOperations {
		return nil, nil
	}
	add := func(resp any) {
		r := resp.(*kmsg.DescribeGroupsResponse)
		if req.IncludeAuthorizedOperations {
			for i := range r.Groups {
				r.Groups[i].AuthorizedOperations = c.authorizedOps(acl.ResourceGroup, r.Groups[i].Group)
			}
		}
		r.Groups = append(r.Groups, denied...)
	}
	if len(kept) == 0 {
		resp := req.ResponseKind()
		add(resp)
		return resp, nil
	}
	req.Groups = kept
	return nil, add
}

func authConsumerGroupDescribe(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.ConsumerGroupDescribeRequest)
	var denied []kmsg.ConsumerGroupDescribeResponseGroup
	kept := req.Groups[:0:0]
	for _, g := range req.Groups {
		if c.group(acl.OpDescribe, g) {
			kept = append(kept, g)
			continue
		}
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.ErrorCode = g, errGroupAuth
		denied = append(denied, rg)
	}
	return finish(req, &req.Groups, kept, denied, func(resp any, d []kmsg.ConsumerGroupDescribeResponseGroup) {
		r := resp.(*kmsg.ConsumerGroupDescribeResponse)
		r.Groups = append(r.Groups, d...)
	})
}

// authListGroups: Describe on the cluster lists every group; otherwise
// only those the principal may Describe.
func authListGroups(c authCheck, _ kmsg.Request) (kmsg.Response, patch) {
	if c.cluster(acl.OpDescribe) {
		return nil, nil
	}
	return nil, func(resp any) {
		r := resp.(*kmsg.ListGroupsResponse)
		kept := make([]kmsg.ListGroupsResponseGroup, 0, len(r.Groups))
		for _, g := range r.Groups {
			if c.group(acl.OpDescribe, g.Group) {
				kept = append(kept, g)
			}
		}
		r.Groups = kept
	}
}

// authCreateTopics: Create on the cluster, or on each topic.
func authCreateTopics(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.CreateTopicsRequest)
	if c.cluster(acl.OpCreate) {
		return nil, nil
	}
	var denied []kmsg.CreateTopicsResponseTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		if c.topic(acl.OpCreate, t.Topic) {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.NumPartitions, rt.ReplicationFactor = t.Topic, errTopicAuth, -1, -1
		denied = append(denied, rt)
	}
	return finish(req, &req.Topics, kept, denied, func(resp any, d []kmsg.CreateTopicsResponseTopic) {
		r := resp.(*kmsg.CreateTopicsResponse)
		r.Topics = append(r.Topics, d...)
	})
}

// authDeleteTopics: Delete on each topic (named, or by ID in v6+: an ID not
// known is left to the handler, which answers UNKNOWN_TOPIC_ID).
func authDeleteTopics(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.DeleteTopicsRequest)
	var denied []kmsg.DeleteTopicsResponseTopic
	deny := func(name string, id [16]byte) {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = kmsg.StringPtr(name), id, errTopicAuth
		denied = append(denied, rt)
	}
	keptNames := req.TopicNames[:0:0]
	for _, t := range req.TopicNames {
		if c.topic(acl.OpDelete, t) {
			keptNames = append(keptNames, t)
		} else {
			deny(t, [16]byte{})
		}
	}
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		name, known := "", false
		if t.Topic != nil {
			name, known = *t.Topic, true
		} else if c.topicName != nil {
			name, known = c.topicName(t.TopicID)
		}
		if !known || c.topic(acl.OpDelete, name) {
			kept = append(kept, t)
		} else {
			deny(name, t.TopicID)
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	add := func(resp any) {
		r := resp.(*kmsg.DeleteTopicsResponse)
		r.Topics = append(r.Topics, denied...)
	}
	if len(keptNames) == 0 && len(kept) == 0 {
		resp := req.ResponseKind()
		add(resp)
		return resp, nil
	}
	req.TopicNames, req.Topics = keptNames, kept
	return nil, add
}

func authDeleteRecords(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.DeleteRecordsRequest)
	var denied []kmsg.DeleteRecordsResponseTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		if c.topic(acl.OpDelete, t.Topic) {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LowWatermark = p.Partition, errTopicAuth, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	return finish(req, &req.Topics, kept, denied, func(resp any, d []kmsg.DeleteRecordsResponseTopic) {
		r := resp.(*kmsg.DeleteRecordsResponse)
		r.Topics = append(r.Topics, d...)
	})
}

// authInitProducerID: Write on the transactional id; without one,
// IdempotentWrite on the cluster or Write on some topic (KIP-679).
func authInitProducerID(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.InitProducerIDRequest)
	code := int16(0)
	switch {
	case req.TransactionalID != nil:
		if !c.txn(acl.OpWrite, *req.TransactionalID) {
			code = errTxnAuth
		}
	case !c.cluster(acl.OpIdempotentWrite) && !c.a.AuthorizeAny(c.principal, c.host, acl.OpWrite, acl.ResourceTopic):
		code = errClusterAuth
	}
	if code == 0 {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp, nil
}

// authOffsetForLeaderEpoch: a follower (ReplicaID >= 0, v3+) needs
// ClusterAction on the cluster; everyone Describe on each topic.
func authOffsetForLeaderEpoch(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.OffsetForLeaderEpochRequest)
	code := int16(0)
	if req.Version >= 3 && req.ReplicaID >= 0 && !c.cluster(acl.OpClusterAction) {
		code = errClusterAuth
	}
	var denied []kmsg.OffsetForLeaderEpochResponseTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		tc := code
		if tc == 0 && !c.topic(acl.OpDescribe, t.Topic) {
			tc = errTopicAuth
		}
		if tc == 0 {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, tc, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	return finish(req, &req.Topics, kept, denied, func(resp any, d []kmsg.OffsetForLeaderEpochResponseTopic) {
		r := resp.(*kmsg.OffsetForLeaderEpochResponse)
		r.Topics = append(r.Topics, d...)
	})
}

// configCheck: op on the topic for topic resources (2), on the cluster for
// broker (4) and broker-logger (8) resources.
func configCheck(c authCheck, op acl.Operation, t kmsg.ConfigResourceType, name string) int16 {
	switch t {
	case kmsg.ConfigResourceTypeTopic:
		if !c.topic(op, name) {
			return errTopicAuth
		}
	default:
		if !c.cluster(op) {
			return errClusterAuth
		}
	}
	return 0
}

func authDescribeConfigs(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.DescribeConfigsRequest)
	var denied []kmsg.DescribeConfigsResponseResource
	kept := req.Resources[:0:0]
	for _, res := range req.Resources {
		if code := configCheck(c, acl.OpDescribeConfigs, res.ResourceType, res.ResourceName); code != 0 {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
			denied = append(denied, rr)
			continue
		}
		kept = append(kept, res)
	}
	return finish(req, &req.Resources, kept, denied, func(resp any, d []kmsg.DescribeConfigsResponseResource) {
		r := resp.(*kmsg.DescribeConfigsResponse)
		r.Resources = append(r.Resources, d...)
	})
}

func authAlterConfigs(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.AlterConfigsRequest)
	var denied []kmsg.AlterConfigsResponseResource
	kept := req.Resources[:0:0]
	for _, res := range req.Resources {
		if code := configCheck(c, acl.OpAlterConfigs, res.ResourceType, res.ResourceName); code != 0 {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
			denied = append(denied, rr)
			continue
		}
		kept = append(kept, res)
	}
	return finish(req, &req.Resources, kept, denied, func(resp any, d []kmsg.AlterConfigsResponseResource) {
		r := resp.(*kmsg.AlterConfigsResponse)
		r.Resources = append(r.Resources, d...)
	})
}

func authIncrementalAlterConfigs(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.IncrementalAlterConfigsRequest)
	var denied []kmsg.IncrementalAlterConfigsResponseResource
	kept := req.Resources[:0:0]
	for _, res := range req.Resources {
		if code := configCheck(c, acl.OpAlterConfigs, res.ResourceType, res.ResourceName); code != 0 {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
			denied = append(denied, rr)
			continue
		}
		kept = append(kept, res)
	}
	return finish(req, &req.Resources, kept, denied, func(resp any, d []kmsg.IncrementalAlterConfigsResponseResource) {
		r := resp.(*kmsg.IncrementalAlterConfigsResponse)
		r.Resources = append(r.Resources, d...)
	})
}

// authCreatePartitions: Alter on each topic.
func authCreatePartitions(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.CreatePartitionsRequest)
	var denied []kmsg.CreatePartitionsResponseTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		if c.topic(acl.OpAlter, t.Topic) {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, errTopicAuth
		denied = append(denied, rt)
	}
	return finish(req, &req.Topics, kept, denied, func(resp any, d []kmsg.CreatePartitionsResponseTopic) {
		r := resp.(*kmsg.CreatePartitionsResponse)
		r.Topics = append(r.Topics, d...)
	})
}

// authDeleteGroups: Delete on each group.
func authDeleteGroups(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.DeleteGroupsRequest)
	var denied []kmsg.DeleteGroupsResponseGroup
	kept := req.Groups[:0:0]
	for _, g := range req.Groups {
		if c.group(acl.OpDelete, g) {
			kept = append(kept, g)
			continue
		}
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, errGroupAuth
		denied = append(denied, rg)
	}
	return finish(req, &req.Groups, kept, denied, func(resp any, d []kmsg.DeleteGroupsResponseGroup) {
		r := resp.(*kmsg.DeleteGroupsResponse)
		r.Groups = append(r.Groups, d...)
	})
}

// authOffsetDelete: Delete on the group, Read on each topic.
func authOffsetDelete(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.OffsetDeleteRequest)
	if !c.group(acl.OpDelete, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = errGroupAuth
		return resp, nil
	}
	var denied []kmsg.OffsetDeleteResponseTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		if c.topic(acl.OpRead, t.Topic) {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, errTopicAuth
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	return finish(req, &req.Topics, kept, denied, func(resp any, d []kmsg.OffsetDeleteResponseTopic) {
		r := resp.(*kmsg.OffsetDeleteResponse)
		r.Topics = append(r.Topics, d...)
	})
}

// authDescribeProducers: Read on each topic.
func authDescribeProducers(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.DescribeProducersRequest)
	var denied []kmsg.DescribeProducersResponseTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		if c.topic(acl.OpRead, t.Topic) {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, errTopicAuth
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	return finish(req, &req.Topics, kept, denied, func(resp any, d []kmsg.DescribeProducersResponseTopic) {
		r := resp.(*kmsg.DescribeProducersResponse)
		r.Topics = append(r.Topics, d...)
	})
}

// authCreateACLs: Alter on the cluster, else every creation fails.
func authCreateACLs(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.CreateACLsRequest)
	if c.cluster(acl.OpAlter) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode = errClusterAuth
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// authDeleteACLs: Alter on the cluster, else every filter fails.
func authDeleteACLs(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.DeleteACLsRequest)
	if c.cluster(acl.OpAlter) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		res.ErrorCode = errClusterAuth
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// authWriteTxnMarkers: ClusterAction on the cluster (an inter-broker API);
// denied, every partition answers CLUSTER_AUTHORIZATION_FAILED.
func authWriteTxnMarkers(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.WriteTxnMarkersRequest)
	if c.cluster(acl.OpClusterAction) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, errClusterAuth
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}

// authTxnOffsetCommit: Write on the transactional id, then Read on the
// group (else every partition answers TRANSACTIONAL_ID_ or
// GROUP_AUTHORIZATION_FAILED), then Read on each topic (per partition
// TOPIC_AUTHORIZATION_FAILED), as Kafka checks them.
func authTxnOffsetCommit(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.TxnOffsetCommitRequest)
	all := int16(0)
	switch {
	case !c.txn(acl.OpWrite, req.TransactionalID):
		all = errTxnAuth
	case !c.group(acl.OpRead, req.Group):
		all = errGroupAuth
	}
	var denied []kmsg.TxnOffsetCommitResponseTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		code := all
		if code == 0 && !c.topic(acl.OpRead, t.Topic) {
			code = errTopicAuth
		}
		if code == 0 {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	return finish(req, &req.Topics, kept, denied, func(resp any, d []kmsg.TxnOffsetCommitResponseTopic) {
		r := resp.(*kmsg.TxnOffsetCommitResponse)
		r.Topics = append(r.Topics, d...)
	})
}
