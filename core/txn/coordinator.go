package txn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/weir-broker/weir/core/clock"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
)

// Log is one partition of __transaction_state as the coordinator uses it
// (the same contract as the group coordinator's Log): Append returns a wait
// that returns once the records are committed (on disk when the topic's
// acks wait for it; on a cluster, replicated as acks=all requires); the
// coordinator appends holding its lock, so records reach the log in the
// order it decided them, and waits without it: Append itself should not
// wait for an fsync.
type Log interface {
	Append(ctx context.Context, batches []byte) (wait func(context.Context) error, err error)
	StartOffset() int64
	EndOffset() int64
	Read(offset, maxBytes, maxOffset int64) (partlog.Slice, error)
}

// MarkerWriter writes m to every partition listed and returns one error per
// partition (nil: the marker is written, as acks=all would have it). The
// coordinator writes the markers of a transaction again, to the partitions
// that failed, after Options.MarkerBackoff.
type MarkerWriter func(ctx context.Context, m Marker, parts []TopicPartition) []error

// Options configures a Coordinator. Zero values take the defaults named.
type Options struct {
	// PartitionFor maps a transactional id to its partition of
	// __transaction_state (Kafka: abs(hash(id)) % partitions). Default:
	// partition 0.
	PartitionFor func(id string) int32
	// ProducerIDs hands out a new producer id, never used before. Required.
	// It is called with the coordinator's mutex held (a new id, an
	// exhausted epoch), so it should not wait long: the broker's hands out
	// ids from a reserved block and reserves the next only when one runs
	// out.
	ProducerIDs func() (int64, error)
	// WriteMarkers writes transaction markers. Required.
	WriteMarkers MarkerWriter
	// Clock tells the time and runs the timeouts. Default: the system clock.
	Clock clock.Clock
	// Logger receives loads, timeouts and marker failures. Default:
	// discarded.
	Logger *slog.Logger
	// MaxTimeout bounds the transaction timeout a producer may ask for.
	// Default 15 minutes (transaction.max.timeout.ms).
	MaxTimeout time.Duration
	// Expiration forgets a transactional id idle for this long between
	// transactions. Default 7 days (transactional.id.expiration.ms);
	// negative: never.
	Expiration time.Duration
	// MarkerBackoff is the pause before writing markers again to partitions
	// that failed, and before a tick retries a log write that failed.
	// Default 100ms (Kafka's retry.backoff.ms).
	MarkerBackoff time.Duration
	// CompletionWait bounds how long EndTxn's answer waits, once the
	// decision is written, for the markers and the Complete state: a client
	// answered before its transaction completes meets
	// CONCURRENT_TRANSACTIONS on its next transaction's first request and
	// backs off (franz-go: 20 ms), usually longer than the markers take.
	// Default 100ms; negative: answer once the decision is written, as
	// Kafka does.
	CompletionWait time.Duration
}

// Defaults of Options.
const (
	DefaultMaxTimeout     = 15 * time.Minute
	DefaultExpiration     = 7 * 24 * time.Hour
	DefaultMarkerBackoff  = 100 * time.Millisecond
	DefaultCompletionWait = 100 * time.Millisecond
)

func (o Options) validate() (Options, error) {
	if o.ProducerIDs == nil || o.WriteMarkers == nil {
		return o, errors.New("txn: Options.ProducerIDs and Options.WriteMarkers are required")
	}
	if o.PartitionFor == nil {
		o.PartitionFor = func(string) int32 { return 0 }
	}
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.MaxTimeout == 0 {
		o.MaxTimeout = DefaultMaxTimeout
	}
	if o.Expiration == 0 {
		o.Expiration = DefaultExpiration
	}
	if o.MarkerBackoff == 0 {
		o.MarkerBackoff = DefaultMarkerBackoff
	}
	if o.CompletionWait == 0 {
		o.CompletionWait = DefaultCompletionWait
	}
	if o.MaxTimeout < 0 || o.MarkerBackoff < 0 {
		return o, fmt.Errorf("txn: MaxTimeout %v and MarkerBackoff %v must be positive", o.MaxTimeout, o.MarkerBackoff)
	}
	return o, nil
}

// Coordinator is the transaction coordinator of a broker: the machines of
// the partitions of __transaction_state it leads, under one mutex, with one
// timer set to the earliest deadline of any, the log writes and marker
// writes they ask for run on goroutines that step them again when done.
type Coordinator struct {
	o   Options
	cfg config

	mu       sync.Mutex
	closed   bool
	shards   map[int32]*shard
	waiters  map[uint64]waiter
	lastW    uint64
	timer    clock.Timer
	timerAt  time.Time
	timerSeq uint64

	ctx    context.Context // ends at Close: marker writes and waits stop
	cancel context.CancelFunc
	work   sync.WaitGroup // goroutines of writes and markers
}

// shard is a partition handed to the coordinator: loading while m is nil.
type shard struct {
	partition int32
	log       Log
	epoch     int32
	m         *machine
}

type waiter struct {
	ch        chan Reply
	partition int32
}

// New returns a coordinator that serves no transactional id until the
// partition holding it is loaded.
func New(o Options) (*Coordinator, error) {
	o, err := o.validate()
	if err != nil {
		return nil, err
	}
	c := &Coordinator{o: o, cfg: config{maxTimeout: o.MaxTimeout, expiration: max(o.Expiration, 0),
		markerBackoff: o.MarkerBackoff, completionWait: max(o.CompletionWait, 0)},
		shards: map[int32]*shard{}, waiters: map[uint64]waiter{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// StartLoad registers partition p of __transaction_state, whose log is log
// and whose leader epoch (the coordinator epoch its markers carry) is
// epoch, as loading: its ids get ErrCoordinatorLoadInProgress until the
// replay it returns has read the log to its end. Then every id is as its
// last record says; transactions in a Prepare state resume their markers,
// open ones keep their timeout. Starting the load of a partition loaded or
// loading with the same log and epoch does nothing (its replay returns nil
// at once); otherwise the old one is unloaded first. An Unload or Close
// before the replay ends abandons it (ErrNotCoordinator).
func (c *Coordinator) StartLoad(p int32, log Log, epoch int32) func(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return func(context.Context) error { return errClosed }
	}
	if sh := c.shards[p]; sh != nil {
		if sh.log == log && sh.epoch == epoch {
			return func(context.Context) error { return nil }
		}
		c.unloadLocked(p)
	}
	sh := &shard{partition: p, log: log, epoch: epoch}
	c.shards[p] = sh
	return func(ctx context.Context) error { return c.replay(ctx, sh) }
}

// Load is StartLoad and its replay.
func (c *Coordinator) Load(ctx context.Context, p int32, log Log, epoch int32) error {
	return c.StartLoad(p, log, epoch)(ctx)
}

func (c *Coordinator) replay(ctx context.Context, sh *shard) error {
	start := c.o.Clock.Now()
	states, records, err := readLog(ctx, sh.log)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shards[sh.partition] != sh || c.closed {
		return fmt.Errorf("%w: partition %d was unloaded while it loaded", ErrNotCoordinator, sh.partition)
	}
	if err != nil {
		delete(c.shards, sh.partition)
		return fmt.Errorf("txn: load partition %d: %w", sh.partition, err)
	}
	now := c.o.Clock.Now()
	sh.m = newMachine(&c.cfg, sh.epoch)
	sh.m.load(now, states)
	open, completing := 0, 0
	for _, e := range sh.m.txns {
		switch e.State {
		case Ongoing:
			open++
		case PrepareCommit, PrepareAbort:
			completing++
		}
	}
	c.o.Logger.Info("transaction log partition loaded", "partition", sh.partition, "coordinator_epoch", sh.epoch,
		"ids", len(sh.m.txns), "open", open, "completing", completing, "records", records, "took", now.Sub(start))
	c.process(sh)
	return nil
}

// readLog reads a partition's records into the last state of each id.
func readLog(ctx context.Context, log Log) (map[string]meta, int, error) {
	states := map[string]meta{}
	records := 0
	end := log.EndOffset()
	for off := log.StartOffset(); off < end; {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		sl, err := log.Read(off, 1<<20, end)
		if err != nil {
			return nil, 0, fmt.Errorf("txn: read the log at %d: %w", off, err)
		}
		b, err := sl.Bytes()
		next := sl.NextOffset
		sl.Release()
		if err != nil {
			return nil, 0, fmt.Errorf("txn: read the log at %d: %w", off, err)
		}
		if len(b) == 0 && next == 0 {
			break
		}
		if next <= off {
			return nil, 0, fmt.Errorf("%w: the log does not advance at %d", ErrCorrupt, off)
		}
		for len(b) > 0 {
			h, n, err := record.Next(b, 0)
			if err != nil {
				return nil, 0, fmt.Errorf("txn: the log at %d: %w", off, err)
			}
			if !h.Control() {
				recs, err := record.Records(b[:n], nil)
				if err != nil {
					return nil, 0, fmt.Errorf("txn: the log at %d: %w", h.BaseOffset, err)
				}
				for _, r := range recs {
					records++
					id, err := decodeKey(r.Key)
					if err != nil {
						return nil, 0, fmt.Errorf("txn: the log at %d: %w", h.BaseOffset+int64(r.OffsetDelta), err)
					}
					if r.Value == nil {
						delete(states, id)
						continue
					}
					m, err := decodeValue(r.Value)
					if err != nil {
						return nil, 0, fmt.Errorf("txn: the log at %d: %w", h.BaseOffset+int64(r.OffsetDelta), err)
					}
					states[id] = m
				}
			}
			b = b[n:]
		}
		off = next
	}
	return states, records, nil
}

// Unload stops serving the ids of partition p (this broker no longer leads
// it): parked requests are answered ErrNotCoordinator, writes and markers
// in flight are abandoned (the new leader resumes them from the log).
func (c *Coordinator) Unload(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unloadLocked(p)
}

func (c *Coordinator) unloadLocked(p int32) {
	if c.shards[p] == nil {
		return
	}
	delete(c.shards, p)
	for w, wt := range c.waiters {
		if wt.partition == p {
			wt.ch <- Reply{Waiter: w, Err: fmt.Errorf("%w: partition %d of the transaction log moved", ErrNotCoordinator, p)}
			delete(c.waiters, w)
		}
	}
	c.o.Logger.Info("transaction log partition unloaded", "partition", p)
}

// Loaded reports whether partition p is loaded (not merely loading).
func (c *Coordinator) Loaded(p int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh := c.shards[p]
	return sh != nil && sh.m != nil
}

// Close answers every parked request with ErrCoordinatorNotAvailable, stops
// the timer and the marker writes, and waits for its goroutines. The logs
// are the broker's.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	for w, wt := range c.waiters {
		wt.ch <- Reply{Waiter: w, Err: errClosed}
		delete(c.waiters, w)
	}
	clear(c.shards)
	c.cancel()
	c.mu.Unlock()
	c.work.Wait()
	return nil
}

var errClosed = fmt.Errorf("%w: closed", ErrCoordinatorNotAvailable)

// machineOf returns id's loaded shard, or why not. Called with mu held.
func (c *Coordinator) machineOf(id string) (*shard, error) {
	if c.closed {
		return nil, errClosed
	}
	p := c.o.PartitionFor(id)
	sh := c.shards[p]
	switch {
	case sh == nil:
		return nil, fmt.Errorf("%w: partition %d of the transaction log is not loaded here", ErrNotCoordinator, p)
	case sh.m == nil:
		return nil, fmt.Errorf("%w: partition %d of the transaction log", ErrCoordinatorLoadInProgress, p)
	}
	return sh, nil
}

// InitProducerID is InitProducerId with a transactional id: the producer
// id and epoch the producer is to use (see machine.initProducerID).
func (c *Coordinator) InitProducerID(ctx context.Context, r InitRequest) (int64, int16, error) {
	rep, err := c.do(ctx, r.ID, func(sh *shard, now time.Time, w uint64) (bool, error) {
		return sh.m.initProducerID(now, r, w, c.o.ProducerIDs)
	})
	if err != nil {
		return -1, -1, err
	}
	return rep.ProducerID, rep.Epoch, nil
}

// AddPartitions adds partitions to the producer's transaction, opening it
// when none is open (AddPartitionsToTxn, AddOffsetsToTxn).
func (c *Coordinator) AddPartitions(ctx context.Context, r AddRequest) error {
	_, err := c.do(ctx, r.ID, func(sh *shard, now time.Time, w uint64) (bool, error) {
		return sh.m.addPartitions(now, r, w)
	})
	return err
}

// EndTxn commits or aborts the producer's open transaction: it returns once
// the transaction is complete (its markers written), or once
// Options.CompletionWait has passed since the decision was committed to the
// log, whichever comes first; the markers then follow.
func (c *Coordinator) EndTxn(ctx context.Context, r EndRequest) error {
	_, err := c.do(ctx, r.ID, func(sh *shard, now time.Time, w uint64) (bool, error) {
		return sh.m.endTxn(now, r, w)
	})
	return err
}

// Verify reports, per partition of r, whether it is in the producer's open
// transaction (nil) or not (ErrInvalidTxnState); err is an error of the
// whole request.
func (c *Coordinator) Verify(r AddRequest) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, err := c.machineOf(r.ID)
	if err != nil {
		return nil, err
	}
	return sh.m.verify(r)
}

// do runs one request against id's machine and waits for its answer when
// the machine parks it.
func (c *Coordinator) do(ctx context.Context, id string, step func(sh *shard, now time.Time, w uint64) (bool, error)) (Reply, error) {
	c.mu.Lock()
	sh, err := c.machineOf(id)
	if err != nil {
		c.mu.Unlock()
		return Reply{}, err
	}
	c.lastW++
	w := c.lastW
	ch := make(chan Reply, 1)
	c.waiters[w] = waiter{ch: ch, partition: sh.partition}
	parked, err := step(sh, c.o.Clock.Now(), w)
	if !parked {
		delete(c.waiters, w)
	}
	c.process(sh)
	c.mu.Unlock()
	if !parked {
		return Reply{}, err
	}
	select {
	case r := <-ch:
		return r, r.Err
	case <-ctx.Done():
	}
	c.mu.Lock()
	delete(c.waiters, w)
	c.mu.Unlock()
	select {
	case r := <-ch:
		return r, r.Err
	default:
		// The state change goes on; the client retries and meets it.
		return Reply{}, ctx.Err()
	}
}

// process carries out what sh's machine asks, until it asks nothing more,
// and sets the timer for its next deadline. Called with mu held.
func (c *Coordinator) process(sh *shard) {
	for {
		rd := sh.m.ready()
		if rd.empty() {
			break
		}
		now := c.o.Clock.Now()
		for _, wr := range rd.Writes {
			c.write(sh, now, wr)
		}
		for _, mw := range rd.Markers {
			c.writeMarkers(sh, mw)
		}
		for _, r := range rd.Replies {
			if wt, ok := c.waiters[r.Waiter]; ok {
				delete(c.waiters, r.Waiter)
				wt.ch <- r
			}
		}
	}
	c.arm(sh.m.deadline())
}

// write appends one record and, on a goroutine, waits for it to commit and
// steps the machine with the outcome; a write the machine applies once
// appended (Write.ApplyOnAppend) steps it at once, and a failure of its
// commit is only logged (see machine.written). Called with mu held.
func (c *Coordinator) write(sh *shard, now time.Time, wr Write) {
	batch, err := record.Build(record.DefaultBuildOptions(),
		[]record.Record{{Key: wr.Key, Value: wr.Value, Timestamp: now.UnixMilli()}})
	var wait func(context.Context) error
	if err == nil {
		wait, err = sh.log.Append(c.ctx, batch)
	}
	if err != nil {
		sh.m.written(now, wr.ID, logError(sh.partition, err))
		return
	}
	if wr.ApplyOnAppend {
		sh.m.written(now, wr.ID, nil)
	}
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		err := wait(c.ctx)
		if wr.ApplyOnAppend {
			if err != nil && c.ctx.Err() == nil {
				c.o.Logger.Warn("transaction log write not committed (a reload writes the markers again)",
					"transactional_id", wr.ID, "partition", sh.partition, "err", err)
			}
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.shards[sh.partition] != sh || sh.m == nil {
			return
		}
		if err != nil {
			err = logError(sh.partition, err)
			c.o.Logger.Warn("transaction log write failed", "transactional_id", wr.ID, "partition", sh.partition, "err", err)
		}
		sh.m.written(c.o.Clock.Now(), wr.ID, err)
		c.process(sh)
	}()
}

// logError is the answer to a request whose state change could not be
// written: COORDINATOR_NOT_AVAILABLE, as Kafka answers for most log errors
// (the client retries, finding the coordinator again). The cause is in the
// text, not wrapped: its own Kafka code (NOT_LEADER_OR_FOLLOWER, say)
// would mislead a client of the coordinator.
func logError(p int32, err error) error {
	return fmt.Errorf("%w: writing partition %d of the transaction log: %v", ErrCoordinatorNotAvailable, p, err)
}

// writeMarkers writes a transaction's markers on a goroutine and steps the
// machine with the partitions done. Called with mu held.
func (c *Coordinator) writeMarkers(sh *shard, mw MarkerWrite) {
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		errs := c.o.WriteMarkers(c.ctx, mw.Marker, mw.Partitions)
		var done []TopicPartition
		for i, tp := range mw.Partitions {
			switch {
			case i < len(errs) && errs[i] == nil:
				done = append(done, tp)
			case loud(mw.Attempt):
				err := errors.New("no answer")
				if i < len(errs) {
					err = errs[i]
				}
				c.o.Logger.Warn("transaction marker not written; retrying", "transactional_id", mw.ID,
					"topic", tp.Topic, "partition", tp.Partition, "commit", mw.Marker.Commit,
					"attempt", mw.Attempt, "err", err)
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.shards[sh.partition] != sh || sh.m == nil {
			return
		}
		sh.m.marked(c.o.Clock.Now(), mw.ID, done)
		c.process(sh)
	}()
}

// loud reports whether a failure at attempt n is logged: the first, then
// the 10th, 100th... (a partition whose leader is down fails every
// MarkerBackoff until it is back).
func loud(n int) bool {
	for n >= 10 && n%10 == 0 {
		n /= 10
	}
	return n == 1
}

// arm makes the timer fire no later than at (zero: no deadline). Called
// with mu held.
func (c *Coordinator) arm(at time.Time) {
	if at.IsZero() || c.closed || c.timer != nil && !c.timerAt.After(at) {
		return
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	c.timerSeq++
	seq := c.timerSeq
	c.timerAt = at
	c.timer = c.o.Clock.AfterFunc(max(at.Sub(c.o.Clock.Now()), 0), func() { c.fire(seq) })
}

// fire ticks every loaded machine and re-arms the timer.
func (c *Coordinator) fire(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || seq != c.timerSeq {
		return
	}
	c.timer, c.timerAt = nil, time.Time{}
	now := c.o.Clock.Now()
	for _, p := range c.sortedShards() {
		sh := c.shards[p]
		if sh.m == nil {
			continue
		}
		sh.m.tick(now)
		c.process(sh)
	}
}

func (c *Coordinator) sortedShards() []int32 {
	ps := make([]int32, 0, len(c.shards))
	for p := range c.shards {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// Description is a transactional id's state as DescribeTransactions
// reports it.
type Description struct {
	ID         string
	ProducerID int64
	Epoch      int16
	State      Status
	Timeout    time.Duration
	Start      time.Time // zero: no transaction open
	Partitions []TopicPartition
}

// Describe returns the state of id: ErrTransactionalIDNotFound when the
// coordinator does not know it.
func (c *Coordinator) Describe(id string) (Description, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == "" {
		return Description{}, fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)
	}
	sh, err := c.machineOf(id)
	if err != nil {
		return Description{}, err
	}
	e := sh.m.txns[id]
	if e == nil || e.State == Dead || e.Epoch == noEpoch {
		return Description{}, fmt.Errorf("%w: %q", ErrTransactionalIDNotFound, id)
	}
	return Description{ID: id, ProducerID: e.ProducerID, Epoch: e.Epoch, State: e.State, Timeout: e.Timeout,
		Start: e.Start, Partitions: e.sortedPartitions()}, nil
}

// Listing is one transactional id as ListTransactions reports it.
type Listing struct {
	ID         string
	ProducerID int64
	State      Status
	Start      time.Time // zero: no transaction open
}

// Filter selects ids for List: by state and producer id (empty: any).
type Filter struct {
	States      []Status
	ProducerIDs []int64
}

// List returns the ids of every loaded partition that pass f, by id.
func (c *Coordinator) List(f Filter) []Listing {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Listing
	for _, sh := range c.shards {
		if sh.m == nil {
			continue
		}
		for id, e := range sh.m.txns {
			if e.State == Dead || e.Epoch == noEpoch ||
				len(f.States) > 0 && !slices.Contains(f.States, e.State) ||
				len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, e.ProducerID) {
				continue
			}
			out = append(out, Listing{ID: id, ProducerID: e.ProducerID, State: e.State, Start: e.Start})
		}
	}
	slices.SortFunc(out, func(a, b Listing) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}
