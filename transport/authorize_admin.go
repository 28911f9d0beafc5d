package transport

// The authorizer's checks of the admin APIs: the cluster, topics,
// partitions, records, configs and ACLs.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/acl"
)

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
