// Package ratelimit is the flush policy of the example plugin
// weir-flushpolicy-ratelimit: fsync after every append, but start at most hz
// fsyncs a second. An append that comes less than 1/hz after the last fsync
// started gets a deadline instead, the next allowed slot (that start +
// 1/hz), so a burst of appends shares one fsync while a trickle is fsynced
// one by one.
//
// Spec parameter (required):
//
//	hz=RATE   fsyncs per second at most, a positive number (e.g. hz=100, hz=0.5)
//
// Loss bound after a power cut (LossBound: Age 1/hz): the appends
// acknowledged during the last 1/hz, plus those acknowledged while the fsync
// that covers them runs. Unflushed data is never older than the last fsync's
// start (whatever was written before an fsync starts, it covers), so the next
// slot is at most 1/hz after the oldest unflushed append. A process crash
// loses nothing (see package flushpolicy).
//
// Like every policy it reads no clock: an fsync's start is FlushInfo.Now less
// its Duration. Every fsync counts, whoever asked for it, failed ones too (a
// failing disk is not hammered).
package ratelimit

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/spec"
)

// Policy is the rate-limited every-append policy, one per partition.
type Policy struct {
	hz    string
	every time.Duration
	last  time.Time // when the last fsync started; zero: none yet
}

// New builds a policy from spec parameters (see the package doc).
func New(params map[string]string) (flushpolicy.Policy, error) {
	if err := spec.OnlyParams(params, "hz"); err != nil {
		return nil, err
	}
	s, ok := params["hz"]
	if !ok {
		return nil, fmt.Errorf(`missing parameter hz (e.g. "hz=100")`)
	}
	hz, err := strconv.ParseFloat(s, 64)
	if err != nil || !(hz > 0) || math.IsInf(hz, 0) {
		return nil, fmt.Errorf("hz=%q: want a positive number of fsyncs per second", s)
	}
	every := time.Duration(float64(time.Second) / hz)
	if every < time.Microsecond {
		return nil, fmt.Errorf("hz=%q: at most 1000000 fsyncs per second", s)
	}
	return &Policy{hz: s, every: every}, nil
}

// Appended asks for an fsync now if the last one started at least 1/hz ago,
// and otherwise for one at the next allowed slot.
func (p *Policy) Appended(_ context.Context, a flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	if a.UnflushedMessages == 0 && a.UnflushedBytes == 0 {
		return flushpolicy.Decision{}, nil
	}
	if p.last.IsZero() || a.Now.Sub(p.last) >= p.every {
		p.last = a.Now
		return flushpolicy.Decision{Flush: true}, nil
	}
	return flushpolicy.Decision{FlushBy: p.last.Add(p.every)}, nil
}

// Flushed records the fsync's start as the last one.
func (p *Policy) Flushed(_ context.Context, f flushpolicy.FlushInfo) error {
	if started := f.Now.Add(-f.Duration); started.After(p.last) {
		p.last = started
	}
	return nil
}

// LossBound: the oldest unflushed append is younger than 1/hz.
func (p *Policy) LossBound() flushpolicy.Bound { return flushpolicy.Bound{Age: p.every} }

// String returns the policy's parameters in spec form.
func (p *Policy) String() string { return "ratelimit:hz=" + p.hz }
