package transport

// The authorizer's checks of the transactional APIs (InitProducerId,
// the coordinator's, the markers', TxnOffsetCommit) and of the SCRAM
// credentials' APIs (Kafka's
// KafkaApis handleAddPartitionsToTxnRequest, handleAddOffsetsToTxnRequest,
// handleEndTxnRequest, handleDescribeTransactionsRequest,
// handleListTransactionsRequest).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/acl"
)

// authAddPartitionsToTxn: v4+ (brokers verifying, KIP-890) needs
// ClusterAction on the cluster. Before: Write on the transactional id (else
// every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then Write
// on each topic; a request with any topic denied adds nothing, as Kafka
// answers it: TOPIC_AUTHORIZATION_FAILED for the denied topics' partitions,
// OPERATION_NOT_ATTEMPTED for the others.
func authAddPartitionsToTxn(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		if c.cluster(acl.OpClusterAction) {
			return nil, nil
		}
		resp.ErrorCode = errClusterAuth
		return resp, nil
	}
	all := int16(0)
	if !c.txn(acl.OpWrite, req.TransactionalID) {
		all = errTxnAuth
	}
	denied := false
	codes := make([]int16, len(req.Topics))
	for i, t := range req.Topics {
		switch {
		case all != 0:
			codes[i] = all
		case !c.topic(acl.OpWrite, t.Topic):
			codes[i], denied = errTopicAuth, true
		}
	}
	if all == 0 && !denied {
		return nil, nil
	}
	for i, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		code := codes[i]
		if code == 0 {
			code = kerr.OperationNotAttempted.Code
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// authAddOffsetsToTxn: Write on the transactional id, then Read on the
// group.
func authAddOffsetsToTxn(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.AddOffsetsToTxnRequest)
	code := int16(0)
	switch {
	case !c.txn(acl.OpWrite, req.TransactionalID):
		code = errTxnAuth
	case !c.group(acl.OpRead, req.Group):
		code = errGroupAuth
	}
	if code == 0 {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = code
	return resp, nil
}

// authEndTxn: Write on the transactional id.
func authEndTxn(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.EndTxnRequest)
	if c.txn(acl.OpWrite, req.TransactionalID) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = errTxnAuth
	return resp, nil
}

// authDescribeTransactions: Describe on each transactional id (a denied one
// answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED); of a described
// transaction's partitions, only those of topics the principal may
// Describe are listed.
func authDescribeTransactions(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.DescribeTransactionsRequest)
	var denied []kmsg.DescribeTransactionsResponseTransactionState
	kept := req.TransactionalIDs[:0:0]
	for _, id := range req.TransactionalIDs {
		if c.txn(acl.OpDescribe, id) {
			kept = append(kept, id)
			continue
		}
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ErrorCode = id, errTxnAuth
		denied = append(denied, st)
	}
	req.TransactionalIDs = kept
	return nil, func(resp any) {
		rr := resp.(*kmsg.DescribeTransactionsResponse)
		states := make([]kmsg.DescribeTransactionsResponseTransactionState, 0, len(rr.TransactionStates)+len(denied))
		for _, st := range rr.TransactionStates {
			topics := st.Topics[:0:0]
			for _, t := range st.Topics {
				if c.topic(acl.OpDescribe, t.Topic) {
					topics = append(topics, t)
				}
			}
			st.Topics = topics
			states = append(states, st)
		}
		rr.TransactionStates = append(states, denied...)
	}
}

// authListTransactions lists only the transactional ids the principal may
// Describe.
func authListTransactions(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	return nil, func(resp any) {
		rr := resp.(*kmsg.ListTransactionsResponse)
		kept := rr.TransactionStates[:0:0]
		for _, st := range rr.TransactionStates {
			if c.txn(acl.OpDescribe, st.TransactionalID) {
				kept = append(kept, st)
			}
		}
		rr.TransactionStates = kept
	}
}

// The SASL exchange is open to everyone: it is how a principal comes to be
// (Kafka authorizes neither SaslHandshake nor SaslAuthenticate).

// authDescribeUserScram: Describe on the cluster.
func authDescribeUserScram(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	if c.cluster(acl.OpDescribe) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.ErrorCode = errClusterAuth
	return resp, nil
}

// authAlterUserScram: Alter on the cluster; every user's result answers
// CLUSTER_AUTHORIZATION_FAILED otherwise.
func authAlterUserScram(c authCheck, r kmsg.Request) (kmsg.Response, patch) {
	req := r.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if c.cluster(acl.OpAlter) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		rr.User, rr.ErrorCode = user, errClusterAuth
		resp.Results = append(resp.Results, rr)
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return resp, nil
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
