// Package wakeup lets one goroutine wait on many sources at once and learn
// which of them fired, at a cost per fire proportional to the waiters of
// that one source.
//
// A long-polling Fetch may read thousands of partitions and must wake as soon
// as any of them has something new. Selecting over one channel per partition
// costs O(partitions) at every wake-up, and so at every append while the
// fetch is parked. Here the cost moves to registration, once per request:
//
//	w := wakeup.NewWaiter(len(parts))
//	defer w.Close()
//	for i, p := range parts {
//		w.Watch(p.source, i) // once per request
//	}
//	for !enough() {          // check after registering: no fire is lost
//		<-w.C()              // (or a timer, or ctx.Done())
//		for _, i := range w.Fired(buf[:0]) {
//			reread(i)        // only the sources that fired
//		}
//	}
//
// A Source is what fires (a partition's log end, its high watermark); its
// owner calls Fire after publishing the change. A fire reaches every Waiter
// registered with the source at the time, so a waiter that registers, then
// reads the published state, either sees the change or is fired: register,
// check, wait. Fire on a source nobody watches is one atomic load.
package wakeup

import (
	"sync"
	"sync/atomic"
)

// Source is something waiters wait for. The zero value is ready to use; a
// Source must not be copied once used. Its methods are safe for concurrent
// use.
type Source struct {
	n    atomic.Int32 // registrations: Fire's fast path reads it without mu
	mu   sync.Mutex
	regs []*reg
}

// Fire wakes every waiter registered with s, marking its key fired. Call it
// after publishing what changed. It costs O(waiters registered with s) and
// never blocks on a waiter.
func (s *Source) Fire() {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	for _, r := range s.regs {
		r.fire()
	}
	s.mu.Unlock()
}

// Waiters is the number of registrations with s.
func (s *Source) Waiters() int { return int(s.n.Load()) }

func (s *Source) add(r *reg) {
	s.mu.Lock()
	r.idx = len(s.regs)
	s.regs = append(s.regs, r)
	s.n.Add(1)
	s.mu.Unlock()
}

func (s *Source) remove(r *reg) {
	s.mu.Lock()
	last := len(s.regs) - 1
	moved := s.regs[last]
	s.regs[r.idx], moved.idx = moved, r.idx
	s.regs[last] = nil
	s.regs = s.regs[:last]
	s.n.Add(-1)
	if cap(s.regs) > 64 && len(s.regs) < cap(s.regs)/4 {
		s.regs = append([]*reg(nil), s.regs...) // a burst of waiters is gone: let its array go
	}
	s.mu.Unlock()
}

// reg is one registration of a waiter with a source under a key.
type reg struct {
	src   *Source
	w     *Waiter
	key   int
	idx   int         // in src.regs, under src.mu
	fired atomic.Bool // reported to w and not yet taken by Fired
}

func (r *reg) fire() {
	if r.fired.Load() || !r.fired.CompareAndSwap(false, true) {
		return // already pending: the waiter will look at this key
	}
	w := r.w
	w.mu.Lock()
	w.pending = append(w.pending, r)
	w.mu.Unlock()
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Waiter is one goroutine's wait on many sources. Watch, C and Fired are
// for that goroutine; fires come from any.
type Waiter struct {
	ch     chan struct{} // one token: something fired since the last receive
	chunks [][]reg       // the registrations, allocated together
	closed bool

	mu      sync.Mutex
	pending []*reg // fired and not yet taken, in firing order
	spare   []*reg
}

// NewWaiter returns a waiter with room for n registrations (more may be
// made, at an allocation each chunk).
func NewWaiter(n int) *Waiter {
	return &Waiter{ch: make(chan struct{}, 1), chunks: [][]reg{make([]reg, 0, max(n, 1))}}
}

// Watch registers w with s under key: each fire of s from now on reports key
// (once until Fired takes it). A key may be registered with several
// sources; Fired then reports it once per source that fired.
func (w *Waiter) Watch(s *Source, key int) {
	if w.closed {
		panic("wakeup: Watch after Close")
	}
	c := &w.chunks[len(w.chunks)-1]
	if len(*c) == cap(*c) {
		w.chunks = append(w.chunks, make([]reg, 0, 2*cap(*c)))
		c = &w.chunks[len(w.chunks)-1]
	}
	*c = append(*c, reg{src: s, w: w, key: key})
	s.add(&(*c)[len(*c)-1])
}

// C receives when something has fired since the last receive: call Fired to
// learn what. A receive may find nothing new (what fired was taken by an
// earlier Fired).
func (w *Waiter) C() <-chan struct{} { return w.ch }

// Fired appends the keys fired since the last call to dst, in firing order,
// and returns it. A key fired again after this returns is reported again.
func (w *Waiter) Fired(dst []int) []int {
	w.mu.Lock()
	taken := w.pending
	w.pending = w.spare[:0]
	for _, r := range taken {
		r.fired.Store(false)
		dst = append(dst, r.key)
	}
	clear(taken)
	w.spare = taken[:0]
	w.mu.Unlock()
	return dst
}

// Close unregisters w from every source; fires after it returns do not
// reach w. It costs O(registrations). A closed waiter is not used again.
func (w *Waiter) Close() {
	if w.closed {
		return
	}
	w.closed = true
	for _, c := range w.chunks {
		for i := range c {
			c[i].src.remove(&c[i])
		}
	}
}
