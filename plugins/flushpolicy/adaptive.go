package flushpolicy

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Adaptive's defaults: what "adaptive" alone means.
const (
	// DefaultAdaptiveBudget is the fsync time an append may pay: twice the
	// ~0.5 ms fsync measured on the SSDs weir was built on, so there it
	// fsyncs every append, while a disk with 5-10 ms fsyncs defers.
	DefaultAdaptiveBudget = time.Millisecond
	// DefaultAdaptiveMax caps how long acknowledged data waits for its
	// fsync, and so what a power cut loses: Kafka-sized windows are
	// seconds; 50 ms keeps the loss to a human blink.
	DefaultAdaptiveMax = 50 * time.Millisecond
	// adaptiveAmortise: when deferring, the window is this many fsync
	// costs, so fsyncs keep the device busy at most 1/4 of the time (back
	// to back, they would starve the writes they are meant to protect).
	adaptiveAmortise = 4
	// adaptiveWeight: each fsync moves the cost estimate 1/4 of the way to
	// its duration, so a slow disk shows within 1-3 fsyncs and one outlier
	// does not flip the mode for long.
	adaptiveWeight = 4
)

func init() {
	RegisterInfo(Info{
		Name:    "adaptive",
		Usage:   "adaptive[:budget=DURATION,max=DURATION]",
		Example: "adaptive:budget=2ms",
		Summary: "fsync every append while fsyncs take <= budget (1ms), else every min(4 x fsync time, max=50ms); a power cut loses the last max of appends",
	}, newAdaptive)
}

// Adaptive returns a policy that fsyncs as often as a latency budget allows.
//
// It learns what an fsync costs from Flushed: an exponentially weighted
// moving average of FlushInfo.Duration (weight 1/4; failed fsyncs are
// ignored). Until the first fsync is measured, and whenever the estimate is
// within budget, it asks for an fsync after every append, so nothing
// acknowledged is at risk and each append pays one fsync, which fits the
// budget. When the estimate exceeds budget, an fsync per append would cost
// every producer more than it allowed, so the policy defers: it asks for an
// fsync by OldestUnflushed + W, where W = min(4 x estimate, max), and for an
// fsync now when an append finds the oldest unflushed data already W old.
// Then one fsync covers all appends of a window (group commit), fsyncs take
// at most about a quarter of the device's time, and the estimate keeps
// learning from the deferred fsyncs, which return it to per-append fsyncs
// when the disk gets fast again (or the load light: small fsyncs are cheap);
// from a 10 ms estimate, 0.5 ms fsyncs bring it under a 2 ms budget in 7.
//
// Loss bound after a power cut: the appends acknowledged during the last max
// (W never exceeds it), plus those made during one fsync; nothing while
// fsyncs fit the budget. If one fsync takes longer than max, the policy
// still asks for one every max, so the device fsyncs back to back and the
// bound is max plus that fsync. Spec: "adaptive:budget=2ms,max=50ms".
//
// It panics if budget or max is not positive or if max < budget.
func Adaptive(budget, max time.Duration) Policy {
	if budget <= 0 || max <= 0 || max < budget {
		panic(fmt.Sprintf("flushpolicy: Adaptive(%v, %v): want 0 < budget <= max", budget, max))
	}
	return &adaptive{budget: budget, max: max}
}

type adaptive struct {
	budget, max time.Duration
	cost        time.Duration // estimated fsync duration; valid when measured
	measured    bool
}

// window returns how long data may wait for its fsync, or 0 to fsync every
// append.
func (p *adaptive) window() time.Duration {
	if !p.measured || p.cost <= p.budget {
		return 0
	}
	if p.cost > p.max/adaptiveAmortise {
		return p.max
	}
	return adaptiveAmortise * p.cost
}

func (p *adaptive) Appended(_ context.Context, a AppendInfo) (Decision, error) {
	w := p.window()
	// A zero OldestUnflushed makes the age huge: flush, the safe direction.
	if w == 0 || a.Now.Sub(a.OldestUnflushed) >= w {
		return Decision{Flush: true}, nil
	}
	by := a.OldestUnflushed.Add(w)
	if latest := a.Now.Add(w); by.After(latest) { // mixed clocks: never promise later than Now + w
		by = latest
	}
	return Decision{FlushBy: by}, nil
}

func (p *adaptive) Flushed(_ context.Context, f FlushInfo) error {
	if f.Failed {
		return nil // a failed fsync's duration says little about the next one
	}
	d := max(f.Duration, 0)
	if !p.measured {
		p.cost, p.measured = d, true
		return nil
	}
	p.cost += (d - p.cost) / adaptiveWeight
	return nil
}

// LossBound: appends younger than max.
func (p *adaptive) LossBound() Bound { return Bound{Age: p.max} }

func (p *adaptive) String() string {
	var params []string
	if p.budget != DefaultAdaptiveBudget {
		params = append(params, "budget="+p.budget.String())
	}
	if p.max != DefaultAdaptiveMax {
		params = append(params, "max="+p.max.String())
	}
	if len(params) == 0 {
		return "adaptive"
	}
	return "adaptive:" + strings.Join(params, ",")
}

func newAdaptive(params map[string]string) (Policy, error) {
	if err := onlyParams(params, "budget", "max"); err != nil {
		return nil, err
	}
	budget, max := DefaultAdaptiveBudget, DefaultAdaptiveMax
	for _, kv := range []struct {
		key string
		v   *time.Duration
	}{{"budget", &budget}, {"max", &max}} {
		key, v := kv.key, kv.v
		s, ok := params[key]
		if !ok {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s=%q: want a positive duration such as 2ms or 500us", key, s)
		}
		*v = d
	}
	if max < budget {
		return nil, fmt.Errorf("max=%v is below budget=%v: want budget <= max", max, budget)
	}
	return Adaptive(budget, max), nil
}
