package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exactly-once mode (Config.ExactlyOnce): the target producer is
// transactional, and each commit interval is one transaction holding the
// records copied in it, the offset syncs written in it and the mirror's
// source positions (TxnOffsetCommit to group Config.Name). The loop is the
// only producer, so between EndTransaction and BeginTransaction nothing is
// produced; see the package doc for the guarantee.

// errTxnPartition: a partition failed during the transaction.
var errTxnPartition = errors.New("a partition's records were refused")

// beginTxn opens the next transaction; a failure is retried on the next
// commit tick (until then produced records fail, and the commit aborts).
func (m *Mirror) beginTxn() {
	if err := m.tgt.BeginTransaction(); err != nil {
		m.log.Warn("mirror: begin transaction failed", "transactional_id", m.cfg.TransactionalID(), "err", err)
		return
	}
	m.inTxn = true
}

// initTxn fences a predecessor with the same transactional id (InitProducerId
// aborts its open transaction) before any position is read, so the
// positions read afterwards with RequireStable are final. It retries until
// ctx ends.
func (m *Mirror) initTxn(ctx context.Context) error {
	wait := m.cfg.BackoffMin
	for {
		_, _, err := m.tgt.ProducerID(ctx)
		if err == nil {
			m.beginTxn()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		m.log.Warn("mirror: transactional producer id not initialized yet, retrying",
			"transactional_id", m.cfg.TransactionalID(), "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, m.cfg.BackoffMax)
	}
}

// commitTxn ends the current transaction: it waits for the records in
// flight, then commits the positions and the records in one transaction,
// or aborts and rewinds every partition to the positions committed on the
// target when anything failed.
func (m *Mirror) commitTxn(ctx context.Context) {
	if !m.inTxn {
		m.abortTxn(ctx, errors.New("no transaction open"))
		return
	}
	fctx, cancel := context.WithTimeout(ctx, flushTimeout)
	err := m.tgt.Flush(fctx)
	cancel()
	if err != nil {
		m.abortTxn(ctx, fmt.Errorf("flush: %w", err))
		return
	}
	type pos struct {
		tr   *tracker
		next int64
		meta string
	}
	var moved []pos
	for _, tr := range m.trackers() {
		tr.mu.Lock()
		failed, next, base := tr.failed, tr.next, tr.base
		tr.mu.Unlock()
		if failed {
			m.abortTxn(ctx, fmt.Errorf("%s/%d: %w", tr.topic, tr.partition, errTxnPartition))
			return
		}
		if next != base {
			moved = append(moved, pos{tr, next, tr.srcID})
		}
	}
	if len(moved) > 0 {
		offs := make(map[string]map[int32]kadm.Offset)
		for _, p := range moved {
			if offs[p.tr.target] == nil {
				offs[p.tr.target] = map[int32]kadm.Offset{}
			}
			offs[p.tr.target][p.tr.partition] = kadm.Offset{At: p.next, LeaderEpoch: -1, Metadata: p.meta}
		}
		if err := m.txnOffsetCommit(ctx, offs); err != nil {
			m.abortTxn(ctx, err)
			return
		}
	}
	ectx, cancel := context.WithTimeout(ctx, requestTimeout)
	err = m.tgt.EndTransaction(ectx, kgo.TryCommit)
	cancel()
	if err != nil {
		m.abortTxn(ctx, fmt.Errorf("end transaction (commit): %w", err))
		return
	}
	m.inTxn = false
	for _, p := range moved {
		p.tr.mu.Lock()
		p.tr.base, p.tr.committed = p.next, p.next
		p.tr.retries = 0
		p.tr.mu.Unlock()
	}
	m.txnCommits.Add(1)
	m.beginTxn()
}

// txnOffsetCommit adds group Config.Name to the transaction
// (AddOffsetsToTxn, on the transaction coordinator) and commits offs in it
// (TxnOffsetCommit, on the group coordinator), with the producer id and
// epoch of the transaction. kgo's own path for this (GroupTransactSession)
// commits the offsets of the group it consumes in, on the same cluster;
// here the group is on the target and the records come from the source.
func (m *Mirror) txnOffsetCommit(ctx context.Context, offs map[string]map[int32]kadm.Offset) error {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	id, epoch, err := m.tgt.ProducerID(rctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	txnID := m.cfg.TransactionalID()
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, id, epoch, m.cfg.Name
	for {
		resp, err := add.RequestWith(rctx, m.tgt)
		if err != nil {
			return fmt.Errorf("AddOffsetsToTxn group %s: %w", m.cfg.Name, err)
		}
		err = kerr.ErrorForCode(resp.ErrorCode)
		if errors.Is(err, kerr.ConcurrentTransactions) && rctx.Err() == nil {
			time.Sleep(20 * time.Millisecond) // the previous transaction's markers are being written
			continue
		}
		if err != nil {
			return fmt.Errorf("AddOffsetsToTxn group %s: %w", m.cfg.Name, err)
		}
		break
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, m.cfg.Name, id, epoch
	req.Generation, req.MemberID = -1, ""
	for topic, ps := range offs {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		for p, o := range ps {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, o.At, o.LeaderEpoch, kmsg.StringPtr(o.Metadata)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(rctx, m.tgt)
	if err != nil {
		return fmt.Errorf("TxnOffsetCommit group %s: %w", m.cfg.Name, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("TxnOffsetCommit group %s, %s/%d at %d: %w", m.cfg.Name, t.Topic, p.Partition, offs[t.Topic][p.Partition].At, err)
			}
		}
	}
	return nil
}

// abortTxn aborts the transaction (its records and positions are dropped
// by every read_committed reader) and rewinds every partition to its
// position committed on the target, read again with RequireStable: when
// an EndTxn(commit) failed without an answer, the transaction may have
// committed, and then the positions it held are the ones to go on from.
func (m *Mirror) abortTxn(ctx context.Context, cause error) {
	if ctx.Err() == nil {
		m.log.Warn("mirror: transaction aborted; every partition goes back to its committed position",
			"transactional_id", m.cfg.TransactionalID(), "cause", cause)
	}
	m.txnAborts.Add(1)
	actx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := m.tgt.AbortBufferedRecords(actx); err != nil {
		m.log.Warn("mirror: aborting buffered records failed", "err", err)
	}
	if m.inTxn {
		if err := m.tgt.EndTransaction(actx, kgo.TryAbort); err != nil {
			// kgo fails the producer id; the next BeginTransaction's
			// produce re-inits it, which bumps the epoch and aborts
			// whatever is still open.
			m.log.Warn("mirror: end transaction (abort) failed", "err", err)
		}
		m.inTxn = false
	}
	// Every promise has resolved (AbortBufferedRecords waits for them):
	// the trackers may be reset.
	var committed kadm.OffsetResponses
	wait := m.cfg.BackoffMin
	for {
		rctx, rcancel := context.WithTimeout(kadm.RequireStable(ctx), requestTimeout)
		var err error
		committed, err = m.tgtAdm.FetchOffsets(rctx, m.cfg.Name)
		rcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return // shutting down: a restarted mirror reads them
		}
		m.log.Warn("mirror: reading committed positions after an abort failed, retrying", "group", m.cfg.Name, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, m.cfg.BackoffMax)
	}
	m.syncMu.Lock()
	m.pendingSyncs = nil // they describe aborted records
	m.syncMu.Unlock()
	rewind := map[string]map[int32]kgo.EpochOffset{}
	resume := map[string][]int32{}
	now := time.Now()
	for _, tr := range m.trackers() {
		tr.mu.Lock()
		at := tr.base
		if o, ok := committed.Lookup(tr.target, tr.partition); ok && o.Err == nil && o.At >= 0 {
			at = o.At
			tr.committed = o.At
		}
		tr.abortTo(at, now)
		tr.mu.Unlock()
		if rewind[tr.topic] == nil {
			rewind[tr.topic] = map[int32]kgo.EpochOffset{}
		}
		rewind[tr.topic][tr.partition] = kgo.EpochOffset{Epoch: -1, Offset: at}
		if m.paused[tr] {
			resume[tr.topic] = append(resume[tr.topic], tr.partition)
			delete(m.paused, tr)
		}
	}
	m.src.SetOffsets(rewind)
	if len(resume) > 0 {
		m.src.ResumeFetchPartitions(resume)
	}
	m.beginTxn()
}
