package transport

import (
	"context"
	"sync"
)

// budget is the broker-wide bound on request bytes
// (Config.MaxQueuedRequestBytes). A connection's reader acquires a frame's
// announced size before reading its body and gives it back once the request
// is handled; acquire waits while the frame does not fit.
//
// Waiters are served in order, except that control requests (everything but
// Produce) go ahead whenever they fit: they are small (MaxControlRequestBytes)
// and some of them complete only when other connections' requests are read (a
// JoinGroup waits for the group's other members), so they must never queue
// behind a Produce waiting for room. Produce frames never overtake one
// another, so small ones cannot starve a large one.
//
// Nothing waits while holding budget: a reader acquires once per frame,
// holding nothing else of the budget's, and what was acquired is released
// without waiting, so every wait ends once the handlers of the admitted
// requests return.
type budget struct {
	max int64 // <= 0: no bound (still counted)

	mu    sync.Mutex
	used  int64
	peak  int64
	waits int64
	queue []*budgetWaiter // in arrival order
}

type budgetWaiter struct {
	n       int64
	control bool
	granted bool          // under mu
	ready   chan struct{} // closed when granted
}

// RequestBudgetStats describes the broker-wide request budget; see
// Server.RequestBudget and Config.MaxQueuedRequestBytes.
type RequestBudgetStats struct {
	// Max is the bound; negative: none.
	Max int64
	// Used: the announced sizes of the requests read (or being read) and not
	// yet handled, on all connections; at most Max.
	Used int64
	// Peak: the largest Used has been.
	Peak int64
	// Waiting: readers waiting for room now.
	Waiting int
	// Waits: how many times a reader has had to wait.
	Waits int64
}

func (b *budget) fits(n int64) bool { return b.max <= 0 || b.used+n <= b.max }

func (b *budget) take(n int64) {
	b.used += n
	b.peak = max(b.peak, b.used)
}

// acquire waits until n bytes fit, then takes them and returns true; false
// (having taken nothing) if ctx ends first. control marks a request other
// than Produce. onWait, when not nil, is called before waiting.
func (b *budget) acquire(ctx context.Context, n int64, control bool, onWait func()) bool {
	b.mu.Lock()
	if (control || len(b.queue) == 0) && b.fits(n) {
		b.take(n)
		b.mu.Unlock()
		return true
	}
	w := &budgetWaiter{n: n, control: control, ready: make(chan struct{})}
	b.queue = append(b.queue, w)
	b.waits++
	b.mu.Unlock()
	if onWait != nil {
		onWait()
	}
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted { // granted meanwhile: give it back
		b.used -= n
	} else {
		for i, q := range b.queue {
			if q == w {
				b.queue = append(b.queue[:i], b.queue[i+1:]...)
				break
			}
		}
	}
	b.grantLocked() // its leaving may let those behind it in
	return false
}

// release gives back n bytes acquired earlier.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.grantLocked()
}

// grantLocked admits the waiters that now fit: Produce frames in order, up
// to the first that does not fit; control frames wherever they are.
func (b *budget) grantLocked() {
	blocked := false // a frame ahead still waits: later Produce frames wait too
	kept := b.queue[:0]
	for _, w := range b.queue {
		if (!blocked || w.control) && b.fits(w.n) {
			b.take(w.n)
			w.granted = true
			close(w.ready)
			continue
		}
		blocked = true
		kept = append(kept, w)
	}
	clear(b.queue[len(kept):])
	b.queue = kept
}

func (b *budget) stats() RequestBudgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return RequestBudgetStats{Max: b.max, Used: b.used, Peak: b.peak, Waiting: len(b.queue), Waits: b.waits}
}
