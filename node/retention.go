package node

import (
	"log/slog"
	"sync"
	"time"

	"github.com/weir-broker/weir/core/clock"
)

// retentionLoop calls apply every interval on a clock until stopped. Each
// pass is scheduled when the previous one ends, so passes never overlap and a
// slow pass delays the next instead of piling up.
type retentionLoop struct {
	clk      clock.Clock
	interval time.Duration
	apply    func() error
	logger   *slog.Logger

	mu      sync.Mutex
	timer   clock.Timer
	stopped bool
	running sync.WaitGroup // a pass in progress
}

func startRetentionLoop(clk clock.Clock, interval time.Duration, apply func() error, logger *slog.Logger) *retentionLoop {
	r := &retentionLoop{clk: clk, interval: interval, apply: apply, logger: logger}
	r.mu.Lock()
	r.timer = clk.AfterFunc(interval, r.pass)
	r.mu.Unlock()
	return r
}

func (r *retentionLoop) pass() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.running.Add(1) // under mu, so never after stop's Wait began
	r.mu.Unlock()
	defer r.running.Done()

	start := r.clk.Now()
	if err := r.apply(); err != nil {
		r.logger.Error("retention pass failed", "err", err)
	} else {
		r.logger.Debug("retention pass done", "took", r.clk.Now().Sub(start))
	}

	r.mu.Lock()
	if !r.stopped {
		r.timer = r.clk.AfterFunc(r.interval, r.pass)
	}
	r.mu.Unlock()
}

// stop cancels the next pass and waits for one in progress to end.
func (r *retentionLoop) stop() {
	r.mu.Lock()
	r.stopped = true
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	r.running.Wait()
}
