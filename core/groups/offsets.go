package groups

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
)

// batchTarget bounds the records section of one batch the store writes,
// well below partlog's default MaxBatchBytes (1 MiB); a commit of many
// partitions is several batches appended with one write.
const batchTarget = 256 << 10

// offsetStore keeps the committed offsets of one partition of
// __consumer_offsets in memory, written through to its Log. It is not safe
// for concurrent use: the Coordinator's mutex guards it.
type offsetStore struct {
	log Log
	// offsets by group, then partition.
	offsets map[string]map[TopicPartition]stored
	live    int   // entries in offsets
	records int64 // records replayed and written: live, superseded and tombstones
	// metas are the latest group metadata records (group_metadata.go), by
	// group: replayed, or appended (set at once, not when committed: they
	// only decide what Load restores and whether a deleted group needs a
	// tombstone).
	metas map[string]*kmsg.GroupMetadataValue
	// skipped counts records with a key version this coordinator does not
	// know (Kafka's newer coordinator writes versions 3 and up), which
	// replay passes over.
	skipped int64
	// pending are the writes appended and not yet applied, in log order:
	// each goes into memory once it and every write before it are done
	// (see begin and finish), so a later write is never overtaken.
	pending []*pendingWrite
	// txns are the transactional offsets waiting for the end of their
	// transaction, by producer id (txn_offsets.go); seqs the producers'
	// sequence numbers in this partition's log.
	txns map[int64]map[offsetKey]stored
	seqs map[int64]producerSeq
	// next is the position (stored.at) of the next record written: past
	// every record replayed, and growing with each record written.
	next int64
}

// pendingWrite is a write in the log waiting to count as committed.
type pendingWrite struct {
	entries []entry
	done    bool
	err     error
	// drained is closed once the write left pending: applied to memory, or
	// dropped because it failed.
	drained chan struct{}
}

func newStore(log Log) *offsetStore {
	return &offsetStore{log: log, offsets: map[string]map[TopicPartition]stored{},
		metas: map[string]*kmsg.GroupMetadataValue{}, txns: map[int64]map[offsetKey]stored{},
		seqs: map[int64]producerSeq{}}
}

// replay reads the log from its start to end into memory, stopping early
// when ctx ends.
func (s *offsetStore) replay(ctx context.Context, end int64) error {
	for off := s.log.StartOffset(); off < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		sl, err := s.log.Read(off, 1<<20, end)
		if err != nil {
			return fmt.Errorf("groups: read offsets log at %d: %w", off, err)
		}
		b, err := sl.Bytes()
		next := sl.NextOffset
		sl.Release()
		if err != nil {
			return fmt.Errorf("groups: read offsets log at %d: %w", off, err)
		}
		if len(b) == 0 && next == 0 {
			break // nothing below end from here (a batch reaching past it)
		}
		if next <= off {
			return fmt.Errorf("%w: offsets log does not advance at %d", ErrCorrupt, off)
		}
		for len(b) > 0 {
			h, n, err := record.Next(b, 0)
			if err != nil {
				return fmt.Errorf("groups: offsets log at %d: %w", off, err)
			}
			if err := s.replayBatch(h, b[:n]); err != nil {
				return fmt.Errorf("groups: offsets log, batch at %d: %w", h.BaseOffset, err)
			}
			b = b[n:]
		}
		off = next
	}
	s.next = max(s.next, end)
	return nil
}

// replayBatch applies one batch of the log: a transaction marker ends its
// producer's transaction (replayMarker), a transactional batch's offsets
// wait for it, any other batch's records apply at once. A record's
// position (stored.at) is its offset.
func (s *offsetStore) replayBatch(h record.Header, batch []byte) error {
	if h.ProducerID >= 0 {
		s.noteBatch(h)
	}
	if h.Control() {
		return s.replayMarker(h, batch)
	}
	recs, err := record.Records(batch, nil)
	if err != nil {
		return err
	}
	txn := h.Transactional() && h.ProducerID >= 0
	for _, r := range recs {
		at := h.BaseOffset + int64(r.OffsetDelta)
		if txn {
			err = s.applyTxn(h.ProducerID, r.Key, r.Value, at, len(recs))
		} else {
			err = s.apply(r.Key, r.Value, at)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// apply applies one record at position at: a value sets the offset (or the
// group's metadata), a tombstone (nil value) removes it.
func (s *offsetStore) apply(key, value []byte, at int64) error {
	if len(key) < 2 {
		return fmt.Errorf("%w: key of %d bytes", ErrCorrupt, len(key))
	}
	switch v := int16(binary.BigEndian.Uint16(key)); {
	case v == groupKeyVersion:
		return s.applyGroup(key, value)
	case v > groupKeyVersion && v <= maxRecordType:
		s.skipped++
		return nil
	}
	k, err := decodeKey(key)
	if err != nil {
		return err
	}
	s.records++
	if value == nil {
		s.remove(k, at)
		return nil
	}
	v, err := decodeValue(value)
	if err != nil {
		return err
	}
	v.at = at
	s.set(k, v)
	return nil
}

// maxRecordType bounds the key versions replay passes over: Kafka's newer
// group coordinator writes record types 3 and up (KIP-848's consumer group
// records, share groups), small numbers, which a coordinator that does not
// know them skips, as Kafka's CoordinatorLoaderImpl does. A key starting
// with anything else is not a record of __consumer_offsets: ErrCorrupt.
const maxRecordType = 255

// applyGroup applies a group metadata record.
func (s *offsetStore) applyGroup(key, value []byte) error {
	var k kmsg.GroupMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return fmt.Errorf("%w: group metadata key: %v", ErrCorrupt, err)
	}
	s.records++
	if value == nil {
		delete(s.metas, k.Group)
		return nil
	}
	v, err := decodeGroupValue(value)
	if err != nil {
		return fmt.Errorf("group %q: %w", k.Group, err)
	}
	s.metas[k.Group] = v
	return nil
}

// set makes v the committed offset of k, unless the one there has a later
// position in the log: the committed offset is always the record of the
// key latest in the log (Kafka keeps the same rule, as a transaction's
// offsets, committed by its marker, may be older than a plain commit
// written after them).
func (s *offsetStore) set(k offsetKey, v stored) {
	m := s.offsets[k.group]
	if m == nil {
		m = map[TopicPartition]stored{}
		s.offsets[k.group] = m
	}
	cur, ok := m[k.TopicPartition]
	switch {
	case !ok:
		s.live++
	case cur.at > v.at:
		return
	}
	m[k.TopicPartition] = v
}

// remove applies a tombstone of k at position at: it removes the committed
// offset unless that has a later position, and the transactional offsets
// of k written before it (Kafka's OffsetMetadataManager.replay does the
// same), so a deleted group or topic does not come back when an open
// transaction commits.
func (s *offsetStore) remove(k offsetKey, at int64) {
	s.dropPending(k, at)
	m := s.offsets[k.group]
	if cur, ok := m[k.TopicPartition]; !ok || cur.at > at {
		return
	}
	delete(m, k.TopicPartition)
	s.live--
	if len(m) == 0 {
		delete(s.offsets, k.group)
	}
}

// entry is one record to write: a value, or a tombstone when v is nil;
// with meta, a group metadata record of group k.group instead, whose value
// is mv (nil: a tombstone). begin sets at, the record's position.
type entry struct {
	k    offsetKey
	v    *stored
	meta bool
	mv   []byte
	at   int64
}

// writeEntries appends entries to log in batches of about batchTarget
// bytes, with one Append (one write), and returns the Append's wait.
func writeEntries(log Log, entries []entry, now int64) (func(context.Context) error, error) {
	buf, err := encodeEntries(entries, now, record.DefaultBuildOptions())
	if err != nil {
		return nil, err
	}
	if len(buf) == 0 {
		return func(context.Context) error { return nil }, nil
	}
	return log.Append(context.Background(), buf)
}

// encodeEntries encodes entries as batches of about batchTarget bytes with
// the options opts; the BaseSequence of an idempotent producer's opts
// (ProducerID >= 0) goes on from batch to batch.
func encodeEntries(entries []entry, now int64, opts record.BuildOptions) ([]byte, error) {
	var buf []byte
	var recs []record.Record
	size := 0
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		var err error
		buf, err = record.AppendBatch(buf, opts, recs)
		if opts.ProducerID >= 0 {
			opts.BaseSequence = nextSeq(opts.BaseSequence, len(recs))
		}
		recs, size = recs[:0], 0
		return err
	}
	for _, e := range entries {
		r := record.Record{Key: appendKey(nil, e.k), Timestamp: now}
		switch {
		case e.meta:
			r.Key, r.Value = groupKey(e.k.group), e.mv
		case e.v != nil:
			r.Value = appendValue(nil, *e.v)
		}
		if size+len(r.Key)+len(r.Value) > batchTarget {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		recs = append(recs, r)
		size += len(r.Key) + len(r.Value) + 16
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return buf, nil
}

// begin appends entries to the log and queues them; the caller waits with
// wait (without the coordinator's lock), then hands the outcome to finish.
// On an error nothing was queued (the log may still hold some of the
// records, which is what recovery would find: a commit is not
// acknowledged, and a later one supersedes it).
func (s *offsetStore) begin(entries []entry, now time.Time) (pw *pendingWrite, wait func(context.Context) error, err error) {
	wait, err = writeEntries(s.log, entries, now.UnixMilli())
	if err != nil {
		return nil, nil, err
	}
	s.position(entries)
	pw = &pendingWrite{entries: entries, drained: make(chan struct{})}
	s.pending = append(s.pending, pw)
	for _, e := range entries {
		if e.meta {
			s.applyMeta(e)
		}
	}
	return pw, wait, nil
}

// finish records a queued write's outcome and applies, in log order, every
// write at the head of the queue that is done: a committed one goes into
// memory, a failed one is dropped. A write behind one still waiting stays
// queued; its drained channel closes when the one before finishes.
func (s *offsetStore) finish(pw *pendingWrite, err error) {
	pw.done, pw.err = true, err
	for len(s.pending) > 0 && s.pending[0].done {
		head := s.pending[0]
		s.pending = s.pending[1:]
		if head.err == nil {
			for _, e := range head.entries {
				switch {
				case e.meta: // applied by begin
				case e.v == nil:
					s.remove(e.k, e.at)
				default:
					v := *e.v
					v.at = e.at
					s.set(e.k, v)
				}
			}
			s.records += int64(len(head.entries))
		}
		close(head.drained)
	}
}

// position gives entries their positions (entry.at), in the order they
// are appended.
func (s *offsetStore) position(entries []entry) {
	for i := range entries {
		entries[i].at = s.next
		s.next++
	}
}

// pendingFor reports whether a queued write, or an open transaction,
// holds offsets of group.
func (s *offsetStore) pendingFor(group string) bool {
	for _, pw := range s.pending {
		for _, e := range pw.entries {
			if !e.meta && e.k.group == group {
				return true
			}
		}
	}
	return s.txnPendingFor(group)
}

// write is begin, the wait and finish in one, for writes made holding the
// coordinator's lock (deletions, expiry): it returns once the write is
// committed, and it is applied once the writes before it are.
func (s *offsetStore) write(entries []entry, now time.Time) error {
	pw, wait, err := s.begin(entries, now)
	if err != nil {
		return err
	}
	err = wait(context.Background())
	s.finish(pw, err)
	return err
}

// commitEntries are the records committing offsets of one group.
func commitEntries(group string, offsets []OffsetCommit, now time.Time) []entry {
	entries := make([]entry, len(offsets))
	for i, oc := range offsets {
		v := stored{Committed: Committed{Offset: oc.Offset, LeaderEpoch: oc.LeaderEpoch}, commitTime: now.UnixMilli()}
		if oc.Metadata != nil {
			v.Metadata = *oc.Metadata
		}
		entries[i] = entry{k: offsetKey{group: group, TopicPartition: oc.TopicPartition}, v: &v}
	}
	return entries
}

// commit stores offsets of one group, waiting for them to be committed;
// on error nothing changes in memory (see begin).
func (s *offsetStore) commit(group string, offsets []OffsetCommit, now time.Time) error {
	return s.write(commitEntries(group, offsets, now), now)
}

// removeWhere writes tombstones for every offset for which drop is true,
// committed or waiting in an open transaction.
func (s *offsetStore) removeWhere(now time.Time, drop func(k offsetKey) bool) error {
	var entries []entry
	for _, k := range s.keys() {
		if drop(k) {
			entries = append(entries, entry{k: k})
		}
	}
	return s.write(entries, now)
}

// keys lists the keys with a committed offset or one waiting in an open
// transaction, sorted.
func (s *offsetStore) keys() []offsetKey {
	seen := map[offsetKey]bool{}
	for g, m := range s.offsets {
		for tp := range m {
			seen[offsetKey{group: g, TopicPartition: tp}] = true
		}
	}
	for _, m := range s.txns {
		for k := range m {
			seen[k] = true
		}
	}
	return slices.SortedFunc(maps.Keys(seen), compareKeys)
}

// writeMeta appends a group metadata record of group (value nil: a
// tombstone) and applies it to metas at once; it does not queue it with
// the offsets' writes (pending), as nothing in memory waits for it.
func (s *offsetStore) writeMeta(group string, value []byte, now time.Time) (func(context.Context) error, error) {
	e := entry{k: offsetKey{group: group}, meta: true, mv: value}
	wait, err := writeEntries(s.log, []entry{e}, now.UnixMilli())
	if err != nil {
		return nil, err
	}
	s.records++
	s.applyMeta(e)
	return wait, nil
}

// applyMeta applies a group metadata entry to metas.
func (s *offsetStore) applyMeta(e entry) {
	if e.mv == nil {
		delete(s.metas, e.k.group)
	} else if v, err := decodeGroupValue(e.mv); err == nil {
		s.metas[e.k.group] = v
	}
}

// removeGroup writes tombstones for every offset of group, and for its
// metadata record if it has one.
func (s *offsetStore) removeGroup(now time.Time, group string) error {
	var entries []entry
	for _, k := range s.keys() {
		if k.group == group {
			entries = append(entries, entry{k: k})
		}
	}
	if s.metas[group] != nil {
		entries = append(entries, entry{k: offsetKey{group: group}, meta: true})
	}
	return s.write(entries, now)
}

// fetch returns the group's offsets for parts (all when nil).
func (s *offsetStore) fetch(group string, parts []TopicPartition) map[TopicPartition]Committed {
	m := s.offsets[group]
	out := make(map[TopicPartition]Committed, min(len(m), max(len(parts), 1)))
	if parts == nil {
		for tp, v := range m {
			out[tp] = v.Committed
		}
		return out
	}
	for _, tp := range parts {
		if v, ok := m[tp]; ok {
			out[tp] = v.Committed
		}
	}
	return out
}

// groups lists the groups that have offsets, committed or waiting in an
// open transaction.
func (s *offsetStore) groups() []string {
	var gs []string
	for g := range s.offsets {
		gs = append(gs, g)
	}
	for _, m := range s.txns {
		for k := range m {
			gs = append(gs, k.group)
		}
	}
	slices.Sort(gs)
	return slices.Compact(gs)
}
