package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
)

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
	byConn := map[wireKey]*kmsg.FetchRequest{} // by source leader and lane
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
		key := wireKey{fp.srcLeader, int(tp.partition) % fwdFetchLanes}
		req := byConn[key]
		if req == nil {
			req = kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, fwdFetchWaitMs, 1, fwdFetchMax
			req.IsolationLevel, req.SessionEpoch = 1, -1
			byConn[key] = req
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
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = fp.leaderEpoch, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	f.mu.Unlock()
	if len(byConn) == 0 {
		waitCtx(ctx, pollWait/5)
		return
	}
	type result struct {
		req  *kmsg.FetchRequest
		resp *kmsg.FetchResponse
		buf  *wireBuf // resp's bytes: one reference, released once queued
		err  error
	}
	results := make(chan result, len(byConn))
	for key, req := range byConn {
		go func() {
			c, err := f.srcWire.conn(ctx, key)
			var resp *kmsg.FetchResponse
			var buf *wireBuf
			if err == nil {
				resp, buf, err = c.fetch(ctx, req)
			}
			results <- result{req, resp, buf, err}
		}()
	}
	for range byConn {
		res := <-results
		if res.err == nil && res.resp.ErrorCode != 0 {
			res.err = kerr.ErrorForCode(res.resp.ErrorCode)
		}
		if res.err != nil {
			res.buf.release()
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
				f.partition(ctx, name, &rt.Partitions[i], whole, err, res.buf)
			}
		}
		res.buf.release()
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
			case fp.validating && e.Err != nil && kerr.IsRetriable(e.Err):
				continue // the leader moving still: asked again next time
			case fp.validating && e.Err != nil:
				// A source that cannot say (no OffsetForLeaderEpoch):
				// a new leader is not a reason to copy it all again.
				f.m.log.Warn("mirror: cannot check the position against the source's new leader",
					"topic", tp.topic, "partition", tp.partition, "position", fp.fetchAt, "err", e.Err)
				at = fp.fetchAt
			}
		}
		if fp.validating && at >= fp.fetchAt {
			// The new leader's log holds what was fetched: nothing to move.
			f.m.log.Debug("mirror: position checked against the source's new leader",
				"topic", tp.topic, "partition", tp.partition, "position", fp.fetchAt, "leader_epoch", fp.leaderEpoch)
			fp.reset, fp.validating = false, false
			continue
		}
		foundBy := "out_of_range" // else a new leader's or a restart's check
		if fp.validating {
			foundBy = "epoch_check"
		}
		tr := fp.tr
		tr.mu.Lock()
		tr.resetTo(at)
		tr.mu.Unlock()
		f.m.log.Warn("mirror: source log truncated below the mirror's position; resuming where it diverged",
			"topic", tp.topic, "partition", tp.partition, "position", fp.fetchAt, "resume_offset", at,
			"leader_epoch", fp.srcEpoch, "from", from, "found_by", foundBy)
		fp.fetchAt, fp.reset, fp.validating = at, false, false
		// Other records from here on: under the producer id and
		// sequences of batches the target may have written (an answer
		// lost), they would be taken for duplicates of those.
		fp.needPid = true
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
// the batches wholeBatches framed, and verr, why the rest was not; buf,
// the response's buffer, gets a reference for each batch queued.
func (f *forwarder) partition(ctx context.Context, topic string, rp *kmsg.FetchResponseTopicPartition, whole []byte, verr error, buf *wireBuf) {
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
			fp.needPid = true // other records under the same sequences: as a reset (resetOffsets)
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
		if !tr.sendBatch(h.BaseOffset, h.LastOffset(), h.PartitionLeaderEpoch, ts) {
			break
		}
		fp.fetchAt, fp.srcEpoch = h.LastOffset()+1, h.PartitionLeaderEpoch
		buf.ref()
		fp.queue = append(fp.queue, fwdBatch{b: batch, buf: buf, base: h.BaseOffset, last: h.LastOffset(), count: h.RecordCount,
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
