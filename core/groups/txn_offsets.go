package groups

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/weir-broker/weir/core/groups/consumer"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
)

// Transactional offset commits (TxnOffsetCommit, KIP-98 and KIP-447): a
// producer in a transaction commits a group's offsets as part of it, so
// that consuming, producing and committing happen exactly once together.
//
// The offsets are written at once, as Kafka writes them: one or more
// batches in the group's partition of __consumer_offsets with the
// producer's id and epoch, the transactional attribute and the records of
// a plain commit. They are not committed yet: they wait in memory, by
// producer id (offsetStore.txns), invisible to OffsetFetch, until the
// transaction coordinator writes the transaction's marker (a control
// batch) to the partition and the broker tells the coordinator
// (CompleteTxn): a commit marker makes them the group's committed offsets,
// an abort marker drops them. OffsetFetch with RequireStable answers
// UNSTABLE_OFFSET_COMMIT for a partition with offsets still waiting
// (FetchStable), so a consumer starting on it does not read from an offset
// that is about to move.
//
// Replay (Load) does the same from the log: a transactional batch's offsets
// wait for a marker of their producer further on, which commits or drops
// them; those whose marker is not in the log stay waiting, as before the
// restart. Every offset keeps the position of its record in the log
// (stored.at), and the committed offset of a partition is always the
// record latest in the log: a transaction's offsets, committed by a marker,
// do not replace a plain commit written after them (Kafka's
// OffsetMetadataManager.replayEndTransactionMarker keeps the same rule). A
// tombstone (a deleted group, topic or offset) removes the offsets waiting
// before it too, so they do not come back when their transaction commits.
//
// The batches carry sequence numbers that go on from the producer's last
// batch in the partition (offsetStore.seqs, rebuilt by replay; a marker of
// a new epoch starts them again at 0), as the partition's idempotence
// checks expect of any producer: they also refuse a fenced producer's
// older epoch (INVALID_PRODUCER_EPOCH), which the coordinator checks
// first against the epochs it has seen.
//
// A broker that verifies transactions with their coordinator (KIP-890
// part 1) starts the verification on the partition before it asks, and
// hands the guard it got to TxnCommit (TxnCommitRequest.Guard), which
// carries it to the append (Log.AppendVerified): a transaction that ended
// between the answer and the append (its abort marker written meanwhile)
// is refused with INVALID_TXN_STATE, instead of opening a transaction in
// the offsets partition that no marker would end (a stuck last stable
// offset, a blocked cleaner, offsets a later marker of the producer would
// apply). The coordinator itself knows nothing of verifications.

// TxnCommitRequest is one TxnOffsetCommit: the offsets of Group that the
// producer ProducerID (epoch ProducerEpoch) of transaction TransactionalID
// commits within its open transaction. MemberID, GenerationID and
// GroupInstanceID (TxnOffsetCommit v3+; "", -1 and nil before) name the
// group member that consumed them, checked as OffsetCommit checks them
// (KIP-447), except that a request naming no member commits whatever the
// group's state. The coordinator copies what it keeps.
type TxnCommitRequest struct {
	Group, TransactionalID string
	ProducerID             int64
	ProducerEpoch          int16
	MemberID               string
	GenerationID           int32
	GroupInstanceID        *string
	Offsets                []OffsetCommit
	// Guard is the transaction verification the broker started on the
	// group's partition of __consumer_offsets before it asked the
	// transaction coordinator (KIP-890 part 1), carried to the append
	// (Log.AppendVerified): producers.Unverified when the broker does not
	// verify.
	Guard producers.Guard
}

var (
	// ErrInvalidRequest: a request the coordinator cannot act on at all,
	// such as a transactional commit without a producer id.
	// INVALID_REQUEST.
	ErrInvalidRequest = errors.New("groups: invalid request")
	// ErrUnstableOffsetCommit: the partition's offset may still change (see
	// FetchStable); the client asks again. UNSTABLE_OFFSET_COMMIT.
	ErrUnstableOffsetCommit = errors.New("groups: unstable offset commit")
)

// TxnCommit writes a transactional offset commit (see TxnCommitRequest)
// and returns once it is in the log as Commit does; the offsets then wait
// for the transaction's marker (CompleteTxn). When err is not nil it
// applies to every partition, and every entry of perPartition is err too;
// otherwise perPartition holds the outcome of each partition of r.Offsets
// (a partition named twice commits its last offset). A producer epoch
// older than one the partition has seen for the producer is
// producers.ErrInvalidProducerEpoch (the zombie of a fenced producer); a
// transaction that ended since r.Guard's verification (its marker is in
// the partition) is producers.ErrInvalidTxnState, nothing written. The
// write's wait is the Log's, bounded by it (as Commit's); a request whose
// ctx has ended is not written.
func (c *Coordinator) TxnCommit(ctx context.Context, r TxnCommitRequest) (perPartition map[TopicPartition]error, err error) {
	all := func(err error) (map[TopicPartition]error, error) {
		perPartition = make(map[TopicPartition]error, len(r.Offsets))
		for _, oc := range r.Offsets {
			perPartition[oc.TopicPartition] = err
		}
		return perPartition, err
	}
	switch {
	case r.Group == "" || len(r.Group) > maxString:
		return all(fmt.Errorf("%w: group id of %d bytes", ErrInvalidGroupID, len(r.Group)))
	case r.ProducerID < 0 || r.ProducerEpoch < 0:
		return all(fmt.Errorf("%w: transactional commit with producer id %d, epoch %d", ErrInvalidRequest,
			r.ProducerID, r.ProducerEpoch))
	}
	if err := ctx.Err(); err != nil {
		return all(err)
	}
	r.GroupInstanceID = cloneString(r.GroupInstanceID)
	c.mu.Lock()
	locked := true
	defer func() {
		if locked {
			c.mu.Unlock()
		}
	}()
	store, err := c.storeOf(r.Group)
	if err != nil {
		return all(err)
	}
	now := c.o.Clock.Now()
	settle, err := c.txnCommitCheck(r, now)
	if err != nil {
		settle()
		return all(err)
	}
	perPartition = make(map[TopicPartition]error, len(r.Offsets))
	valid := map[TopicPartition]OffsetCommit{}
	for _, oc := range r.Offsets {
		switch {
		case oc.Metadata != nil && len(*oc.Metadata) > c.o.MaxMetadataBytes:
			perPartition[oc.TopicPartition] = fmt.Errorf("%w: %d bytes for %s-%d, limit %d", ErrOffsetMetadataTooLarge,
				len(*oc.Metadata), oc.Topic, oc.Partition, c.o.MaxMetadataBytes)
			delete(valid, oc.TopicPartition)
		case len(oc.Topic) > maxString:
			perPartition[oc.TopicPartition] = fmt.Errorf("%w: topic name of %d bytes", ErrInvalidCommitSize, len(oc.Topic))
			delete(valid, oc.TopicPartition)
		default:
			perPartition[oc.TopicPartition] = nil
			oc.Metadata = cloneString(oc.Metadata)
			valid[oc.TopicPartition] = oc
		}
	}
	if len(valid) == 0 {
		settle()
		return perPartition, nil
	}
	offsets := make([]OffsetCommit, 0, len(valid))
	for _, tp := range slices.SortedFunc(maps.Keys(valid), compareTP) {
		offsets = append(offsets, valid[tp])
	}
	w, wait, err := store.beginTxn(r.ProducerID, r.ProducerEpoch, r.Guard, commitEntries(r.Group, offsets, now), now)
	settle()
	if err == nil {
		c.mu.Unlock()
		locked = false
		err = wait(context.Background())
		c.mu.Lock()
		locked = true
		store.finishTxn(w, err)
		settle()
	}
	if err != nil {
		if !isProducerError(err) {
			// The store failing is the coordinator failing: clients retry.
			err = fmt.Errorf("%w: storing transactional offsets: %v", ErrCoordinatorNotAvailable, err)
		}
		err = fmt.Errorf("groups: transactional offsets of producer %d (transaction %q) for group %q: %w",
			r.ProducerID, r.TransactionalID, r.Group, err)
		c.o.Logger.Warn("transactional commit failed", "group", r.Group, "producer", r.ProducerID, "err", err)
		for tp := range valid {
			perPartition[tp] = err
		}
	}
	return perPartition, nil
}

// isProducerError reports whether err is the partition's idempotence
// checks refusing the producer's batch, which the client must see as it
// is (a fenced epoch above all; a transaction that ended since its
// verification, INVALID_TXN_STATE, as Kafka's maybeConvertOffsetCommitError
// leaves it).
func isProducerError(err error) bool {
	for _, e := range []error{producers.ErrInvalidProducerEpoch, producers.ErrOutOfOrderSequence,
		producers.ErrUnknownProducerID, producers.ErrDuplicateSequence, producers.ErrInvalidTxnState} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// txnCommitCheck decides whether a transactional commit for r.Group may go
// ahead, creating the group when it does not exist and the request names
// no generation (Kafka's GroupCoordinator.handleTxnCommitOffsets). It
// returns what settles the group after the commit, or after the refusal.
// Called with mu held.
func (c *Coordinator) txnCommitCheck(r TxnCommitRequest, now time.Time) (settle func(), err error) {
	if cg := c.cgroups[r.Group]; cg != nil {
		// A KIP-848 consumer group: the generation is the member epoch,
		// and a stale one is ILLEGAL_GENERATION here (Kafka's
		// validateTransactionalOffsetCommit).
		settle = func() { c.settleConsumer(cg) }
		err := consumerCommitCheck(cg, r.MemberID, r.GenerationID, r.Offsets)
		if errors.Is(err, consumer.ErrStaleMemberEpoch) {
			err = fmt.Errorf("%w: %w", ErrIllegalGeneration, err)
		}
		return settle, err
	}
	g := c.groups[r.Group]
	if g == nil {
		if r.GenerationID >= 0 {
			return func() {}, fmt.Errorf("%w: group %q does not exist", ErrIllegalGeneration, r.Group)
		}
		g = newGroup(r.Group, &c.o)
		c.groups[r.Group] = g
	}
	return func() { c.settle(g) }, g.txnCommitCheck(now, r.MemberID, r.GroupInstanceID, r.GenerationID)
}

// CompleteTxn applies the transaction marker of producer producerID just
// written to partition p of __consumer_offsets: with commit, the offsets
// the producer's transaction wrote to p become their groups' committed
// offsets (each unless a commit written after it is there), otherwise
// they are dropped. The broker calls it once the marker is in the log. A
// partition loading keeps the marker for the end of its replay (which may
// have read the marker too: completing twice does nothing more); one not
// here ignores it (whoever loads it replays the marker).
func (c *Coordinator) CompleteTxn(p int32, producerID int64, commit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh := c.shards[p]
	switch {
	case c.closed || sh == nil:
		return
	case sh.store == nil:
		sh.completions = append(sh.completions, completion{producerID: producerID, commit: commit})
		return
	}
	c.completeLocked(sh.store, producerID, commit)
}

// completion is a transaction marker that came while its partition loaded.
type completion struct {
	producerID int64
	commit     bool
}

// completeLocked applies a marker to store and settles the groups it
// touched (one left with nothing is forgotten). Called with mu held.
func (c *Coordinator) completeLocked(store *offsetStore, producerID int64, commit bool) {
	for _, id := range store.completeTxn(producerID, commit) {
		if g := c.groups[id]; g != nil {
			c.settle(g)
		} else if cg := c.cgroups[id]; cg != nil {
			c.settleConsumer(cg)
		}
	}
}

// FetchStable is FetchMember for OffsetFetch v7+ with RequireStable: it
// also returns the partitions among parts (among those with a committed
// offset, when parts is nil) whose offset may still change, which the
// caller answers UNSTABLE_OFFSET_COMMIT: offsets waiting in an open
// transaction, or a commit written and not yet applied (Kafka's
// GroupMetadata.hasPendingOffsetCommitsForTopicPartition).
func (c *Coordinator) FetchStable(group string, memberID *string, epoch int32, parts []TopicPartition) (
	committed map[TopicPartition]Committed, unstable map[TopicPartition]bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	committed, err = c.fetchMemberLocked(group, memberID, epoch, parts)
	if err != nil {
		return nil, nil, err
	}
	store := c.shards[c.o.PartitionFor(group)].store
	if parts == nil {
		for tp := range committed {
			parts = append(parts, tp)
		}
	}
	unstable = map[TopicPartition]bool{}
	for _, tp := range parts {
		if store.unstable(offsetKey{group: group, TopicPartition: tp}) {
			unstable[tp] = true
		}
	}
	return committed, unstable, nil
}

// producerSeq is a producer's epoch and next sequence number in the
// partition's log.
type producerSeq struct {
	epoch int16
	next  int32
}

// nextSeq is the sequence n records after seq: sequences wrap from
// MaxInt32 to 0 (Kafka's DefaultRecordBatch.incrementSequence).
func nextSeq(seq int32, n int) int32 {
	return int32((int64(seq) + int64(n)) % (math.MaxInt32 + 1))
}

// noteBatch keeps the sequence state of the producer of a batch replayed:
// after a data batch its next sequence follows the batch; a marker of
// another epoch makes that epoch the producer's and starts its sequences
// at 0 (as the partition's producer state does).
func (s *offsetStore) noteBatch(h record.Header) {
	cur, ok := s.seqs[h.ProducerID]
	switch {
	case h.Control():
		if !ok || h.ProducerEpoch != cur.epoch {
			s.seqs[h.ProducerID] = producerSeq{epoch: h.ProducerEpoch}
		}
	case h.BaseSequence >= 0:
		s.seqs[h.ProducerID] = producerSeq{epoch: h.ProducerEpoch, next: nextSeq(h.BaseSequence, int(h.LastOffsetDelta)+1)}
	}
}

// seqFor returns the sequence the producer's next batch in epoch starts
// at: 0 in a new epoch, producers.ErrInvalidProducerEpoch for an older one.
func (s *offsetStore) seqFor(producerID int64, epoch int16) (int32, error) {
	cur, ok := s.seqs[producerID]
	switch {
	case !ok || epoch > cur.epoch:
		return 0, nil
	case epoch < cur.epoch:
		return 0, fmt.Errorf("%w: producer %d sent epoch %d, the offsets partition has seen epoch %d",
			producers.ErrInvalidProducerEpoch, producerID, epoch, cur.epoch)
	}
	return cur.next, nil
}

// txnWrite is a transactional commit written and waiting to count as
// committed.
type txnWrite struct {
	producerID int64
	entries    []entry
}

// beginTxn appends entries as producer producerID's transactional batches
// in epoch, under the verification guard g (Log.AppendVerified), and
// makes them wait for the transaction's end; the caller waits
// with wait (without the coordinator's lock) and hands the outcome to
// finishTxn. On an error nothing waits (and the sequence does not move on:
// a retry of the same commit is the partition's duplicate if the batches
// did reach the log).
func (s *offsetStore) beginTxn(producerID int64, epoch int16, g producers.Guard, entries []entry, now time.Time) (*txnWrite, func(context.Context) error, error) {
	seq, err := s.seqFor(producerID, epoch)
	if err != nil {
		return nil, nil, err
	}
	opts := record.DefaultBuildOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.Transactional = producerID, epoch, true
	appendAt := func(seq int32) (func(context.Context) error, error) {
		opts.BaseSequence = seq
		buf, err := encodeEntries(entries, now.UnixMilli(), opts)
		if err != nil {
			return nil, err
		}
		return s.log.AppendVerified(context.Background(), buf, g)
	}
	wait, err := appendAt(seq)
	if errors.Is(err, producers.ErrUnknownProducerID) && seq != 0 {
		// The partition forgot the producer (its state expires after a
		// day without appends): it starts again at 0.
		seq = 0
		wait, err = appendAt(seq)
	}
	if err != nil {
		return nil, nil, err
	}
	s.seqs[producerID] = producerSeq{epoch: epoch, next: nextSeq(seq, len(entries))}
	s.position(entries)
	m := s.txns[producerID]
	if m == nil {
		m = map[offsetKey]stored{}
		s.txns[producerID] = m
	}
	for _, e := range entries {
		v := *e.v
		v.at = e.at
		m[e.k] = v
	}
	return &txnWrite{producerID: producerID, entries: entries}, wait, nil
}

// finishTxn takes a transactional write's outcome: a failed write's
// offsets stop waiting (unless a later write replaced them, or the
// transaction ended meanwhile); a committed one's go on waiting.
func (s *offsetStore) finishTxn(w *txnWrite, err error) {
	if err == nil {
		return
	}
	m := s.txns[w.producerID]
	for _, e := range w.entries {
		if v, ok := m[e.k]; ok && v.at == e.at {
			delete(m, e.k)
		}
	}
	if len(m) == 0 {
		delete(s.txns, w.producerID)
	}
}

// applyTxn replays one record of producer producerID's transactional batch
// (of records records) at position at: an offset waits for the
// transaction's marker, a tombstone removes the producer's waiting offset
// (Kafka's GroupMetadataManager.loadGroupsAndOffsets); a group metadata
// record applies at once, as nothing else would (Kafka writes none in
// transactions).
func (s *offsetStore) applyTxn(producerID int64, key, value []byte, at int64, records int) error {
	if len(key) < 2 {
		return fmt.Errorf("%w: key of %d bytes", ErrCorrupt, len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v >= groupKeyVersion {
		return s.apply(key, value, at)
	}
	k, err := decodeKey(key)
	if err != nil {
		return err
	}
	s.records++
	m := s.txns[producerID]
	if value == nil {
		delete(m, k)
		if len(m) == 0 {
			delete(s.txns, producerID)
		}
		return nil
	}
	v, err := decodeValue(value)
	if err != nil {
		return err
	}
	v.at = at
	if m == nil {
		m = make(map[offsetKey]stored, records)
		s.txns[producerID] = m
	}
	m[k] = v
	return nil
}

// replayMarker applies a control batch replayed: a transaction marker
// (control record type 0 abort, 1 commit: Kafka's ControlRecordType)
// completes its producer's transaction; other control records (and a
// batch the cleaner emptied) carry nothing for the offsets.
func (s *offsetStore) replayMarker(h record.Header, batch []byte) error {
	recs, err := record.Records(batch, nil)
	if err != nil || len(recs) == 0 {
		return err
	}
	k := recs[0].Key
	if len(k) < 4 {
		return fmt.Errorf("%w: control record key of %d bytes in the batch of producer %d", ErrCorrupt, len(k), h.ProducerID)
	}
	// The key is version int16 (0; Kafka parses others as 0 too), type int16.
	switch binary.BigEndian.Uint16(k[2:]) {
	case 0:
		s.completeTxn(h.ProducerID, false)
	case 1:
		s.completeTxn(h.ProducerID, true)
	}
	return nil
}

// completeTxn ends producer producerID's transaction in this partition:
// with commit its waiting offsets become committed (set keeps a later
// commit), otherwise they go. It returns the groups touched, sorted.
func (s *offsetStore) completeTxn(producerID int64, commit bool) []string {
	m := s.txns[producerID]
	delete(s.txns, producerID)
	var touched []string
	for k, v := range m { // in any order: set keeps the latest position
		if commit {
			s.set(k, v)
		}
		if !slices.Contains(touched, k.group) {
			touched = append(touched, k.group)
		}
	}
	slices.Sort(touched)
	return touched
}

// dropPending removes the offsets of k waiting in open transactions that
// were written before position at (a tombstone of k at at).
func (s *offsetStore) dropPending(k offsetKey, at int64) {
	for id, m := range s.txns {
		if v, ok := m[k]; ok && v.at < at {
			delete(m, k)
			if len(m) == 0 {
				delete(s.txns, id)
			}
		}
	}
}

// txnPendingFor reports whether an open transaction has offsets of group.
func (s *offsetStore) txnPendingFor(group string) bool {
	for _, m := range s.txns {
		for k := range m {
			if k.group == group {
				return true
			}
		}
	}
	return false
}

// unstable reports whether k's offset may still change: offsets of k wait
// in an open transaction, or a commit of k is written and not applied.
func (s *offsetStore) unstable(k offsetKey) bool {
	for _, m := range s.txns {
		if _, ok := m[k]; ok {
			return true
		}
	}
	for _, pw := range s.pending {
		for _, e := range pw.entries {
			if !e.meta && e.k == k {
				return true
			}
		}
	}
	return false
}

func compareTP(a, b TopicPartition) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

func compareKeys(a, b offsetKey) int {
	return cmp.Or(strings.Compare(a.group, b.group), compareTP(a.TopicPartition, b.TopicPartition))
}
