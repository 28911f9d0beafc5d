package transport

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/acl"
)

// checker returns the check of principal User:alice from 10.0.0.1 over bs.
func checker(bs ...acl.Binding) authCheck {
	return authCheck{a: acl.New(acl.Config{}, acl.NewSet(bs...)), principal: "User:alice", host: "10.0.0.1",
		topicName:   func(id [16]byte) (string, bool) { return map[[16]byte]string{{1}: "t-by-id"}[id], id == [16]byte{1} },
		topicExists: func(name string) bool { return name != "new" },
	}
}

func allowAlice(rt acl.ResourceType, pt acl.PatternType, name string, op acl.Operation) acl.Binding {
	return acl.Binding{Pattern: acl.Pattern{Type: rt, Pattern: pt, Name: name},
		Entry: acl.Entry{Principal: "User:alice", Host: "*", Operation: op, Permission: acl.Allow}}
}

func TestAuthRulesCoverEveryAPI(t *testing.T) {
	for _, a := range apis {
		if _, ok := authRules[a.key]; !ok && a.raw == nil {
			t.Errorf("%s (%d) has no authorization rule in authRules: refused whole under an authorizer", kmsg.NameForKey(a.key), a.key)
		}
		if a.raw != nil && a.key != 1 {
			t.Errorf("%s (%d) is a raw API without an authorization rule", kmsg.NameForKey(a.key), a.key)
		}
	}
}

func TestAuthProduceFiltersDeniedTopics(t *testing.T) {
	c := checker(allowAlice(acl.ResourceTopic, acl.PatternPrefixed, "pub-", acl.OpWrite))
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	for _, name := range []string{"pub-a", "secret", "pub-b"} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = name
		rt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0}, {Partition: 1}}
		req.Topics = append(req.Topics, rt)
	}
	deny, p := authProduce(c, req)
	if deny != nil || p == nil {
		t.Fatalf("deny %v, patch %v: want a filtered request and a patch", deny, p != nil)
	}
	if len(req.Topics) != 2 || req.Topics[0].Topic != "pub-a" || req.Topics[1].Topic != "pub-b" {
		t.Fatalf("request keeps %v", req.Topics)
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = []kmsg.ProduceResponseTopic{{Topic: "pub-a"}, {Topic: "pub-b"}}
	p(resp)
	if len(resp.Topics) != 3 || resp.Topics[2].Topic != "secret" || len(resp.Topics[2].Partitions) != 2 ||
		resp.Topics[2].Partitions[1].ErrorCode != errTopicAuth {
		t.Fatalf("patched response %+v", resp.Topics)
	}

	// A topic that does not exist, with Write but no Create: not
	// auto-created, UNKNOWN_TOPIC_OR_PARTITION.
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "new", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0}}}}
	c.a = acl.New(acl.Config{}, acl.NewSet(allowAlice(acl.ResourceTopic, acl.PatternLiteral, "new", acl.OpWrite)))
	deny, _ = authProduce(c, req)
	if r, ok := deny.(*kmsg.ProduceResponse); !ok || r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce to a missing topic without Create: %+v", deny)
	}

	// Every topic denied: answered without the handler. A transactional
	// produce without Write on its id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
	req.Topics = req.Topics[:1]
	req.TransactionID = kmsg.StringPtr("tx")
	deny, _ = authProduce(c, req)
	if r, ok := deny.(*kmsg.ProduceResponse); !ok || r.Topics[0].Partitions[0].ErrorCode != errTxnAuth {
		t.Fatalf("transactional produce: %+v", deny)
	}
}

func TestAuthMetadataHidesAndDenies(t *testing.T) {
	c := checker(allowAlice(acl.ResourceTopic, acl.PatternLiteral, "seen", acl.OpRead),
		allowAlice(acl.ResourceTopic, acl.PatternLiteral, "new", acl.OpDescribe))
	resp := func() *kmsg.MetadataResponse {
		r := kmsg.NewPtrMetadataResponse()
		for _, n := range []string{"seen", "hidden"} {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.Partitions = kmsg.StringPtr(n), []kmsg.MetadataResponseTopicPartition{{}}
			r.Topics = append(r.Topics, mt)
		}
		return r
	}

	// Every topic: the hidden one is left out, and the handler's slice
	// (a cache, shared with other requests) is left alone.
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	_, p := authMetadata(c, req)
	r := resp()
	shared := r.Topics
	p(r)
	if len(r.Topics) != 1 || *r.Topics[0].Topic != "seen" {
		t.Fatalf("every topic: %+v", r.Topics)
	}
	if *shared[0].Topic != "seen" || *shared[1].Topic != "hidden" {
		t.Fatalf("the handler's slice was changed: %s, %s", *shared[0].Topic, *shared[1].Topic)
	}

	// Named: the hidden one answers TOPIC_AUTHORIZATION_FAILED, and "new"
	// (Describe, no Create, does not exist) is not auto-created.
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("seen")}, {Topic: kmsg.StringPtr("hidden")}, {Topic: kmsg.StringPtr("new")}}
	req.AllowAutoTopicCreation = true
	_, p = authMetadata(c, req)
	if len(req.Topics) != 1 || *req.Topics[0].Topic != "seen" {
		t.Fatalf("named request keeps %v", req.Topics)
	}
	r = resp()
	r.Topics = r.Topics[:1]
	p(r)
	got := map[string]int16{}
	for _, t := range r.Topics {
		got[*t.Topic] = t.ErrorCode
	}
	if len(got) != 3 || got["seen"] != 0 || got["hidden"] != errTopicAuth || got["new"] != errTopicAuth {
		t.Fatalf("named: %v", got)
	}

	// Every named topic denied: v0's empty list would mean every topic, so
	// the request keeps them, without auto-creation, and the answer masks.
	req.Version = 0
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("hidden")}}
	_, p = authMetadata(c, req)
	if len(req.Topics) != 1 || req.AllowAutoTopicCreation {
		t.Fatalf("all denied: request %v, auto-create %v", req.Topics, req.AllowAutoTopicCreation)
	}
	r = resp()
	r.Topics = r.Topics[1:]
	p(r)
	if len(r.Topics) != 1 || r.Topics[0].ErrorCode != errTopicAuth || len(r.Topics[0].Partitions) != 0 {
		t.Fatalf("all denied: %+v", r.Topics)
	}
}

func TestAuthFetch(t *testing.T) {
	c := checker(allowAlice(acl.ResourceTopic, acl.PatternLiteral, "r", acl.OpRead))
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID = 11, -1
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "r", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}}},
		{Topic: "x", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 3}}}}
	deny, p := authFetch(c, req)
	if deny != nil || len(req.Topics) != 1 || req.Topics[0].Topic != "r" {
		t.Fatalf("consumer: deny %v, request %v", deny, req.Topics)
	}
	resp := &fetchResponse{topics: []fetchTopic{{name: "r"}}}
	p(resp)
	if len(resp.topics) != 2 || resp.topics[1].name != "x" || resp.topics[1].parts[0].index != 3 ||
		resp.topics[1].parts[0].errCode != errTopicAuth {
		t.Fatalf("consumer: patched %+v", resp.topics)
	}
	// An incremental fetch: the partitions come from the session, and one
	// whose topic is no longer allowed answers the error, not its records.
	req.Topics = nil
	_, p = authFetch(c, req)
	resp = &fetchResponse{topics: []fetchTopic{{name: "r", parts: []fetchPart{{hw: 5}}}, {name: "revoked", parts: []fetchPart{{hw: 7}}}}}
	p(resp)
	if resp.topics[0].parts[0].errCode != 0 || resp.topics[1].parts[0].errCode != errTopicAuth || resp.topics[1].parts[0].hw != -1 {
		t.Fatalf("session fetch: patched %+v", resp.topics)
	}
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "r", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}}}}

	// A follower without ClusterAction: everything denied.
	req.ReplicaID = 2
	deny, _ = authFetch(c, req)
	if deny == nil || len(deny.topics) != 1 || deny.topics[0].parts[0].errCode != errTopicAuth {
		t.Fatalf("follower: %+v", deny)
	}
}

func TestAuthGroupsAndCluster(t *testing.T) {
	c := checker(allowAlice(acl.ResourceGroup, acl.PatternLiteral, "g", acl.OpRead),
		allowAlice(acl.ResourceTopic, acl.PatternLiteral, "t", acl.OpRead),
		allowAlice(acl.ResourceTopic, acl.PatternLiteral, "mine", acl.OpCreate),
		allowAlice(acl.ResourceTopic, acl.PatternLiteral, "t-by-id", acl.OpDelete))

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group = "other"
	if deny, _ := authRules[11](c, join); deny == nil || deny.(*kmsg.JoinGroupResponse).ErrorCode != errGroupAuth {
		t.Fatalf("JoinGroup of another group: %+v", deny)
	}
	join.Group = "g"
	if deny, _ := authRules[11](c, join); deny != nil {
		t.Fatalf("JoinGroup of g denied")
	}

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	for _, c2 := range []struct {
		group  string
		topics []string
		want   int16
	}{
		{"g", []string{"t"}, 0}, // Read on t implies Describe
		{"g", nil, 0},           // a heartbeat that does not repeat the subscription
		{"g", []string{"t", "u"}, errTopicAuth},
		{"other", []string{"t"}, errGroupAuth},
	} {
		hb.Group, hb.SubscribedTopicNames = c2.group, c2.topics
		deny, _ := authRules[68](c, hb)
		got := int16(0)
		if deny != nil {
			got = deny.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
		}
		if got != c2.want {
			t.Errorf("ConsumerGroupHeartbeat of %s subscribing to %v: error %d, want %d", c2.group, c2.topics, got, c2.want)
		}
	}

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = "g"
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t"}, {Topic: "u", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1}}}}
	_, p := authOffsetCommit(c, commit)
	cr := commit.ResponseKind().(*kmsg.OffsetCommitResponse)
	p(cr)
	if len(commit.Topics) != 1 || len(cr.Topics) != 1 || cr.Topics[0].Partitions[0].ErrorCode != errTopicAuth {
		t.Fatalf("OffsetCommit: request %v, response %+v", commit.Topics, cr.Topics)
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group = 5, "other"
	if deny, _ := authOffsetFetch(c, fetch); deny == nil || deny.(*kmsg.OffsetFetchResponse).ErrorCode != errGroupAuth {
		t.Fatalf("OffsetFetch v5 of another group: %+v", deny)
	}
	fetch.Version = 8
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}, {Group: "other"}}
	_, p = authOffsetFetch(c, fetch)
	fr := fetch.ResponseKind().(*kmsg.OffsetFetchResponse)
	fr.Groups = []kmsg.OffsetFetchResponseGroup{{Group: "g", Topics: []kmsg.OffsetFetchResponseGroupTopic{{Topic: "t"}, {Topic: "u"}}}}
	p(fr)
	if len(fetch.Groups) != 1 || len(fr.Groups) != 2 || len(fr.Groups[0].Topics) != 1 || fr.Groups[1].ErrorCode != errGroupAuth {
		t.Fatalf("OffsetFetch v8: %+v", fr.Groups)
	}

	create := kmsg.NewPtrCreateTopicsRequest()
	create.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "mine"}, {Topic: "theirs"}}
	_, p = authCreateTopics(c, create)
	if len(create.Topics) != 1 || create.Topics[0].Topic != "mine" {
		t.Fatalf("CreateTopics keeps %v", create.Topics)
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 6
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: [16]byte{1}}, {Topic: kmsg.StringPtr("t")}}
	_, p = authDeleteTopics(c, del)
	dr := del.ResponseKind().(*kmsg.DeleteTopicsResponse)
	p(dr)
	if len(del.Topics) != 1 || del.Topics[0].TopicID != [16]byte{1} || *dr.Topics[0].Topic != "t" || dr.Topics[0].ErrorCode != errTopicAuth {
		t.Fatalf("DeleteTopics: request %v, response %+v", del.Topics, dr.Topics)
	}

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0"}}
	if deny, _ := authDescribeConfigs(c, dc); deny == nil || deny.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode != errClusterAuth {
		t.Fatalf("DescribeConfigs of a broker: %+v", deny)
	}

	// InitProducerId without a transactional id: Write on some topic is
	// enough (alice has none: CLUSTER_AUTHORIZATION_FAILED), with one it
	// needs Write on the id.
	ip := kmsg.NewPtrInitProducerIDRequest()
	if deny, _ := authInitProducerID(c, ip); deny == nil || deny.(*kmsg.InitProducerIDResponse).ErrorCode != errClusterAuth {
		t.Fatalf("InitProducerId: %+v", deny)
	}
	c2 := checker(allowAlice(acl.ResourceTopic, acl.PatternPrefixed, "p", acl.OpWrite))
	if deny, _ := authInitProducerID(c2, ip); deny != nil {
		t.Fatalf("InitProducerId with Write on a prefix denied")
	}
	ip.TransactionalID = kmsg.StringPtr("tx")
	if deny, _ := authInitProducerID(c2, ip); deny == nil || deny.(*kmsg.InitProducerIDResponse).ErrorCode != errTxnAuth {
		t.Fatalf("InitProducerId of tx: %+v", deny)
	}

	lg := kmsg.NewPtrListGroupsRequest()
	_, p = authListGroups(c, lg)
	lr := lg.ResponseKind().(*kmsg.ListGroupsResponse)
	lr.Groups = []kmsg.ListGroupsResponseGroup{{Group: "g"}, {Group: "other"}}
	p(lr)
	if len(lr.Groups) != 1 || lr.Groups[0].Group != "g" {
		t.Fatalf("ListGroups: %+v", lr.Groups)
	}

	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Creations = make([]kmsg.CreateACLsRequestCreation, 2)
	if deny, _ := authCreateACLs(c, ca); deny == nil || len(deny.(*kmsg.CreateACLsResponse).Results) != 2 {
		t.Fatalf("CreateAcls without cluster Alter: %+v", deny)
	}
}

// TestAuthorizedOperations: asked for, Metadata, DescribeGroups and
// DescribeCluster answer the bit field of what the principal may do.
func TestAuthorizedOperations(t *testing.T) {
	c := checker(allowAlice(acl.ResourceTopic, acl.PatternLiteral, "t", acl.OpWrite),
		allowAlice(acl.ResourceGroup, acl.PatternLiteral, "g", acl.OpRead),
		allowAlice(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, acl.OpDescribe))
	md := kmsg.NewPtrMetadataRequest()
	md.Version, md.IncludeTopicAuthorizedOperations, md.IncludeClusterAuthorizedOperations = 10, true, true
	_, p := authMetadata(c, md)
	mr := md.ResponseKind().(*kmsg.MetadataResponse)
	mr.Topics = []kmsg.MetadataResponseTopic{{Topic: kmsg.StringPtr("t")}}
	p(mr)
	if got, want := mr.Topics[0].AuthorizedOperations, int32(1<<acl.OpWrite|1<<acl.OpDescribe); got != want {
		t.Errorf("topic t: authorized operations %b, want %b (Write, and Describe it implies)", got, want)
	}
	if got, want := mr.AuthorizedOperations, int32(1<<acl.OpDescribe); got != want {
		t.Errorf("cluster: authorized operations %b, want %b", got, want)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.IncludeAuthorizedOperations, dg.Groups = 5, true, []string{"g"}
	_, p = authDescribeGroups(c, dg)
	gr := dg.ResponseKind().(*kmsg.DescribeGroupsResponse)
	gr.Groups = []kmsg.DescribeGroupsResponseGroup{{Group: "g"}}
	p(gr)
	if got, want := gr.Groups[0].AuthorizedOperations, int32(1<<acl.OpRead|1<<acl.OpDescribe); got != want {
		t.Errorf("group g: authorized operations %b, want %b", got, want)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	_, p = authDescribeCluster(c, dc)
	cr := dc.ResponseKind().(*kmsg.DescribeClusterResponse)
	p(cr)
	if cr.ClusterAuthorizedOperations != 1<<acl.OpDescribe {
		t.Errorf("DescribeCluster: authorized operations %b", cr.ClusterAuthorizedOperations)
	}
}

func TestAuthTransactionAPIs(t *testing.T) {
	c := checker(allowAlice(acl.ResourceTransactionalID, acl.PatternLiteral, "tx", acl.OpWrite),
		allowAlice(acl.ResourceGroup, acl.PatternLiteral, "g", acl.OpRead),
		allowAlice(acl.ResourceTopic, acl.PatternLiteral, "t", acl.OpRead))
	commit := func(txn, group string, topics ...string) *kmsg.TxnOffsetCommitRequest {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group = txn, group
		for _, tp := range topics {
			req.Topics = append(req.Topics, kmsg.TxnOffsetCommitRequestTopic{Topic: tp,
				Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0}}})
		}
		return req
	}
	for _, tc := range []struct {
		req  *kmsg.TxnOffsetCommitRequest
		code int16
	}{
		{commit("other", "g", "t"), errTxnAuth},
		{commit("tx", "other", "t"), errGroupAuth},
		{commit("tx", "g", "u"), errTopicAuth},
	} {
		deny, _ := authTxnOffsetCommit(c, tc.req)
		if r, ok := deny.(*kmsg.TxnOffsetCommitResponse); !ok || r.Topics[0].Partitions[0].ErrorCode != tc.code {
			t.Errorf("TxnOffsetCommit %s/%s: %+v, want error %d", tc.req.TransactionalID, tc.req.Group, deny, tc.code)
		}
	}
	req := commit("tx", "g", "t", "u")
	_, p := authTxnOffsetCommit(c, req)
	if len(req.Topics) != 1 || req.Topics[0].Topic != "t" || p == nil {
		t.Fatalf("TxnOffsetCommit keeps %v", req.Topics)
	}

	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 7, Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "t", Partitions: []int32{0, 1}}}}}
	deny, _ := authWriteTxnMarkers(c, wm)
	if r, ok := deny.(*kmsg.WriteTxnMarkersResponse); !ok || r.Markers[0].ProducerID != 7 || r.Markers[0].Topics[0].Partitions[1].ErrorCode != errClusterAuth {
		t.Fatalf("WriteTxnMarkers without ClusterAction: %+v", deny)
	}
}
