package txn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/clock/clocktest"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

// testLog is a partition log as the coordinator's Log.
type testLog struct{ *partlog.Log }

func (l testLog) Append(ctx context.Context, b []byte) (func(context.Context) error, error) {
	if _, err := l.Log.Append(ctx, b, 0); err != nil {
		return nil, err
	}
	return func(context.Context) error { return nil }, nil
}

func openTestLog(t *testing.T, fsys vfs.FS) testLog {
	t.Helper()
	l, _, err := partlog.Open(fsys, "/txn-0", partlog.Config{RetentionAge: -1, Logger: quiet()})
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return testLog{l}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// markerLog is a fake MarkerWriter: it records every marker asked for and
// fails while failing is set.
type markerLog struct {
	mu      sync.Mutex
	failing bool
	written []Marker // one per partition written
}

func (w *markerLog) write(_ context.Context, m Marker, parts []TopicPartition) []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	errs := make([]error, len(parts))
	for i := range parts {
		if w.failing {
			errs[i] = errors.New("leader not available")
			continue
		}
		w.written = append(w.written, m)
	}
	return errs
}

func (w *markerLog) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.written)
}

func (w *markerLog) setFailing(f bool) {
	w.mu.Lock()
	w.failing = f
	w.mu.Unlock()
}

type coordEnv struct {
	t       *testing.T
	clk     *clocktest.Clock
	fs      *vfs.MemFS
	markers *markerLog
	pid     int64
	mu      sync.Mutex
}

func newCoordEnv(t *testing.T) *coordEnv {
	return &coordEnv{t: t, clk: clocktest.New(t0), fs: vfs.NewMem(), markers: &markerLog{}, pid: 5000}
}

// open starts a coordinator on the env's log at coordinator epoch epoch
// (a broker's start).
func (env *coordEnv) open(epoch int32) (*Coordinator, testLog) {
	env.t.Helper()
	c, err := New(Options{Clock: env.clk, Logger: quiet(), WriteMarkers: env.markers.write,
		ProducerIDs: func() (int64, error) {
			env.mu.Lock()
			defer env.mu.Unlock()
			env.pid++
			return env.pid, nil
		}})
	if err != nil {
		env.t.Fatal(err)
	}
	l := openTestLog(env.t, env.fs)
	if err := c.Load(context.Background(), 0, l, epoch); err != nil {
		env.t.Fatalf("load: %v", err)
	}
	return c, l
}

// eventually polls cond until it holds, failing after 10s of wall time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

func stateOf(c *Coordinator, id string) Status {
	d, err := c.Describe(id)
	if err != nil {
		return -1
	}
	return d.State
}

func TestCoordinatorCommitAndRestart(t *testing.T) {
	env := newCoordEnv(t)
	ctx := context.Background()
	c, l := env.open(3)
	pid, epoch, err := c.InitProducerID(ctx, InitRequest{ID: "tx", Timeout: time.Minute, ProducerID: -1, Epoch: -1})
	if err != nil || epoch != 0 {
		t.Fatalf("InitProducerID = %d, %d, %v", pid, epoch, err)
	}
	parts := []TopicPartition{tp("out", 0), tp("out", 1)}
	if err := c.AddPartitions(ctx, AddRequest{ID: "tx", ProducerID: pid, Epoch: epoch, Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	if errs, err := c.Verify(AddRequest{ID: "tx", ProducerID: pid, Epoch: epoch, Partitions: parts}); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("Verify: %v, %v", errs, err)
	}
	if err := c.EndTxn(ctx, EndRequest{ID: "tx", ProducerID: pid, Epoch: epoch, Commit: true}); err != nil {
		t.Fatal(err)
	}
	// Answered once complete: the markers written.
	if s := stateOf(c, "tx"); s != CompleteCommit {
		t.Fatalf("EndTxn answered in %v, want CompleteCommit", s)
	}
	if n := env.markers.count(); n != 2 {
		t.Fatalf("%d markers written, want 2", n)
	}
	if m := env.markers.written[0]; m != (Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: true, CoordinatorEpoch: 3}) {
		t.Fatalf("marker %+v", m)
	}
	if ls := c.List(Filter{States: []Status{CompleteCommit}}); len(ls) != 1 || ls[0].ID != "tx" || ls[0].ProducerID != pid {
		t.Fatalf("List = %+v", ls)
	}
	if ls := c.List(Filter{ProducerIDs: []int64{pid + 1}}); len(ls) != 0 {
		t.Fatalf("List by another producer id = %+v", ls)
	}

	// A second transaction, open at the restart; its markers fail.
	if err := c.AddPartitions(ctx, AddRequest{ID: "tx", ProducerID: pid, Epoch: epoch, Partitions: parts[:1]}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	l.Close()
	env.clk.Advance(time.Second)
	c, l = env.open(4)
	d, err := c.Describe("tx")
	if err != nil || d.State != Ongoing || d.ProducerID != pid || d.Epoch != epoch || len(d.Partitions) != 1 ||
		!d.Start.Equal(t0.Truncate(time.Millisecond)) {
		t.Fatalf("after the restart: %+v, %v", d, err)
	}
	// Its timeout, from its start, aborts it, fencing the producer.
	env.clk.Advance(time.Minute - time.Second)
	eventually(t, "CompleteAbort after the timeout", func() bool { return stateOf(c, "tx") == CompleteAbort })
	if m := env.markers.written[len(env.markers.written)-1]; m.Commit || m.ProducerEpoch != epoch+1 || m.CoordinatorEpoch != 4 {
		t.Fatalf("abort marker %+v", m)
	}
	err = c.EndTxn(ctx, EndRequest{ID: "tx", ProducerID: pid, Epoch: epoch, Commit: true})
	if !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("EndTxn of the timed-out producer: %v", err)
	}

	// A commit whose markers cannot be written: resumed by the next load.
	_, epoch, _ = c.InitProducerID(ctx, InitRequest{ID: "tx", Timeout: time.Minute, ProducerID: -1, Epoch: -1})
	if err := c.AddPartitions(ctx, AddRequest{ID: "tx", ProducerID: pid, Epoch: epoch, Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	env.markers.setFailing(true)
	ended := make(chan error, 1)
	go func() { ended <- c.EndTxn(ctx, EndRequest{ID: "tx", ProducerID: pid, Epoch: epoch, Commit: true}) }()
	// The answer waits for the markers, up to CompletionWait.
	eventually(t, "PrepareCommit", func() bool { return stateOf(c, "tx") == PrepareCommit })
	select {
	case err := <-ended:
		t.Fatalf("EndTxn answered (%v) with its markers failing, before CompletionWait", err)
	default:
	}
	env.clk.Advance(DefaultCompletionWait)
	if err := <-ended; err != nil {
		t.Fatalf("EndTxn after CompletionWait: %v", err)
	}
	env.clk.Advance(time.Second) // retries, failing
	if s := stateOf(c, "tx"); s != PrepareCommit {
		t.Fatalf("with markers failing: %v", s)
	}
	c.Close()
	l.Close()
	env.markers.setFailing(false)
	before := env.markers.count()
	c, _ = env.open(5)
	eventually(t, "CompleteCommit after the reload", func() bool { return stateOf(c, "tx") == CompleteCommit })
	if n := env.markers.count() - before; n != 2 {
		t.Fatalf("%d markers written after the reload, want 2", n)
	}
	c.Close()
}

func TestCoordinatorNotLoaded(t *testing.T) {
	env := newCoordEnv(t)
	c, err := New(Options{Clock: env.clk, Logger: quiet(), WriteMarkers: env.markers.write,
		ProducerIDs:  func() (int64, error) { return 1, nil },
		PartitionFor: func(id string) int32 { return int32(len(id)) }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	_, _, err = c.InitProducerID(ctx, InitRequest{ID: "x", Timeout: time.Minute, ProducerID: -1})
	if !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("InitProducerID of an id not loaded: %v", err)
	}
	replay := c.StartLoad(1, openTestLog(t, env.fs), 0)
	_, _, err = c.InitProducerID(ctx, InitRequest{ID: "x", Timeout: time.Minute, ProducerID: -1})
	if !errors.Is(err, ErrCoordinatorLoadInProgress) {
		t.Fatalf("InitProducerID while loading: %v", err)
	}
	if err := replay(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err = c.InitProducerID(ctx, InitRequest{ID: "x", Timeout: time.Minute, ProducerID: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Describe("y"); !errors.Is(err, ErrTransactionalIDNotFound) {
		t.Fatalf("Describe of an unknown id: %v", err)
	}
	c.Unload(1)
	if _, err := c.Describe("x"); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("Describe after Unload: %v", err)
	}
}

func TestCoordinatorCorruptLog(t *testing.T) {
	env := newCoordEnv(t)
	c, l := env.open(0)
	// A record of another key version.
	if _, err := l.Append(context.Background(), mustBatch(t, []byte{0, 9, 0, 0}, []byte{0, 0})); err != nil {
		t.Fatal(err)
	}
	c.Close()
	l.Close()
	c2, err := New(Options{Clock: env.clk, Logger: quiet(), WriteMarkers: env.markers.write,
		ProducerIDs: func() (int64, error) { return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.Load(context.Background(), 0, openTestLog(t, env.fs), 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of a corrupt log: %v", err)
	}
	if c2.Loaded(0) {
		t.Fatal("a partition that failed to load counts as loaded")
	}
}

func mustBatch(t *testing.T, key, value []byte) []byte {
	t.Helper()
	b, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Key: key, Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoud(t *testing.T) {
	for n, want := range map[int]bool{1: true, 2: false, 9: false, 10: true, 11: false, 20: false, 100: true, 1000: true, 1010: false} {
		if got := loud(n); got != want {
			t.Errorf("loud(%d) = %v, want %v", n, got, want)
		}
	}
}

// heldLog is a testLog whose commits of Complete states wait until release
// is closed.
type heldLog struct {
	testLog
	release chan struct{}
}

func (l heldLog) Append(ctx context.Context, b []byte) (func(context.Context) error, error) {
	wait, err := l.testLog.Append(ctx, b)
	if err != nil {
		return nil, err
	}
	recs, err := record.Records(b, nil)
	if err != nil || len(recs) != 1 {
		return nil, fmt.Errorf("heldLog: %d records, %v", len(recs), err)
	}
	if m, err := decodeValue(recs[0].Value); err == nil && (m.State == CompleteCommit || m.State == CompleteAbort) {
		return func(ctx context.Context) error {
			select {
			case <-l.release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return wait(ctx)
		}, nil
	}
	return wait, nil
}

// TestCoordinatorCompleteOnAppend: a Complete state is applied once its
// record is appended, without waiting for its commit, so EndTxn is answered
// and the next transaction opens while it is not yet committed; the next
// transaction's record comes after it in the log.
func TestCoordinatorCompleteOnAppend(t *testing.T) {
	env := newCoordEnv(t)
	ctx := context.Background()
	c, err := New(Options{Clock: env.clk, Logger: quiet(), WriteMarkers: env.markers.write,
		ProducerIDs: func() (int64, error) { return 77, nil }})
	if err != nil {
		t.Fatal(err)
	}
	l := heldLog{openTestLog(t, env.fs), make(chan struct{})}
	if err := c.Load(ctx, 0, l, 1); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := c.InitProducerID(ctx, InitRequest{ID: "tx", Timeout: time.Minute, ProducerID: -1, Epoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	add := AddRequest{ID: "tx", ProducerID: pid, Epoch: epoch, Partitions: []TopicPartition{tp("out", 0)}}
	if err := c.AddPartitions(ctx, add); err != nil {
		t.Fatal(err)
	}
	// The clock stands still: CompletionWait never passes, and without the
	// completion EndTxn would only end with its context.
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.EndTxn(ectx, EndRequest{ID: "tx", ProducerID: pid, Epoch: epoch, Commit: true}); err != nil {
		t.Fatalf("EndTxn with the CompleteCommit record not committed: %v", err)
	}
	if s := stateOf(c, "tx"); s != CompleteCommit {
		t.Fatalf("EndTxn answered in %v with the CompleteCommit record not committed; want CompleteCommit", s)
	}
	if err := c.AddPartitions(ctx, add); err != nil {
		t.Fatalf("the next transaction: %v", err)
	}
	close(l.release)
	states, _, err := readLog(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	var got []Status
	for off := int64(0); off < l.EndOffset(); off++ {
		sl, err := l.Read(off, 1<<20, off+1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := sl.Bytes()
		sl.Release()
		recs, err := record.Records(b, nil)
		if err != nil || len(recs) != 1 {
			t.Fatalf("offset %d: %d records, %v", off, len(recs), err)
		}
		m, _ := decodeValue(recs[0].Value)
		got = append(got, m.State)
	}
	want := []Status{Empty, Ongoing, PrepareCommit, CompleteCommit, Ongoing}
	if !slices.Equal(got, want) || states["tx"].State != Ongoing {
		t.Fatalf("the log holds %v (last %v); want %v", got, states["tx"].State, want)
	}
	c.Close()
}
