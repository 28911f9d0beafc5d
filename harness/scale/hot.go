package scale

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/harness/load"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/stats"
)

// The two brokers of step 7, as metric infixes.
const (
	HotIdle  = "idle"  // the measured broker, its N partitions idle beside the hot ones
	HotAlone = "alone" // a second broker holding the hot partitions only
)

// Step 7: the workload against the broker holding the N partitions (now
// idle) and against a fresh broker holding nothing else, alternating
// which goes first, HotRounds times; the broker not loaded is stopped
// (SIGSTOP) meanwhile, so neither's background work takes the other's CPU.
func (r *run) hot(ctx context.Context) error {
	sc := r.cfg.Scale
	alone, err := r.startBroker(ctx, filepath.Join(r.cfg.DataDir, HotAlone), "", brokerproc.DefaultStartTimeout)
	if err != nil {
		return fmt.Errorf("the second broker (hot partitions alone) did not start: %w", err)
	}
	defer alone.Stop()
	w := r.cfg.Workload
	configs := maps.Clone(w.TopicConfig)
	if configs == nil {
		configs = map[string]string{}
	}
	if w.FlushPolicy != "" {
		configs[topicconfig.FlushPolicy] = w.FlushPolicy
	}
	configs[topicconfig.DurableAcks] = strconv.FormatBool(w.DurableAcks)
	brokers := map[string]*brokerproc.Process{HotIdle: r.broker, HotAlone: alone}
	figures := map[string]map[string][]float64{HotIdle: {}, HotAlone: {}}
	// Each round runs both loads back to back: its own ratio is the
	// comparison least moved by the machine's drift (a VM neighbour, CPU
	// frequency) from round to round.
	paired := map[string][]float64{}
	for round := range sc.HotRounds {
		order := []string{HotIdle, HotAlone}
		if round%2 == 1 {
			order = []string{HotAlone, HotIdle}
		}
		for _, which := range order {
			other := brokers[map[string]string{HotIdle: HotAlone, HotAlone: HotIdle}[which]]
			res, err := r.hotLoad(ctx, brokers[which], other, load.Config{
				Bootstrap:    brokers[which].Addr,
				Workload:     w,
				Seed:         r.cfg.Seed + int64(round),
				TopicPrefix:  fmt.Sprintf("%s-hot-%s-%d", r.cfg.TopicPrefix, which, round),
				TopicConfigs: configs,
				Codec:        r.cfg.Codec,
			})
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, which, err)
			}
			for _, m := range []string{result.ProduceMsgsPerSec, result.ConsumeMsgsPerSec} {
				figures[which][m] = append(figures[which][m], res.Metrics[m])
			}
			r.progress(fmt.Sprintf("step 7: round %d of %d, %s: produce %.0f msgs/s, consume %.0f msgs/s", round+1, sc.HotRounds,
				which, res.Metrics[result.ProduceMsgsPerSec], res.Metrics[result.ConsumeMsgsPerSec]))
		}
		for _, m := range []string{result.ProduceMsgsPerSec, result.ConsumeMsgsPerSec} {
			if a := figures[HotAlone][m][round]; a > 0 {
				paired[m] = append(paired[m], figures[HotIdle][m][round]/a)
			}
		}
	}
	med := func(which, m string) float64 { s, _ := stats.Summarize(figures[which][m]); return s.Median }
	for _, which := range []string{HotIdle, HotAlone} {
		r.m["hot-"+which+"-produce-msgs/s"] = med(which, result.ProduceMsgsPerSec)
		r.m["hot-"+which+"-consume-msgs/s"] = med(which, result.ConsumeMsgsPerSec)
	}
	if ps := paired[result.ProduceMsgsPerSec]; len(ps) > 0 {
		s, _ := stats.Summarize(ps)
		r.m["hot-ratio"], r.m["hot-round-ratio-min"], r.m["hot-round-ratio-max"] = s.Median, slices.Min(ps), slices.Max(ps)
	}
	if ps := paired[result.ConsumeMsgsPerSec]; len(ps) > 0 {
		s, _ := stats.Summarize(ps)
		r.m["hot-consume-ratio"] = s.Median
	}
	return nil
}

// hotLoad runs one load against p with other stopped.
func (r *run) hotLoad(ctx context.Context, p, other *brokerproc.Process, cfg load.Config) (load.Result, error) {
	if err := other.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return load.Result{}, fmt.Errorf("SIGSTOP of the other broker: %w", err)
	}
	defer other.Cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-p.Exited():
		return load.Result{}, fmt.Errorf("the broker had exited: %v", p.ExitErr())
	default:
	}
	return load.Run(ctx, cfg)
}
