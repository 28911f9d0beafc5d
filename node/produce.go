package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
)

// ProduceRequest is one Produce request's writes.
type ProduceRequest struct {
	// TransactionalID is the transactional producer's id (nil: not
	// transactional). Its transactional batches are verified with the
	// coordinator, when the node has a verifier (KIP-890 part 1).
	TransactionalID *string
	// Acks is 0 (no answer), 1 (the leader appended) or -1 (every in-sync
	// replica has the records: on one replica, the leader).
	Acks int16
	// Timeout bounds the wait for durable acks (weir.durable.acks); zero or
	// negative: the caller's ctx only.
	Timeout time.Duration
	// Partitions are the writes, answered in place.
	Partitions []ProducePartition
}

// ProducePartition is one partition's write and, once Produce returns, its
// result.
type ProducePartition struct {
	Topic     string
	Partition int32
	Records   []byte // whole record batches (v2), rewritten in place

	Err            error
	BaseOffset     int64 // -1 on error
	LogAppendTime  int64 // -1: the records keep their CreateTime
	LogStartOffset int64 // -1 when unknown

	guard producers.Guard // the transaction verification's (verifyTxnProduce)
}

// Produce appends every partition's records and fills in its result. The
// node decides what a produce needs: the topic exists (or is auto-created),
// the partition's min.insync.replicas can be met for acks=-1, and topics with
// durable acks wait for the fsync that covers their records, within Timeout.
// Partitions with durable acks are appended concurrently, so that one
// request's partitions share fsync rounds instead of queueing for them.
func (n *Node) Produce(ctx context.Context, req *ProduceRequest) {
	var reqErr error
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		reqErr = ErrInvalidAcks
	}
	var (
		wg       sync.WaitGroup
		dctx     context.Context // for durable appends: ctx within the request's timeout
		cancel   context.CancelFunc
		panicMu  sync.Mutex
		panicked []any
	)
	// The partitions to append, each one's append gate begun before the
	// first append (see appendGate).
	var buf [8]*replicated
	parts, handed := buf[:0], 0
	defer func() {
		// A panic must not leave a gate begun that no append ends.
		for _, p := range parts[handed:] {
			if p != nil && !p.Settings().DurableAcks {
				p.appends.end()
			}
		}
	}()
	for i := range req.Partitions {
		w := &req.Partitions[i]
		w.BaseOffset, w.LogAppendTime, w.LogStartOffset = -1, -1, -1
		if reqErr != nil {
			w.Err = reqErr
			parts = append(parts, nil)
			continue
		}
		p, err := n.producePartition(ctx, w.Topic, w.Partition)
		if err == nil {
			w.guard, err = n.verifyTxnProduce(ctx, req.TransactionalID, p, w)
		}
		if err == nil && req.Acks == -1 {
			err = p.checkAppend(p.Settings().MinInsyncReplicas)
		}
		if err != nil {
			w.Err = err
			p = nil
		} else if !p.Settings().DurableAcks {
			p.appends.begin()
		}
		parts = append(parts, p)
	}
	for i, p := range parts {
		handed = i + 1 // appendTo ends p's gate
		w := &req.Partitions[i]
		if p == nil {
			continue
		}
		if !p.Settings().DurableAcks && req.Acks != -1 {
			n.appendTo(ctx, p, w, req.Acks)
			continue
		}
		// Durable acks and acks=all wait: concurrently, within the
		// request's timeout.
		if dctx == nil {
			dctx, cancel = ctx, func() {}
			if req.Timeout > 0 {
				dctx, cancel = context.WithTimeout(ctx, req.Timeout)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A panic here is handed to the caller's goroutine, whose
			// recovery (the transport's) closes just that connection.
			defer func() {
				if p := recover(); p != nil {
					panicMu.Lock()
					panicked = append(panicked, p)
					panicMu.Unlock()
				}
			}()
			n.appendTo(dctx, p, w, req.Acks)
		}()
	}
	wg.Wait()
	if cancel != nil {
		cancel()
	}
	if len(panicked) > 0 {
		panic(panicked[0])
	}
}

// appendTo appends one partition's records, stamped with the leader epoch,
// and fills its result; with acks=all it waits until the ISR has them
// (the high watermark passes them).
func (n *Node) appendTo(ctx context.Context, p *replicated, w *ProducePartition, acks int16) {
	res, err := func() (logs.AppendResult, error) {
		if !p.Settings().DurableAcks { // begun by Produce
			defer p.appends.end()
		}
		return p.AppendVerified(ctx, w.Records, p.epoch.Load(), w.guard)
	}()
	p.appended()
	if errors.Is(err, partlog.ErrFailed) {
		p.logFailed()
	}
	err = staleLeader(err)
	w.LogStartOffset = p.Log().StartOffset()
	if err == nil && acks == -1 {
		err = p.waitAcksAll(ctx, res.NextOffset, p.Settings().MinInsyncReplicas)
	}
	if err != nil {
		w.Err = err
		n.logger.Debug("produce failed", "topic", p.Topic, "partition", p.Index, "err", err)
		return
	}
	w.BaseOffset = res.BaseOffset
	w.LogAppendTime = res.LogAppendTime
}

// verifyTxnProduce checks a partition's transactional batches with the
// transaction coordinator (KIP-890 part 1: the partition must be in the
// producer's ongoing transaction), when the node has a verifier, and
// returns the guard the append must carry (see core/producers, verify.go):
// a transaction aborted after the coordinator's answer (its marker written
// before the append) voids it, so the late batch is refused instead of
// opening a transaction nothing would end. A transaction already ongoing in
// the partition at the producer's epoch needs no question (Kafka verifies
// only a transaction's first batch per partition); the guard then holds
// only while it stays ongoing. A transactional batch without a
// transactional id in the request, or one the coordinator did not add, is
// refused (INVALID_TXN_STATE). Only the first transactional batch is asked
// about: a request's batches for one partition come from one producer.
func (n *Node) verifyTxnProduce(ctx context.Context, transactionalID *string, p *replicated, w *ProducePartition) (producers.Guard, error) {
	verify := n.txnVerifier
	if verify == nil {
		return producers.Unverified, nil
	}
	for b := w.Records; len(b) > 0; {
		h, err := record.ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			return producers.Unverified, nil // the log refuses it with the precise error
		}
		if h.Transactional() && !h.Control() {
			if transactionalID == nil {
				return producers.Unverified, fmt.Errorf("%w: transactional batch from producer %d without a transactional id",
					producers.ErrInvalidTxnState, h.ProducerID)
			}
			if h.ProducerID < 0 {
				return producers.Unverified, nil // the log refuses it (ErrTransactionalWithoutProducer)
			}
			g, err := p.StartTxnVerification(h.ProducerID, h.ProducerEpoch)
			if err != nil || g == producers.Ongoing {
				return g, err
			}
			return g, verify(ctx, *transactionalID, h.ProducerID, h.ProducerEpoch, w.Topic, w.Partition)
		}
		b = b[h.Size():]
	}
	return producers.Unverified, nil
}

// staleLeader maps the log's refusal of an append stamped with an epoch
// older than its latest to ErrNotLeader: the request was accepted while
// this broker led at that epoch, and the log has moved on since (the
// broker became a follower and fetched the new leader's batches). The
// client refreshes its metadata and sends the records to the new leader.
func staleLeader(err error) error {
	if errors.Is(err, partlog.ErrStaleEpoch) {
		return fmt.Errorf("%w: it led at an epoch the log has left: %w", ErrNotLeader, err)
	}
	return err
}

// producePartition finds the partition a produce writes to: one this broker
// leads (ErrNotLeader, ErrLeaderNotAvailable otherwise), of a topic that
// exists (created first when auto-creation is on) and is not reserved
// (IsReservedTopic: never auto-created, never written by clients).
func (n *Node) producePartition(ctx context.Context, topic string, partition int32) (*replicated, error) {
	if IsReservedTopic(topic) {
		return nil, fmt.Errorf("%w: %s", ErrWriteToInternalTopic, topic)
	}
	p, _, err := n.leaderPartition(topic, partition)
	if errors.Is(err, ErrUnknownTopic) && n.cfg.AutoCreateTopics {
		if _, err := n.autoCreate(ctx, topic); err != nil {
			return nil, err
		}
		p, _, err = n.leaderPartition(topic, partition)
	}
	return p, err
}

// leaderPartition returns the open log of a partition this broker leads, and
// its leader epoch.
func (n *Node) leaderPartition(topic string, partition int32) (*replicated, int32, error) {
	im, _ := n.image.load()
	t := im.Topics[topic]
	switch {
	case t == nil || t.Deleting:
		return nil, 0, unknownTopic(topic)
	case partition < 0 || int(partition) >= len(t.Assignment):
		return nil, 0, fmt.Errorf("%w: %q has %d partitions, not %d", ErrUnknownPartition, topic, len(t.Assignment), partition)
	}
	v := im.View(t, int(partition))
	switch {
	case v.Leader == meta.NoLeader:
		return nil, 0, fmt.Errorf("%w: %s", ErrLeaderNotAvailable, logs.DirName(topic, partition))
	case v.Leader != n.cfg.NodeID:
		return nil, 0, fmt.Errorf("%w: %s is led by broker %d", ErrNotLeader, logs.DirName(topic, partition), v.Leader)
	}
	p, ok := n.localPartition(topic, t.ID, partition)
	if !ok || !p.leading.Load() || p.epoch.Load() != v.LeaderEpoch {
		// Elected, not yet opened (or leading) here: the client retries.
		return nil, 0, fmt.Errorf("%w: %s is not led here yet", ErrNotLeader, logs.DirName(topic, partition))
	}
	p.logFailed()
	if p.resigned.Load() {
		// What it would serve may be cut: neither consumers nor followers
		// may see an end (or records) the recovery takes back.
		return nil, 0, fmt.Errorf("%w: %s, epoch %d", ErrReplicaOffline, logs.DirName(topic, partition), v.LeaderEpoch)
	}
	return p, v.LeaderEpoch, nil
}

// producerIDBlock is how many producer ids one allocation in the
// coordination store reserves (Kafka's block size).
const producerIDBlock = 1000

// InitProducerID hands out a new idempotent-producer id with epoch 0, never
// reused, even across restarts and brokers: ids come from blocks reserved in
// the coordination store (Kafka's /latest_producer_id_block). The first
// block is reserved when the node opens (as Kafka's ProducerIdManager
// does), so producers can start while the store is unreachable; the next
// when a block runs out. Transactional producers get theirs from the
// transaction coordinator (InitTransactionalProducerID), which takes them
// from the same blocks.
func (n *Node) InitProducerID(ctx context.Context) (int64, int16, error) {
	n.pidMu.Lock()
	defer n.pidMu.Unlock()
	if n.pidNext >= n.pidEnd {
		if err := n.reserveProducerIDsLocked(ctx); err != nil {
			return -1, -1, err
		}
	}
	id := n.pidNext
	n.pidNext++
	return id, 0, nil
}

// reserveProducerIDsLocked reserves a new block of producer ids; n.pidMu
// is held.
func (n *Node) reserveProducerIDsLocked(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	first, err := layout.AllocateProducerIDs(sctx, n.store, n.cfg.NodeID, producerIDBlock)
	if err != nil {
		return fmt.Errorf("node: producer ids: %w", err)
	}
	n.pidNext, n.pidEnd = first, first+producerIDBlock
	return nil
}
