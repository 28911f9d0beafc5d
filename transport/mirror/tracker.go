package mirror

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// tracker follows one source partition: what was sent to the target, what
// the target acknowledged, and the position that may be committed. It does
// no I/O and reads no clock (times come in as arguments); the mirror's loop
// and kgo's promises drive it, under mu.
//
// Invariant: every source record below next was acknowledged by the target
// in a run that started at or before it, so committing next loses nothing.
type tracker struct {
	mu sync.Mutex

	topic, target string
	partition     int32
	// srcID: the source topic's id (hex; "" if the source has none),
	// committed with the position as its metadata, so that a topic
	// re-created under the same name shows as another (addPartitions).
	// fresh: the position is the start of such a new topic (forwarding
	// then takes a fresh producer id: the target partition may hold the
	// old topic's sequences under the current one).
	srcID string
	fresh bool

	next    int64      // committable position: everything before it is acknowledged
	expect  int64      // lowest source offset accepted from the consumer
	queue   []inflight // sent, unresolved, oldest first
	head    int        // queue[head] is the oldest
	failed  bool       // a record failed: next is frozen, sends are refused
	retries int        // consecutive failed runs, for the backoff
	retryAt time.Time  // when a failed partition may rewind
	// careful: below this offset one record at a time is in flight, so a
	// batch the target refused as too large is sent again record by
	// record, and only the record really too large fails. refetch: a
	// record was refused for that; the consumer must be moved back to
	// expect before anything more is accepted.
	careful int64
	refetch bool
	// truncated: the consumer came back below expect on its own (kgo's
	// reset after the source's log was truncated below the position, as
	// by an unclean leader election): sends are refused until the mirror
	// moves the consumer back to where the source's log diverged
	// (truncation.go: resetDue, then resetTo). epoch: the source leader
	// epoch of the record at next-1, -1 if unknown; it locates the
	// divergence (OffsetForLeaderEpoch, KIP-320).
	truncated bool
	epoch     int32

	syncEvery int64
	lo, hi    time.Duration // backoff bounds
	syncUp    int64         // upstream offset of the last sync, -1 before the first of a run
	syncs     []OffsetSync

	committed                 int64 // last position committed to the target, -1 for none
	base                      int64 // exactly once: position at the start of the open transaction
	skipTo                    int64 // forwarding: next moves here once nothing is in flight (a skipped marker)
	hwm                       int64 // source high watermark, as last seen
	lastAck                   time.Time
	records                   int64
	bytes                     int64
	errors                    int64 // records that failed
	fetchErrors, commitErrors int64
	commitFails               int // consecutive failed commits
	lastErr                   error
	lastErrAt                 time.Time
}

// inflight is one record sent and not yet resolved.
type inflight struct {
	offset int64
	epoch  int32 // the source leader epoch of the record, -1 if unknown
	ts     time.Time
}

func newTracker(topic, target string, partition int32, start, syncEvery int64, lo, hi time.Duration) *tracker {
	return &tracker{topic: topic, target: target, partition: partition, next: start, expect: start,
		syncEvery: syncEvery, lo: lo, hi: hi, syncUp: -1, committed: -1, hwm: start, base: start, epoch: -1}
}

// send records that the record at offset (source leader epoch epoch,
// timestamp ts) is being sent. It reports false when the record must not
// be sent: the partition failed (a rewind will fetch it again), the
// consumer returned it from before a rewind, or the consumer went below
// the position (truncated; the reset will fetch it again).
func (t *tracker) send(offset int64, epoch int32, ts time.Time) bool {
	if t.failed || t.refetch || t.truncated || offset < t.expect {
		return false
	}
	if offset < t.careful && t.inFlight() > 0 {
		t.refetch = true
		return false
	}
	t.expect = offset + 1
	t.queue = append(t.queue, inflight{offset, epoch, ts})
	return true
}

// sendBatch is send for a whole batch of source offsets base..last (its
// source leader epoch epoch), sent as one (forwarding): its
// acknowledgement is that of last.
func (t *tracker) sendBatch(base, last int64, epoch int32, ts time.Time) bool {
	if t.failed || t.refetch || base < t.expect && last < t.expect {
		return false
	}
	t.expect = last + 1
	t.queue = append(t.queue, inflight{last, epoch, ts})
	return true
}

// skipped records that source offsets base..last hold nothing to copy (a
// transaction marker, an aborted batch). With nothing in flight before
// them, the position moves past them.
func (t *tracker) skipped(base, last int64) {
	if t.failed || t.refetch {
		return
	}
	t.expect = max(t.expect, last+1)
	if t.inFlight() > 0 {
		t.skipTo = last + 1 // once what is in flight is acknowledged
		return
	}
	if t.next >= base {
		t.next = max(t.next, last+1)
	}
}

// ackNoSync is ack for a record whose target offset is unknown (the
// target answered that it was a duplicate): no offset sync is written.
func (t *tracker) ackNoSync(offset int64, size int, now time.Time) {
	up := t.syncUp
	t.syncUp = offset // no sync due now
	t.ack(offset, -1, size, now)
	t.syncUp = up
}

// inFlight is how many records wait for the target.
func (t *tracker) inFlight() int { return len(t.queue) - t.head }

// pop removes the oldest record in flight, which must be offset, and
// returns its leader epoch: kgo resolves a partition's records in the
// order they were produced. A mismatch is a bug; it reports an error so
// the partition fails safe.
func (t *tracker) pop(offset int64) (int32, error) {
	if t.inFlight() == 0 {
		return -1, fmt.Errorf("mirror: %s/%d: resolved offset %d with nothing in flight", t.topic, t.partition, offset)
	}
	front, epoch := t.queue[t.head].offset, t.queue[t.head].epoch
	t.queue[t.head] = inflight{}
	t.head++
	if t.head == len(t.queue) {
		t.queue, t.head = t.queue[:0], 0
	} else if t.head > 1024 && t.head*2 > len(t.queue) {
		t.queue = append(t.queue[:0], t.queue[t.head:]...)
		t.head = 0
	}
	if front != offset {
		return -1, fmt.Errorf("mirror: %s/%d: resolved offset %d, but %d was sent first", t.topic, t.partition, offset, front)
	}
	return epoch, nil
}

// ack records that the target acknowledged the record at source offset
// offset, written at target offset dst, of size bytes.
func (t *tracker) ack(offset, dst int64, size int, now time.Time) {
	epoch, err := t.pop(offset)
	if err != nil {
		t.failPopped(offset, err, now)
		return
	}
	t.records++
	t.bytes += int64(size)
	t.lastAck = now
	if t.failed {
		return // written after a failure: sent again after the rewind
	}
	t.next, t.epoch = offset+1, epoch
	if t.skipTo > t.next && t.inFlight() == 0 {
		t.next = t.skipTo
	}
	t.retries = 0
	if t.syncUp < 0 || offset-t.syncUp >= t.syncEvery {
		t.syncUp = offset
		t.syncs = append(t.syncs, OffsetSync{Topic: t.topic, Partition: t.partition, Upstream: offset, Downstream: dst})
	}
}

// syncStart adds an offset sync for the first record of a batch forwarded
// as one (source offset base, at dst on the target), before the batch's
// ack, when the partition has had none since it started or moved (ack
// syncs a batch's last record): a group inside that first batch then
// translates, re-reading from the batch's second record, instead of not
// at all.
func (t *tracker) syncStart(base, dst int64) {
	if t.syncUp < 0 && !t.failed && dst >= 0 {
		t.syncs = append(t.syncs, OffsetSync{Topic: t.topic, Partition: t.partition, Upstream: base, Downstream: dst})
	}
}

// fail records that the record at offset was not written. The first
// failure of a run freezes next and schedules the rewind after a backoff
// doubling from lo to at most hi. It reports whether this failure was the
// first of its run (the one worth logging).
func (t *tracker) fail(offset int64, err error, now time.Time) bool {
	if _, perr := t.pop(offset); perr != nil {
		err = perr
	} else if errors.Is(err, kerr.MessageTooLarge) {
		t.careful = max(t.careful, offset+1)
	}
	return t.failPopped(offset, err, now)
}

// refetchDue reports the offset the consumer must be moved back to, once
// a record was refused in careful mode and nothing is in flight.
func (t *tracker) refetchDue() (int64, bool) {
	if !t.refetch || t.failed || t.inFlight() > 0 {
		return 0, false
	}
	t.refetch = false
	return t.expect, true
}

func (t *tracker) failPopped(offset int64, err error, now time.Time) bool {
	t.errors++
	t.lastErr = fmt.Errorf("%s/%d offset %d: %w", t.topic, t.partition, offset, err)
	t.lastErrAt = now
	t.skipTo = 0
	if t.failed {
		return false
	}
	t.failed = true
	wait := t.lo
	for i := 0; i < t.retries && wait < t.hi; i++ {
		wait *= 2
	}
	t.retries++
	t.retryAt = now.Add(min(wait, t.hi))
	return true
}

// rewindDue reports the position to fetch again from, once the partition
// failed, nothing is in flight and the backoff passed.
func (t *tracker) rewindDue(now time.Time) (int64, bool) {
	if !t.failed || t.inFlight() > 0 || now.Before(t.retryAt) {
		return 0, false
	}
	return t.next, true
}

// rewound records that the consumer was moved back to next: sends are
// accepted again from there, and the next acknowledgement writes a sync.
// A truncation signalled meanwhile stays pending (the source may have
// grown past next since; the consumer would not come back below it):
// resetDue follows at once.
func (t *tracker) rewound() {
	t.failed = false
	t.refetch = false
	t.expect = t.next
	t.syncUp = -1
}

// abortTo records that the transaction was aborted (exactly-once mode)
// and the consumer moved back to at, the position committed on the
// target: everything sent since is dropped, and nothing may be in flight.
// A truncation signalled stays pending, as for rewound.
func (t *tracker) abortTo(at int64, now time.Time) {
	clear(t.queue)
	t.queue, t.head = t.queue[:0], 0
	if at != t.next {
		t.epoch = -1
	}
	t.base, t.next, t.expect = at, at, at
	t.failed, t.refetch = false, false
	t.syncUp = -1
	t.syncs = nil
	t.retries++
	t.retryAt = now
}

// resetTo records that the source's log was truncated below the position
// and the consumer moved back to at (forwarding: resetOffsets; records:
// resetTruncated): sends are accepted again from there, and the position
// moves back to at if above, its epoch then unknown. Nothing may be in
// flight.
func (t *tracker) resetTo(at int64) {
	if at < t.next {
		t.next, t.epoch = at, -1
	}
	t.expect = at
	t.skipTo = 0
	t.syncUp = -1
	t.refetch, t.truncated = false, false
}

// truncate records that the consumer returned source offset to (a
// record, or where kgo reset it to: ErrDataLoss's ResetTo) below the
// records accepted: the source's log was truncated below them and kgo
// moved back on its own. Sends are refused until resetTo. It reports
// whether this is news, to count and log once per truncation.
func (t *tracker) truncate(to int64) bool {
	if t.truncated || to >= t.expect {
		return false
	}
	t.truncated = true
	return true
}

// resetDue reports, once the consumer went below the position
// (truncated), nothing is in flight and no failure waits for its rewind
// (which comes first), the position and the leader epoch of the record
// before it, to locate where the source's log diverged.
func (t *tracker) resetDue() (at int64, epoch int32, due bool) {
	if !t.truncated || t.failed || t.inFlight() > 0 {
		return 0, -1, false
	}
	return t.next, t.epoch, true
}

// takeSyncs returns and forgets the offset syncs due.
func (t *tracker) takeSyncs() []OffsetSync {
	s := t.syncs
	t.syncs = nil
	return s
}

// lagSeconds is the age of the oldest record in flight, or when nothing is
// in flight but the source holds more, the time since the last ack.
func (t *tracker) lagSeconds(now time.Time) float64 {
	if t.inFlight() > 0 {
		if ts := t.queue[t.head].ts; !ts.IsZero() {
			return max(0, now.Sub(ts).Seconds())
		}
	}
	if t.hwm > t.next && !t.lastAck.IsZero() {
		return now.Sub(t.lastAck).Seconds()
	}
	return 0
}

// PartitionStatus is what the mirror knows of one source partition.
type PartitionStatus struct {
	Topic        string  // source topic
	Partition    int32   // partition, the same on both sides
	TargetTopic  string  // target topic
	Next         int64   // committable source position
	Committed    int64   // last committed to the target, -1 before the first commit
	End          int64   // source high watermark, as last seen
	LagRecords   int64   // End - Next, at least 0
	LagSeconds   float64 // see tracker.lagSeconds
	InFlight     int     // records sent, not yet acknowledged
	Records      int64   // records acknowledged by the target
	Bytes        int64   // their key and value bytes
	Errors       int64   // records the target refused
	FetchErrors  int64   // failed fetches from the source
	CommitErrors int64   // failed commits of the position
	LastError    string  // the latest failure, "" if none
	LastErrorAt  time.Time
	Retrying     bool // failed, waiting to rewind
}

func (t *tracker) status(now time.Time) PartitionStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := PartitionStatus{Topic: t.topic, Partition: t.partition, TargetTopic: t.target,
		Next: t.next, Committed: t.committed, End: t.hwm, LagRecords: max(0, t.hwm-t.next),
		LagSeconds: t.lagSeconds(now), InFlight: t.inFlight(), Records: t.records, Bytes: t.bytes,
		Errors: t.errors, FetchErrors: t.fetchErrors, CommitErrors: t.commitErrors, LastErrorAt: t.lastErrAt, Retrying: t.failed}
	if t.lastErr != nil {
		s.LastError = t.lastErr.Error()
	}
	return s
}
