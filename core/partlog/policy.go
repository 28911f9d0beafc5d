package partlog

import (
	"context"

	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// The flush policy's calls (see "Flushing and durability" in the package
// doc). The policy may be a plugin behind an RPC that takes up to its
// timeout, so it is called with none of appendMu, syncMu and statMu held,
// and one call at a time, in log order:
//
//   - An append, once its records are published (under appendMu and
//     statMu), owes the policy an Appended call; an fsync, once it has
//     finished (under syncMu and statMu), owes it a Flushed call. Both are
//     queued in polQ under statMu, so the queue's order is the order in
//     which the unflushed counters changed, and every AppendInfo agrees with
//     the calls before it.
//   - polBusy (under statMu) is the policy lock: whoever set it calls the
//     policy without statMu, and clears it (with a broadcast on polIdle)
//     when done.
//   - An append makes its own Appended call (with its own ctx), when the
//     policy is free and its call is at the head of the queue. Before it,
//     it makes the Flushed calls queued ahead of it; an earlier append's
//     call it leaves to that append, and waits. After it, it makes the
//     Flushed calls queued behind it meanwhile, up to the next append's.
//   - Flush and the fsyncs it makes never call the policy nor wait for it:
//     the policy hears of an fsync before the next Appended call (whichever
//     append makes it), or at Close.
//
// The common case, an idle policy and an empty queue, queues nothing: the
// append takes the policy under statMu while it publishes, and calls it
// once appendMu is released. No goroutine, no channel.

// policyCall is one call owed to the flush policy: an append's Appended
// (turn > 0; the append holds its AppendInfo) or an fsync's Flushed (turn 0).
type policyCall struct {
	turn int64
	f    flushpolicy.FlushInfo
}

// queueAppendedLocked is an append's claim on the policy, made while it
// publishes its records: turn 0 means it holds the policy now (nobody else
// does and nothing is owed); otherwise its call is queued under the turn
// returned. statMu held.
func (l *Log) queueAppendedLocked() int64 {
	if !l.polBusy && l.polHead == len(l.polQ) {
		l.polBusy = true
		return 0
	}
	l.polTurns++
	l.polQ = append(l.polQ, policyCall{turn: l.polTurns})
	return l.polTurns
}

// queueFlushedLocked owes the policy the news of a finished fsync. statMu
// held.
func (l *Log) queueFlushedLocked(f flushpolicy.FlushInfo) {
	l.polQ = append(l.polQ, policyCall{f: f})
}

// popLocked drops the call at the head of the queue. statMu held.
func (l *Log) popLocked() {
	l.polQ[l.polHead] = policyCall{}
	l.polHead++
	switch {
	case l.polHead == len(l.polQ):
		l.polQ, l.polHead = l.polQ[:0], 0
	case l.polHead >= 1024 && 2*l.polHead >= len(l.polQ):
		// A queue that never drains (a policy slower than the appends)
		// would otherwise only grow.
		n := copy(l.polQ, l.polQ[l.polHead:])
		clear(l.polQ[n:])
		l.polQ, l.polHead = l.polQ[:n], 0
	}
}

// appended makes the Appended call of the append whose claim returned turn,
// after every call queued before it, and returns the policy's answer. No
// lock held.
func (l *Log) appended(ctx context.Context, turn int64, info flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	if turn != 0 {
		l.awaitTurn(turn)
	}
	defer l.releasePolicy() // even if the policy panics: never wedge the partition
	return l.conf().FlushPolicy.Appended(ctx, info)
}

// awaitTurn returns holding the policy, once the call of turn is at the head
// of the queue (which it removes). Flushed calls queued ahead of it it makes
// itself; an earlier append's call is that append's to make.
func (l *Log) awaitTurn(turn int64) {
	l.statMu.Lock()
	for {
		if l.polBusy {
			l.polIdle.Wait()
			continue
		}
		c := &l.polQ[l.polHead]
		switch {
		case c.turn == turn:
			l.popLocked()
			l.polBusy = true
			l.statMu.Unlock()
			return
		case c.turn != 0:
			l.polIdle.Wait() // an earlier append's call: it is on its way
		default:
			f := c.f
			l.popLocked()
			l.polBusy = true
			l.statMu.Unlock()
			l.tellFlushed(f)
			l.statMu.Lock()
			l.polBusy = false
			l.polIdle.Broadcast()
		}
	}
}

// releasePolicy gives the policy back, first making the Flushed calls at the
// head of the queue: nobody else may be coming to make them.
func (l *Log) releasePolicy() {
	l.statMu.Lock()
	for l.polHead < len(l.polQ) && l.polQ[l.polHead].turn == 0 {
		f := l.polQ[l.polHead].f
		l.popLocked()
		l.statMu.Unlock()
		l.tellFlushed(f)
		l.statMu.Lock()
	}
	l.polBusy = false
	l.polIdle.Broadcast()
	l.statMu.Unlock()
}

// tellQueuedFlushes makes the Flushed calls at the head of the queue if the
// policy is free (Close: nothing may come after it). If it is not, whoever
// holds it makes them. No lock held.
func (l *Log) tellQueuedFlushes() {
	l.statMu.Lock()
	if l.polBusy || l.polHead == len(l.polQ) || l.polQ[l.polHead].turn != 0 {
		l.statMu.Unlock()
		return
	}
	l.polBusy = true
	l.statMu.Unlock()
	l.releasePolicy()
}

// tellFlushed makes one Flushed call, the policy held. Its error changes
// nothing: the fsync is done either way.
func (l *Log) tellFlushed(f flushpolicy.FlushInfo) {
	if err := l.conf().FlushPolicy.Flushed(context.Background(), f); err != nil {
		l.cfg.Logger.Warn("flush policy failed to take an fsync's report", "dir", l.dir, "err", err)
	}
}
