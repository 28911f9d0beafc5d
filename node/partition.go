package node

import (
	"fmt"
	"os"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/wakeup"
)

// Partition is a partition this broker serves reads of (Fetch, ListOffsets).
// It is a handle: cheap to take per request, valid while the topic exists
// (reads of a deleted topic's partition fail with a retriable error).
type Partition struct {
	Topic string
	Index int32
	p     *replicated
	epoch int32
	// follower: read by a follower (up to the log end, woken by appends),
	// not a consumer (up to the high watermark, woken when it moves).
	follower bool
	// committed: read by a read_committed consumer (up to the last
	// stable offset).
	committed bool
}

// Partition returns a partition this broker leads, to read from:
// ErrUnknownTopic or ErrUnknownPartition when there is none, ErrNotLeader or
// ErrLeaderNotAvailable when this broker does not lead it (wrapped).
func (n *Node) Partition(topic string, index int32) (*Partition, error) {
	p, epoch, err := n.leaderPartition(topic, index)
	if err != nil {
		return nil, err
	}
	return &Partition{Topic: topic, Index: index, p: p, epoch: epoch}, nil
}

// HasPartition reports whether the partition exists in the cluster: nil, or
// why not.
func (n *Node) HasPartition(topic string, index int32) error {
	im, _ := n.image.load()
	t := im.Topics[topic]
	switch {
	case t == nil || t.Deleting:
		return unknownTopic(topic)
	case index < 0 || int(index) >= len(t.Assignment):
		return fmt.Errorf("%w: %q has %d partitions, not %d", ErrUnknownPartition, topic, len(t.Assignment), index)
	}
	return nil
}

// HighWatermark is the offset consumers read up to: the smallest log end
// over the in-sync replicas (with one replica, the log end).
func (p *Partition) HighWatermark() int64 { return p.p.highWatermark() }

// ReadLimit is the offset this read may go up to: the high watermark for a
// consumer, the log end for a follower.
// Follower reports whether p is a follower's handle (a replica fetching).
func (p *Partition) Follower() bool { return p.follower }

func (p *Partition) ReadLimit() int64 {
	if p.follower {
		return p.p.Log().EndOffset()
	}
	if p.committed {
		return p.LastStableOffset()
	}
	return p.HighWatermark()
}

// ReadCommitted makes p a read_committed consumer's handle (Fetch and
// ListOffsets with isolation_level 1): it reads up to the last stable
// offset, and ListOffset answers it for the latest offset. A follower's
// handle stays a follower's.
func (p *Partition) ReadCommitted() {
	p.committed = !p.follower
}

// LastStableOffset is the offset read_committed consumers read up to: the
// high watermark, or the first offset of the oldest transaction still open
// in the partition when that is lower (logs.Partition.FirstUnstableOffset).
func (p *Partition) LastStableOffset() int64 {
	hw := p.HighWatermark()
	if first, ok := p.p.FirstUnstableOffset(); ok && first < hw {
		return first
	}
	return hw
}

// AbortedTxns lists the aborted transactions a read_committed Fetch
// returning the records of [from, upTo) must name, so that the client
// drops their records (logs.Partition.AbortedTxns).
func (p *Partition) AbortedTxns(from, upTo int64) []logs.AbortedTxn {
	return p.p.AbortedTxns(from, upTo)
}

// LogStartOffset is the first offset still in the log.
func (p *Partition) LogStartOffset() int64 { return p.p.Log().StartOffset() }

// LeaderEpoch is the partition's current leader epoch.
func (p *Partition) LeaderEpoch() int32 { return p.epoch }

// Watch registers w (package wakeup) under key, to be fired when ReadLimit
// may have moved: for a consumer when the high watermark moves, for a
// follower when the log changes (an append, a reset, a recovery, a close),
// and for both when the partition changes role or closes. Register, then
// check ReadLimit, then wait, and no move is missed; false means no fire
// will come (the log is closed): look now. A fire costs O(waiters of this
// partition); w.Close unregisters.
func (p *Partition) Watch(w *wakeup.Waiter, key int) bool {
	w.Watch(&p.p.readers, key)
	if p.follower {
		return p.p.Log().Watch(w, key)
	}
	return true
}

// Read returns whole batches from offset on, up to the limit the caller
// read (ReadLimit; at least one batch, even past maxBytes):
// ErrOffsetOutOfRange outside [LogStartOffset, limit]; an empty result at
// limit. The caller releases it.
//
// It fails with filecache.ErrBudget, reading nothing, when the segment
// file it needs is closed and every descriptor of the budget is held by
// other reads in flight: the caller answers with what it has read so far.
func (p *Partition) Read(offset, maxBytes, limit int64) (Records, error) {
	if p.committed && offset > limit && offset <= p.HighWatermark() {
		// A read_committed consumer past the last stable offset but
		// within the high watermark (it seeked there): nothing to read
		// yet, as Kafka answers it, not out of range.
		return Records{}, nil
	}
	sl, err := p.p.Log().TryRead(offset, max(maxBytes, 1), limit)
	if err != nil {
		return Records{}, err
	}
	return Records{sl: sl}, nil
}

// Timestamps of ListOffsets with special meanings.
const (
	ListEarliest = -2
	ListLatest   = -1
	// ListMaxTimestamp (KIP-734, ListOffsets v7): the record with the
	// largest timestamp.
	ListMaxTimestamp = -3
)

// ListOffset answers one partition of ListOffsets: ListEarliest is the log
// start, ListLatest the high watermark (the last stable offset for a
// read_committed handle), any other timestamp the first batch
// holding a record at or after it (offset -1 and timestamp -1 when there is
// none, as in Kafka). The timestamp answered is the batch's first timestamp
// when that qualifies, else its largest: weir indexes batches, not records.
func (p *Partition) ListOffset(ts int64) (offset, timestamp int64, err error) {
	l := p.p.Log()
	switch ts {
	case ListEarliest:
		return l.StartOffset(), -1, nil
	case ListLatest:
		if p.committed {
			return p.LastStableOffset(), -1, nil
		}
		return p.HighWatermark(), -1, nil
	case ListMaxTimestamp:
		return p.maxTimestamp()
	}
	off, ok, err := l.OffsetForTimestamp(ts)
	if err != nil || !ok {
		return -1, -1, err
	}
	if p.committed && off >= p.LastStableOffset() {
		// Not yet readable by read_committed (Kafka filters the same way).
		return -1, -1, nil
	}
	// Read the batch's header for the timestamp to answer with.
	sl, err := l.Read(off, record.HeaderSize, partlog.NoLimit)
	if err != nil {
		return off, ts, nil
	}
	defer sl.Release()
	var hdr [record.HeaderSize]byte
	if sl.Size < record.HeaderSize {
		return off, ts, nil
	}
	if _, err := sl.File.ReadAt(hdr[:], sl.Pos); err != nil {
		return off, ts, nil
	}
	h, err := record.ParseHeader(hdr[:])
	switch {
	case err != nil:
		return off, ts, nil
	case h.BaseTimestamp >= ts:
		return off, h.BaseTimestamp, nil
	default:
		return off, h.MaxTimestamp, nil
	}
}

// PartitionStats is a partition's state, for metrics and tests.
type PartitionStats struct {
	LogStartOffset int64
	LogEndOffset   int64
	HighWatermark  int64
	FlushedOffset  int64 // every offset below is fsynced
	Size           int64 // bytes of the partition's segments
	Fsyncs         int64 // fsync rounds of the log
	Recoveries     int64 // in-place recoveries after I/O errors
	Err            error // non-nil while the log is failed (it recovers by itself)
}

// Stats returns the partition's state.
func (p *Partition) Stats() PartitionStats {
	l := p.p.Log()
	return PartitionStats{LogStartOffset: l.StartOffset(), LogEndOffset: l.EndOffset(), HighWatermark: p.HighWatermark(),
		FlushedOffset: l.FlushedOffset(), Size: l.Size(), Fsyncs: l.Syncs(), Recoveries: l.Recoveries(), Err: l.Err()}
}

// Records is a byte range of whole record batches in one segment file, ready
// to be sent as they are. It holds the file open until Release, even if
// retention deletes the segment meanwhile. The zero value is empty.
type Records struct {
	sl partlog.Slice
}

// NewRecords wraps a slice read from a partlog.Log directly, for tests and
// tools that read a log without a node.
func NewRecords(sl partlog.Slice) Records { return Records{sl: sl} }

// Len is the number of bytes.
func (r Records) Len() int64 { return r.sl.Size }

// NextOffset is the offset after the last record of the range.
func (r Records) NextOffset() int64 { return r.sl.NextOffset }

// Name names the segment file, for error messages.
func (r Records) Name() string {
	if r.sl.File == nil {
		return ""
	}
	return r.sl.File.Name()
}

// OSFile returns the operating-system file and the range's position in it,
// for sendfile; ok is false when the records live on another file system
// (vfs.MemFS) or the range is empty.
func (r Records) OSFile() (f *os.File, pos int64, ok bool) {
	of, isOS := r.sl.File.(vfs.OSFiler)
	if !isOS || r.sl.Size == 0 {
		return nil, 0, false
	}
	return of.OSFile(), r.sl.Pos, true
}

// ReadAt reads len(b) bytes of the range starting off bytes into it.
func (r Records) ReadAt(b []byte, off int64) (int, error) {
	return r.sl.File.ReadAt(b, r.sl.Pos+off)
}

// Release lets the file go; the Records are empty afterwards.
func (r *Records) Release() {
	r.sl.Release()
	r.sl = partlog.Slice{}
}

// FetchPartition returns the partition a Fetch reads. replicaID < 0 is a
// consumer: as Partition, read up to the high watermark. replicaID >= 0 is
// a follower (that broker): the fetch at fetchOffset is recorded with the
// partition's replication state first (the follower's log end and
// caught-up time, which may move the high watermark and the ISR), and it
// reads up to the log end. currentEpoch (-1: not checked) must be the
// partition's leader epoch: lower is ErrFencedLeaderEpoch, higher
// ErrUnknownLeaderEpoch (KIP-320).
func (n *Node) FetchPartition(topic string, index int32, replicaID int32, fetchOffset int64, currentEpoch int32) (*Partition, error) {
	p, err := n.Partition(topic, index)
	if err != nil {
		return nil, err
	}
	if err := checkEpoch(p, currentEpoch); err != nil {
		return nil, err
	}
	if replicaID < 0 {
		return p, nil
	}
	p.follower = true
	p.p.mu.Lock()
	defer p.p.mu.Unlock()
	// The replica learns of a produce's append only once the producer's
	// goroutine tells it (appended), which may come after a follower has
	// read those records and fetches past them: tell it of the log end
	// first, or the fetch would look out of range and send the follower
	// through an epoch query.
	if end := p.p.Log().EndOffset(); end > p.p.r.LogEnd() {
		p.p.r.Appended(end)
	}
	if err := p.p.r.FollowerFetch(n.cfg.Clock.Now(), replicaID, fetchOffset); err != nil {
		return nil, err
	}
	p.p.applyLocked()
	return p, nil
}

// checkEpoch is Kafka's checkCurrentLeaderEpoch.
func checkEpoch(p *Partition, current int32) error {
	switch {
	case current < 0:
		return nil
	case current < p.epoch:
		return fmt.Errorf("%w: %s is in leader epoch %d, the request says %d", ErrFencedLeaderEpoch, logs.DirName(p.Topic, p.Index), p.epoch, current)
	case current > p.epoch:
		return fmt.Errorf("%w: %s is in leader epoch %d, the request says %d", ErrUnknownLeaderEpoch, logs.DirName(p.Topic, p.Index), p.epoch, current)
	}
	return nil
}

// EpochEnd answers OffsetForLeaderEpoch for a partition this broker leads:
// where leader epoch epoch ends (the largest epoch at or below it, and the
// start of the next, or the log end for the current epoch); (-1, -1) for an
// epoch it does not know. currentEpoch is checked as in FetchPartition.
func (n *Node) EpochEnd(topic string, index int32, currentEpoch, epoch int32) (int32, int64, error) {
	p, err := n.Partition(topic, index)
	if err != nil {
		return -1, -1, err
	}
	if err := checkEpoch(p, currentEpoch); err != nil {
		return -1, -1, err
	}
	if epoch == p.epoch {
		return epoch, p.p.Log().EndOffset(), nil
	}
	e, end := p.p.Log().EndOffsetForEpoch(epoch)
	return e, end, nil
}
