package durability

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/harness/internal/weirbin"
	"github.com/weir-broker/weir/harness/spec"
)

// weirBin is cmd/weir, built once for the kill tests: they SIGKILL real
// `weir broker` processes.
var weirBin string

func TestMain(m *testing.M) { os.Exit(weirbin.Main(m, &weirBin)) }

// runTimeout bounds one run in the tests: generous for a 2-core machine
// shared with other test binaries, far below -timeout.
const runTimeout = 60 * time.Second

// policies are the built-in flush policies the tests cycle through, with
// parameters that make their bounds bite within a short run.
var policies = []string{"every-batch", "messages:n=50", "bytes:n=8192", "interval:ms=20", "adaptive", "never"}

// smallLoad is a short paced load: a few thousand records a second over
// two partitions, the fault within 10-60 ms of the first record (power
// runs) so hundreds of cuts fit in seconds. Kill runs are given longer.
func smallLoad(policy string, durable bool, acks string) spec.Workload {
	w := spec.Defaults().Workload
	w.Partitions = 2
	w.MessageSize = spec.MessageSize{Distribution: spec.Uniform, Min: 40, Max: 300}
	w.Rate = 10000
	w.Warmup = 10 * time.Millisecond
	w.Duration = 50 * time.Millisecond
	w.Linger = time.Millisecond
	w.FlushPolicy = policy
	w.DurableAcks = durable
	w.Acks = acks
	return w
}

// cut is one run to make and what it found.
type cut struct {
	name string
	cfg  Config
	out  *Outcome
	in   *checkInput
	err  error
}

// runAll runs the configs, parallel at a time, and returns their results
// in order.
func runAll(t *testing.T, cfgs []Config, parallel int) []cut {
	t.Helper()
	out := make([]cut, len(cfgs))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		out[i] = cut{name: describe(cfg), cfg: cfg}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			out[i].out, out[i].in, out[i].err = run(ctx, cfg)
		})
	}
	wg.Wait()
	return out
}

func describe(c Config) string {
	w := c.Workload
	s := fmt.Sprintf("%s seed=%d policy=%s durable=%t acks=%s", c.Fault, c.Seed, w.FlushPolicy, w.DurableAcks, w.Acks)
	if c.Torn {
		s += " torn"
	}
	return s
}
