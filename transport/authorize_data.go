package transport

// The authorizer's checks of the data path: produce, fetch, offsets and
// metadata (Kafka's KafkaApis; the README's ACL table lists the same).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/acl"
)

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
