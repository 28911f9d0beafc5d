package mirror

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Forwarding (Config.Forward): source record batches go to the target byte
// for byte, compression included, instead of being decoded by the consumer
// and encoded again by the producer. The mirror fetches with Fetch
// requests from each source partition's leader, and produces each batch as
// it came in a Produce request (acks=all) to the target partition's
// leader, both on connections of its own (wire.go: answers read into
// recycled buffers, batches written in place), with its base offset reset
// to 0 and its producer id, epoch and
// base sequence rewritten for the mirror's own idempotent producer id
// (InitProducerId), and the CRC, which covers those fields, updated: the
// new one is derived from the fetched one and the header bytes changed
// (record.Reheader), so a bad CRC stays bad and the target's check covers
// the batch from the source on; the mirror does not read the records
// (wholeBatches, checkBatch). The
// trackers see one entry per batch (its last offset), so the rules of the
// record path hold: a position is committed only after the target
// acknowledged everything before it, a failure freezes it and rewinds.
//
// A partition has up to fwdPartInFlight batches in flight, each in its own
// request (a request carries one batch of every ready partition led by
// that broker), with consecutive sequence numbers; the requests to a
// broker are written one after the other on one connection (the broker
// serves a connection's requests in order), and their answers are
// applied in that order. A partition's sequence for the batch at its
// acknowledged position is its acknowledged sequence. When a batch fails,
// the batches after it in flight are dropped (their answers, usually
// OUT_OF_ORDER_SEQUENCE_NUMBER, are ignored) and the partition rewinds to
// its acknowledged position and sends the same batches again (rewinds
// land on batch boundaries) with the same sequences, so a batch the target
// had written is answered as a duplicate; it sends again only once every
// answer to the dropped sends arrived. A sequence error on the oldest
// batch in flight (the target lost the producer's state, e.g. a restart
// before the log was flushed) moves the partition to a fresh producer id.
// Fetching runs alongside: the loop fetches the next batches while the
// ones fetched before are produced, up to fwdMaxQueued bytes a partition.
//
// What is not forwarded: transactional source batches that aborted
// (skipped, as read_committed readers skip them; committed ones are
// forwarded with the transactional bit cleared), control batches
// (skipped), and batches with gaps in their offsets (a compacted source: the
// target refuses them as a producer's batch; the batches before one are
// forwarded, then the partition fails at it with an error naming it, so
// compacted topics need the record path).
//
// A fetch answered OFFSET_OUT_OF_RANGE below the log start the answer
// gives (records deleted by retention) moves on to that log start. Any
// other (the source's log truncated below the mirror's position P, e.g. by
// an unclean leader election; or a source that does not give its log start
// in the answer, as Kafka does not) is logged, counted as a fetch error,
// and, once the partition's batches in flight are settled, moves the
// partition back to where the source's log diverged from what was copied
// (KIP-320): OffsetForLeaderEpoch with the leader epoch of the last batch
// fetched gives the end of that epoch on the source, D, and the partition
// resumes at min(D, P), its position moved back with it, so that the
// records written at [D, P) after the truncation are copied, not passed
// over. With D unknown (no batch fetched yet, or the source does not
// answer it) it resumes at the source's log start: batches copied again
// are at-least-once's duplicates, never a loss. A truncation the source's
// log has grown past again answers no fetch out of range, so a new source
// leader is checked the same way before the partition fetches from it
// (fwdPart.leaderEpoch, from metadata; fetches carry it as
// CurrentLeaderEpoch, so a leader elected again at a newer epoch fences
// them): when its log holds everything fetched, the position stays; a
// rewind after a failure keeps that check due. A partition moved to other
// records (a reset, the log start) sends them under a fresh producer id:
// under its sequences there, the target may hold batches it wrote without
// the mirror hearing of it, and would take the new ones for duplicates.

const (
	fwdMaxQueued = 16 << 20 // bytes fetched and not acknowledged per partition before its fetching pauses
	fwdFetchMax  = 64 << 20
	fwdPartFetch = 4 << 20
	// fwdPartFetchMin: a forwarder's first fetches ask for less per
	// partition, doubling up to fwdPartFetch, so that the first batches
	// reach the target while the larger fetches are on their way (a 32
	// MiB first answer would keep the target idle for its whole transfer).
	fwdPartFetchMin = 256 << 10
	fwdFetchWaitMs  = 250
	metadataPause   = 50 * time.Millisecond
	fwdMaxReqs      = 8 // produce requests in flight, over all target brokers
	// fwdPartInFlight: batches of a partition in flight at once. The
	// target remembers a producer's last 5 batches per partition
	// (Kafka's max.in.flight.requests.per.connection <= 5 for
	// idempotence), so a run sent again after a failure is recognised.
	fwdPartInFlight = 5
	fwdReqBytes     = 4 << 20 // a request takes no more partitions once this large
)

// fwdLanes: connections to each target leader, a partition always on the
// same one (partition mod fwdLanes), so that the target works on requests
// of two connections at once (a broker serves a connection's requests one
// after the other): 0.86 to 0.92 of a plain consumer's throughput against
// 0.76 to 0.78 with one, on 2 cores (README). fwdFetchLanes: the same for
// fetching from each source leader; one, since a round of fetches waits
// for every answer, and a connection whose partitions got nothing new
// answers only after the fetch's MaxWait.
var fwdLanes, fwdFetchLanes = 2, 1

var errForwardGap = errors.New("batch has gaps in its offsets (a compacted source): cannot be forwarded, run the mirror without forwarding")

type fwdBatch struct {
	b          []byte
	buf        *wireBuf // b's buffer: the queue holds a reference
	base, last int64
	count      int32
	epoch      int32 // the source's PartitionLeaderEpoch (the copy's is rewritten)
	ts         time.Time
}

type fwdPart struct {
	tr        *tracker
	topicID   [16]byte
	fetchAt   int64
	srcLeader int32
	tgtLeader int32
	// queue: batches fetched and not yet acknowledged, oldest first;
	// queue[:sent] are in flight, in this order.
	queue  []fwdBatch
	queued int // their bytes
	sent   int
	// unresolved: batches sent and not yet answered, of any generation;
	// sentTo: the leader they went to. gen goes up when the partition
	// fails, so that answers to what was sent before are ignored.
	unresolved int
	sentTo     int32
	gen        int
	pid        int64
	epoch      int16
	seq        int32 // sequence of queue[0]: the records acknowledged under pid
	nextSeq    int32 // sequence of queue[sent]
	needPid    bool
	// gap: the batch at gapAt has gaps in its offsets and is not queued;
	// the partition fails at it once the batches queued before it are
	// acknowledged, and fetches nothing meanwhile.
	gap   bool
	gapAt int64
	// reset: the fetch at fetchAt was out of range: fetchAt moves back
	// (resetOffsets) before the partition fetches again. srcEpoch: the
	// source leader epoch of the batch fetchAt last moved past, -1 if
	// unknown. ackAt, ackEpoch: the offset after the last batch
	// acknowledged, and its epoch, for a rewind there.
	reset      bool
	validating bool // the reset is a new leader's check, not a fetch out of range
	srcEpoch   int32
	ackAt      int64
	ackEpoch   int32
	// leaderEpoch: the source leader's epoch the partition fetches at
	// (from metadata, sent as CurrentLeaderEpoch; -1 unknown). When it
	// goes up, the position is checked (reset) before the next fetch:
	// the new leader's log may have been truncated below it and have
	// grown past it again, which no fetch out of range would tell.
	leaderEpoch int32
}

type forwarder struct {
	m *Mirror

	mu       sync.Mutex
	cond     *sync.Cond
	parts    map[topicPartition]*fwdPart
	srcStale bool
	tgtStale bool
	// srcAsked, tgtAsked: when leaders were last asked, so that a
	// partition without a leader does not make a busy loop of metadata.
	srcAsked, tgtAsked time.Time
	reqs               int                       // produce requests in flight
	partFetch          int32                     // PartitionMaxBytes of the next fetch: fwdPartFetchMin doubling up to fwdPartFetch
	tails              map[wireKey]chan struct{} // per target connection: resolved of the last request issued
	resetErr           string                    // resetOffsets' last error logged (the loop's), so a repeat is not
	pid                int64
	epoch              int16
	// aborted: per partition, producer ids of aborted transactions seen in
	// fetch responses and not yet ended by their marker.
	aborted map[topicPartition]map[int64][]int64
	// srcWire, tgtWire: the forwarder's own connections (wire.go), for
	// Fetch and Produce; nil in tests that feed it answers themselves.
	srcWire, tgtWire *wirePool
}

func newForwarder(m *Mirror) *forwarder {
	f := &forwarder{m: m, parts: map[topicPartition]*fwdPart{}, srcStale: true, tgtStale: true, pid: -1,
		aborted: map[topicPartition]map[int64][]int64{}, tails: map[wireKey]chan struct{}{}, partFetch: fwdPartFetchMin}
	f.cond = sync.NewCond(&f.mu)
	if m.src != nil && m.tgt != nil {
		f.srcWire, f.tgtWire = newWirePool(wireOptionsOf(m.src), wireBufs), newWirePool(wireOptionsOf(m.tgt), wireBufs)
	}
	return f
}

// close closes the forwarder's connections.
func (f *forwarder) close() {
	if f.srcWire != nil {
		f.srcWire.close()
		f.tgtWire.close()
	}
}

// add starts forwarding partitions of source topic t from the given offsets.
func (f *forwarder) add(t string, trs map[int32]*tracker, at map[int32]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, tr := range trs {
		fp := &fwdPart{tr: tr, fetchAt: at[p], srcLeader: -1, tgtLeader: -1, pid: -1, srcEpoch: -1, leaderEpoch: -1, ackAt: -1}
		tr.mu.Lock()
		if tr.fresh {
			// A re-created source topic: the target partition may hold
			// the old one's batches under the current producer id.
			fp.pid, fp.needPid = f.pid, true
		}
		if tr.epoch >= 0 && tr.next == at[p] {
			// A position committed with its leader epoch: checked
			// before the first fetch, in case the source's log was
			// truncated below it while the mirror was away.
			fp.srcEpoch, fp.reset, fp.validating = tr.epoch, true, true
		}
		tr.mu.Unlock()
		f.parts[topicPartition{t, p}] = fp
	}
	f.srcStale, f.tgtStale = true, true
}

func (f *forwarder) drop(t string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for tp, fp := range f.parts {
		if tp.topic == t && fp.unresolved == 0 && len(fp.queue) == 0 {
			delete(f.parts, tp)
		}
	}
}

func (f *forwarder) setOffsets(rewind map[string]map[int32]kgo.EpochOffset) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t, ps := range rewind {
		for p, o := range ps {
			if fp := f.parts[topicPartition{t, p}]; fp != nil {
				fp.fetchAt, fp.srcEpoch = o.Offset, o.Epoch
				if o.Offset == fp.ackAt {
					fp.srcEpoch = fp.ackEpoch
				}
				// A fetch out of range is asked again from the new
				// position; a new leader's check stays due (the rewind
				// fetches from that leader, whose log may have been
				// truncated below the position and grown past it
				// again), if the epoch there is known.
				fp.validating = fp.reset && fp.validating && fp.srcEpoch >= 0
				fp.reset = fp.validating
				delete(f.aborted, topicPartition{t, p})
			}
		}
	}
}

// leaders refreshes the source and target leaders when stale.
func (f *forwarder) leaders(ctx context.Context, source bool) error {
	f.mu.Lock()
	stale, last := f.srcStale, &f.srcAsked
	if !source {
		stale, last = f.tgtStale, &f.tgtAsked
	}
	if stale && time.Since(*last) < metadataPause {
		stale = false // asked a moment ago
	}
	if stale {
		*last = time.Now()
	}
	topics := map[string]bool{}
	for _, fp := range f.parts {
		if source {
			topics[fp.tr.topic] = true
		} else {
			topics[fp.tr.target] = true
		}
	}
	f.mu.Unlock()
	if !stale || len(topics) == 0 {
		return nil
	}
	cl := f.m.src
	if !source {
		cl = f.m.tgt
	}
	req := kmsg.NewPtrMetadataRequest()
	for t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	// Not kadm's Metadata: it answers from kgo's cache, which may not know
	// a topic the mirror just created.
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return err
	}
	if pool := map[bool]*wirePool{true: f.srcWire, false: f.tgtWire}[source]; pool != nil {
		pool.setBrokers(resp.Brokers)
	}
	type leader struct {
		id    int32
		epoch int32
		topic [16]byte
	}
	leaders := map[topicPartition]leader{}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Leader >= 0 {
				leaders[topicPartition{*t.Topic, p.Partition}] = leader{p.Leader, p.LeaderEpoch, t.TopicID}
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	all := true
	for _, fp := range f.parts {
		name := fp.tr.topic
		if !source {
			name = fp.tr.target
		}
		l, ok := leaders[topicPartition{name, fp.tr.partition}]
		if !ok {
			all = false
			continue
		}
		if source {
			fp.sourceLeader(l.id, l.epoch, l.topic)
		} else {
			fp.tgtLeader = l.id
		}
	}
	if !all {
		return nil // stays stale: asked again after a pause
	}
	if source {
		f.srcStale = false
	} else {
		f.tgtStale = false
	}
	return nil
}

// sourceLeader records fp's source leader (id, at leader epoch epoch) and
// topic id, from metadata. f.mu held.
func (fp *fwdPart) sourceLeader(id, epoch int32, topic [16]byte) {
	fp.srcLeader, fp.topicID = id, topic
	if fp.leaderEpoch >= 0 && epoch > fp.leaderEpoch && fp.srcEpoch >= 0 && !fp.reset {
		// A new leader: where its log diverged from what was
		// fetched is asked before fetching from it (KIP-320).
		fp.reset, fp.validating = true, true
	}
	fp.leaderEpoch = max(fp.leaderEpoch, epoch)
}

// idle waits (until ctx ends) for every queued batch to be resolved, and
// reports whether they were.
func (f *forwarder) idle(ctx context.Context) bool {
	for {
		f.mu.Lock()
		busy := false
		for _, fp := range f.parts {
			if fp.unresolved > 0 || len(fp.queue) > 0 {
				busy = true
				break
			}
		}
		f.mu.Unlock()
		if !busy {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		waitCtx(ctx, 10*time.Millisecond)
	}
}

func waitCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
