package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/cluster/peer"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/replica"
)

// Replica fetcher settings (Kafka's defaults).
const (
	replicaFetchWait     = 500 * time.Millisecond // replica.fetch.wait.max.ms
	replicaFetchBytes    = 1 << 20                // replica.fetch.max.bytes, per partition
	replicaFetchResponse = 10 << 20               // replica.fetch.response.max.bytes
	replicaFetchBackoff  = time.Second            // replica.fetch.backoff.ms
	// replicaRetryBackoff is the wait after an answer that will change in
	// a moment: the leader has not applied the new state yet
	// (UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE
	// from a leader whose image still shows the election): in Kafka the
	// controller tells the new leader first; here every broker reads the
	// state from the store, and the follower may read it first.
	replicaRetryBackoff = 20 * time.Millisecond
	// replicaRequestTimeout bounds a request to the leader beyond its long
	// poll (Kafka's replica.socket.timeout.ms): a connection that died
	// without a word is given up then.
	replicaRequestTimeout = 30 * time.Second
)

// fetchers are this broker's replica fetchers, one per source broker (Kafka's
// num.replica.fetchers = 1): each fetches every partition this broker
// follows on that leader in one Fetch request, after asking the leader
// where its epoch ends for the partitions that just started following
// (OffsetForLeaderEpoch). The replica values decide; fetchers carry the
// requests and hand the answers back.
type fetchers struct {
	n  *Node
	mu sync.Mutex
	by map[int32]*fetcher
	of map[*replicated]*fetcher
}

// fetchPart is one partition a fetcher serves.
type fetchPart struct {
	epoch int32 // the leader epoch followed, sent as CurrentLeaderEpoch
	query bool  // asking where our epoch ends, not fetching yet
	// until: after an error, not before then.
	until time.Time
}

type fetcher struct {
	fs     *fetchers
	source int32
	mu     sync.Mutex
	parts  map[*replicated]*fetchPart
	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	client *peer.Client // for addr; the fetcher goroutine's own
	addr   string

	// The request in flight (mu), a Fetch or an epoch query (inQuery):
	// its partitions, and how to cut it short when a partition it does
	// not carry arrives (see put) or the fetcher has nothing left to do;
	// changed: a partition arrived since the last snapshot, before the
	// request left.
	inFlight    []queued
	inQuery     bool
	interrupt   context.CancelFunc
	interrupted bool
	changed     bool
}

func newFetchers(n *Node) *fetchers {
	return &fetchers{n: n, by: map[int32]*fetcher{}, of: map[*replicated]*fetcher{}}
}

// query has rp's fetcher of leader ask where rp's latest epoch ends.
// The query waits until rp.queryNotBefore (after a failed truncation).
// rp.mu held.
func (fs *fetchers) query(rp *replicated, leader, epoch int32) {
	fs.put(rp, leader, &fetchPart{epoch: epoch, query: true, until: rp.queryNotBefore})
}

// fetch has rp fetched from leader, from its log end.
func (fs *fetchers) fetch(rp *replicated, leader, epoch int32, _ int64) {
	fs.put(rp, leader, &fetchPart{epoch: epoch})
}

func (fs *fetchers) put(rp *replicated, leader int32, fp *fetchPart) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if old := fs.of[rp]; old != nil && old.source != leader {
		old.drop(rp)
	}
	f := fs.by[leader]
	if f == nil {
		f = &fetcher{fs: fs, source: leader, parts: map[*replicated]*fetchPart{}, wake: make(chan struct{}, 1),
			done: make(chan struct{})}
		f.ctx, f.cancel = context.WithCancel(fs.n.ctx)
		fs.by[leader] = f
		go f.run()
	}
	fs.of[rp] = f
	f.mu.Lock()
	f.parts[rp] = fp
	f.interruptLocked(rp, fp)
	f.mu.Unlock()
	f.poke()
}

// interruptLocked cuts short the request in flight when it does not carry
// rp as fp wants it (a partition new to this leader's fetcher, a new epoch,
// an epoch query during a Fetch): otherwise rp would wait for that long
// poll, up to replica.fetch.wait.max.ms, before its first fetch, and an
// acks=all produce to it as long; or, on a connection that died without a
// word (a link down), for the request's timeout. The connection goes (the
// peer client closes it with the request); the partitions in flight are
// asked again at once. f.mu held.
func (f *fetcher) interruptLocked(rp *replicated, fp *fetchPart) {
	if f.interrupt == nil {
		f.changed = true // the request being prepared may not carry it
		return
	}
	if f.interrupted {
		return
	}
	if fp.query == f.inQuery {
		for _, q := range f.inFlight {
			if q.rp == rp && q.epoch == fp.epoch {
				return
			}
		}
	}
	f.interrupted = true
	f.interrupt()
}

// begin makes qs, about to be asked (an epoch query when query is set),
// the request in flight, cut short by the returned context's cancel. It
// returns false, and nothing is in flight, when a partition arrived since
// the snapshot: that one is taken first.
func (f *fetcher) begin(qs []queued, query bool, timeout time.Duration) (context.Context, bool) {
	ctx, cancel := context.WithTimeout(f.ctx, timeout)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changed {
		cancel()
		return nil, false
	}
	f.inFlight, f.inQuery, f.interrupt, f.interrupted = qs, query, cancel, false
	return ctx, true
}

// end ends the request in flight and reports whether it was cut short.
func (f *fetcher) end() (interrupted bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.interrupt != nil {
		f.interrupt()
	}
	interrupted = f.interrupted
	f.inFlight, f.inQuery, f.interrupt, f.interrupted = nil, false, nil, false
	return interrupted
}

// remove stops fetching rp.
func (fs *fetchers) remove(rp *replicated) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.of[rp]; f != nil {
		f.drop(rp)
		delete(fs.of, rp)
	}
}

// close stops every fetcher and waits for them.
func (fs *fetchers) close() {
	fs.mu.Lock()
	all := fs.by
	fs.by, fs.of = map[int32]*fetcher{}, map[*replicated]*fetcher{}
	fs.mu.Unlock()
	for _, f := range all {
		f.cancel()
		<-f.done
	}
}

// drop stops fetching rp here. When nothing is left to fetch from this
// source, the request in flight is cut short: the source may be gone (its
// partitions moved because it died), and its connection with it.
func (f *fetcher) drop(rp *replicated) {
	f.mu.Lock()
	delete(f.parts, rp)
	if len(f.parts) == 0 && f.interrupt != nil && !f.interrupted {
		f.interrupted = true
		f.interrupt()
	}
	f.mu.Unlock()
	f.poke()
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// sleep waits d, or until poked or stopped.
func (f *fetcher) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.wake:
	case <-f.ctx.Done():
	}
}

func (f *fetcher) run() {
	defer close(f.done)
	defer func() {
		if f.client != nil {
			f.client.Close()
		}
	}()
	log := f.fs.n.logger.With("component", "fetcher", "source", f.source)
	for f.ctx.Err() == nil {
		queries, fetches, next := f.snapshot()
		if len(queries) == 0 && len(fetches) == 0 {
			if next.IsZero() {
				select {
				case <-f.wake:
				case <-f.ctx.Done():
				}
			} else {
				f.sleep(time.Until(next))
			}
			continue
		}
		cl, err := f.clientOf()
		if err != nil {
			log.Debug("no route to the leader", "err", err)
			f.sleep(replicaFetchBackoff)
			continue
		}
		if len(queries) > 0 {
			// Then look again: the partitions answered have truncated
			// and fetch in this round, not after a long poll of the
			// others.
			f.askEpochs(cl, queries, log)
			continue
		}
		f.fetchOnce(cl, fetches, next, log)
	}
}

type queued struct {
	rp    *replicated
	epoch int32
}

// snapshot returns what to do now, and when the earliest backed-off
// partition may go again.
func (f *fetcher) snapshot() (queries, fetches []queued, next time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changed = false
	now := time.Now()
	for rp, fp := range f.parts {
		if now.Before(fp.until) {
			if next.IsZero() || fp.until.Before(next) {
				next = fp.until
			}
			continue
		}
		if fp.query {
			queries = append(queries, queued{rp, fp.epoch})
		} else {
			fetches = append(fetches, queued{rp, fp.epoch})
		}
	}
	return queries, fetches, next
}

// backoff holds rp back after an error: briefly when the leader is only
// behind on the partition's state, replicaFetchBackoff otherwise.
func (f *fetcher) backoff(rp *replicated, err ...error) {
	d := replicaFetchBackoff
	if len(err) > 0 && (errors.Is(err[0], kerr.UnknownLeaderEpoch) || errors.Is(err[0], kerr.NotLeaderForPartition) ||
		errors.Is(err[0], kerr.LeaderNotAvailable)) {
		d = replicaRetryBackoff
	}
	f.mu.Lock()
	if fp := f.parts[rp]; fp != nil {
		fp.until = time.Now().Add(d)
	}
	f.mu.Unlock()
}

// clientOf returns a client of the source broker at its inter-broker
// listener's endpoint in the image, or at its route in ReplicaRoutes (a
// new one when the address changed).
func (f *fetcher) clientOf() (*peer.Client, error) {
	im, _ := f.fs.n.image.load()
	b, ok := im.Brokers[f.source]
	if !ok {
		return nil, fmt.Errorf("broker %d is not registered", f.source)
	}
	addr, err := f.fs.n.peerAddr(brokerOf(b))
	if err != nil {
		return nil, err
	}
	if f.client != nil && f.addr == addr {
		return f.client, nil
	}
	if f.client != nil {
		f.client.Close()
		f.client = nil
	}
	cl, err := peer.Dial(addr, f.fs.n.cfg.NodeID, f.fs.n.cfg.ReplicaDialer)
	if err != nil {
		return nil, err
	}
	f.client, f.addr = cl, addr
	return cl, nil
}

func (f *fetcher) askEpochs(cl *peer.Client, qs []queued, log interface{ Debug(string, ...any) }) {
	var req []peer.EpochQuery
	var asked []queued
	for _, q := range qs {
		latest, ok := q.rp.Log().LatestEpoch()
		if !ok {
			// An empty log: nothing to truncate.
			q.rp.epochAnswered(f.source, q.epoch, replica.Undefined)
			continue
		}
		req = append(req, peer.EpochQuery{Topic: q.rp.Topic, Partition: q.rp.Index, CurrentLeaderEpoch: q.epoch, LeaderEpoch: latest})
		asked = append(asked, q)
	}
	if len(req) == 0 {
		return
	}
	ctx, ok := f.begin(asked, true, replicaRequestTimeout)
	if !ok {
		return
	}
	answers, err := cl.EpochEnds(ctx, req)
	interrupted := f.end()
	if err != nil {
		if f.ctx.Err() == nil && !interrupted {
			log.Debug("OffsetForLeaderEpoch failed", "err", err)
			for _, q := range asked {
				f.backoff(q.rp)
			}
		}
		return
	}
	for _, q := range asked {
		a, ok := findAnswer(answers, q.rp)
		switch {
		case !ok:
			f.backoff(q.rp)
		case a.Err != nil:
			log.Debug("OffsetForLeaderEpoch refused", "partition", logs.DirName(q.rp.Topic, q.rp.Index), "err", a.Err)
			f.backoff(q.rp, a.Err)
		default:
			q.rp.epochAnswered(f.source, q.epoch, replica.EpochEnd{Epoch: a.Epoch, EndOffset: a.EndOffset})
		}
	}
}

func findAnswer(as []peer.EpochAnswer, rp *replicated) (peer.EpochAnswer, bool) {
	for _, a := range as {
		if a.Topic == rp.Topic && a.Partition == rp.Index {
			return a, true
		}
	}
	return peer.EpochAnswer{}, false
}

// longPoll is a Fetch's MaxWait at now: replica.fetch.wait.max.ms, or
// until backedOff (at least 1 ms) when a partition held back after an error
// may go again before that.
func longPoll(backedOff, now time.Time) time.Duration {
	if backedOff.IsZero() {
		return replicaFetchWait
	}
	return max(min(replicaFetchWait, backedOff.Sub(now)), time.Millisecond)
}

// fetchOnce fetches the partitions of fetches (from snapshot). backedOff is
// when the first partition held back after an error may go again (zero:
// none): the long poll ends then, so that it is not held back longer.
func (f *fetcher) fetchOnce(cl *peer.Client, fetches []queued, backedOff time.Time, log interface{ Debug(string, ...any) }) {
	req := peer.FetchRequest{MaxWait: longPoll(backedOff, time.Now()), MinBytes: 1, MaxBytes: replicaFetchResponse}
	offsets := make(map[*replicated]int64, len(fetches))
	for _, q := range fetches {
		off := q.rp.Log().EndOffset()
		offsets[q.rp] = off
		req.Partitions = append(req.Partitions, peer.FetchPartition{Topic: q.rp.Topic, Partition: q.rp.Index,
			CurrentLeaderEpoch: q.epoch, FetchOffset: off, LogStartOffset: q.rp.Log().StartOffset(), MaxBytes: replicaFetchBytes})
	}
	ctx, ok := f.begin(fetches, false, req.MaxWait+replicaRequestTimeout)
	if !ok {
		return
	}
	res, err := cl.Fetch(ctx, req)
	interrupted := f.end()
	if err != nil {
		if f.ctx.Err() == nil && !interrupted {
			log.Debug("fetch failed", "err", err)
			for _, q := range fetches {
				f.backoff(q.rp)
			}
		}
		return
	}
	var durable []*replicated
	for _, q := range fetches {
		var got *peer.Fetched
		for i := range res {
			if res[i].Topic == q.rp.Topic && res[i].Partition == q.rp.Index {
				got = &res[i]
				break
			}
		}
		if got == nil {
			f.backoff(q.rp)
			continue
		}
		if err := q.rp.fetched(f.source, q.epoch, offsets[q.rp], got); err != nil {
			log.Debug("fetched partition refused", "partition", logs.DirName(q.rp.Topic, q.rp.Index), "err", err)
			f.backoff(q.rp, err)
			continue
		}
		if q.rp.Settings().DurableAcks && q.rp.Log().FlushedOffset() < q.rp.Log().EndOffset() {
			durable = append(durable, q.rp)
		}
	}
	f.flushDurable(durable, log)
}

// flushDurable fsyncs what this round appended to partitions with durable
// acks (weir.durable.acks), concurrently, before the next fetch: the offset
// a follower fetches at is then covered by its fsync, and the leader, which
// counts that offset as the follower's log end, completes acks=all only for
// records on the disk of every in-sync replica. (Kafka's Fetch carries no
// flushed offset; this makes the fetch offset one.) A failed fsync fails
// the log, whose recovery cuts back to what the last one covered, so the
// next fetch offset is again durable.
func (f *fetcher) flushDurable(rps []*replicated, log interface{ Debug(string, ...any) }) {
	flush := func(rp *replicated) {
		if err := rp.Log().Flush(rp.Log().EndOffset()); err != nil {
			log.Debug("fsync of a durable partition failed", "partition", logs.DirName(rp.Topic, rp.Index), "err", err)
			f.backoff(rp, err)
			rp.logFailed()
		}
	}
	switch len(rps) {
	case 0:
	case 1:
		flush(rps[0])
	default:
		var wg sync.WaitGroup
		for _, rp := range rps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				flush(rp)
			}()
		}
		wg.Wait()
	}
}

// following reports whether rp still follows source in epoch. mu held.
func (rp *replicated) followingLocked(source, epoch int32) bool {
	return rp.r.Role() == replica.Follower && rp.r.Leader() == source && rp.r.Epoch() == epoch
}

// epochAnswered hands the leader's answer to an epoch query to the replica,
// with where the follower's own log ends that epoch.
func (rp *replicated) epochAnswered(source, epoch int32, leader replica.EpochEnd) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if !rp.followingLocked(source, epoch) {
		return
	}
	local := replica.Undefined
	if leader.Epoch >= 0 {
		e, end := rp.Log().EndOffsetForEpoch(leader.Epoch)
		local = replica.EpochEnd{Epoch: e, EndOffset: end}
	}
	rp.r.EpochEnd(leader, local)
	rp.applyLocked()
}

// errStaleFetch: an answer for a fetch the partition has moved on from.
var errStaleFetch = errors.New("node: stale fetch answer")

// fetched appends what a fetch at offset brought, and hands the leader's
// high watermark (or an out-of-range answer) to the replica.
func (rp *replicated) fetched(source, epoch int32, offset int64, got *peer.Fetched) error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if !rp.followingLocked(source, epoch) || rp.Log().EndOffset() != offset {
		return errStaleFetch
	}
	switch {
	case errors.Is(got.Err, kerr.OffsetOutOfRange):
		rp.r.OutOfRange(got.LogStartOffset)
		rp.applyLocked()
		return nil
	case got.Err != nil:
		return got.Err
	}
	if len(got.Records) > 0 {
		if _, err := rp.AppendReplicated(rp.n.ctx, got.Records); err != nil {
			if errors.Is(err, partlog.ErrFailed) {
				rp.logFailedLocked()
			}
			return fmt.Errorf("append what %s fetched from broker %d: %w", logs.DirName(rp.Topic, rp.Index), source, err)
		}
		rp.r.Appended(rp.Log().EndOffset())
	}
	rp.r.LeaderHighWatermark(got.HighWatermark)
	rp.applyLocked()
	rp.followLogStartLocked(got.LogStartOffset)
	return nil
}
