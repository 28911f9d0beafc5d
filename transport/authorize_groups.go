package transport

// The authorizer's checks of the group coordinator's APIs and committed
// offsets.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/acl"
)

// authConsumerGroupHeartbeat: Read on the group, and Describe on every
// topic the member subscribes to (a heartbeat that names them); as Kafka's
// KafkaApis, one topic not describable refuses the whole heartbeat with
// TOPIC_AUTHORIZATION_FAILED, so a member cannot learn of topics it may
// not see through its assignment.
func authConsumerGroupHeartbeat(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.ConsumerGroupHeartbeatRequest)
	code := int16(0)
	if !c.group(acl.OpRead, req.Group) {
		code = errGroupAuth
	} else {
		for _, t := range req.SubscribedTopicNames {
			if !c.topic(acl.OpDescribe, t) {
				code = errTopicAuth
				break
			}
		}
	}
	if code == 0 {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = code
	return resp, nil
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
