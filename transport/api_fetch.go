package transport

// Fetch: v4-v11.
//
// v4 is the first version whose responses carry record batches v2 with the
// last stable offset (librdkafka's minimum); v10 is the first that may carry
// zstd batches; v11 (rack-aware reads, answered with no preferred replica) is
// the last non-flexible one, so the hand-written response in fetch_writer.go
// has one layout family and no topic IDs. v7 adds incremental fetch
// sessions (KIP-227): the session ID and epoch in the request say whether it
// is sessionless, creates a session, closes one or is incremental, and
// ForgottenTopics removes partitions from the session; package
// transport/fetchsession decides which partitions an incremental fetch reads
// (all of its session's) and which the response carries (those with
// something to report), and the response names the session.
//
// A consumer reads a partition up to its high watermark, a follower
// (ReplicaID = its broker id) up to the log end (the node says what each is,
// and records a follower's fetch offset, which moves the high watermark); the
// response waits up to MaxWait for MinBytes, woken by the partitions when
// what may be read grows, not by polling: one waiter per request, fired by
// the partitions that move (package core/wakeup). CurrentLeaderEpoch (v9+)
// is checked (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH).
//
// IsolationLevel 1 (read_committed) reads a consumer's partitions up to
// their last stable offset (node.Partition.LastStableOffset: the high
// watermark, or the first offset of the oldest open transaction), and
// lists the aborted transactions among the records returned (their
// producer and first offset, from the partition's aborted-transactions
// index), so that the client drops their records; read_uncommitted lists
// none.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/filecache"
	"github.com/weir-broker/weir/core/wakeup"
	"github.com/weir-broker/weir/transport/fetchsession"
)

// testHookFetchWait, when set (by tests, before any server starts), is called
// each time a Fetch is about to wait for appends.
var testHookFetchWait func()

func handleFetch(ctx context.Context, s *Server, r *request) (rawResponse, error) {
	req := r.body.(*kmsg.FetchRequest)
	resp := &fetchResponse{version: req.Version}
	sreq := sessionRequest(req)
	parts := sreq.Partitions
	var sctx *fetchsession.Context
	if req.Version >= 7 {
		sctx = s.sessions.newContext(s.now(), &sreq)
		if sctx.Err != nil {
			resp.errCode = s.code(sctx.Err)
			return resp, nil
		}
		parts = sctx.Partitions
	}
	resp.partitions(s, parts, req.ReplicaID, req.IsolationLevel == 1)

	// Config.MaxFetchBytes caps the response, as Kafka's broker-side
	// fetch.max.bytes does, whatever the request asks for.
	resp.wait(ctx, s, min(int64(req.MaxBytes), int64(s.cfg.MaxFetchBytes)), int64(req.MinBytes),
		time.Now().Add(time.Duration(req.MaxWaitMillis)*time.Millisecond))
	if sctx != nil {
		resp.answerSession(s, sctx)
	}
	return resp, nil
}

// sessionRequest is the request as package fetchsession sees it (Fetch
// v4-v6 as sessionless: ID 0, epoch -1).
func sessionRequest(req *kmsg.FetchRequest) fetchsession.Request {
	sr := fetchsession.Request{SessionID: req.SessionID, Epoch: req.SessionEpoch, Follower: req.ReplicaID >= 0}
	if req.Version < 7 {
		sr.SessionID, sr.Epoch = fetchsession.InvalidID, fetchsession.FinalEpoch
	}
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	sr.Partitions = make([]fetchsession.Partition, 0, n)
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			current := rp.CurrentLeaderEpoch
			if req.Version < 9 {
				current = -1
			}
			sr.Partitions = append(sr.Partitions, fetchsession.Partition{
				TopicPartition: fetchsession.TopicPartition{Topic: rt.Topic, Partition: rp.Partition},
				PartitionData: fetchsession.PartitionData{FetchOffset: rp.FetchOffset, LogStartOffset: rp.LogStartOffset,
					MaxBytes: rp.PartitionMaxBytes, CurrentLeaderEpoch: current}})
		}
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			sr.Forgotten = append(sr.Forgotten, fetchsession.TopicPartition{Topic: ft.Topic, Partition: p})
		}
	}
	return sr
}

// partitions sets up the response's partitions, in order (consecutive
// partitions of one topic under one topic entry, as Kafka groups them), and
// takes each from the node for replicaID (recording a follower's fetch).
func (r *fetchResponse) partitions(s *Server, parts []fetchsession.Partition, replicaID int32, committed bool) {
	for i := 0; i < len(parts); {
		j := i + 1
		for j < len(parts) && parts[j].Topic == parts[i].Topic {
			j++
		}
		ft := fetchTopic{name: parts[i].Topic, parts: make([]fetchPart, j-i)}
		for k := range ft.parts {
			sp, fp := &parts[i+k], &ft.parts[k]
			fp.index, fp.offset, fp.maxBytes = sp.Partition, sp.FetchOffset, int64(sp.MaxBytes)
			fp.hw, fp.lso, fp.logStart = -1, -1, -1
			p, err := s.node.FetchPartition(sp.Topic, sp.Partition, replicaID, sp.FetchOffset, sp.CurrentLeaderEpoch)
			if err != nil {
				fp.errCode = s.code(err)
				continue
			}
			if replicaID >= 0 {
				p.FollowerLogStart(replicaID, sp.LogStartOffset) // DeleteRecords waits for it
			} else if committed {
				p.ReadCommitted()
				fp.committed = true
			}
			fp.p = p
		}
		r.topics = append(r.topics, ft)
		i = j
	}
}

// answerSession hands what was read to the session cache, and keeps the
// partitions it says the response carries (an incremental fetch's changed
// ones), with the session ID to answer.
func (r *fetchResponse) answerSession(s *Server, sctx *fetchsession.Context) {
	results := make([]fetchsession.Result, 0, len(sctx.Partitions))
	for _, t := range r.topics {
		for i := range t.parts {
			p := &t.parts[i]
			results = append(results, fetchsession.Result{HighWatermark: p.hw, LastStableOffset: p.lso,
				LogStartOffset: p.logStart, Records: p.records.Len() > 0, Failed: p.errCode != 0})
		}
	}
	id, include, err := s.sessions.respond(s.now(), sctx, results)
	r.sessionID = id
	if err != nil {
		r.release()
		r.topics, r.errCode = nil, s.code(err)
		return
	}
	if sctx.Kind != fetchsession.Incremental {
		return // every partition
	}
	// Keep the partitions included, in order; an excluded one has no
	// records to release (it would have been included).
	kept, k, n := r.topics[:0], 0, 0
	for _, t := range r.topics {
		parts := t.parts[:0]
		for i := range t.parts {
			if k < len(include) && include[k] == n {
				parts = append(parts, t.parts[i])
				k++
			}
			n++
		}
		if len(parts) > 0 {
			t.parts = parts
			kept = append(kept, t)
		}
	}
	clear(r.topics[len(kept):])
	r.topics = kept
}

// fetchSessions is the server's fetch session cache (package fetchsession)
// behind its lock, reporting to the metrics.
type fetchSessions struct {
	mu      sync.Mutex
	c       *fetchsession.Cache
	m       *Metrics
	evicted int64 // as last reported
}

func (fs *fetchSessions) newContext(now time.Time, req *fetchsession.Request) *fetchsession.Context {
	fs.mu.Lock()
	ctx := fs.c.NewContext(now, req)
	fs.reportLocked()
	fs.mu.Unlock()
	fs.m.fetchKind(ctx.Kind)
	return ctx
}

func (fs *fetchSessions) respond(now time.Time, ctx *fetchsession.Context, results []fetchsession.Result) (int32, []int, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	defer fs.reportLocked()
	return fs.c.Respond(now, ctx, results)
}

func (fs *fetchSessions) reportLocked() {
	st := fs.c.Stats()
	fs.m.fetchSessions(st, st.Evictions-fs.evicted)
	fs.evicted = st.Evictions
}

// wait reads every partition, then, until MinBytes are read, a partition
// fails, the deadline passes or ctx ends, waits for the partitions to move
// and re-reads those that did. It registers one waiter with every partition
// once (package wakeup), so an append costs the parked fetch the re-read of
// that partition only, whatever the number it waits on.
func (r *fetchResponse) wait(ctx context.Context, s *Server, maxBytes, minBytes int64, deadline time.Time) {
	var (
		timer *time.Timer
		w     *wakeup.Waiter
		moved []int // keys (indexes in r.watched) to re-read
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if w != nil {
			w.Close()
		}
	}()
	total, failed := r.read(s, maxBytes)
	settled := false
	for {
		if failed || total >= minBytes || ctx.Err() != nil || !time.Now().Before(deadline) {
			// A follower's fetch with records to answer waits, once, for
			// the produce appends in progress to its partitions (the
			// rest of the produce request whose first append woke it),
			// as Kafka completes parked fetches only once a produce
			// request is appended to all its partitions: the follower
			// gets the whole request in one round, which with acks=all
			// is on the producer's path. The wait is bounded by those
			// appends (and MaxWait).
			// An append that ended between the read and this look is
			// no longer in progress, but its records were not read:
			// a follower's read limit that moved since is read again.
			if !settled && !failed && total > 0 && ctx.Err() == nil {
				if inFlight := r.appendsInFlight(); inFlight || r.followerLimitMoved() {
					settled = true
					r.release()
					if inFlight {
						if timer == nil {
							timer = time.NewTimer(time.Until(deadline))
						}
						r.awaitAppends(ctx, timer.C)
					}
					total, failed = r.read(s, maxBytes)
					continue
				}
			}
			return
		}
		if w == nil {
			// Register with every partition, then look at each once
			// more: a move before its registration shows in its read
			// limit, one after fires.
			w, moved = r.watch()
		}
		if len(moved) == 0 {
			if timer == nil {
				timer = time.NewTimer(time.Until(deadline))
			}
			if testHookFetchWait != nil {
				testHookFetchWait()
			}
			select {
			case <-w.C():
				moved = w.Fired(moved)
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		total, failed = r.reread(s, maxBytes, total, moved)
		moved = moved[:0]
	}
}

// watch registers a waiter with every partition read, under its index in
// r.watched, and returns it with the keys of the partitions whose read
// limit moved since they were read (or that will not fire: closed).
func (r *fetchResponse) watch() (*wakeup.Waiter, []int) {
	r.watched = r.watched[:0]
	for ti := range r.topics {
		for pi := range r.topics[ti].parts {
			if fp := &r.topics[ti].parts[pi]; fp.p != nil {
				r.watched = append(r.watched, fp)
			}
		}
	}
	w := wakeup.NewWaiter(len(r.watched))
	var moved []int
	for k, fp := range r.watched {
		if !fp.p.Watch(w, k) || fp.p.ReadLimit() != fp.readLimit {
			moved = append(moved, k)
		}
	}
	return w, moved
}

// appendsInFlight notes, for every partition a follower reads, the produce
// appends to it in progress (node.Partition.AppendsInFlight), and reports
// whether there are any.
func (r *fetchResponse) appendsInFlight() bool {
	found := false
	for ti := range r.topics {
		for pi := range r.topics[ti].parts {
			fp := &r.topics[ti].parts[pi]
			fp.appendMark, fp.appending = 0, false
			if fp.p != nil {
				fp.appendMark, fp.appending = fp.p.AppendsInFlight()
				found = found || fp.appending
			}
		}
	}
	return found
}

// followerLimitMoved reports whether a partition a follower read has a read
// limit (its log end) other than the one it was read up to.
func (r *fetchResponse) followerLimitMoved() bool {
	for ti := range r.topics {
		for pi := range r.topics[ti].parts {
			fp := &r.topics[ti].parts[pi]
			if fp.p != nil && fp.p.Follower() && fp.p.ReadLimit() != fp.readLimit {
				return true
			}
		}
	}
	return false
}

// awaitAppends waits until the appends appendsInFlight noted have ended,
// the timer fires or ctx ends.
func (r *fetchResponse) awaitAppends(ctx context.Context, timer <-chan time.Time) {
	for ti := range r.topics {
		for pi := range r.topics[ti].parts {
			fp := &r.topics[ti].parts[pi]
			if !fp.appending {
				continue
			}
			for ch := fp.p.AppendsLanded(fp.appendMark); ch != nil; ch = fp.p.AppendsLanded(fp.appendMark) {
				select {
				case <-ch:
				case <-timer:
					return
				case <-ctx.Done():
					return
				}
			}
		}
	}
}

// read reads every partition from its fetch offset up to its high watermark,
// within the partition's and the response's byte limits (but the first batch
// of the first partition with data goes whole, as in Kafka). It returns the
// record bytes read and whether any partition failed (which answers at once).
func (r *fetchResponse) read(s *Server, maxBytes int64) (total int64, failed bool) {
	for ti := range r.topics {
		for pi := range r.topics[ti].parts {
			fp := &r.topics[ti].parts[pi]
			if fp.p == nil {
				failed = true
				continue
			}
			failed = fp.read(s, maxBytes, &total) || failed
		}
	}
	return total, failed
}

// reread reads again the partitions r.watched[k] for the keys given (in
// any order, repeats allowed), given the total read so far, and returns the
// new total and whether one failed.
func (r *fetchResponse) reread(s *Server, maxBytes, total int64, keys []int) (int64, bool) {
	r.round++
	failed := false
	for _, k := range keys {
		fp := r.watched[k]
		if fp.round == r.round {
			continue
		}
		fp.round = r.round
		failed = fp.read(s, maxBytes, &total) || failed
	}
	return total, failed
}

// read reads the partition from its fetch offset up to its read limit,
// within its byte limit and what is left of maxBytes besides its own
// records, which the new read replaces (*total follows); the first batch
// goes whole when no other partition has records. A read that does not fit
// keeps the records read before. It reports a failure (errCode set, no
// records).
func (fp *fetchPart) read(s *Server, maxBytes int64, total *int64) (failed bool) {
	fp.readLimit = fp.p.ReadLimit()
	fp.hw, fp.lso, fp.logStart = fp.p.HighWatermark(), fp.p.LastStableOffset(), fp.p.LogStartOffset()
	others := *total - fp.records.Len()
	limit := min(fp.maxBytes, maxBytes-others)
	if others > 0 && limit <= 0 {
		return false
	}
	recs, err := fp.p.Read(fp.offset, limit, fp.readLimit)
	if errors.Is(err, filecache.ErrBudget) {
		// Every descriptor of the segment files' budget is held by reads
		// in flight: answer with what was read, as at the byte limit; the
		// client fetches the rest next.
		return false
	}
	if err != nil {
		fp.errCode = s.code(err)
		*total = others
		fp.records.Release()
		fp.aborted = nil
		return true
	}
	if others > 0 && recs.Len() > limit {
		recs.Release()
		return false
	}
	fp.records.Release()
	fp.records = recs
	*total = others + recs.Len()
	fp.aborted = nil
	if fp.committed && recs.Len() > 0 {
		fp.aborted = fp.p.AbortedTxns(fp.offset, recs.NextOffset())
	}
	return false
}
