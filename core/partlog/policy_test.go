package partlog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs/errorfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// Tests of how the log calls its flush policy: outside its locks, one call at
// a time, in log order (see "Flushing and durability" in the package doc).

// within bounds every wait for something that must happen.
const within = 10 * time.Second

// await returns what c delivers, failing the test if nothing comes within
// the deadline.
func await[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(within):
		t.Fatalf("%s: nothing within %v", what, within)
		panic("unreachable")
	}
}

// goRun runs f in a goroutine and delivers its result.
func goRun[T any](f func() T) <-chan T {
	c := make(chan T, 1)
	go func() { c <- f() }()
	return c
}

type appendOutcome struct {
	res AppendResult
	err error
}

func appendAsync(l *Log, buf []byte) <-chan appendOutcome {
	return goRun(func() appendOutcome {
		res, err := l.Append(ctx, buf, 0)
		return appendOutcome{res, err}
	})
}

// checkBatchAt reads offset and checks it is served a batch starting there
// with n records.
func checkBatchAt(t *testing.T, l *Log, offset int64, n int32) {
	t.Helper()
	sl, err := l.Read(offset, 1<<20, NoLimit)
	if err != nil {
		t.Fatalf("read %d: %v", offset, err)
	}
	b, err := sl.Bytes()
	sl.Release()
	if err != nil {
		t.Fatalf("read %d: %v", offset, err)
	}
	bs, err := testbatch.Split(b)
	if err != nil || len(bs) == 0 {
		t.Fatalf("read %d: %d batches, %v", offset, len(bs), err)
	}
	if h, _ := record.ParseHeader(bs[0]); h.BaseOffset != offset || h.RecordCount != n {
		t.Fatalf("read %d: batch at %d with %d records, want %d records", offset, h.BaseOffset, h.RecordCount, n)
	}
}

// gatePolicy asks for an fsync after every append, records its calls in the
// order they start ("A<messages>/<unflushed messages>", "F<messages>"), and
// can make one call hang: the blockAppended-th Appended or the
// blockFlushed-th Flushed (1-based; 0: none) closes entered and waits for
// unblock.
type gatePolicy struct {
	blockAppended, blockFlushed int
	entered                     chan struct{}
	release                     chan struct{}
	releaseOnce                 sync.Once

	mu     sync.Mutex
	calls  []string
	nA, nF int
	in     int // calls in progress
	maxIn  int
}

func newGatePolicy(blockAppended, blockFlushed int) *gatePolicy {
	return &gatePolicy{blockAppended: blockAppended, blockFlushed: blockFlushed,
		entered: make(chan struct{}), release: make(chan struct{})}
}

func (p *gatePolicy) unblock() { p.releaseOnce.Do(func() { close(p.release) }) }

func (p *gatePolicy) call(name string, appended bool) {
	p.mu.Lock()
	p.in++
	p.maxIn = max(p.maxIn, p.in)
	p.calls = append(p.calls, name)
	var block bool
	if appended {
		p.nA++
		block = p.nA == p.blockAppended
	} else {
		p.nF++
		block = p.nF == p.blockFlushed
	}
	p.mu.Unlock()
	if block {
		close(p.entered)
		<-p.release
	}
	p.mu.Lock()
	p.in--
	p.mu.Unlock()
}

func (p *gatePolicy) Appended(_ context.Context, a flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	p.call(fmt.Sprintf("A%d/%d", a.Messages, a.UnflushedMessages), true)
	return flushpolicy.Decision{Flush: true}, nil
}

func (p *gatePolicy) Flushed(_ context.Context, f flushpolicy.FlushInfo) error {
	p.call(fmt.Sprintf("F%d", f.Messages), false)
	return nil
}

// check compares the calls started so far with want, and checks that no two
// ever overlapped.
func (p *gatePolicy) check(t *testing.T, want ...string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Equal(p.calls, want) {
		t.Fatalf("policy calls %v, want %v", p.calls, want)
	}
	if p.maxIn > 1 {
		t.Fatalf("%d policy calls overlapped", p.maxIn)
	}
}

// A flush policy whose Appended hangs (an external plugin that stopped
// answering) holds up only the appends whose own policy call is queued behind
// it. An earlier append whose call had returned finishes its fsync and
// returns; the hung append's records, and a later one's, are published
// (EndOffset, Read, and a long poll woken by the later append); a durable
// Flush of all of them returns. The later append returns only once the hung
// call did, and the policy hears every call once, in log order.
func TestPolicyAppendedHangs(t *testing.T) {
	mem := memFS(t)
	var armed atomic.Bool
	syncing, syncGo := make(chan struct{}), make(chan struct{})
	var syncOnce sync.Once
	letSync := func() { syncOnce.Do(func() { close(syncGo) }) }
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if op == errorfs.OpSync && strings.HasSuffix(path, ".log") && armed.CompareAndSwap(true, false) {
			close(syncing)
			<-syncGo
		}
		return nil
	}))
	pol := newGatePolicy(2, 0)
	l, _ := mustOpen(t, fs, Config{FlushPolicy: pol})
	defer l.Close()
	defer letSync()
	defer pol.unblock() // first: let everything finish before Close

	// A1 (offset 0): its Appended answers at once, asking for an fsync,
	// which the file system holds.
	armed.Store(true)
	a1 := appendAsync(l, batch(1, 1, 50))
	await(t, syncing, "A1's fsync")
	// A2 (offsets 1-2): its Appended hangs.
	a2 := appendAsync(l, batch(2, 2, 50))
	await(t, pol.entered, "A2's Appended call")

	// A1 does not need A2's policy call: its fsync finishes and it returns.
	letSync()
	r1 := await(t, a1, "A1 while A2's policy call hangs")
	if r1.err != nil || !r1.res.Flushed || r1.res.NextOffset != 1 || l.FlushedOffset() < 1 {
		t.Fatalf("A1: %+v, %v; flushed %d", r1.res, r1.err, l.FlushedOffset())
	}
	if err := await(t, goRun(func() error { return l.FlushAppended(ctx, r1.res) }), "FlushAppended of A1"); err != nil {
		t.Fatal(err)
	}

	// A2's records are published before its policy call.
	if got := l.EndOffset(); got != 3 {
		t.Fatalf("EndOffset %d while A2's policy call hangs, want 3", got)
	}
	checkBatchAt(t, l, 1, 2)
	// A long poll: take the channel, look at the end, wait for an append.
	wake := await(t, goRun(l.Wait), "Wait")
	if got := l.EndOffset(); got != 3 {
		t.Fatalf("EndOffset %d", got)
	}
	a3 := appendAsync(l, batch(3, 3, 50)) // A3: offsets 3-5
	await(t, wake, "a long poll woken by A3")
	if got := l.EndOffset(); got != 6 {
		t.Fatalf("EndOffset %d after A3, want 6", got)
	}
	checkBatchAt(t, l, 3, 3)
	// A durable flush of everything appended.
	if err := await(t, goRun(func() error { return l.Flush(l.EndOffset()) }), "Flush of A2 and A3"); err != nil {
		t.Fatal(err)
	}
	if got := l.FlushedOffset(); got != 6 {
		t.Fatalf("FlushedOffset %d after Flush, want 6", got)
	}

	// A3's policy call comes after A2's: it has not started, so A3 has not
	// returned.
	select {
	case r := <-a3:
		t.Fatalf("A3 returned (%+v, %v) before its policy call", r.res, r.err)
	default:
	}
	pol.check(t, "A1/1", "A2/3")

	pol.unblock()
	for i, a := range []<-chan appendOutcome{a2, a3} {
		r := await(t, a, fmt.Sprintf("A%d after the policy call returned", i+2))
		if r.err != nil || !r.res.Flushed || r.res.BaseOffset != []int64{1, 3}[i] {
			t.Fatalf("A%d: %+v, %v", i+2, r.res, r.err)
		}
	}
	// A2's Appended saw A1's record unflushed (A1's fsync was running);
	// the policy then hears of that fsync, then A3, then the Flush.
	pol.check(t, "A1/1", "A2/3", "F1", "A3/5", "F5")
}

// A flush policy whose Flushed hangs holds up no Flush and no fsync's
// caller: an append whose policy asked for an fsync returns after it without
// telling the policy. The next append's call (which comes after telling the
// policy of that fsync) waits, but its records are published, and a durable
// Flush of them returns.
func TestPolicyFlushedHangs(t *testing.T) {
	pol := newGatePolicy(0, 1)
	l, _ := mustOpen(t, memFS(t), Config{FlushPolicy: pol})
	defer l.Close()
	defer pol.unblock()

	r1 := await(t, appendAsync(l, batch(1, 1, 50)), "A1, whose policy asked for an fsync")
	if r1.err != nil || !r1.res.Flushed || l.FlushedOffset() != 1 {
		t.Fatalf("A1: %+v, %v; flushed %d", r1.res, r1.err, l.FlushedOffset())
	}
	// A2 first tells the policy of A1's fsync, which hangs.
	a2 := appendAsync(l, batch(2, 2, 50))
	await(t, pol.entered, "Flushed of A1's fsync")

	if got := l.EndOffset(); got != 3 {
		t.Fatalf("EndOffset %d while the policy's Flushed hangs, want 3", got)
	}
	checkBatchAt(t, l, 1, 2)
	wake := await(t, goRun(l.Wait), "Wait")
	a3 := appendAsync(l, batch(3, 3, 50))
	await(t, wake, "a long poll woken by A3")
	if got := l.EndOffset(); got != 6 {
		t.Fatalf("EndOffset %d after A3, want 6", got)
	}
	checkBatchAt(t, l, 3, 3)
	if err := await(t, goRun(func() error { return l.Flush(l.EndOffset()) }), "Flush of A2 and A3"); err != nil {
		t.Fatal(err)
	}
	if got := l.FlushedOffset(); got != 6 {
		t.Fatalf("FlushedOffset %d after Flush, want 6", got)
	}
	if err := await(t, goRun(func() error { return l.FlushAppended(ctx, r1.res) }), "FlushAppended of A1"); err != nil {
		t.Fatal(err)
	}
	for i, a := range []<-chan appendOutcome{a2, a3} {
		select {
		case r := <-a:
			t.Fatalf("A%d returned (%+v, %v) before its policy call", i+2, r.res, r.err)
		default:
		}
	}
	pol.check(t, "A1/1", "F1")

	pol.unblock()
	for i, a := range []<-chan appendOutcome{a2, a3} {
		if r := await(t, a, fmt.Sprintf("A%d", i+2)); r.err != nil || !r.res.Flushed {
			t.Fatalf("A%d: %+v, %v", i+2, r.res, r.err)
		}
	}
	pol.check(t, "A1/1", "F1", "A2/2", "A3/5", "F5")
}

// Close does not wait for a policy call in progress; the append that made
// it returns afterwards, covered by Close's fsync.
func TestCloseDoesNotWaitForPolicy(t *testing.T) {
	pol := newGatePolicy(1, 0)
	l, _ := mustOpen(t, memFS(t), Config{FlushPolicy: pol})
	defer pol.unblock()
	a1 := appendAsync(l, batch(1, 1, 50))
	await(t, pol.entered, "A1's Appended call")
	if err := await(t, goRun(l.Close), "Close while a policy call hangs"); err != nil {
		t.Fatal(err)
	}
	pol.unblock()
	if r := await(t, a1, "A1"); r.err != nil || !r.res.Flushed {
		t.Fatalf("A1: %+v, %v", r.res, r.err)
	}
	if _, err := l.Append(ctx, batch(2, 1, 50), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Close: %v", err)
	}
	pol.check(t, "A1/1")
}

// Readers and long polls take none of the writer's locks: Wait, EndOffset,
// FlushedOffset and Read proceed while appendMu, syncMu and statMu are all
// held (as an append, an fsync and a recovery hold them).
func TestReadersTakeNoWriterLocks(t *testing.T) {
	l, _ := mustOpen(t, memFS(t), Config{})
	defer l.Close()
	if _, err := l.Append(ctx, batch(1, 2, 50), 0); err != nil {
		t.Fatal(err)
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.statMu.Lock()
	defer l.statMu.Unlock()
	err := await(t, goRun(func() error {
		wake := l.Wait()
		if got := l.EndOffset(); got != 2 {
			return fmt.Errorf("EndOffset %d, want 2", got)
		}
		if got := l.FlushedOffset(); got != 0 {
			return fmt.Errorf("FlushedOffset %d, want 0", got)
		}
		sl, err := l.Read(0, 1<<20, NoLimit)
		if err != nil {
			return err
		}
		sl.Release()
		if sl.NextOffset != 2 {
			return fmt.Errorf("read 0 up to %d, want 2", sl.NextOffset)
		}
		select {
		case <-wake:
			return errors.New("Wait's channel closed with no append")
		default:
		}
		return nil
	}), "Wait, EndOffset, FlushedOffset and Read with the writer's locks held")
	if err != nil {
		t.Fatal(err)
	}
}

// replayPolicy records its calls and checks, replaying them, that it hears
// the log's history in order: each AppendInfo's unflushed count is the sum
// of the appends told since, less what the fsyncs told since covered. It asks
// for an fsync once 20 records are unflushed.
type replayPolicy struct {
	mu        sync.Mutex
	in, maxIn int
	unflushed int64
	appended  int
	flushed   int
	err       error
}

func (p *replayPolicy) enter() {
	p.mu.Lock()
	p.in++
	p.maxIn = max(p.maxIn, p.in)
}

func (p *replayPolicy) leave() { p.in--; p.mu.Unlock() }

func (p *replayPolicy) Appended(_ context.Context, a flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	p.enter()
	defer p.leave()
	p.appended++
	p.unflushed += a.Messages
	if p.unflushed != a.UnflushedMessages && p.err == nil {
		p.err = fmt.Errorf("Appended %d: unflushed %d, replayed calls say %d", p.appended, a.UnflushedMessages, p.unflushed)
	}
	return flushpolicy.Decision{Flush: a.UnflushedMessages >= 20}, nil
}

func (p *replayPolicy) Flushed(_ context.Context, f flushpolicy.FlushInfo) error {
	p.enter()
	defer p.leave()
	p.flushed++
	p.unflushed -= f.Messages
	return nil
}

// With concurrent appenders and durable flushes, the policy hears every
// append once, one call at a time, in log order, interleaved with the fsyncs
// in the order they happened.
func TestPolicyCallsInLogOrder(t *testing.T) {
	pol := &replayPolicy{}
	l, _ := mustOpen(t, memFS(t), Config{FlushPolicy: pol})
	const appenders, each = 4, 150
	stop := make(chan struct{})
	flusher := goRun(func() error {
		for {
			select {
			case <-stop:
				return nil
			default:
			}
			if err := l.Flush(l.EndOffset()); err != nil {
				return err
			}
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, appenders)
	for g := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range each {
				if _, err := l.Append(ctx, batch(g*each+i, 1+r.IntN(3), 20), 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := await(t, flusher, "flusher"); err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	pol.mu.Lock()
	defer pol.mu.Unlock()
	if pol.err != nil {
		t.Fatal(pol.err)
	}
	if pol.appended != appenders*each || pol.maxIn != 1 || pol.flushed == 0 {
		t.Fatalf("policy heard %d appends (want %d) and %d fsyncs, up to %d calls at once",
			pol.appended, appenders*each, pol.flushed, pol.maxIn)
	}
}
