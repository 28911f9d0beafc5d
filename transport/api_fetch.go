package transport

// Fetch: v4-v11.
//
// v4 is the first version whose responses carry record batches v2 with the
// last stable offset (librdkafka's minimum); v10 is the first that may carry
// zstd batches; v11 (rack-aware reads, answered with no preferred replica) is
// the last non-flexible one, so the hand-written response in fetch_writer.go
// has one layout family and no topic IDs. Fetch sessions (v7+) are declined:
// every response has session ID 0, which tells clients to send full requests,
// and a request naming a session gets FETCH_SESSION_ID_NOT_FOUND.
//
// A consumer reads a partition up to its high watermark, a follower
// (ReplicaID = its broker id) up to the log end (the node says what each is,
// and records a follower's fetch offset, which moves the high watermark); the
// response waits up to MaxWait for MinBytes, woken by the partitions when
// what may be read grows, not by polling. CurrentLeaderEpoch (v9+) is checked
// (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH).

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/filecache"
)

// testHookFetchWait, when set (by tests, before any server starts), is called
// each time a Fetch is about to wait for appends.
var testHookFetchWait func()

func handleFetch(ctx context.Context, s *Server, r *request) (rawResponse, error) {
	req := r.body.(*kmsg.FetchRequest)
	resp := &fetchResponse{version: req.Version}
	if req.Version >= 7 && (req.SessionID != 0 || req.SessionEpoch > 0) {
		resp.errCode = s.code(errFetchSession)
		return resp, nil
	}

	resp.topics = make([]fetchTopic, len(req.Topics))
	for i, rt := range req.Topics {
		ft := &resp.topics[i]
		ft.name = rt.Topic
		ft.parts = make([]fetchPart, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			fp := &ft.parts[j]
			fp.index, fp.offset, fp.maxBytes = rp.Partition, rp.FetchOffset, int64(rp.PartitionMaxBytes)
			fp.hw, fp.logStart = -1, -1
			current := rp.CurrentLeaderEpoch
			if req.Version < 9 {
				current = -1
			}
			p, err := s.node.FetchPartition(rt.Topic, rp.Partition, req.ReplicaID, rp.FetchOffset, current)
			if err != nil {
				fp.errCode = s.code(err)
				continue
			}
			fp.p = p
		}
	}

	// Config.MaxFetchBytes caps the response, as Kafka's broker-side
	// fetch.max.bytes does, whatever the request asks for.
	maxBytes := min(int64(req.MaxBytes), int64(s.cfg.MaxFetchBytes))
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	var (
		timer *time.Timer
		chans []<-chan struct{}
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	settled := false
	for {
		total, failed := resp.read(s, maxBytes)
		if failed || total >= int64(req.MinBytes) || ctx.Err() != nil || !time.Now().Before(deadline) {
			// A follower's fetch with records to answer waits, once, for
			// the produce appends in progress to its partitions (the
			// rest of the produce request whose first append woke it),
			// as Kafka completes parked fetches only once a produce
			// request is appended to all its partitions: the follower
			// gets the whole request in one round, which with acks=all
			// is on the producer's path. The wait is bounded by those
			// appends (and MaxWait).
			if !settled && !failed && total > 0 && ctx.Err() == nil && resp.appendsInFlight() {
				settled = true
				resp.release()
				if timer == nil {
					timer = time.NewTimer(time.Until(deadline))
				}
				resp.awaitAppends(ctx, timer.C)
				continue
			}
			return resp, nil
		}
		// Take every partition's wake-up channel, then check that nothing was
		// appended since the read: an append after this point closes a
		// channel, one before it moved the log end.
		var moved bool
		chans, moved = resp.waitChannels(chans[:0])
		resp.release()
		if moved {
			continue
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
		}
		if testHookFetchWait != nil {
			testHookFetchWait()
		}
		waitAny(ctx, chans, timer.C)
	}
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
	remaining := maxBytes
	for ti := range r.topics {
		for pi := range r.topics[ti].parts {
			fp := &r.topics[ti].parts[pi]
			if fp.p == nil {
				failed = true
				continue
			}
			fp.readLimit = fp.p.ReadLimit()
			fp.hw, fp.lso, fp.logStart = fp.p.HighWatermark(), fp.p.LastStableOffset(), fp.p.LogStartOffset()
			limit := min(fp.maxBytes, remaining)
			if total > 0 && limit <= 0 {
				continue
			}
			recs, err := fp.p.Read(fp.offset, limit, fp.readLimit)
			if errors.Is(err, filecache.ErrBudget) {
				// Every descriptor of the segment files' budget is held
				// by reads in flight: answer with what was read, as at
				// the byte limit; the client fetches the rest next.
				remaining = 0
				continue
			}
			if err != nil {
				fp.errCode = s.code(err)
				failed = true
				continue
			}
			if total > 0 && recs.Len() > limit {
				recs.Release()
				continue
			}
			fp.records = recs
			total += recs.Len()
			remaining -= recs.Len()
		}
	}
	return total, failed
}

// waitChannels appends each partition's wake-up channel to chans and reports
// whether some high watermark has moved since it was read.
func (r *fetchResponse) waitChannels(chans []<-chan struct{}) ([]<-chan struct{}, bool) {
	moved := false
	for _, t := range r.topics {
		for _, p := range t.parts {
			if p.p == nil {
				continue
			}
			chans = append(chans, p.p.Wait())
			if p.p.ReadLimit() != p.readLimit {
				moved = true
			}
		}
	}
	return chans, moved
}

// waitAny returns when one of chans is closed, the timer fires or ctx ends.
func waitAny(ctx context.Context, chans []<-chan struct{}, timer <-chan time.Time) {
	switch len(chans) {
	case 0:
		select {
		case <-timer:
		case <-ctx.Done():
		}
	case 1:
		select {
		case <-chans[0]:
		case <-timer:
		case <-ctx.Done():
		}
	default:
		cases := make([]reflect.SelectCase, 0, len(chans)+2)
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
		for _, ch := range chans {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		reflect.Select(cases)
	}
}
