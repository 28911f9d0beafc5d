package logs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/weir-broker/weir/core/clock"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
)

// leaderEpoch is the partitionLeaderEpoch Append stamps: a single node is
// leader of every partition from epoch 0 on. AppendEpoch takes another.
const leaderEpoch = 0

// Partition is one partition's log with what every append to it needs: the
// idempotent-producer state (package producers) and its snapshots,
// recompression (package recompress) and durable acks. Reads, offsets,
// waits, epochs and cuts go to Log; appends go through Append, AppendEpoch
// (a leader's) and AppendReplicated (a follower's). It knows nothing of
// leaders, replicas or the network.
type Partition struct {
	Topic string
	Index int32
	log   *partlog.Log
	// settings are what the topic's configs say, replaced whole by
	// Reconfigure (reconfigure.go).
	settings atomic.Pointer[Settings]
	clock    clock.Clock
	// opened is how Open found the partition (OpenedAs).
	opened Opened

	// prod is rebuilt from the log when the log's generation moves on (a
	// recovery, Truncate or Reset cut records it remembers). Idempotent
	// appends (and replicated ones) hold prodMu shared; the rebuild and a
	// snapshot hold it alone.
	prodMu  sync.RWMutex
	prod    producers.Table
	prodGen int64 // the log generation prod was built for

	// Producer-state snapshots (snapshots.go): one is taken when the log
	// has rolled (its active segment's base moved from snapBase), by the
	// append that notices, and at Close.
	snaps    *snapshots
	snapBase atomic.Int64
	snapBusy atomic.Bool
	// snapAt is the offset of the snapshot file that holds the producer
	// state as it is (-1: none does): Close does not write it again.
	snapAt atomic.Int64

	// txn: open transactions and the aborted-transactions index (txn.go).
	txn txnState
}

// AppendResult says where an append went.
type AppendResult struct {
	BaseOffset int64 // offset of the first record appended (or, for a duplicate, originally appended)
	NextOffset int64 // offset after the last of those records
	// Duplicate: every batch was a retry of a remembered batch; nothing was
	// appended, and the offsets are the original ones.
	Duplicate bool
	// LogAppendTime is always -1: topics keep the producers' CreateTime.
	LogAppendTime int64
}

func newPartition(topic string, i int32, l *partlog.Log, pc PartitionConfig, clk clock.Clock, snaps *snapshots, idx *txnIndex) *Partition {
	p := &Partition{Topic: topic, Index: i, log: l, clock: clk, snaps: snaps}
	p.txn.idx = idx
	p.settings.Store(settingsOf(pc))
	p.snapBase.Store(l.ActiveBase())
	p.snapAt.Store(-1)
	return p
}

// Opened is how Open found a partition's directory.
type Opened uint8

const (
	// OpenedClean: the log had been closed cleanly (its clean-shutdown
	// marker was there): it holds everything it ever acknowledged.
	OpenedClean Opened = iota
	// OpenedUnclean: the log had not been closed cleanly (a crash, a power
	// cut): what was not fsynced may be gone, with no trace of the cut.
	OpenedUnclean
	// OpenedNew: there was no partition directory (or no durable marker in
	// it): the log was created empty.
	OpenedNew
)

func (o Opened) String() string {
	switch o {
	case OpenedClean:
		return "clean"
	case OpenedUnclean:
		return "unclean"
	}
	return "new"
}

// OpenedAs says how Open found the partition: closed cleanly, not, or not
// there at all. A broker back from an unclean shutdown must not take up a
// leadership or an ISR membership it held before on a log that may have
// lost records (see node's use).
func (p *Partition) OpenedAs() Opened { return p.opened }

// Log is the partition's log, for reads, offsets, waits, the epoch cache
// (Epochs, AssignEpoch, EndOffsetForEpoch), Truncate and Reset (appends go
// through Append, AppendEpoch and AppendReplicated, which keep the producer
// state). After a Truncate or Reset the producer state is rebuilt before the
// next idempotent or replicated append, from what the log still holds; the
// snapshots past the cut are gone with it (partlog's CutHook).
func (p *Partition) Log() *partlog.Log { return p.log }

// Close takes a producer-state snapshot, then closes the log cleanly
// (sealed, with its clean-shutdown marker). A snapshot that fails is logged:
// the next Open reads more of the log instead.
func (p *Partition) Close() error {
	if err := p.writeSnapshot(); err != nil {
		p.snaps.logger.Warn("producer-state snapshot at close failed", "dir", p.log.Dir(), "err", err)
	}
	if err := p.txn.idx.close(); err != nil {
		p.snaps.logger.Warn("transaction index at close failed", "dir", p.log.Dir(), "err", err)
	}
	return p.log.Close()
}

// Discard closes a partition about to be removed (its topic deleted):
// no producer-state snapshot, no fsync of the log or its transaction index
// (partlog.Log.Discard).
func (p *Partition) Discard() error {
	if err := p.txn.idx.discard(); err != nil {
		p.snaps.logger.Warn("transaction index at discard failed", "dir", p.log.Dir(), "err", err)
	}
	return p.log.Discard()
}

// ApplyRetention applies the log's retention and forgets idempotent producers
// whose last append was before expireBefore (unix ms; negative: none).
func (p *Partition) ApplyRetention(expireBefore int64) error {
	_, err := p.log.ApplyRetention()
	if expireBefore >= 0 {
		p.prod.Expire(expireBefore)
	}
	if ierr := p.txn.idx.trimBefore(p.log.StartOffset()); ierr != nil {
		err = errors.Join(err, ierr)
	}
	return err
}

// ProducerCount is the number of idempotent producers the partition knows.
func (p *Partition) ProducerCount() int { return p.prod.Count() }

// Append validates and appends one produce request's records (whole Kafka v2
// batches) for this partition, rewriting their base offsets and leader epochs
// in place. Invalid batches append nothing: errors.Is(err, record.ErrCorrupt)
// for bad bytes, partlog.ErrBatchTooLarge over max.message.bytes, and the
// producer errors below.
//
// Batches with producerId >= 0 come from an idempotent producer and are
// checked against what the partition remembers of it (its epoch and last 5
// batches; see the package doc):
//   - a retry of a remembered batch (same epoch and sequence range) appends
//     nothing and returns the original offsets with Duplicate set;
//   - an older epoch is ErrInvalidProducerEpoch;
//   - a newer epoch must start at sequence 0, else producers.ErrOutOfOrderSequence;
//   - an unknown producer must start at sequence 0, else ErrUnknownProducerID;
//   - otherwise the batch must follow the last sequence (wrapping after
//     MaxInt32): a gap or overlap is producers.ErrOutOfOrderSequence, and a batch lying
//     wholly before the last sequence but older than the remembered batches is
//     ErrDuplicateSequence (it was appended; its offsets are forgotten).
//
// A request mixing duplicates with new batches (real clients send one batch
// per partition) is producers.ErrOutOfOrderSequence. The check, the append and the
// update of the producer's state happen under that producer's lock;
// non-idempotent batches take no lock here beyond the log's own.
//
// A topic whose compression.type is not "producer" first recompresses every
// batch not already under its codec (see the package doc); errors then are
// ErrUnsupportedCompression, ErrCodecUnavailable, record.ErrCorrupt for a
// section that does not decompress to the batch's records, or the codec's.
//
// With DurableAcks, Append returns only once Log.FlushedOffset covers the
// records (a duplicate waits for its original append's fsync); concurrent
// appends share fsyncs (group commit).
//
// Storage failures come back as partlog.ErrFailed (KAFKA_STORAGE_ERROR,
// which clients retry), and the log recovers by itself (see partlog). A
// durable ack is never given for records a recovery cut before their fsync
// (partlog.ErrCut), nor for the retry of a batch whose original was cut: the
// retry is appended again instead, once the producers' state has been
// rebuilt from what the log still holds. An idempotent batch checked against
// the state of one log generation is appended only in that generation
// (partlog.ErrGenerationChanged, retriable, otherwise); one whose records the
// log published before its append failed is recorded all the same, so that
// its retry is answered as a duplicate, not appended twice.
func (p *Partition) Append(ctx context.Context, records []byte) (AppendResult, error) {
	return p.AppendEpoch(ctx, records, leaderEpoch)
}

// AppendEpoch is Append stamping the batches with leader epoch epoch: a
// leader's append in that epoch. An epoch above the log's latest starts it
// in the epoch cache (a new leader records it first, with
// Log().AssignEpoch); one below is partlog.ErrStaleEpoch, nothing appended.
func (p *Partition) AppendEpoch(ctx context.Context, records []byte, epoch int32) (AppendResult, error) {
	return p.AppendVerified(ctx, records, epoch, producers.Unverified)
}

// AppendVerified is AppendEpoch for a leader that verifies transactions
// (KIP-890 part 1): g is the guard StartTxnVerification gave for the
// request's transactional producer. A transactional batch (not a
// duplicate) is appended only if its producer's transaction is ongoing here
// at its epoch, or the guard is still the producer's: a marker written since
// the verification started voids it, and the append is then
// producers.ErrInvalidTxnState, nothing written. producers.Unverified
// skips the check (AppendEpoch).
func (p *Partition) AppendVerified(ctx context.Context, records []byte, epoch int32, g producers.Guard) (AppendResult, error) {
	defer p.maybeSnapshot()
	res, r, err := p.appendEpoch(ctx, records, epoch, g)
	if err != nil {
		return AppendResult{}, err
	}
	if p.Settings().DurableAcks && !r.Flushed {
		// The wait ends with the request's timeout (REQUEST_TIMED_OUT); the
		// fsync goes on.
		if err := p.log.FlushAppended(ctx, r); err != nil {
			return AppendResult{}, p.wrap(err)
		}
	}
	return p.result(res), nil
}

// AppendDeferred is AppendEpoch without its wait for the disk: it returns
// once the records are in the log, in order, with a wait that returns once
// they are durable as DurableAcks asks (at once without DurableAcks, or when
// the append's own fsync already covered them). A caller that appends
// holding a lock (the transaction coordinator, which must put its records
// in the order it decided them) waits without it, and appends made
// meanwhile share the fsync.
func (p *Partition) AppendDeferred(ctx context.Context, records []byte, epoch int32) (AppendResult, func(context.Context) error, error) {
	return p.AppendDeferredVerified(ctx, records, epoch, producers.Unverified)
}

// AppendDeferredVerified is AppendDeferred carrying the guard g of a
// transaction verification, as AppendVerified does: the group coordinator
// appends a transactional offset commit this way, verified with the
// transaction coordinator like a transactional produce (KIP-890 part 1). A
// transactional batch whose transaction a marker ended since the
// verification started is producers.ErrInvalidTxnState, nothing written.
func (p *Partition) AppendDeferredVerified(ctx context.Context, records []byte, epoch int32, g producers.Guard) (AppendResult, func(context.Context) error, error) {
	defer p.maybeSnapshot()
	res, r, err := p.appendEpoch(ctx, records, epoch, g)
	if err != nil {
		return AppendResult{}, nil, err
	}
	wait := func(context.Context) error { return nil }
	if p.Settings().DurableAcks && !r.Flushed {
		wait = func(ctx context.Context) error {
			if err := p.log.FlushAppended(ctx, r); err != nil {
				return p.wrap(err)
			}
			return nil
		}
	}
	return p.result(res), wait, nil
}

// appendEpoch is AppendVerified without the wait for durable acks; r is
// what that wait is for (the append, or a duplicate's original).
func (p *Partition) appendEpoch(ctx context.Context, records []byte, epoch int32, g producers.Guard) (AppendResult, partlog.AppendResult, error) {
	if rc := p.Settings().recompress; rc != nil {
		var err error
		if records, err = rc.Apply(ctx, records); err != nil {
			return AppendResult{}, partlog.AppendResult{}, p.wrap(err)
		}
	}
	var buf [4]record.Header
	hs, idempotent := scanHeaders(buf[:0], records)
	for i, h := range hs {
		switch {
		case h.Control():
			return AppendResult{}, partlog.AppendResult{}, p.wrap(fmt.Errorf("batch %d: %w", i, ErrControlBatch))
		case h.Transactional() && h.ProducerID < 0:
			return AppendResult{}, partlog.AppendResult{}, p.wrap(fmt.Errorf("batch %d: %w", i, ErrTransactionalWithoutProducer))
		}
	}
	var res AppendResult
	var r partlog.AppendResult // what to wait for: the append, or a duplicate's original
	var err error
	if idempotent {
		res, r, err = p.appendIdempotent(ctx, records, hs, epoch, g)
	} else {
		r, err = p.log.Append(ctx, records, epoch)
		res = AppendResult{BaseOffset: r.BaseOffset, NextOffset: r.NextOffset}
	}
	if err != nil {
		return AppendResult{}, partlog.AppendResult{}, p.wrap(err)
	}
	return res, r, nil
}

func (p *Partition) result(r AppendResult) AppendResult {
	r.LogAppendTime = -1
	return r
}

func (p *Partition) wrap(err error) error {
	return fmt.Errorf("logs: append to %s: %w", DirName(p.Topic, p.Index), err)
}

// scanHeaders parses the batch headers of records, reporting whether any
// batch is idempotent. On malformed input it returns no idempotent batch, so
// that the log rejects the input with its precise error.
func scanHeaders(hs []record.Header, records []byte) ([]record.Header, bool) {
	idempotent := false
	for b := records; len(b) > 0; {
		h, err := record.ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			return hs[:0], false
		}
		hs = append(hs, h)
		idempotent = idempotent || h.ProducerID >= 0
		b = b[h.Size():]
	}
	return hs, idempotent
}

// pending is a batch that passed the checks, to be recorded once appended.
type pending struct {
	entry *producers.Entry
	id    int64
	batch int // index in the request
	epoch int16
	txn   bool // transactional: opens the producer's transaction if none is
	meta  producers.Batch
}

// appendIdempotent returns the result, and the log's view of what a durable
// ack must wait for: the append, or a duplicate's original append.
func (p *Partition) appendIdempotent(ctx context.Context, records []byte, hs []record.Header, epoch int32, g producers.Guard) (AppendResult, partlog.AppendResult, error) {
	// A failed log recovers (or refuses) first: duplicates are answered
	// without appending, and must not be while the log is failed, nor from
	// state a recovery's cut has made stale.
	if err := p.log.RecoverIfDue(); err != nil {
		return AppendResult{}, partlog.AppendResult{}, err
	}
	p.prodMu.RLock()
	if p.prodGen != p.log.Generation() {
		p.prodMu.RUnlock()
		if err := p.resyncProducers(); err != nil {
			return AppendResult{}, partlog.AppendResult{}, err
		}
		p.prodMu.RLock()
	}
	defer p.prodMu.RUnlock()
	// Lock every producer of the request, in ascending id order (a request
	// carries one batch, so one producer, in practice).
	var idBuf [4]int64
	ids := idBuf[:0]
	for _, h := range hs {
		if h.ProducerID >= 0 && !slices.Contains(ids, h.ProducerID) {
			ids = append(ids, h.ProducerID)
		}
	}
	slices.Sort(ids)
	var entBuf [4]*producers.Entry
	entries := entBuf[:0]
	var stBuf [4]producers.State
	states := stBuf[:0] // checks run on copies; committed after the append
	for _, id := range ids {
		e := p.prod.Lock(id)
		entries = append(entries, e)
		states = append(states, e.State)
	}
	unlock := func() {
		for i, e := range entries {
			p.prod.Unlock(ids[i], e)
		}
	}

	var pendBuf [4]pending
	pend := pendBuf[:0]
	var dups []producers.Batch
	plain := 0
	for i, h := range hs {
		if h.ProducerID < 0 {
			plain++
			continue
		}
		k := slices.Index(ids, h.ProducerID)
		v, meta, err := states[k].Check(h)
		if err != nil {
			unlock()
			return AppendResult{}, partlog.AppendResult{}, p.rejected(records, err)
		}
		if v == producers.Duplicate {
			dups = append(dups, meta)
			continue
		}
		if err := states[k].CheckGuard(h, g); err != nil {
			unlock()
			return AppendResult{}, partlog.AppendResult{}, p.rejected(records, err)
		}
		meta = producers.Batch{FirstSeq: h.BaseSequence, LastSeq: producers.LastSequence(h.BaseSequence, h.LastOffsetDelta)}
		states[k].Push(h.ProducerEpoch, meta)
		pend = append(pend, pending{entry: entries[k], id: h.ProducerID, batch: i, epoch: h.ProducerEpoch, txn: h.Transactional(), meta: meta})
	}
	now := p.clock.Now().UnixMilli()
	switch {
	case len(dups) > 0 && len(dups) < len(hs):
		unlock()
		return AppendResult{}, partlog.AppendResult{}, p.rejected(records, fmt.Errorf("%w: %d of %d batches are duplicates, %d new",
			producers.ErrOutOfOrderSequence, len(dups), len(hs), len(pend)+plain))
	case len(dups) > 0:
		if err := p.validate(records); err != nil { // Kafka checks the CRC before deduplicating
			unlock()
			return AppendResult{}, partlog.AppendResult{}, err
		}
		res := AppendResult{BaseOffset: dups[0].Base, NextOffset: dups[len(dups)-1].Next, Duplicate: true}
		for _, d := range dups {
			res.NextOffset = max(res.NextOffset, d.Next)
		}
		// The state holds what the log held at generation prodGen (or
		// was appended since, which only makes this check stricter).
		orig := partlog.AppendResult{BaseOffset: res.BaseOffset, NextOffset: res.NextOffset, Generation: p.prodGen}
		if !p.log.Survived(orig) {
			// The original was cut before its fsync (the rebuild that
			// forgets it comes with the next append): the client's retry
			// must append it again, so it gets a retriable error.
			unlock()
			return AppendResult{}, partlog.AppendResult{}, fmt.Errorf("%w: %w: retry of offsets [%d, %d)",
				partlog.ErrFailed, partlog.ErrCut, res.BaseOffset, res.NextOffset)
		}
		for _, e := range entries {
			e.Used = now
		}
		unlock()
		return res, orig, nil
	}

	// Only in the generation the checks saw: a cut since (a recovery
	// another appender made) may have removed batches they counted on.
	r, err := p.log.AppendInGeneration(ctx, records, epoch, p.prodGen)
	if err != nil && r.NextOffset <= r.BaseOffset {
		unlock()
		return AppendResult{}, partlog.AppendResult{}, err
	}
	// The records are in the log, even if Append then failed (sealing the
	// segment its roll left behind, or the flush the policy asked for): a
	// recovery keeps them unless it cuts them, which starts a new generation
	// and so rebuilds this state. Record them, so that the client's retry is
	// answered as a duplicate instead of being appended a second time; the
	// error still goes back, and durability is FlushAppended's to report.
	// The log assigned consecutive offsets to the batches in order.
	off, next := r.BaseOffset, 0
	for i, h := range hs {
		for next < len(pend) && pend[next].batch == i {
			pe := pend[next]
			pe.meta.Base, pe.meta.Next = off, off+int64(h.LastOffsetDelta)+1
			pe.entry.State.Push(pe.epoch, pe.meta)
			if pe.txn && pe.entry.State.OpenTxn(off) {
				p.txn.opened(pe.id, off)
			}
			next++
		}
		off += int64(h.LastOffsetDelta) + 1
	}
	for _, e := range entries {
		e.Used = now
	}
	unlock()
	if err != nil {
		return AppendResult{}, partlog.AppendResult{}, err
	}
	return AppendResult{BaseOffset: r.BaseOffset, NextOffset: r.NextOffset}, r, nil
}

// resyncProducers rebuilds the producers' state from the log after its
// generation moved on: batches a cut removed must not answer retries. The
// rebuild is Open's (rebuildProducers): the latest snapshot the cut left,
// and the headers after it.
func (p *Partition) resyncProducers() error {
	p.prodMu.Lock()
	defer p.prodMu.Unlock()
	if p.prodGen == p.log.Generation() {
		return nil
	}
	if _, _, err := p.rebuildProducers(false); err != nil {
		return fmt.Errorf("rebuild producer state after a cut: %w", err)
	}
	return nil
}

// rejected returns the error for a request the producer checks refused,
// unless the bytes are bad: like Kafka, corruption is reported first.
func (p *Partition) rejected(records []byte, err error) error {
	if verr := p.validate(records); verr != nil {
		return verr
	}
	return err
}

// validate checks every batch as the log's Append would, for the requests
// that do not reach it (duplicates and refusals), so those report the same
// errors: record.ErrCorrupt, or partlog.ErrBatchTooLarge.
func (p *Partition) validate(records []byte) error {
	maxBatch := p.Settings().maxBatch
	for i, b := 0, records; len(b) > 0; i++ {
		h, n, err := record.Next(b, maxBatch)
		if err == nil {
			err = record.ValidateProduced(h)
		}
		if err != nil {
			if h, perr := record.ParseHeader(b); perr == nil && h.Size() > maxBatch {
				err = fmt.Errorf("%w: %d bytes, limit %d", partlog.ErrBatchTooLarge, h.Size(), maxBatch)
			}
			return fmt.Errorf("batch %d: %w", i, err)
		}
		b = b[n:]
	}
	return nil
}

// headerWindow is how much of a segment rebuildProducers reads at a time.
const headerWindow = 64 << 10

// rebuildProducers restores the idempotent producers' state (after Open,
// and after a cut, see resyncProducers): from the latest snapshot the log
// still covers (at or past its start, at or below its end), then the batch
// headers after it (never the records, so nothing is decompressed), read in
// windows of 64 KiB. A snapshot that does not restore is logged, removed,
// and the one before tried. With none usable the headers are read from the
// log start; except for a log closed cleanly without any snapshot (written
// before weir kept them: upgrade), where only the active segment is read
// (or the one before it, while the active one is empty), as weir always did:
// reading whole logs at the first start would take long, and the state of
// producers only older segments hold is forgotten as before. It returns the
// idempotent batches read and whether a snapshot was used. prodMu held
// alone (or the partition not yet published).
func (p *Partition) rebuildProducers(upgrade bool) (int, bool, error) {
	gen := p.log.Generation()
	p.prod.Reset() // forget every producer; appenders are held off by prodMu
	p.txn.reset(nil)
	// An abort marker appended, then cut before the state noticed, left
	// its entry behind; markers are appended under prodMu shared, so none
	// is being added now.
	if err := p.txn.idx.AfterCut(p.log.EndOffset()); err != nil {
		return 0, false, err
	}
	if err := p.txn.idx.trimBefore(p.log.StartOffset()); err != nil {
		return 0, false, err
	}
	from := p.log.StartOffset()
	offs, err := p.snaps.list()
	if err != nil {
		return 0, false, err
	}
	used := false
	for i := len(offs) - 1; i >= 0 && !used; i-- {
		off := offs[i]
		if off < from || off > p.log.EndOffset() {
			continue // past the end: a cut is removing it; below the start: its gap cannot be replayed
		}
		b, err := p.snaps.read(off)
		if err == nil {
			_, err = p.prod.Restore(b)
		}
		if err == nil {
			p.txn.reset(p.prod.OpenTxns())
		}
		switch {
		case err == nil:
			from, used = off, true
		case errors.Is(err, fs.ErrNotExist): // a cut removed it meanwhile
		default:
			p.snaps.logger.Warn("producer-state snapshot ignored", "dir", p.log.Dir(), "offset", off, "err", err)
			if rerr := p.snaps.remove(off); rerr != nil {
				p.snaps.logger.Warn("could not remove a bad producer-state snapshot", "dir", p.log.Dir(), "offset", off, "err", rerr)
			}
		}
	}
	if !used && upgrade && len(offs) == 0 {
		segs := p.log.Segments()
		last := len(segs) - 1
		if last > 0 && segs[last].Next == segs[last].Base {
			last--
		}
		from = segs[last].Base
	}
	now := p.clock.Now().UnixMilli()
	seen := 0
	var buf []byte // allocated when there is something to read: a clean start mostly has not
	for off := from; off < p.log.EndOffset(); {
		if buf == nil {
			buf = make([]byte, 0, headerWindow)
		}
		sl, err := p.log.Read(off, 4<<20, partlog.NoLimit)
		if err != nil {
			return seen, used, err
		}
		if sl.Size == 0 {
			sl.Release()
			break
		}
		n, err := p.scanSlice(&sl, buf, now)
		seen += n
		off = sl.NextOffset
		sl.Release()
		if err != nil {
			return seen, used, err
		}
	}
	p.prodGen = gen
	p.snapAt.Store(-1)
	if used && from == p.log.EndOffset() {
		p.snapAt.Store(from) // the snapshot read is the state: nothing after it
	}
	return seen, used, nil
}

// scanSlice feeds every idempotent batch header in sl to the producer state.
func (p *Partition) scanSlice(sl *partlog.Slice, buf []byte, now int64) (int, error) {
	seen := 0
	end := sl.Pos + sl.Size
	var winPos int64 // file position of buf[0]
	buf = buf[:0]
	for pos := sl.Pos; pos < end; {
		if pos < winPos || pos+record.HeaderSize > winPos+int64(len(buf)) {
			winPos = pos
			buf = buf[:min(int64(cap(buf)), end-pos)]
			n, err := sl.File.ReadAt(buf, pos)
			if n < len(buf) {
				return seen, fmt.Errorf("read %s at %d: %w", sl.File.Name(), pos, errors.Join(err, errShortRead))
			}
		}
		h, err := record.ParseHeader(buf[pos-winPos:])
		if err != nil {
			return seen, fmt.Errorf("batch at %s:%d: %w", sl.File.Name(), pos, err)
		}
		if h.Control() && h.ProducerID >= 0 {
			// A transaction marker: its record says commit or abort.
			batch := make([]byte, min(int64(h.Size()), end-pos))
			n, err := sl.File.ReadAt(batch, pos)
			if n < len(batch) {
				return seen, fmt.Errorf("read %s at %d: %w", sl.File.Name(), pos, errors.Join(err, errShortRead))
			}
			p.recordControl(h, batch, now)
			seen++
		} else if h.ProducerID >= 0 {
			p.record(h, now)
			seen++
		}
		pos += int64(h.Size())
	}
	return seen, nil
}

var errShortRead = errors.New("short read")

// record feeds one idempotent batch header, as the log stores it, to the
// producer state: a rebuild's replay and a follower's append. A batch older
// than the producer's epoch changes nothing. (A replay never meets a batch
// the state has: it starts at the offset of the snapshot it restored, which
// holds only batches below it.)
func (p *Partition) record(h record.Header, now int64) {
	e := p.prod.Lock(h.ProducerID)
	if !e.State.Known() || h.ProducerEpoch >= e.State.Epoch() {
		e.State.Push(h.ProducerEpoch, producers.Batch{FirstSeq: h.BaseSequence,
			LastSeq: producers.LastSequence(h.BaseSequence, h.LastOffsetDelta), Base: h.BaseOffset, Next: h.NextOffset()})
		if h.Transactional() && e.State.OpenTxn(h.BaseOffset) {
			p.txn.opened(h.ProducerID, h.BaseOffset)
		}
	}
	e.Used = now
	p.prod.Unlock(h.ProducerID, e)
}

// AppendReplicated appends batches exactly as the leader's log stores them
// (a follower's fetch; see partlog.Log.AppendReplicated): no recompression,
// no idempotence checks, but every idempotent batch header is fed to the
// producer state, as a leader's appends record theirs (Kafka's
// appendAsFollower), so that a follower that becomes leader answers a
// producer's retry as a duplicate. DurableAcks does not apply: a follower
// acknowledges nothing. The errors are partlog's (record.ErrCorrupt,
// partlog.ErrNotContiguous, partlog.ErrStaleEpoch, partlog.ErrFailed, ...).
func (p *Partition) AppendReplicated(ctx context.Context, records []byte) (partlog.AppendResult, error) {
	defer p.maybeSnapshot()
	var buf [4]record.Header
	hs, idempotent := scanHeaders(buf[:0], records)
	if !idempotent {
		r, err := p.log.AppendReplicated(ctx, records)
		if err != nil {
			return r, p.wrap(err)
		}
		return r, nil
	}
	p.prodMu.RLock()
	if p.prodGen != p.log.Generation() {
		p.prodMu.RUnlock()
		if err := p.resyncProducers(); err != nil {
			return partlog.AppendResult{}, p.wrap(err)
		}
		p.prodMu.RLock()
	}
	defer p.prodMu.RUnlock()
	r, err := p.log.AppendReplicated(ctx, records)
	if r.NextOffset > r.BaseOffset {
		// Published (even if a later step failed): recorded as Append's
		// are. A cut since the resync moves the generation on, and the
		// next append rebuilds the state from the log.
		now := p.clock.Now().UnixMilli()
		b := records
		for _, h := range hs {
			switch {
			case h.BaseOffset >= r.NextOffset: // not published
			case h.Control() && h.ProducerID >= 0:
				p.recordControl(h, b[:h.Size()], now)
			case h.ProducerID >= 0:
				p.record(h, now)
			}
			b = b[h.Size():]
		}
	}
	if err != nil {
		return r, p.wrap(err)
	}
	return r, nil
}

// maybeSnapshot takes a producer-state snapshot if the log rolled since the
// last one (Kafka takes one at each roll): the appender that notices pays
// for it, after its append, holding none of its locks. One at a time; a
// failure is logged and not retried before the next roll.
func (p *Partition) maybeSnapshot() {
	base := p.log.ActiveBase()
	if base == p.snapBase.Load() || !p.snapBusy.CompareAndSwap(false, true) {
		return
	}
	defer p.snapBusy.Store(false)
	p.snapBase.Store(base)
	if err := p.writeSnapshot(); err != nil {
		p.snaps.logger.Warn("producer-state snapshot failed", "dir", p.log.Dir(), "err", err)
	}
}

// writeSnapshot writes the producer state as of the log end. Under prodMu
// alone no idempotent append is between its append and its record, so
// every idempotent batch below the end is in the state. A cut that comes
// after the state was taken either bumps the generation before the file is
// in place (write then removes it) or runs its CutHook after (which
// removes it if it lies past the cut). A failed log is skipped: its
// recovery may cut; so is an empty log.
func (p *Partition) writeSnapshot() error {
	p.prodMu.Lock()
	if p.prodGen != p.log.Generation() {
		if _, _, err := p.rebuildProducers(false); err != nil {
			p.prodMu.Unlock()
			return err
		}
	}
	if p.log.Err() != nil || p.log.EndOffset() == p.log.StartOffset() {
		p.prodMu.Unlock()
		return nil // a failed log's recovery may cut; an empty log has nothing to replay
	}
	gen, off := p.prodGen, p.log.EndOffset()
	if p.snapAt.Load() == off {
		p.prodMu.Unlock()
		return nil // the snapshot at off is this state already: no append since
	}
	b := p.prod.AppendSnapshot(nil, off)
	p.prodMu.Unlock()
	// The index entries of the markers below off must be durable before
	// a snapshot says the replay may start at off.
	if err := p.txn.idx.sync(); err != nil {
		return err
	}
	err := p.snaps.write(off, b, func() bool { return p.log.Generation() == gen && p.log.Err() == nil })
	if err == nil && p.log.Generation() == gen {
		p.snapAt.Store(off)
	}
	return err
}
