package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
)

// Forwarding (Config.Forward): source record batches go to the target byte
// for byte, compression included, instead of being decoded by the consumer
// and encoded again by the producer. The mirror fetches with raw kmsg Fetch
// requests from each source partition's leader, and produces each batch as
// it came in a raw kmsg Produce request (acks=all) to the target partition's
// leader, with its base offset reset to 0 and its producer id, epoch and
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
// broker are issued one after the other, each once kgo wrote the one
// before (kgo writes a broker's requests in the order issued, and the
// broker serves a connection's requests in order), and their answers are
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
// are at-least-once's duplicates, never a loss.

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

var errForwardGap = errors.New("batch has gaps in its offsets (a compacted source): cannot be forwarded, run the mirror without forwarding")

type fwdBatch struct {
	b          []byte
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
	reset    bool
	srcEpoch int32
	ackAt    int64
	ackEpoch int32
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
	reqs               int                     // produce requests in flight
	partFetch          int32                   // PartitionMaxBytes of the next fetch: fwdPartFetchMin doubling up to fwdPartFetch
	tails              map[int32]chan struct{} // per target leader: resolved of the last request issued
	resetErr           string                  // resetOffsets' last error logged (the loop's), so a repeat is not
	pid                int64
	epoch              int16
	// aborted: per partition, producer ids of aborted transactions seen in
	// fetch responses and not yet ended by their marker.
	aborted map[topicPartition]map[int64][]int64
}

func newForwarder(m *Mirror) *forwarder {
	f := &forwarder{m: m, parts: map[topicPartition]*fwdPart{}, srcStale: true, tgtStale: true, pid: -1,
		aborted: map[topicPartition]map[int64][]int64{}, tails: map[int32]chan struct{}{}, partFetch: fwdPartFetchMin}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// add starts forwarding partitions of source topic t from the given offsets.
func (f *forwarder) add(t string, trs map[int32]*tracker, at map[int32]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, tr := range trs {
		f.parts[topicPartition{t, p}] = &fwdPart{tr: tr, fetchAt: at[p], srcLeader: -1, tgtLeader: -1, pid: -1, srcEpoch: -1, ackAt: -1}
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
				fp.fetchAt, fp.reset, fp.srcEpoch = o.Offset, false, o.Epoch
				if o.Offset == fp.ackAt {
					fp.srcEpoch = fp.ackEpoch
				}
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
	type leader struct {
		id    int32
		topic [16]byte
	}
	leaders := map[topicPartition]leader{}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Leader >= 0 {
				leaders[topicPartition{*t.Topic, p.Partition}] = leader{p.Leader, t.TopicID}
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
			fp.srcLeader, fp.topicID = l.id, l.topic
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

// fetchOnce sends one Fetch to each source leader of the partitions that
// may fetch (not failed, not paused, not too much queued) and queues what
// came back. It runs in the mirror's loop.
func (f *forwarder) fetchOnce(ctx context.Context) {
	if err := f.leaders(ctx, true); err != nil {
		if ctx.Err() == nil {
			f.m.log.Warn("mirror: source metadata failed, retrying", "err", err)
		}
		waitCtx(ctx, f.m.cfg.BackoffMin)
		return
	}
	if err := f.resetOffsets(ctx); err != nil && ctx.Err() == nil && err.Error() != f.resetErr {
		// The partitions not reset fetch nothing, asked again next time;
		// the others fetch.
		f.m.log.Warn("mirror: listing source log starts failed, retrying", "err", err)
		f.resetErr = err.Error()
	} else if err == nil {
		f.resetErr = ""
	}
	byLeader := map[int32]*kmsg.FetchRequest{}
	f.mu.Lock()
	partFetch := f.partFetch
	f.partFetch = min(2*f.partFetch, fwdPartFetch)
	for tp, fp := range f.parts {
		if fp.srcLeader < 0 || fp.queued >= fwdMaxQueued || fp.gap || fp.reset || f.m.paused[fp.tr] {
			continue
		}
		fp.tr.mu.Lock()
		failed := fp.tr.failed
		fp.tr.mu.Unlock()
		if failed {
			continue
		}
		req := byLeader[fp.srcLeader]
		if req == nil {
			req = kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, fwdFetchWaitMs, 1, fwdFetchMax
			req.IsolationLevel, req.SessionEpoch = 1, -1
			byLeader[fp.srcLeader] = req
		}
		var rt *kmsg.FetchRequestTopic
		for i := range req.Topics {
			if req.Topics[i].Topic == tp.topic {
				rt = &req.Topics[i]
			}
		}
		if rt == nil {
			req.Topics = append(req.Topics, kmsg.NewFetchRequestTopic())
			rt = &req.Topics[len(req.Topics)-1]
			rt.Topic, rt.TopicID = tp.topic, fp.topicID
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = tp.partition, fp.fetchAt, partFetch
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	f.mu.Unlock()
	if len(byLeader) == 0 {
		waitCtx(ctx, pollWait/5)
		return
	}
	type result struct {
		req  *kmsg.FetchRequest
		resp *kmsg.FetchResponse
		err  error
	}
	results := make(chan result, len(byLeader))
	for leader, req := range byLeader {
		go func() {
			resp, err := f.m.src.Broker(int(leader)).Request(ctx, req)
			r, _ := resp.(*kmsg.FetchResponse)
			results <- result{req, r, err}
		}()
	}
	for range byLeader {
		res := <-results
		if res.err == nil && res.resp.ErrorCode != 0 {
			res.err = kerr.ErrorForCode(res.resp.ErrorCode)
		}
		if res.err != nil {
			if ctx.Err() == nil {
				f.m.log.Warn("mirror: fetch from source failed, retrying", "err", res.err)
			}
			f.mu.Lock()
			f.srcStale = true
			f.mu.Unlock()
			continue
		}
		names := map[[16]byte]string{}
		for _, t := range res.req.Topics {
			names[t.TopicID] = t.Topic
		}
		for _, rt := range res.resp.Topics {
			name := rt.Topic
			if name == "" {
				name = names[rt.TopicID]
			}
			for i := range rt.Partitions {
				whole, err := wholeBatches(rt.Partitions[i].RecordBatches)
				f.partition(ctx, name, &rt.Partitions[i], whole, err)
			}
		}
	}
	f.cond.Broadcast()
}

// resetOffsets moves the partitions whose fetch was out of range
// (fp.reset), once nothing of theirs is queued or in flight, back to where
// the source's log diverged from what was fetched: the end offset on the
// source of the leader epoch of the last batch fetched (OffsetForLeaderEpoch),
// at most the position; the source's log start when that is unknown. The
// tracker's position moves back with it. An error is a listing's; the
// partitions listed are moved all the same.
func (f *forwarder) resetOffsets(ctx context.Context) error {
	f.mu.Lock()
	var topics []string
	var epochs kadm.OffsetForLeaderEpochRequest
	for tp, fp := range f.parts {
		if !fp.resettable() {
			continue
		}
		if !slices.Contains(topics, tp.topic) {
			topics = append(topics, tp.topic)
		}
		if fp.srcEpoch >= 0 {
			epochs.Add(tp.topic, tp.partition, fp.srcEpoch)
		}
	}
	f.mu.Unlock()
	if len(topics) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	starts, err := f.m.srcAdm.ListStartOffsets(rctx, topics...)
	var ends kadm.OffsetsForLeaderEpochs
	if len(epochs) > 0 {
		var eerr error
		ends, eerr = f.m.srcAdm.OffsetForLeaderEpoch(rctx, epochs)
		if eerr != nil {
			err = errors.Join(err, fmt.Errorf("OffsetForLeaderEpoch: %w", eerr))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for tp, fp := range f.parts {
		if !fp.resettable() {
			continue
		}
		o, ok := starts.Lookup(tp.topic, tp.partition)
		if !ok || o.Err != nil || o.Offset < 0 {
			if err == nil && o.Err != nil {
				err = fmt.Errorf("%s/%d: %w", tp.topic, tp.partition, o.Err)
			}
			continue
		}
		at, from := o.Offset, "log_start"
		if fp.srcEpoch >= 0 {
			e, ok := ends[tp.topic][tp.partition]
			switch {
			case !ok:
				continue // not answered: asked again next time
			case e.Err == nil && e.EndOffset >= 0:
				at, from = max(min(e.EndOffset, fp.fetchAt), o.Offset), "divergence"
			}
		}
		tr := fp.tr
		tr.mu.Lock()
		tr.resetTo(at)
		tr.mu.Unlock()
		f.m.log.Warn("mirror: source log truncated below the mirror's position; resuming where it diverged",
			"topic", tp.topic, "partition", tp.partition, "position", fp.fetchAt, "resume_offset", at,
			"leader_epoch", fp.srcEpoch, "from", from)
		fp.fetchAt, fp.reset = at, false
		if from == "log_start" {
			fp.srcEpoch = -1
		}
		delete(f.aborted, tp) // listed again from the new position
	}
	return err
}

// resettable reports whether fp waits for a reset (fp.reset) and may be
// moved now: nothing of it queued or in flight, its tracker not failed (a
// rewind moves it). f.mu held.
func (fp *fwdPart) resettable() bool {
	if !fp.reset || fp.unresolved > 0 || len(fp.queue) > 0 {
		return false
	}
	fp.tr.mu.Lock()
	defer fp.tr.mu.Unlock()
	return !fp.tr.failed
}

func waitCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// wholeBatches returns the longest prefix of b made of whole batches
// whose headers record.ParseHeader accepts, and why the rest was not: nil
// if b ended there, record.ErrShort for a partial batch at the end (fetched
// again next time), or the damage found. It does not check the CRCs: a
// forwarded batch's is checked by the target (Reheader keeps a bad CRC
// bad, so the target refuses a corrupt batch with CORRUPT_MESSAGE), and
// the batches the forwarder decides on by their header alone (skipped as
// control or aborted, refused for gaps) are checked by checkBatch.
func wholeBatches(b []byte) ([]byte, error) {
	n := 0
	for n < len(b) {
		h, err := record.ParseHeader(b[n:])
		if err != nil {
			return b[:n], err
		}
		if h.Size() > len(b)-n {
			return b[:n], fmt.Errorf("%w: %d bytes, batch needs %d", record.ErrShort, len(b)-n, h.Size())
		}
		n += h.Size()
	}
	return b, nil
}

// checkBatch checks the CRC of a whole batch (wholeBatches framed it).
func checkBatch(b []byte) error {
	_, _, err := record.Next(b, 0)
	return err
}

// partition queues the batches of one partition's fetch response: whole,
// the batches wholeBatches framed, and verr, why the rest was not.
func (f *forwarder) partition(ctx context.Context, topic string, rp *kmsg.FetchResponseTopicPartition, whole []byte, verr error) {
	tp := topicPartition{topic, rp.Partition}
	f.mu.Lock()
	defer f.mu.Unlock()
	fp := f.parts[tp]
	if fp == nil {
		return
	}
	tr := fp.tr
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		at := fp.fetchAt
		switch {
		case errors.Is(err, kerr.OffsetOutOfRange) && rp.LogStartOffset >= 0 && fp.fetchAt < rp.LogStartOffset:
			f.m.log.Warn("mirror: source offset below the log start (records deleted before they were copied); moving to the log start",
				"topic", topic, "partition", rp.Partition, "offset", fp.fetchAt, "log_start", rp.LogStartOffset)
			fp.fetchAt, fp.srcEpoch = rp.LogStartOffset, -1
		case errors.Is(err, kerr.OffsetOutOfRange):
			// Above the log end, or the log start unknown: reset
			// (resetOffsets), never fetched here again and again.
			fp.reset = true
			f.m.log.Warn("mirror: source offset out of range (the source's log truncated below the mirror's position?); "+
				"moving back to where the source's log diverged",
				"topic", topic, "partition", rp.Partition, "offset", fp.fetchAt)
		default:
			f.srcStale = true
			msg := err.Error()
			if f.m.fetchErrs[tp] != msg {
				f.m.fetchErrs[tp] = msg
				f.m.log.Warn("mirror: fetch from source failed, retrying", "topic", topic, "partition", rp.Partition, "err", err)
			}
		}
		tr.mu.Lock()
		tr.fetchErrors++
		tr.lastErr = fmt.Errorf("%s/%d: fetch at %d: %w", topic, rp.Partition, at, err)
		tr.lastErrAt = time.Now()
		tr.mu.Unlock()
		return
	}
	delete(f.m.fetchErrs, tp)
	ab := f.aborted[tp]
	for _, a := range rp.AbortedTransactions {
		if ab == nil {
			ab = map[int64][]int64{}
			f.aborted[tp] = ab
		}
		if !slices.Contains(ab[a.ProducerID], a.FirstOffset) {
			ab[a.ProducerID] = append(ab[a.ProducerID], a.FirstOffset)
			slices.Sort(ab[a.ProducerID])
		}
	}
	b := whole
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.hwm = max(tr.hwm, rp.HighWatermark)
	for {
		if len(b) == 0 {
			if verr != nil && !errors.Is(verr, record.ErrShort) { // a partial batch at the end is fetched again next time
				tr.fetchErrors++
				tr.lastErr = fmt.Errorf("%s/%d: fetch at %d: %w", topic, rp.Partition, fp.fetchAt, verr)
				tr.lastErrAt = time.Now()
			}
			break
		}
		h, _ := record.ParseHeader(b) // framed by wholeBatches
		n := h.Size()
		batch := b[:n]
		b = b[n:]
		if h.LastOffset() < fp.fetchAt {
			continue
		}
		if h.Control() || h.Transactional() || h.RecordCount != h.LastOffsetDelta+1 {
			// Decided on by the header: skipped, or refused for gaps.
			// Only a header under a valid CRC says so.
			if err := checkBatch(batch); err != nil {
				verr, b = err, nil
				continue
			}
		}
		switch {
		case h.Control():
			if mk, err := record.ParseControlBatch(batch); err == nil && mk.Type == record.ControlAbort {
				// The marker ends the producer's aborted transactions
				// that began before it.
				l := ab[h.ProducerID]
				for len(l) > 0 && l[0] < h.BaseOffset {
					l = l[1:]
				}
				if len(l) == 0 {
					delete(ab, h.ProducerID)
				} else {
					ab[h.ProducerID] = l
				}
			}
			tr.skipped(h.BaseOffset, h.LastOffset())
			fp.fetchAt, fp.srcEpoch = h.LastOffset()+1, h.PartitionLeaderEpoch
			continue
		case h.Transactional():
			if l := ab[h.ProducerID]; len(l) > 0 && l[0] <= h.LastOffset() {
				tr.skipped(h.BaseOffset, h.LastOffset())
				fp.fetchAt, fp.srcEpoch = h.LastOffset()+1, h.PartitionLeaderEpoch
				continue // aborted
			}
		}
		if tr.failed || tr.refetch {
			break // sendBatch refuses: a rewind fetches it again
		}
		if h.LastOffset() < tr.expect {
			// Below the mirror's position, fetched again after a
			// reset (fp.reset): copied before, passed over.
			fp.fetchAt, fp.srcEpoch = h.LastOffset()+1, h.PartitionLeaderEpoch
			continue
		}
		if h.RecordCount != h.LastOffsetDelta+1 {
			// Not queued, nor anything after it: the batches queued
			// before it are forwarded, and the partition fails here
			// once they are acknowledged (it must not fail before:
			// a failed tracker does not move its position for them,
			// so they would be sent again after the rewind, under
			// new sequences, and written twice).
			fp.gap, fp.gapAt = true, h.BaseOffset
			f.failAtGap(fp, time.Now())
			break
		}
		var ts time.Time
		if h.MaxTimestamp > 0 {
			ts = time.UnixMilli(h.MaxTimestamp)
		}
		if !tr.sendBatch(h.BaseOffset, h.LastOffset(), ts) {
			break
		}
		fp.fetchAt, fp.srcEpoch = h.LastOffset()+1, h.PartitionLeaderEpoch
		fp.queue = append(fp.queue, fwdBatch{b: batch, base: h.BaseOffset, last: h.LastOffset(), count: h.RecordCount,
			epoch: h.PartitionLeaderEpoch, ts: ts})
		fp.queued += len(batch)
	}
}

// failAtGap fails fp's tracker at the batch with gaps it stopped before
// (fp.gap), once nothing is queued before it, and reports whether it did.
// f.mu and fp.tr.mu held.
func (f *forwarder) failAtGap(fp *fwdPart, now time.Time) bool {
	if !fp.gap || len(fp.queue) > 0 {
		return false
	}
	fp.gap = false
	tr := fp.tr
	if tr.failPopped(fp.gapAt, errForwardGap, now) {
		f.m.log.Warn("mirror: cannot forward a batch; partition paused and retried",
			"topic", tr.topic, "partition", tr.partition, "offset", fp.gapAt, "err", errForwardGap)
	}
	return true
}

// send runs until ctx ends: it produces the next unsent batch of every
// partition that may send one, one request per target leader, and
// resolves the answers in the trackers.
func (f *forwarder) send(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		f.cond.Broadcast()
		f.mu.Unlock()
	})
	defer stop()
	for {
		f.mu.Lock()
		for ctx.Err() == nil && (!f.ready() || f.reqs >= fwdMaxReqs) {
			f.cond.Wait()
		}
		f.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if err := f.leaders(ctx, false); err != nil {
			if ctx.Err() == nil {
				f.m.log.Warn("mirror: target metadata failed, retrying", "err", err)
			}
			waitCtx(ctx, f.m.cfg.BackoffMin)
			continue
		}
		if err := f.producerID(ctx); err != nil {
			if ctx.Err() == nil {
				f.m.log.Warn("mirror: target producer id failed, retrying", "err", err)
			}
			waitCtx(ctx, f.m.cfg.BackoffMin)
			continue
		}
		if !f.round(ctx) {
			waitCtx(ctx, metadataPause) // nothing sendable yet: partitions without a leader
		}
	}
}

// sendable reports whether fp may send its next batch: it has one, fewer
// than fwdPartInFlight are in flight, and what is in flight went to the
// partition's current leader in its current generation (after a failure,
// or when the leader moved, the answers to the older sends are awaited
// first). f.mu held.
func (fp *fwdPart) sendable() bool {
	if fp.sent >= len(fp.queue) || fp.sent >= fwdPartInFlight {
		return false
	}
	return fp.unresolved == 0 || fp.sent > 0 && fp.sentTo == fp.tgtLeader
}

// ready reports whether some partition has a batch to send. f.mu held.
func (f *forwarder) ready() bool {
	for _, fp := range f.parts {
		if fp.sendable() {
			return true
		}
	}
	return false
}

// producerID gets the first producer id, and a fresh one when a partition
// needs one (a sequence error) and still has the latest.
func (f *forwarder) producerID(ctx context.Context) error {
	f.mu.Lock()
	need := f.pid < 0
	for _, fp := range f.parts {
		if fp.needPid && fp.pid == f.pid {
			need = true
		}
	}
	f.mu.Unlock()
	if !need {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = -1, -1, -1
	resp, err := req.RequestWith(rctx, f.m.tgt)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("InitProducerId: %w", err)
	}
	f.mu.Lock()
	f.pid, f.epoch = resp.ProducerID, resp.ProducerEpoch
	f.mu.Unlock()
	return nil
}

type sent struct {
	fp  *fwdPart
	bt  fwdBatch
	gen int
}

// fwdRequest is one produce request to a target leader.
type fwdRequest struct {
	leader int32
	req    *kmsg.ProduceRequest
	ss     []sent
	bytes  int
	// prev is closed once the previous request to the same leader is
	// resolved, resolved once this one is: answers are applied in the
	// order the requests were sent, so a partition's in order.
	prev, resolved chan struct{}
}

// round builds one request per target leader (more if large), each with
// the next unsent batch of every sendable partition, and issues them in
// order. It reports whether it issued any.
func (f *forwarder) round(ctx context.Context) bool {
	var reqs []*fwdRequest
	open := map[int32]*fwdRequest{}
	f.mu.Lock()
	for _, fp := range f.parts {
		if !fp.sendable() {
			continue
		}
		if fp.tgtLeader < 0 {
			f.tgtStale = true
			continue
		}
		r := open[fp.tgtLeader]
		if r == nil || r.bytes >= fwdReqBytes {
			if f.reqs+len(reqs) >= fwdMaxReqs {
				continue
			}
			r = &fwdRequest{leader: fp.tgtLeader, req: kmsg.NewPtrProduceRequest(), resolved: make(chan struct{})}
			r.req.Acks, r.req.TimeoutMillis = -1, int32(requestTimeout/time.Millisecond)
			r.prev, f.tails[r.leader] = f.tails[r.leader], r.resolved
			open[fp.tgtLeader] = r
			reqs = append(reqs, r)
		}
		if fp.pid != f.pid && fp.sent == 0 && fp.unresolved == 0 {
			// A partition moves to the latest producer id only with
			// nothing in flight: its sequences start again at 0.
			fp.pid, fp.epoch, fp.seq, fp.nextSeq, fp.needPid = f.pid, f.epoch, 0, 0, false
		}
		bt := fp.queue[fp.sent]
		h, _ := record.ParseHeader(bt.b)
		h.BaseOffset, h.PartitionLeaderEpoch = 0, -1
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = fp.pid, fp.epoch, fp.nextSeq
		h.Attributes &^= 0x10    // transactional: the copy is not
		record.Reheader(bt.b, h) // the CRC was checked when fetched (record.Next)
		var rt *kmsg.ProduceRequestTopic
		for i := range r.req.Topics {
			if r.req.Topics[i].Topic == fp.tr.target {
				rt = &r.req.Topics[i]
			}
		}
		if rt == nil {
			r.req.Topics = append(r.req.Topics, kmsg.NewProduceRequestTopic())
			rt = &r.req.Topics[len(r.req.Topics)-1]
			rt.Topic = fp.tr.target
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = fp.tr.partition, bt.b
		rt.Partitions = append(rt.Partitions, rp)
		fp.nextSeq += bt.count
		fp.sent++
		fp.unresolved++
		fp.sentTo = r.leader
		r.ss = append(r.ss, sent{fp, bt, fp.gen})
		r.bytes += len(bt.b)
	}
	f.reqs += len(reqs)
	f.mu.Unlock()
	for _, r := range reqs {
		f.issue(ctx, r)
	}
	return len(reqs) > 0
}

// issue sends r and returns once it is written to the connection (or
// failed): kgo writes a broker's requests in the order they were issued,
// so a partition's batches in flight reach the target in sequence order.
// The answer is applied by a goroutine, after those of the requests sent
// before to the same leader.
func (f *forwarder) issue(ctx context.Context, r *fwdRequest) {
	done := make(chan struct{})
	written := f.m.fwWrites.count()
	go func() {
		resp, err := f.m.fwTgt.Broker(int(r.leader)).Request(ctx, r.req)
		close(done)
		if r.prev != nil {
			<-r.prev
		}
		pr, _ := resp.(*kmsg.ProduceResponse)
		f.resolve(r.ss, pr, err)
		close(r.resolved)
		f.mu.Lock()
		f.reqs--
		if f.tails[r.leader] == r.resolved {
			delete(f.tails, r.leader)
		}
		f.cond.Broadcast()
		f.mu.Unlock()
	}()
	f.m.fwWrites.wait(written, done)
}

// resolve applies a produce response (or its error) to the batches sent.
func (f *forwarder) resolve(ss []sent, resp *kmsg.ProduceResponse, reqErr error) {
	codes := map[topicPartition]*kmsg.ProduceResponseTopicPartition{}
	if resp != nil {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				p := &resp.Topics[i].Partitions[j]
				codes[topicPartition{resp.Topics[i].Topic, p.Partition}] = p
			}
		}
	}
	now := time.Now()
	wake := false
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range ss {
		fp, bt, tr := s.fp, s.bt, s.fp.tr
		fp.unresolved--
		if s.gen != fp.gen {
			// Sent before the partition failed: whatever the answer,
			// the batch is sent again from the last acknowledged
			// position (the target answers a duplicate if it wrote it).
			continue
		}
		err := reqErr
		dst := int64(-1)
		if err == nil {
			if p := codes[topicPartition{tr.target, tr.partition}]; p == nil {
				err = fmt.Errorf("produce response without %s/%d", tr.target, tr.partition)
			} else if err = kerr.ErrorForCode(p.ErrorCode); err == nil {
				dst = p.BaseOffset + (bt.last - bt.base)
			} else if errors.Is(err, kerr.DuplicateSequenceNumber) {
				err = nil
			} else if errors.Is(err, kerr.CorruptMessage) {
				// The CRC is checked here only now (wholeBatches):
				// a bad one came so from the source.
				if cerr := checkBatch(bt.b); cerr != nil {
					err = fmt.Errorf("%w: source batch at offset %d: %w", err, bt.base, cerr)
				}
			}
		}
		tr.mu.Lock()
		if err == nil && fp.sent > 0 && fp.queue[0].last == bt.last {
			fp.queue = fp.queue[1:]
			fp.queued -= len(bt.b)
			fp.sent--
			fp.seq += bt.count
			fp.ackAt, fp.ackEpoch = bt.last+1, bt.epoch
			if dst >= 0 {
				tr.ack(bt.last, dst, len(bt.b), now)
			} else {
				tr.ackNoSync(bt.last, len(bt.b), now)
			}
			tr.records += int64(bt.count) - 1 // ack counted one
			if !bt.ts.IsZero() {
				f.m.e2e.Observe(now.Sub(bt.ts).Seconds())
			}
			wake = f.failAtGap(fp, now) || wake
			tr.mu.Unlock()
			continue
		}
		if err == nil {
			err = errors.New("forward: resolved batch is not the partition's oldest")
		}
		// The first failure of this generation, so of the oldest batch
		// in flight: a sequence error here means the target lost the
		// producer's state (the batches after it fail with sequence
		// errors too, as a consequence, and are ignored above).
		var ke *kerr.Error
		if errors.As(err, &ke) {
			switch ke.Code {
			case kerr.OutOfOrderSequenceNumber.Code, kerr.UnknownProducerID.Code, kerr.InvalidProducerEpoch.Code:
				fp.needPid = true
			case kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.LeaderNotAvailable.Code:
				f.tgtStale = true
			}
		} else {
			f.tgtStale = true
		}
		first := false
		for _, q := range fp.queue {
			if tr.fail(q.last, err, now) && !first {
				first = true
				f.m.log.Warn("mirror: target refused a batch; partition paused, retrying from its last acknowledged position",
					"topic", tr.topic, "partition", tr.partition, "target_topic", tr.target, "offset", q.base, "err", err)
			}
		}
		fp.queue, fp.queued, fp.sent, fp.nextSeq = nil, 0, 0, fp.seq
		fp.gap = false // fetched again after the rewind
		fp.gen++
		tr.mu.Unlock()
		wake = true
	}
	if wake {
		f.m.wakeLoop()
	}
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

// produceWrites counts the Produce requests written by the forwarding
// client (a kgo hook), so that issue can wait for a request to be written
// before it issues the next.
type produceWrites struct {
	n  atomic.Int64
	mu sync.Mutex
	ch chan struct{} // closed and replaced at each write
}

func newProduceWrites() *produceWrites { return &produceWrites{ch: make(chan struct{})} }

// OnBrokerWrite implements kgo.HookBrokerWrite. A write that failed with
// nothing written is retried by kgo on a new connection, or the request
// fails: either way it is not the last word on the request.
func (w *produceWrites) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, written int, _, _ time.Duration, err error) {
	if key != 0 || err != nil && written == 0 {
		return
	}
	w.mu.Lock()
	w.n.Add(1)
	close(w.ch)
	w.ch = make(chan struct{})
	w.mu.Unlock()
}

func (w *produceWrites) count() int64 { return w.n.Load() }

// wait returns once a Produce request was written after count() returned
// since, or done is closed.
func (w *produceWrites) wait(since int64, done <-chan struct{}) {
	for {
		w.mu.Lock()
		ch := w.ch
		w.mu.Unlock()
		if w.n.Load() != since {
			return
		}
		select {
		case <-ch:
		case <-done:
			return
		}
	}
}
