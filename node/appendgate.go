package node

import "sync"

// appendGate counts the produce appends to a partition that are in
// progress, so that a follower's fetch woken by one partition of a produce
// request can wait for the request's other partitions before it answers:
// one fetch round per produce request instead of one per partition (with
// acks=all each round is on the producer's path). Kafka does the same by
// completing parked fetches only once a produce request is appended to all
// its partitions (ReplicaManager's action queue). Produce begins the gate of
// every partition of a request before the first append, and each append
// ends its own.
//
// Waiters wait for the appends in progress when they looked (a mark), not
// for none at all, so that a stream of appends from other requests cannot
// hold a fetch back: at worst it waits for as many appends to end as were
// in progress then.
type appendGate struct {
	mu       sync.Mutex
	started  int64
	finished int64
	changed  chan struct{} // closed and cleared at each end; nil while no one waits
}

func (g *appendGate) begin() {
	g.mu.Lock()
	g.started++
	g.mu.Unlock()
}

func (g *appendGate) end() {
	g.mu.Lock()
	g.finished++
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
	g.mu.Unlock()
}

// mark returns what to wait for: the appends begun so far, and whether any
// is still in progress.
func (g *appendGate) mark() (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started, g.started > g.finished
}

// landed returns nil once as many appends have ended as had begun at mark,
// otherwise a channel closed when the next one ends (then call again).
func (g *appendGate) landed(mark int64) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.finished >= mark {
		return nil
	}
	if g.changed == nil {
		g.changed = make(chan struct{})
	}
	return g.changed
}

// AppendsInFlight reports, for a follower's read, whether produce appends
// to the partition are in progress (the rest of the produce request whose
// first append woke the fetch), with a mark to wait for them with
// AppendsLanded. A consumer's read reports none.
func (p *Partition) AppendsInFlight() (mark int64, ok bool) {
	if !p.follower {
		return 0, false
	}
	return p.p.appends.mark()
}

// AppendsLanded returns nil once the appends in progress at mark have
// ended, otherwise a channel closed when the next one ends (then call
// again).
func (p *Partition) AppendsLanded(mark int64) <-chan struct{} { return p.p.appends.landed(mark) }
