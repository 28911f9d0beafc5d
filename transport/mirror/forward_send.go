package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
)

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
	to    wireKey // the target leader, and the connection to it
	req   wireProduce
	ss    []sent // each holds a reference to its batch's buffer until written
	bytes int
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
	open := map[wireKey]*fwdRequest{}
	f.mu.Lock()
	for _, fp := range f.parts {
		if !fp.sendable() {
			continue
		}
		if fp.tgtLeader < 0 {
			f.tgtStale = true
			continue
		}
		if fp.needPid && fp.pid == f.pid {
			// Waits for its fresh producer id (producerID, before the
			// next round): under the old one, its sequences may name
			// batches the target wrote (a reset).
			continue
		}
		key := wireKey{fp.tgtLeader, int(fp.tr.partition) % fwdLanes}
		r := open[key]
		if r == nil || r.bytes >= fwdReqBytes {
			if f.reqs+len(reqs) >= fwdMaxReqs {
				continue
			}
			r = &fwdRequest{to: key, resolved: make(chan struct{})}
			r.prev, f.tails[key] = f.tails[key], r.resolved
			open[key] = r
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
		r.req.add(fp.tr.target, fp.tr.partition, bt.b)
		bt.buf.ref()
		fp.nextSeq += bt.count
		fp.sent++
		fp.unresolved++
		fp.sentTo = r.to.id
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

// issue writes r to the target leader's connection and returns once it
// is written (or failed): a partition's batches in flight reach the target
// in the order of their sequences. The answer is applied by a goroutine,
// after those of the requests sent before to the same leader.
func (f *forwarder) issue(ctx context.Context, r *fwdRequest) {
	c, err := f.tgtWire.conn(ctx, r.to)
	var call *wireCall
	if err == nil {
		r.req.version, err = c.produceVersion()
	}
	if err == nil {
		call = c.send(r.req.encode(c.id, -1, int32(requestTimeout/time.Millisecond)), r.req.version >= 9,
			time.Now().Add(requestTimeout+produceGrace))
	}
	for _, s := range r.ss {
		s.bt.buf.release() // written: the queue keeps the batch
	}
	go func() {
		var resp *kmsg.ProduceResponse
		if err == nil {
			b, buf, werr := call.wait(ctx)
			if err = werr; err == nil {
				resp = kmsg.NewPtrProduceResponse()
				resp.Version = r.req.version
				if err = resp.ReadFrom(b); err != nil {
					resp = nil
					err = fmt.Errorf("bad Produce answer: %w", err)
				}
				buf.release()
			}
		}
		if r.prev != nil {
			<-r.prev
		}
		f.resolve(r.ss, resp, err)
		close(r.resolved)
		f.mu.Lock()
		f.reqs--
		if f.tails[r.to] == r.resolved {
			delete(f.tails, r.to)
		}
		f.cond.Broadcast()
		f.mu.Unlock()
	}()
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
			bt.buf.release()
			fp.queued -= len(bt.b)
			fp.sent--
			fp.seq += bt.count
			fp.ackAt, fp.ackEpoch = bt.last+1, bt.epoch
			if dst >= 0 {
				if bt.last > bt.base {
					tr.syncStart(bt.base, dst-(bt.last-bt.base))
				}
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
			q.buf.release()
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
