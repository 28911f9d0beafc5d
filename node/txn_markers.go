package node

// Transaction markers (helper txndata of issue 13): the node appends the
// markers of a transaction to the partitions it leads, and sends them to
// the leaders of the others with WriteTxnMarkers (API 27), as Kafka's
// TransactionMarkerChannelManager does. A marker append is a leader's
// append with acks=all semantics: it returns once the in-sync replicas have
// the marker (min.insync.replicas applies, as to a produce with acks=-1).

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cluster/peer"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/partlog"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// TxnVerifier is KIP-890 part 1's check of a transactional produce: nil
// when the partition is in the producer's ongoing transaction (the
// coordinator's AddPartitionsToTxn added it), an error wrapping
// producers.ErrInvalidTxnState (or the coordinator's reason) otherwise.
type TxnVerifier func(ctx context.Context, transactionalID string, producerID int64, epoch int16, topic string, partition int32) error

// WriteTxnMarker appends marker m to a partition this broker leads, in its
// leader epoch, and waits for the in-sync replicas as acks=all does. The
// partition may be an internal one (__consumer_offsets,
// __transaction_state): markers are the broker's writes, not a client's.
// A marker that lands in a partition of OffsetsTopic is handed to the
// group coordinator (Node.TxnOffsetsDone), which makes the transaction's
// offsets visible (commit) or drops them (abort).
func (n *Node) WriteTxnMarker(ctx context.Context, m logs.Marker, topic string, partition int32) error {
	p, epoch, err := n.leaderPartition(topic, partition)
	if err != nil {
		return err
	}
	minISR := p.Settings().MinInsyncReplicas
	if err := p.checkAppend(minISR); err != nil {
		return err
	}
	durable := p.Settings().DurableAcks
	if !durable {
		p.appends.begin()
	}
	res, err := func() (logs.AppendResult, error) {
		if !durable {
			defer p.appends.end()
		}
		return p.AppendMarker(ctx, m, epoch)
	}()
	p.appended()
	if errors.Is(err, partlog.ErrFailed) {
		p.logFailed()
	}
	if err != nil {
		return staleLeader(err)
	}
	if err := p.waitAcksAll(ctx, res.NextOffset, minISR); err != nil {
		return err
	}
	// As Kafka's coordinator completes a group's transactional offsets
	// once the marker's write is acknowledged: offsets never show that a
	// new leader, missing the marker, would take back.
	if topic == OffsetsTopic {
		if done := n.txnOffsetsDone; done != nil {
			done(partition, m.ProducerID, m.Commit)
		}
	}
	return nil
}

// writeTxnMarkers writes marker m to every partition of parts: those led
// here by WriteTxnMarker, the others with one WriteTxnMarkers request per
// leader. It returns one error per partition (nil: the marker is
// replicated as acks=all requires); the coordinator retries the failed ones.
// A partition without a leader, or whose leader is unknown, fails
// (retriable: ErrLeaderNotAvailable). ctx bounds everything, the waits for
// the in-sync replicas included: the caller gives it a deadline. Requests to
// one broker go one at a time on its connection (cluster/peer).
func (n *Node) writeTxnMarkers(ctx context.Context, m logs.Marker, parts []TopicPartition) []error {
	errs := make([]error, len(parts))
	im, _ := n.image.load()
	remote := map[int32][]int{} // leader -> indexes in parts
	var wg sync.WaitGroup
	for i, tp := range parts {
		t := im.Topics[tp.Topic]
		switch {
		case t == nil || t.Deleting:
			// A deleted topic's markers have nowhere to go: done (Kafka's
			// coordinator drops them too).
			continue
		case tp.Partition < 0 || int(tp.Partition) >= len(t.Assignment):
			errs[i] = fmt.Errorf("%w: %q has %d partitions, not %d", ErrUnknownPartition, tp.Topic, len(t.Assignment), tp.Partition)
			continue
		}
		v := im.View(t, int(tp.Partition))
		switch v.Leader {
		case meta.NoLeader:
			errs[i] = fmt.Errorf("%w: %s", ErrLeaderNotAvailable, logs.DirName(tp.Topic, tp.Partition))
		case n.cfg.NodeID:
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = n.WriteTxnMarker(ctx, m, tp.Topic, tp.Partition)
			}()
		default:
			remote[v.Leader] = append(remote[v.Leader], i)
		}
	}
	for leader, idx := range remote {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.sendTxnMarkers(ctx, leader, m, parts, idx, errs)
		}()
	}
	wg.Wait()
	return errs
}

// sendTxnMarkers sends one WriteTxnMarkers request to leader for the
// partitions parts[idx...], filling in their errors.
func (n *Node) sendTxnMarkers(ctx context.Context, leader int32, m logs.Marker, parts []TopicPartition, idx []int, errs []error) {
	fail := func(err error) {
		for _, i := range idx {
			errs[i] = err
		}
	}
	cl, err := n.markerClients.client(n, leader)
	if err != nil {
		fail(fmt.Errorf("%w: broker %d: %w", ErrLeaderNotAvailable, leader, err))
		return
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	byTopic := map[string]int{}
	for _, i := range idx {
		tp := parts[i]
		k, ok := byTopic[tp.Topic]
		if !ok {
			k = len(mk.Topics)
			byTopic[tp.Topic] = k
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = tp.Topic
			mk.Topics = append(mk.Topics, t)
		}
		mk.Topics[k].Partitions = append(mk.Topics[k].Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, mk)
	resp, err := cl.WriteTxnMarkers(ctx, req)
	if err != nil {
		fail(fmt.Errorf("%w: WriteTxnMarkers to broker %d: %w", ErrLeaderNotAvailable, leader, err))
		return
	}
	got := map[TopicPartition]error{}
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				got[TopicPartition{rt.Topic, rp.Partition}] = kerr.ErrorForCode(rp.ErrorCode)
			}
		}
	}
	for _, i := range idx {
		err, ok := got[parts[i]]
		if !ok {
			err = fmt.Errorf("%w: broker %d did not answer for %s", ErrLeaderNotAvailable, leader, logs.DirName(parts[i].Topic, parts[i].Partition))
		}
		errs[i] = err
	}
}

// markerClients are the connections to other brokers that markers are
// sent on, one per broker, dialed when first needed (again when its
// address changed), closed with the node.
type markerClients struct {
	mu      sync.Mutex
	clients map[int32]*peer.Client
	closed  bool
}

func (mc *markerClients) client(n *Node, id int32) (*peer.Client, error) {
	im, _ := n.image.load()
	b, ok := im.Brokers[id]
	if !ok {
		return nil, fmt.Errorf("broker %d is not registered", id)
	}
	addr, err := n.peerAddr(brokerOf(b))
	if err != nil {
		return nil, err
	}
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.closed {
		return nil, ErrClosed
	}
	if cl := mc.clients[id]; cl != nil {
		if cl.Addr() == addr {
			return cl, nil
		}
		cl.Close()
	}
	cl, err := peer.Dial(addr, n.cfg.NodeID, n.cfg.ReplicaDialer)
	if err != nil {
		return nil, err
	}
	if mc.clients == nil {
		mc.clients = map[int32]*peer.Client{}
	}
	mc.clients[id] = cl
	return cl, nil
}

func (mc *markerClients) close() {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	mc.closed = true
	for _, cl := range mc.clients {
		cl.Close()
	}
	mc.clients = nil
}

// WriteTxnMarkers is writeTxnMarkers, for tools and tests outside the
// package (the transaction coordinator calls writeTxnMarkers).
func (n *Node) WriteTxnMarkers(ctx context.Context, m logs.Marker, parts []TopicPartition) []error {
	return n.writeTxnMarkers(ctx, m, parts)
}
