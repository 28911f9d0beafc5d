package txn

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Ready is what the machine asks its caller to do, in order: append Writes
// to the partition's log (each then answered with written), write the
// markers of Markers (each answered with marked), and deliver Replies to
// requests parked earlier.
type Ready struct {
	Writes  []Write
	Markers []MarkerWrite
	Replies []Reply
}

func (r *Ready) empty() bool { return len(r.Writes)+len(r.Markers)+len(r.Replies) == 0 }

// Write is one record of the transaction log: the id's new state (Value nil:
// a tombstone, the id expired). ApplyOnAppend says that the caller may
// answer it with written as soon as the record is appended to the log, in
// order, without waiting for it to be committed: so are the Complete
// states (see written).
type Write struct {
	ID            string
	Key, Value    []byte
	ApplyOnAppend bool
}

// MarkerWrite asks for the markers of id's transaction on Partitions;
// Attempt counts the writes of this transaction's markers (1: the first).
type MarkerWrite struct {
	ID         string
	Marker     Marker
	Partitions []TopicPartition
	Attempt    int
}

// Reply answers a parked request (its waiter): Err, or for InitProducerId
// the producer id and epoch.
type Reply struct {
	Waiter     uint64
	Err        error
	ProducerID int64
	Epoch      int16
}

// config is what a machine needs of Options.
type config struct {
	maxTimeout    time.Duration
	expiration    time.Duration
	markerBackoff time.Duration
	// completionWait is how long EndTxn's answer waits for the transaction
	// to complete (zero: it is answered once the Prepare state is written).
	completionWait time.Duration
}

// machine is the transaction coordinator of one partition of
// __transaction_state: the transactional ids that map to it, each a small
// state machine (entry). It does no I/O and reads no clock: requests come
// with the time, time passes as tick, and what to do comes back from ready.
// A state change is decided, written to the log, and only applied once the
// write is committed (written); meanwhile the id has a pending state and
// other requests for it get ErrConcurrentTransactions, as Kafka's
// pendingState does.
type machine struct {
	cfg        *config
	coordEpoch int32
	txns       map[string]*entry
	out        Ready
}

// entry is one transactional id: its committed state, the state being
// written, and the markers of a completing transaction.
type entry struct {
	id string
	meta
	pending *meta   // being written (nil: nothing)
	waiters []Reply // answered once pending is written, with these values
	// unmarked are the partitions of a Prepare* transaction whose marker is
	// not written yet; marking says a marker write is in flight. retryAt is
	// when the next write a tick makes (markers, a timeout's abort, an
	// expiration, a completion) may start: a backoff after a failure.
	unmarked map[TopicPartition]struct{}
	marking  bool
	retryAt  time.Time
	attempts int
	// ending are the answers to the EndTxn of a Prepare* transaction, held
	// until it completes or until endBy (config.completionWait).
	ending []Reply
	endBy  time.Time
}

func newMachine(cfg *config, coordEpoch int32) *machine {
	return &machine{cfg: cfg, coordEpoch: coordEpoch, txns: map[string]*entry{}}
}

// ready returns (and forgets) what the machine asks the caller to do.
func (m *machine) ready() Ready {
	r := m.out
	m.out = Ready{}
	return r
}

// InitRequest is InitProducerId with a transactional id.
type InitRequest struct {
	ID      string
	Timeout time.Duration
	// ProducerID and Epoch are the producer's current ones (InitProducerId
	// v3+, to bump after an abortable error), or -1.
	ProducerID int64
	Epoch      int16
}

// initProducerID handles InitProducerId (Kafka's handleInitProducerId):
// a new id gets newPID's producer id with epoch 0; a known one, between
// transactions, its epoch bumped (a new producer id once the epoch is
// exhausted), which fences any older producer with the id; with a
// transaction open, that transaction is aborted under a bumped epoch and
// the caller retries (ErrConcurrentTransactions). The answer comes in a
// reply to w once the new state is written; parked says so.
func (m *machine) initProducerID(now time.Time, r InitRequest, w uint64, newPID func() (int64, error)) (parked bool, err error) {
	switch {
	case r.ID == "":
		return false, fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)
	case r.Timeout <= 0 || r.Timeout > m.cfg.maxTimeout:
		return false, fmt.Errorf("%w: %v is not in (0, %v] (transaction.max.timeout.ms)",
			ErrInvalidTransactionTimeout, r.Timeout, m.cfg.maxTimeout)
	}
	e := m.txns[r.ID]
	if e == nil {
		pid, err := newPID()
		if err != nil {
			return false, fmt.Errorf("%w: a producer id for %q: %w", ErrCoordinatorNotAvailable, r.ID, err)
		}
		e = &entry{id: r.ID, meta: meta{ProducerID: pid, LastProducerID: noProducer, Epoch: noEpoch,
			LastEpoch: noEpoch, Timeout: r.Timeout, State: Empty, Updated: now}}
		m.txns[r.ID] = e
	}
	if e.pending != nil {
		return false, fmt.Errorf("%w: %q: a state change is being written", ErrConcurrentTransactions, r.ID)
	}
	expected := r.ProducerID != noProducer
	if expected && !(e.Epoch == noEpoch || r.ProducerID == e.ProducerID ||
		r.ProducerID == e.LastProducerID && r.Epoch >= maxEpoch) {
		return false, fmt.Errorf("%w: %q has producer id %d, not %d", ErrProducerFenced, r.ID, e.ProducerID, r.ProducerID)
	}
	switch e.State {
	case PrepareCommit, PrepareAbort:
		return false, fmt.Errorf("%w: %q: the previous transaction is completing (%v)", ErrConcurrentTransactions, r.ID, e.State)
	case Ongoing:
		// Fence the current producer and abort its transaction; the
		// caller's retry then bumps the epoch again, as Kafka does.
		m.abort(now, e)
		return false, fmt.Errorf("%w: %q: aborting the open transaction of the previous producer",
			ErrConcurrentTransactions, r.ID)
	case Empty, CompleteCommit, CompleteAbort:
	default:
		return false, fmt.Errorf("%w: %q is %v", ErrConcurrentTransactions, r.ID, e.State)
	}
	next := e.meta.clone()
	next.State, next.Timeout, next.Partitions, next.Start, next.Updated = Empty, r.Timeout, nil, time.Time{}, now
	switch {
	case e.Epoch >= maxEpoch && (!expected || r.Epoch == e.Epoch):
		pid, err := newPID()
		if err != nil {
			return false, fmt.Errorf("%w: a producer id for %q: %w", ErrCoordinatorNotAvailable, r.ID, err)
		}
		next.LastProducerID, next.ProducerID, next.Epoch, next.LastEpoch = e.ProducerID, pid, 0, noEpoch
		if expected {
			next.LastEpoch = e.Epoch
		}
	case !expected:
		next.Epoch, next.LastEpoch = e.Epoch+1, noEpoch
	case e.Epoch == noEpoch || r.Epoch == e.Epoch:
		next.Epoch, next.LastEpoch = e.Epoch+1, e.Epoch
	case r.Epoch == e.LastEpoch:
		// A retry of a bump whose answer was lost: the same answer.
	default:
		return false, fmt.Errorf("%w: %q is at epoch %d, not %d", ErrProducerFenced, r.ID, e.Epoch, r.Epoch)
	}
	m.transit(e, next, Reply{Waiter: w, ProducerID: next.ProducerID, Epoch: next.Epoch})
	return true, nil
}

// abort fences e's producer (its epoch bumped, unless at the last one) and
// begins the abort of its open transaction. e is Ongoing with nothing
// pending.
func (m *machine) abort(now time.Time, e *entry) {
	next := e.meta.clone()
	if next.Epoch < math.MaxInt16 {
		next.Epoch++
	}
	next.LastEpoch, next.State, next.Updated = noEpoch, PrepareAbort, now
	m.transit(e, next)
}

// transit begins the change of e to next: the record is queued for writing
// and e is pending until written.
func (m *machine) transit(e *entry, next meta, waiters ...Reply) {
	e.pending = &next
	e.waiters = waiters
	w := Write{ID: e.id, Key: encodeKey(e.id),
		ApplyOnAppend: next.State == CompleteCommit || next.State == CompleteAbort}
	if next.State != Dead {
		w.Value = encodeValue(&next)
	}
	m.out.Writes = append(m.out.Writes, w)
}

// AddRequest is AddPartitionsToTxn (and AddOffsetsToTxn, whose partition
// is the group's partition of __consumer_offsets) for one transaction.
type AddRequest struct {
	ID         string
	ProducerID int64
	Epoch      int16
	Partitions []TopicPartition
}

// check is the checks every request of a producer makes (Kafka's order):
// the id known with this producer id and epoch, nothing pending.
func (m *machine) check(id string, pid int64, epoch int16) (*entry, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)
	}
	e := m.txns[id]
	switch {
	case e == nil || e.State == Dead:
		return nil, fmt.Errorf("%w: %q is not known", ErrInvalidProducerIDMapping, id)
	case e.ProducerID != pid:
		return nil, fmt.Errorf("%w: %q has producer id %d, not %d", ErrInvalidProducerIDMapping, id, e.ProducerID, pid)
	case e.Epoch != epoch:
		return nil, fmt.Errorf("%w: %q is at epoch %d, not %d", ErrProducerFenced, id, e.Epoch, epoch)
	case e.pending != nil:
		return nil, fmt.Errorf("%w: %q: a state change is being written", ErrConcurrentTransactions, id)
	}
	return e, nil
}

// addPartitions adds partitions to the id's transaction, opening one if
// none is (Kafka's handleAddPartitionsToTransaction). Partitions already in
// the open transaction are answered at once (parked false, err nil).
func (m *machine) addPartitions(now time.Time, r AddRequest, w uint64) (parked bool, err error) {
	e, err := m.check(r.ID, r.ProducerID, r.Epoch)
	if err != nil {
		return false, err
	}
	switch e.State {
	case PrepareCommit, PrepareAbort:
		return false, fmt.Errorf("%w: %q: the previous transaction is completing (%v)", ErrConcurrentTransactions, r.ID, e.State)
	case Ongoing:
		if !slices.ContainsFunc(r.Partitions, func(tp TopicPartition) bool { _, in := e.Partitions[tp]; return !in }) {
			return false, nil
		}
	}
	next := e.meta.clone()
	if next.State != Ongoing {
		next.Partitions, next.Start = map[TopicPartition]struct{}{}, now
	}
	for _, tp := range r.Partitions {
		next.Partitions[tp] = struct{}{}
	}
	next.State, next.Updated = Ongoing, now
	m.transit(e, next, Reply{Waiter: w})
	return true, nil
}

// verify answers whether each partition is in the id's open transaction
// (AddPartitionsToTxn v4's VerifyOnly, KIP-890's check of a transactional
// produce): nil for those in it, ErrInvalidTxnState for the others; err is
// an error of the whole request.
func (m *machine) verify(r AddRequest) (perPartition []error, err error) {
	if r.ID == "" {
		return nil, fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)
	}
	e := m.txns[r.ID]
	switch {
	case e == nil || e.State == Dead:
		return nil, fmt.Errorf("%w: %q is not known", ErrInvalidProducerIDMapping, r.ID)
	case e.ProducerID != r.ProducerID:
		return nil, fmt.Errorf("%w: %q has producer id %d, not %d", ErrInvalidProducerIDMapping, r.ID, e.ProducerID, r.ProducerID)
	case e.Epoch != r.Epoch:
		return nil, fmt.Errorf("%w: %q is at epoch %d, not %d", ErrProducerFenced, r.ID, e.Epoch, r.Epoch)
	case e.State == PrepareCommit || e.State == PrepareAbort:
		return nil, fmt.Errorf("%w: %q: the transaction is completing (%v)", ErrConcurrentTransactions, r.ID, e.State)
	}
	out := make([]error, len(r.Partitions))
	for i, tp := range r.Partitions {
		if _, in := e.Partitions[tp]; e.State != Ongoing || !in {
			out[i] = fmt.Errorf("%w: %s-%d is not in the transaction of %q", ErrInvalidTxnState, tp.Topic, tp.Partition, r.ID)
		}
	}
	return out, nil
}

// EndRequest is EndTxn.
type EndRequest struct {
	ID         string
	ProducerID int64
	Epoch      int16
	Commit     bool
}

// endTxn begins the commit or abort of the id's open transaction (Kafka's
// handleEndTransaction): the Prepare state is written, then the markers,
// then the Complete state; the client is answered once the transaction is
// complete, or once completionWait has passed since the Prepare state was
// written, whichever comes first (Kafka answers once the Prepare state is
// written, and the client's next request meets ErrConcurrentTransactions
// and backs off while the markers are written; here it usually finds the
// transaction complete). A retry of a completed end is answered at once
// (parked false, err nil); one while its answer is held waits with it.
func (m *machine) endTxn(now time.Time, r EndRequest, w uint64) (parked bool, err error) {
	e, err := m.check(r.ID, r.ProducerID, r.Epoch)
	if err != nil {
		return false, err
	}
	want := map[bool]Status{true: CompleteCommit, false: CompleteAbort}[r.Commit]
	prep := map[bool]Status{true: PrepareCommit, false: PrepareAbort}[r.Commit]
	switch e.State {
	case Ongoing:
		next := e.meta.clone()
		next.State, next.Updated = prep, now
		m.transit(e, next, Reply{Waiter: w})
		return true, nil
	case want:
		return false, nil
	case prep:
		if len(e.ending) > 0 {
			e.ending = append(e.ending, Reply{Waiter: w})
			return true, nil
		}
		return false, fmt.Errorf("%w: %q: the %v is being completed", ErrConcurrentTransactions, r.ID, e.State)
	}
	return false, fmt.Errorf("%w: %q is %v, cannot %s", ErrInvalidTxnState, r.ID, e.State,
		map[bool]string{true: "commit", false: "abort"}[r.Commit])
}

// written applies the outcome of id's pending write: err nil applies the
// new state (a Prepare state then asks for its markers, a Complete state
// answers the EndTxn held for it, a tombstone forgets the id), an error
// drops it; the parked requests are answered, but for the EndTxn of a
// Prepare state, which is held until the transaction completes or
// completionWait passes.
//
// A Complete state may be applied once its record is appended, before it is
// committed (Write.ApplyOnAppend): every later record of the id goes after
// it in the same partition, so none can be committed (survive a power cut,
// reach the in-sync replicas) without it; and if it is lost alone, the
// Prepare record before it is what a new coordinator loads, and it writes
// the markers again (a marker is appended even where the transaction is
// no longer open) and completes. What cannot be lost is the Prepare state:
// it waits for its commit, and EndTxn is answered only after it.
func (m *machine) written(now time.Time, id string, err error) {
	e := m.txns[id]
	if e == nil || e.pending == nil {
		return
	}
	next, waiters := *e.pending, e.waiters
	e.pending, e.waiters = nil, nil
	hold := err == nil && m.cfg.completionWait > 0 && (next.State == PrepareCommit || next.State == PrepareAbort)
	for _, r := range waiters {
		if err != nil {
			r = Reply{Waiter: r.Waiter, Err: err}
		}
		if hold {
			e.ending = append(e.ending, r)
			e.endBy = now.Add(m.cfg.completionWait)
			continue
		}
		m.out.Replies = append(m.out.Replies, r)
	}
	if err != nil {
		if e.Epoch == noEpoch {
			delete(m.txns, id) // never written: nothing to keep
		}
		// Not again at once: the log may refuse for a while (no leader,
		// too few replicas), and a tick would retry it in a loop.
		e.retryAt = now.Add(m.cfg.markerBackoff)
		return
	}
	e.meta = next
	switch next.State {
	case Dead:
		delete(m.txns, id)
	case CompleteCommit, CompleteAbort:
		m.endAnswered(e)
	case PrepareCommit, PrepareAbort:
		e.unmarked = make(map[TopicPartition]struct{}, len(next.Partitions))
		for tp := range next.Partitions {
			e.unmarked[tp] = struct{}{}
		}
		e.retryAt, e.attempts = now, 0
		m.markers(now, e)
	}
}

// endAnswered gives the EndTxn answers held for e's transaction.
func (m *machine) endAnswered(e *entry) {
	m.out.Replies = append(m.out.Replies, e.ending...)
	e.ending, e.endBy = nil, time.Time{}
}

// markers asks for e's remaining markers when none are being written and
// the retry time has come; with none left it writes the Complete state.
func (m *machine) markers(now time.Time, e *entry) {
	if e.marking || e.pending != nil || now.Before(e.retryAt) {
		return
	}
	if len(e.unmarked) == 0 {
		next := e.meta.clone()
		next.State = CompleteCommit
		if e.State == PrepareAbort {
			next.State = CompleteAbort
		}
		next.Partitions, next.Updated = nil, now
		m.transit(e, next)
		return
	}
	mw := MarkerWrite{ID: e.id, Marker: Marker{ProducerID: e.ProducerID, ProducerEpoch: e.Epoch,
		Commit: e.State == PrepareCommit, CoordinatorEpoch: m.coordEpoch}}
	for tp := range e.unmarked {
		mw.Partitions = append(mw.Partitions, tp)
	}
	slices.SortFunc(mw.Partitions, comparePartitions)
	e.marking = true
	e.attempts++
	mw.Attempt = e.attempts
	m.out.Markers = append(m.out.Markers, mw)
}

// marked applies the outcome of id's marker write: the partitions in done
// have their marker; the others are tried again after the backoff.
func (m *machine) marked(now time.Time, id string, done []TopicPartition) {
	e := m.txns[id]
	if e == nil || !e.marking {
		return
	}
	e.marking = false
	for _, tp := range done {
		delete(e.unmarked, tp)
	}
	if len(e.unmarked) > 0 {
		e.retryAt = now.Add(m.cfg.markerBackoff)
	}
	m.markers(now, e)
}

// tick aborts transactions open longer than their timeout (fencing their
// producer, as Kafka's abortTimedOutTransactions does), expires ids idle
// between transactions for longer than the expiration (a tombstone, as
// transactional.id.expiration.ms), retries marker writes due, and gives
// the EndTxn answers held past completionWait.
func (m *machine) tick(now time.Time) {
	for _, id := range m.sortedIDs() {
		e := m.txns[id]
		if len(e.ending) > 0 && !now.Before(e.endBy) {
			// Completing takes longer (a partition's leader is away):
			// the commit is decided, the client may go on, and meets
			// ErrConcurrentTransactions until it completes.
			m.endAnswered(e)
		}
		if e.pending != nil || now.Before(e.retryAt) {
			continue
		}
		switch e.State {
		case Ongoing:
			if !now.Before(e.Start.Add(e.Timeout)) {
				m.abort(now, e)
			}
		case PrepareCommit, PrepareAbort:
			m.markers(now, e)
		case Empty, CompleteCommit, CompleteAbort:
			if m.cfg.expiration > 0 && !now.Before(e.Updated.Add(m.cfg.expiration)) {
				next := e.meta.clone()
				next.State, next.Partitions, next.Updated = Dead, nil, now
				m.transit(e, next)
			}
		}
	}
}

// deadline returns when tick next has something to do (zero: nothing).
func (m *machine) deadline() time.Time {
	var at time.Time
	earlier := func(t time.Time) {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	later := func(t time.Time, e *entry) time.Time {
		if t.Before(e.retryAt) {
			return e.retryAt
		}
		return t
	}
	for _, e := range m.txns {
		if len(e.ending) > 0 {
			earlier(e.endBy)
		}
		if e.pending != nil {
			continue
		}
		switch e.State {
		case Ongoing:
			earlier(later(e.Start.Add(e.Timeout), e))
		case PrepareCommit, PrepareAbort:
			if !e.marking {
				earlier(e.retryAt)
			}
		case Empty, CompleteCommit, CompleteAbort:
			if m.cfg.expiration > 0 {
				earlier(later(e.Updated.Add(m.cfg.expiration), e))
			}
		}
	}
	return at
}

// load restores the ids of a replayed log: every id as its last record
// says; transactions being prepared resume their markers (retried at
// once), open ones keep their timeout from their start.
func (m *machine) load(now time.Time, states map[string]meta) {
	for id, s := range states {
		if s.State == Dead {
			continue
		}
		if s.State == PrepareEpochFence { // never written by Kafka or weir; an open transaction
			s.State = Ongoing
		}
		e := &entry{id: id, meta: s}
		m.txns[id] = e
		if s.State == PrepareCommit || s.State == PrepareAbort {
			e.unmarked = map[TopicPartition]struct{}{}
			for tp := range s.Partitions {
				e.unmarked[tp] = struct{}{}
			}
			e.retryAt = now
		}
	}
	for _, id := range m.sortedIDs() {
		if e := m.txns[id]; e.State == PrepareCommit || e.State == PrepareAbort {
			m.markers(now, e)
		}
	}
}

func (m *machine) sortedIDs() []string {
	ids := make([]string, 0, len(m.txns))
	for id := range m.txns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func comparePartitions(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}
