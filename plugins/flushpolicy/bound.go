package flushpolicy

import (
	"fmt"
	"strings"
	"time"
)

// Bound is a policy's promise about what a power cut can cost: right after
// any append returns (is acknowledged), the data not yet covered by an fsync
// is fewer than Messages records, fewer than Bytes bytes, and its oldest
// append is younger than Age. A zero field promises nothing on that axis;
// the zero Bound promises nothing at all.
//
// Age also bounds deadlines: a policy with an Age bound never leaves data
// unflushed without asking for an fsync by OldestUnflushed + Age. The fsync
// then takes its own time, during which the data is still at risk, so the
// data a power cut can lose is that of the last Age plus one fsync's
// duration (plus whatever the log's own scheduling adds).
//
// The bound is per partition log and assumes the log honours every Decision
// (Flush before the append returns, FlushBy by a timer), as package
// core/partlog does. The conformance suite (package flushpolicytest)
// checks it on simulated workloads; the durability lab checks it under real
// power cuts.
type Bound struct {
	Messages int64         // unflushed records stay below this; 0: unbounded
	Bytes    int64         // unflushed bytes stay below this; 0: unbounded
	Age      time.Duration // the oldest unflushed append stays younger than this; 0: unbounded
}

// Unbounded reports whether b promises nothing.
func (b Bound) Unbounded() bool { return b == Bound{} }

// String describes b for listings and test messages, e.g.
// "< 1000 messages" or "nothing" (for a bound that loses nothing).
func (b Bound) String() string {
	if b.Unbounded() {
		return "unbounded"
	}
	if b.Messages == 1 || b.Bytes == 1 {
		return "nothing"
	}
	var parts []string
	if b.Messages > 0 {
		parts = append(parts, fmt.Sprintf("< %d messages", b.Messages))
	}
	if b.Bytes > 0 {
		parts = append(parts, fmt.Sprintf("< %d bytes", b.Bytes))
	}
	if b.Age > 0 {
		parts = append(parts, fmt.Sprintf("< %v old", b.Age))
	}
	return strings.Join(parts, ", ")
}

// Bounded is implemented by policies that promise a loss bound. Every
// built-in does; LossBound must not change over the policy's life.
type Bounded interface {
	LossBound() Bound
}

// The built-ins' bounds, as documented in the package doc's table.

// LossBound: nothing is unflushed after an append returns.
func (everyBatch) LossBound() Bound { return Bound{Messages: 1, Bytes: 1} }

// LossBound: fewer than n records.
func (p everyMessages) LossBound() Bound { return Bound{Messages: p.n} }

// LossBound: fewer than n bytes.
func (p everyBytes) LossBound() Bound { return Bound{Bytes: p.n} }

// LossBound: appends younger than d.
func (p everyInterval) LossBound() Bound { return Bound{Age: p.d} }

// LossBound: none; the active segment may be lost.
func (never) LossBound() Bound { return Bound{} }
