package durability

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/harness/spec"
)

// Run runs the experiment once: a fresh broker, topics with the
// workload's flush policy and durable-ack mode, producers recording every
// record in their ledgers, the fault at its moment, a restart, the
// records produced after recovery, and everything read back and checked.
//
// The error is for a run that could not be carried out (a broker that
// would not start, a client error that is not the fault's doing, ctx);
// what the run found, guarantees broken included, is in the Outcome,
// which Outcome.Verify judges. When everything was read back but the
// restarted broker failed to stop cleanly, both come back.
func Run(ctx context.Context, cfg Config) (*Outcome, error) {
	o, _, err := run(ctx, cfg)
	return o, err
}

// run is Run, also returning what the outcome was computed from (tests
// tamper with it to show the check notices).
func run(ctx context.Context, cfg Config) (*Outcome, *checkInput, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, nil, err
	}
	w := cfg.Workload
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0xfa171))
	faultAt := cfg.FaultAt
	if faultAt == 0 {
		faultAt = w.Warmup
		if w.Duration > 0 {
			faultAt += time.Duration(rng.Int64N(int64(w.Duration)))
		}
	}

	var t target
	switch cfg.Fault {
	case Power:
		t, err = startPower(cfg)
	case Kill:
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("%w: data directory: %w", ErrBroker, err)
		}
		t, err = startKill(ctx, cfg)
	case DiskPower:
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("%w: data directory: %w", ErrBroker, err)
		}
		t, err = startDisk(ctx, cfg)
	}
	if err != nil {
		return nil, nil, err
	}
	closed := false
	defer func() {
		if !closed {
			_ = t.close()
		}
	}()

	names, configs := topics("durability-", w)
	ps, err := newProducers(ctx, t.addr(), names, w, cfg.Codec, cfg.Seed)
	if err != nil {
		return nil, nil, err
	}
	defer ps.close()
	cctx, cancel := context.WithTimeout(ctx, firstAckTimeout)
	defer cancel()
	if err := createTopics(cctx, ps.ps[0].cl, names, w.Partitions, configs); err != nil {
		return nil, nil, err
	}

	// The fault's moment counts from the first acknowledgement, so that it
	// strikes the load however long the clients took to connect.
	ps.start(w)
	select {
	case <-cctx.Done():
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("%w: no record acknowledged within %v", ErrClient, firstAckTimeout)
	case <-ps.first:
	}
	timer := time.NewTimer(time.Until(ps.firstAt.Add(faultAt)))
	select {
	case <-ctx.Done():
		timer.Stop()
		return nil, nil, ctx.Err()
	case <-timer.C:
	}
	cut, crashErr := t.crash(rng)
	ps.close() // every promise resolved: the ledgers are final
	in := checkInput{fault: cfg.Fault, start: ps.firstAt, warmup: w.Warmup, cut: cut, ledgers: ps.entries()}
	if crashErr != nil {
		return nil, nil, crashErr
	}

	begin := time.Now()
	if err := t.restart(ctx); err != nil {
		return nil, nil, err
	}
	var recovery time.Duration
	err = withClient(t.addr(), func(cl *kgo.Client) error {
		f := &fetcher{cl: cl, topics: names, parts: w.Partitions, codec: cfg.Codec}
		var err error
		if in.recovered, err = f.waitServing(ctx, cfg.RecoveryTimeout); err != nil {
			return err
		}
		recovery = time.Since(begin)
		lo, _ := w.MessageSize.Bounds()
		if in.post, err = producePost(ctx, cl, names, w.Partitions, cfg.VerifyRecords, int(lo)); err != nil {
			return err
		}
		in.served, err = f.readAll(ctx)
		return err
	})
	closed = true
	err = errors.Join(err, t.close())
	if in.served == nil {
		return nil, nil, err // nothing read back: there is nothing to compare
	}
	o := check(in)
	o.Seed, o.Torn, o.Recovery = cfg.Seed, cfg.Fault == Power && cfg.Torn, recovery
	if pt, ok := t.(*powerTarget); ok {
		o.Fsyncs, o.MaxSync, o.TimerLateness = pt.syncs, pt.maxSync, pt.timerLateness
	}
	if dt, ok := t.(*diskTarget); ok {
		o.Fsyncs, o.MaxSync = dt.syncs, dt.maxSync
		o.DiskCut = &dt.lost
	}
	return o, &in, err
}

// firstAckTimeout bounds the topics' creation and the wait for the first
// acknowledgement.
const firstAckTimeout = 30 * time.Second

// withClient runs f with the verifying client of addr, closed after: it
// reads with raw fetches and produces with acks=all, no compression and
// explicit partitions.
func withClient(addr string, f func(*kgo.Client) error) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrClient, err)
	}
	defer cl.Close()
	return f(cl)
}

// topics names a run's topics (prefix and an index) and gives their
// configs: the workload's, with its flush policy and durable-ack mode.
func topics(prefix string, w spec.Workload) ([]string, map[string]string) {
	names := make([]string, w.Topics)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
	}
	configs := maps.Clone(w.TopicConfig)
	if configs == nil {
		configs = map[string]string{}
	}
	if w.FlushPolicy != "" {
		configs[topicconfig.FlushPolicy] = w.FlushPolicy
	}
	configs[topicconfig.DurableAcks] = strconv.FormatBool(w.DurableAcks)
	return names, configs
}
