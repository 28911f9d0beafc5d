package logs

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
)

// Transactions (see "Transactions" in the package doc).

// Marker is a transaction marker to append: the end of producer
// ProducerID's transaction, committed or aborted, as its coordinator (in
// CoordinatorEpoch) decided. ProducerEpoch is the producer's epoch the
// coordinator writes it with.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

// AbortedTxn is an aborted transaction as Fetch lists it: its producer and
// its first offset (a read_committed consumer drops that producer's
// records from there up to its abort marker).
type AbortedTxn struct{ ProducerID, FirstOffset int64 }

// ErrControlBatch: a produce request carried a control batch (attributes
// bit 5): only the broker writes transaction markers. Kafka: INVALID_RECORD.
var ErrControlBatch = errors.New("logs: control batches are not accepted from producers")

// ErrTransactionalWithoutProducer: a transactional batch (attributes bit
// 4) without a producer id. Kafka: INVALID_RECORD.
var ErrTransactionalWithoutProducer = errors.New("logs: transactional batch without a producer id")

// txnState is a partition's transactions: the open ones by producer (the
// producers' state holds them too; this map answers FirstUnstableOffset
// without locking producers) and the aborted ones (the index).
type txnState struct {
	mu   sync.Mutex
	open map[int64]int64 // producer id -> first offset of its open transaction
	idx  *txnIndex
}

func (t *txnState) opened(id, first int64) {
	t.mu.Lock()
	if t.open == nil {
		t.open = map[int64]int64{}
	}
	t.open[id] = first
	t.mu.Unlock()
}

// closed forgets id's open transaction and returns the first offset still
// undecided after it (Kafka's lastStableOffset of a completed transaction):
// the oldest other open transaction's first offset, or next.
func (t *txnState) closed(id, next int64) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.open, id)
	lso := next
	for _, first := range t.open {
		lso = min(lso, first)
	}
	return lso
}

func (t *txnState) reset(open map[int64]int64) {
	t.mu.Lock()
	t.open = open
	t.mu.Unlock()
}

// FirstUnstableOffset is the first offset of the partition's oldest open
// transaction, ok=false when none is open. The last stable offset is the
// high watermark, or this offset when it is lower.
func (p *Partition) FirstUnstableOffset() (int64, bool) {
	p.prodMu.RLock()
	stale := p.prodGen != p.log.Generation()
	p.prodMu.RUnlock()
	if stale {
		// A cut since the state was built may have removed transactions:
		// rebuild (as the next append would) before answering.
		if err := p.resyncProducers(); err != nil {
			p.snaps.logger.Warn("producer state rebuild failed", "dir", p.log.Dir(), "err", err)
		}
	}
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	first, ok := int64(0), false
	for _, f := range p.txn.open {
		if !ok || f < first {
			first, ok = f, true
		}
	}
	return first, ok
}

// OpenTxns is the number of transactions open in the partition.
func (p *Partition) OpenTxns() int {
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	return len(p.txn.open)
}

// AbortedTxns returns the aborted transactions overlapping [from, upTo):
// those whose abort marker is at or past from and whose first offset is
// below upTo, ordered by their markers' offsets: what a read_committed
// Fetch returning the records of [from, upTo) lists.
func (p *Partition) AbortedTxns(from, upTo int64) []AbortedTxn {
	return p.txn.idx.aborted(from, upTo)
}

// StartTxnVerification starts the verification of producer id's
// transactional batches of epoch epoch before a leader asks the
// transaction coordinator about them (KIP-890 part 1), and returns the
// guard the append (AppendVerified) must carry: producers.Ongoing when the
// producer's transaction is already ongoing here at that epoch, so there is
// nothing to ask. See package producers (verify.go).
func (p *Partition) StartTxnVerification(id int64, epoch int16) (producers.Guard, error) {
	p.prodMu.RLock()
	if p.prodGen != p.log.Generation() {
		// A guard set on state about to be rebuilt would be lost.
		p.prodMu.RUnlock()
		if err := p.resyncProducers(); err != nil {
			return producers.Unverified, p.wrap(err)
		}
		p.prodMu.RLock()
	}
	defer p.prodMu.RUnlock()
	return p.prod.StartVerification(id, epoch, p.clock.Now().UnixMilli()), nil
}

// AppendMarker appends a transaction marker (a control batch) in leader
// epoch leaderEpoch: it closes the producer's open transaction, if any (a
// coordinator writes markers to every partition of the transaction and
// retries them: one that finds none open is appended all the same, as
// Kafka does), and an abort adds the transaction to the aborted index. A
// marker of an epoch older than the producer's is
// producers.ErrInvalidProducerEpoch, of a coordinator epoch older than the
// last marker's producers.ErrTransactionCoordinatorFenced; nothing is
// appended then. With durable acks it returns once the marker is on disk.
func (p *Partition) AppendMarker(ctx context.Context, m Marker, leaderEpoch int32) (AppendResult, error) {
	defer p.maybeSnapshot()
	if m.ProducerID < 0 {
		return AppendResult{}, p.wrap(fmt.Errorf("%w: marker for producer id %d", producers.ErrInvalidProducerEpoch, m.ProducerID))
	}
	if err := p.log.RecoverIfDue(); err != nil {
		return AppendResult{}, p.wrap(err)
	}
	p.prodMu.RLock()
	if p.prodGen != p.log.Generation() {
		p.prodMu.RUnlock()
		if err := p.resyncProducers(); err != nil {
			return AppendResult{}, p.wrap(err)
		}
		p.prodMu.RLock()
	}
	e := p.prod.Lock(m.ProducerID)
	if err := e.State.CheckMarker(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch); err != nil {
		p.prod.Unlock(m.ProducerID, e)
		p.prodMu.RUnlock()
		return AppendResult{}, p.wrap(err)
	}
	now := p.clock.Now().UnixMilli()
	b := record.BuildControlBatch(record.ControlBatchOptions{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch, Timestamp: now})
	r, err := p.log.AppendInGeneration(ctx, b, leaderEpoch, p.prodGen)
	if r.NextOffset > r.BaseOffset {
		// Published, even if a later step failed: recorded, as Append's
		// batches are (a cut since starts a new generation, and the state
		// is rebuilt from the log).
		if ierr := p.applyMarker(e, m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch, r.BaseOffset); ierr != nil {
			// The entry is served from memory; no snapshot is taken past
			// it, so the next open replays this marker (txnindex.go).
			p.snaps.logger.Warn("transaction index write failed", "dir", p.log.Dir(), "offset", r.BaseOffset, "err", ierr)
		}
		e.Used = now
	}
	p.prod.Unlock(m.ProducerID, e)
	p.prodMu.RUnlock()
	if err != nil {
		return AppendResult{}, p.wrap(err)
	}
	if p.Settings().DurableAcks && !r.Flushed {
		if err := p.log.FlushAppended(ctx, r); err != nil {
			return AppendResult{}, p.wrap(err)
		}
	}
	return p.result(AppendResult{BaseOffset: r.BaseOffset, NextOffset: r.NextOffset}), nil
}

// applyMarker applies a marker at offset off to the producer's entry
// (locked) and, for an abort that closed a transaction, to the index.
func (p *Partition) applyMarker(e *producers.Entry, id int64, epoch int16, commit bool, coordEpoch int32, off int64) error {
	first, ok := e.State.Mark(epoch, coordEpoch)
	if !ok {
		return nil
	}
	lso := p.txn.closed(id, off+1)
	if commit {
		return nil
	}
	return p.txn.idx.add(txnEntry{ProducerID: id, First: first, Last: off, LSO: lso}, p.log.ActiveBase())
}

// recordControl feeds a control batch as the log stores it (a replay, a
// follower's append) to the producer state and the index. A control batch
// that is not a transaction marker is skipped (logged).
func (p *Partition) recordControl(h record.Header, batch []byte, now int64) {
	m, err := record.ParseControlBatch(batch)
	if err != nil {
		p.snaps.logger.Warn("control batch ignored", "dir", p.log.Dir(), "offset", h.BaseOffset, "err", err)
		return
	}
	e := p.prod.Lock(h.ProducerID)
	if !e.State.Known() || h.ProducerEpoch >= e.State.Epoch() {
		if err := p.applyMarker(e, h.ProducerID, h.ProducerEpoch, m.Type == record.ControlCommit, m.CoordinatorEpoch, h.BaseOffset); err != nil {
			// The index file could not be written: the entry is in memory,
			// and the replay after the next restart writes it again.
			p.snaps.logger.Warn("transaction index write failed", "dir", p.log.Dir(), "offset", h.BaseOffset, "err", err)
		}
	}
	e.Used = now
	p.prod.Unlock(h.ProducerID, e)
}

// cutHooks tells both the snapshots and the transaction index of a cut.
type cutHooks struct {
	snaps *snapshots
	idx   *txnIndex
}

func (c cutHooks) AfterCut(end int64) error {
	return errors.Join(c.snaps.AfterCut(end), c.idx.AfterCut(end))
}

var _ partlog.CutHook = cutHooks{}
