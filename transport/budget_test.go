package transport

import (
	"context"
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-broker/weir/node"
)

// Tests of Config.MaxQueuedRequestBytes, the bound on the request bytes of
// all connections together.

// produceGate holds every Produce request before it is handled until open
// is called (or the connection ends).
type produceGate struct {
	once sync.Once
	ch   chan struct{}
}

func newProduceGate() *produceGate { return &produceGate{ch: make(chan struct{})} }

func (g *produceGate) hook(ctx context.Context, key int16) {
	if key != produceKey {
		return
	}
	select {
	case <-g.ch:
	case <-ctx.Done():
	}
}

func (g *produceGate) open() { g.once.Do(func() { close(g.ch) }) }

// Many connections pipelining large Produce requests, with their handling
// held back so that everything they send piles up: the broker reads only as
// much as the bound allows, every reader then waiting; once the requests are
// handled, all are served.
func TestMaxQueuedRequestBytes(t *testing.T) {
	const (
		bound  = 1 << 20
		conns  = 8
		perCon = 6
	)
	gate := newProduceGate()
	t.Cleanup(gate.open)
	b := startBroker(t, withSeams(&seams{beforeHandle: gate.hook}), func(c *Config, _ *node.Config) {
		c.MaxRequestBytes = bound
		c.MaxQueuedRequestBytes = bound
		c.MaxInFlightRequests = 4 // per connection: 4 x 200 KiB, 8 connections: 6 MiB unbounded
	})
	b.createTopic(t, "t", 1, nil)
	records := batchOf(t, 1, 200<<10, 1)
	req := produceReq(7, 1, "t", 0, records)

	clients := make([]*rawConn, conns)
	var writers sync.WaitGroup
	for i := range clients {
		rc := b.dial(t)
		clients[i] = rc
		var out []byte
		for j := range perCon {
			out = append(out, frame(req, int32(j), nil)...)
		}
		writers.Add(1)
		go func() { // blocks while the broker holds the connection back
			defer writers.Done()
			rc.c.Write(out)
		}()
	}
	st := pollStats(t, b.s, "every connection to be held back", func(st []ConnStats) bool {
		if len(st) < conns {
			return false
		}
		for _, cs := range st {
			if !cs.HeldBack {
				return false
			}
		}
		return true
	})
	var sum int64
	for _, cs := range st {
		sum += cs.ReservedBytes
	}
	if sum > bound {
		t.Errorf("the connections hold %d request bytes together, bound %d: %+v", sum, bound, st)
	}
	if bs := b.s.RequestBudget(); bs.Used > bound || bs.Used < bound-int64(len(records))-1000 || bs.Waiting == 0 {
		t.Errorf("budget %+v: want about %d used and readers waiting", bs, bound)
	}

	gate.open()
	for i, rc := range clients {
		for j := range perCon {
			resp := rc.recv(req, int32(j)).(*kmsg.ProduceResponse)
			if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("connection %d, request %d: error %d", i, j, code)
			}
		}
	}
	writers.Wait()
	p, _ := b.node.Partition("t", 0)
	if end := p.Stats().LogEndOffset; end != conns*perCon {
		t.Fatalf("log end %d, want %d", end, conns*perCon)
	}
	// Every request was handled before its answer was written.
	if bs := b.s.RequestBudget(); bs.Used != 0 || bs.Peak > bound || bs.Waits == 0 || bs.Waiting != 0 {
		t.Errorf("budget after all answers %+v: want nothing used, a peak within %d, waits", bs, bound)
	}
}

// A connection whose next frame does not fit beside its own earlier ones
// waits for them to be handled, not forever: its frames are handled without
// it reading more, and their bytes are given back before their answers are
// written, so a client that reads no answer until it has sent everything is
// served too.
func TestRequestBudgetOwnFrames(t *testing.T) {
	const bound = 1 << 20
	// The first request is handled only once the reader waits for room
	// (two 400 KiB frames held, the third does not fit).
	var first sync.Once
	var srv atomic.Pointer[Server] // set once the server exists
	bs := func() RequestBudgetStats { return srv.Load().RequestBudget() }
	hook := func(ctx context.Context, _ int16) {
		first.Do(func() {
			deadline := time.Now().Add(20 * time.Second)
			for bs().Waiting == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
				runtime.Gosched() // polling, bounded by the deadline
			}
		})
	}
	b := startBroker(t, withSeams(&seams{beforeHandle: hook}), func(c *Config, _ *node.Config) {
		c.MaxRequestBytes = bound
		c.MaxQueuedRequestBytes = bound
		c.MaxInFlightRequests = 8
	})
	srv.Store(b.s)
	b.createTopic(t, "t", 1, nil)
	req := produceReq(7, 1, "t", 0, batchOf(t, 1, 400<<10, 1))
	var out []byte
	for i := range 10 {
		out = append(out, frame(req, int32(i), nil)...)
	}
	rc := b.dial(t)
	rc.write(out) // all of it before reading anything
	for i := range 10 {
		if code := rc.recv(req, int32(i)).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("request %d: error %d", i, code)
		}
	}
	if bs := b.s.RequestBudget(); bs.Waits == 0 || bs.Peak > bound || bs.Used != 0 {
		t.Errorf("budget %+v: want waits, a peak within %d, nothing used", bs, bound)
	}
}

// Control requests go ahead of a Produce waiting for room (some, like
// JoinGroup, complete only when other connections' requests are read), but
// a Produce never overtakes another.
func TestRequestBudgetOrder(t *testing.T) {
	const bound = 1 << 20
	gate := newProduceGate()
	t.Cleanup(gate.open)
	b := startBroker(t, withSeams(&seams{beforeHandle: gate.hook}), func(c *Config, _ *node.Config) {
		c.MaxRequestBytes = bound
		c.MaxQueuedRequestBytes = bound
	})
	b.createTopic(t, "t", 1, nil)
	big := produceReq(7, 1, "t", 0, batchOf(t, 1, 400<<10, 1))
	small := produceReq(7, 1, "t", 0, batchOf(t, 1, 10<<10, 2))
	var held []*rawConn
	for range 2 { // 800 KiB held, their handling gated
		rc := b.dial(t)
		rc.write(frame(big, 1, nil))
		held = append(held, rc)
	}
	pollBudget(t, b.s, "two large frames to be held", func(bs RequestBudgetStats) bool { return bs.Used > 800<<10 })
	waiter := b.dial(t) // a third: no room
	waiter.write(frame(big, 1, nil))
	pollBudget(t, b.s, "the third to wait", func(bs RequestBudgetStats) bool { return bs.Waiting == 1 })
	late := b.dial(t) // fits, but must not overtake the third
	late.write(frame(small, 1, nil))
	pollBudget(t, b.s, "the small one to queue behind it", func(bs RequestBudgetStats) bool { return bs.Waiting == 2 })

	// A control request fits and goes ahead.
	meta := b.dial(t).do(&kmsg.MetadataRequest{Version: 4}).(*kmsg.MetadataResponse)
	if len(meta.Topics) != 1 {
		t.Fatalf("metadata while Produce waits: %d topics", len(meta.Topics))
	}
	if bs := b.s.RequestBudget(); bs.Waiting != 2 {
		t.Fatalf("budget %+v: the waiting Produce frames were admitted out of order", bs)
	}
	gate.open()
	for _, rc := range append(held, waiter) {
		rc.recv(big, 1)
	}
	late.recv(small, 1)
}

// Whatever ends a request, its bytes go back to the budget: a client that
// stalls in the middle of a frame and goes, a handler that panics, and
// frames dropped after a request that closes the connection.
func TestRequestBudgetReleasedOnEveryPath(t *testing.T) {
	var panicKey, waitKey atomic.Int32
	panicKey.Store(-2)
	waitKey.Store(-2)
	var srv atomic.Pointer[Server] // set once the server exists
	bs := func() RequestBudgetStats { return srv.Load().RequestBudget() }
	hook := func(ctx context.Context, key int16) {
		if int32(key) == panicKey.Load() {
			panic("test: handler panics")
		}
		if int32(key) == waitKey.Load() { // until the frame after it is read
			deadline := time.Now().Add(20 * time.Second)
			for bs().Used < 100<<10 && time.Now().Before(deadline) && ctx.Err() == nil {
				runtime.Gosched() // polling, bounded by the deadline
			}
		}
	}
	b := startBroker(t, withSeams(&seams{beforeHandle: hook}))
	srv.Store(b.s)
	b.createTopic(t, "t", 1, nil)
	empty := func(what string) {
		t.Helper()
		pollBudget(t, b.s, what, func(bs RequestBudgetStats) bool { return bs.Used == 0 && bs.Waiting == 0 })
	}

	t.Run("stalled mid-frame", func(t *testing.T) {
		rc := b.dial(t)
		var hdr [6]byte
		binary.BigEndian.PutUint32(hdr[:], 50<<20)
		binary.BigEndian.PutUint16(hdr[4:], uint16(produceKey))
		rc.write(hdr[:])
		rc.write(make([]byte, 1000))
		pollBudget(t, b.s, "the announced size to be held", func(bs RequestBudgetStats) bool { return bs.Used == 50<<20 })
		rc.c.Close()
		empty("the stalled frame's bytes to be released")
	})
	t.Run("panic", func(t *testing.T) {
		panicKey.Store(int32(produceKey))
		defer panicKey.Store(-2)
		rc := b.dial(t)
		rc.write(frame(produceReq(7, 1, "t", 0, batchOf(t, 1, 100<<10, 1)), 1, nil))
		rc.expectClosed()
		empty("a panicked request's bytes to be released")
		if len(b.logs.find("panic serving request")) == 0 {
			t.Fatal("no panic logged")
		}
		b.logs.forget("panic") // expected: startBroker fails tests that log one
	})
	t.Run("dropped after a closing request", func(t *testing.T) {
		waitKey.Store(1000)
		defer waitKey.Store(-2)
		bad := binary.BigEndian.AppendUint16(nil, 1000) // unknown API key
		bad = append(bad, 0, 0, 0, 0, 0, 1, 0xff, 0xff)
		out := append(binary.BigEndian.AppendUint32(nil, uint32(len(bad))), bad...)
		out = append(out, frame(produceReq(7, 1, "t", 0, batchOf(t, 1, 100<<10, 1)), 2, nil)...)
		rc := b.dial(t)
		rc.write(out)
		rc.expectClosed()
		empty("the dropped frame's bytes to be released")
		p, _ := b.node.Partition("t", 0)
		if end := p.Stats().LogEndOffset; end != 0 {
			t.Fatalf("the produce after a request that closed its connection was served (log end %d)", end)
		}
	})
}

// pollBudget polls the server's request budget until cond holds, failing
// after 20 s.
func pollBudget(t *testing.T, s *Server, what string, cond func(RequestBudgetStats) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		bs := s.RequestBudget()
		if cond(bs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s; budget %+v", what, bs)
		}
		<-tick.C
	}
}

// The budget's rules, without sockets: a frame waits while it does not fit,
// Produce frames are admitted in order, control frames whenever they fit,
// and a waiter that gives up lets those behind it in.
func TestBudgetRules(t *testing.T) {
	bg := &budget{max: 100}
	ctx := context.Background()
	if !bg.acquire(ctx, 60, false, nil) {
		t.Fatal("60 of 100 refused")
	}
	got := make(chan string, 8)
	start := func(name string, ctx context.Context, n int64, control bool) {
		waiting := make(chan struct{})
		go func() {
			if bg.acquire(ctx, n, control, func() { close(waiting) }) {
				got <- name
			} else {
				got <- name + " gave up"
			}
		}()
		<-waiting
	}
	cctx, cancel := context.WithCancel(ctx)
	start("p50", ctx, 50, false)      // does not fit
	start("p10", ctx, 10, false)      // fits, but queues behind p50
	start("gives-up", cctx, 5, false) // queues behind both
	if bg.acquire(ctx, 30, true, nil) != true {
		t.Fatal("a control frame that fits waited behind Produce frames")
	}
	if st := bg.stats(); st.Used != 90 || st.Waiting != 3 || st.Waits != 3 {
		t.Fatalf("stats %+v", st)
	}
	cancel()
	if g := <-got; g != "gives-up gave up" {
		t.Fatalf("%s, want the cancelled waiter to give up", g)
	}
	bg.release(30) // 60 used: p10 would fit, but p50 is ahead of it
	if st := bg.stats(); st.Used != 60 || st.Waiting != 2 {
		t.Fatalf("after a release that only p10 fits: %+v, want p10 still behind p50", st)
	}
	bg.release(60) // nothing used: both fit
	admitted := map[string]bool{<-got: true, <-got: true}
	if !admitted["p50"] || !admitted["p10"] {
		t.Fatalf("admitted %v, want p50 and p10", admitted)
	}
	if st := bg.stats(); st.Used != 60 || st.Peak != 90 || st.Waiting != 0 {
		t.Fatalf("stats %+v", st)
	}
}
