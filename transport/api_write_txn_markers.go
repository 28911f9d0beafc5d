package transport

// WriteTxnMarkers: v0-v1.
//
// The transaction coordinator of another broker asks this one, the leader
// of the partitions named, to append transaction markers (control batches:
// commit or abort of one producer's transaction). Each partition's marker
// is appended in the leader's epoch and answered once the in-sync replicas
// have it (node.Node.WriteTxnMarker: acks=all semantics, internal topics
// included); the partitions of a request are written concurrently. Errors
// per partition: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_PRODUCER_EPOCH (a marker older than the producer's epoch),
// TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch than a marker
// already written), NOT_ENOUGH_REPLICAS, KAFKA_STORAGE_ERROR ... v1 is the
// flexible version. weir has no authorization: any client may send it, as
// to a Kafka broker without ACLs (where ClusterAction is allowed).

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/logs"
)

func handleWriteTxnMarkers(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	var wg sync.WaitGroup
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	for i, rm := range req.Markers {
		sm := &resp.Markers[i]
		sm.Default()
		sm.ProducerID = rm.ProducerID
		m := logs.Marker{ProducerID: rm.ProducerID, ProducerEpoch: rm.ProducerEpoch, Commit: rm.Committed,
			CoordinatorEpoch: rm.CoordinatorEpoch}
		sm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(rm.Topics))
		for j, rt := range rm.Topics {
			st := &sm.Topics[j]
			st.Default()
			st.Topic = rt.Topic
			st.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(rt.Partitions))
			for k, p := range rt.Partitions {
				sp := &st.Partitions[k]
				sp.Default()
				sp.Partition = p
				wg.Add(1)
				go func() {
					defer wg.Done()
					sp.ErrorCode = s.code(s.node.WriteTxnMarker(ctx, m, rt.Topic, p))
				}()
			}
		}
	}
	wg.Wait()
	return resp, nil
}
