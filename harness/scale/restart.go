package scale

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/harness/stats"
)

// Steps 4 (clean) and 5 (unclean): Restarts restarts, each timed from the
// new process's exec until it serves; the medians are the figures.
func (r *run) restarts(ctx context.Context, clean bool) error {
	kind := "unclean"
	if clean {
		kind = "clean"
	}
	var meta, fetch, stop []float64
	for i := range r.cfg.Scale.Restarts {
		fig, err := r.restart(ctx, clean)
		if err != nil {
			return fmt.Errorf("restart %d of %d: %w", i+1, r.cfg.Scale.Restarts, err)
		}
		meta, fetch = append(meta, fig.metadata.Seconds()), append(fetch, fig.fetch.Seconds())
		if clean {
			stop = append(stop, fig.stop.Seconds())
		}
		r.progress(fmt.Sprintf("step %d: restart %d of %d serving Metadata after %v, a fetch after %v; %s",
			map[bool]int{true: StepCleanRestart, false: StepUncleanRestart}[clean], i+1, r.cfg.Scale.Restarts,
			fig.metadata.Round(time.Millisecond), fig.fetch.Round(time.Millisecond), r.measure(ctx, kind+"-restart")))
	}
	med := func(vs []float64) float64 { s, _ := stats.Summarize(vs); return s.Median }
	r.m[kind+"-restart-metadata-s"] = med(meta)
	r.m[kind+"-restart-fetch-s"] = med(fetch)
	if clean {
		r.m["clean-stop-s"] = med(stop)
	}
	return nil
}

// restartFigures are one restart's times: stop is SIGTERM until exit
// (clean restarts), the others count from the new process's exec.
type restartFigures struct{ stop, metadata, fetch time.Duration }

func (r *run) restart(ctx context.Context, clean bool) (restartFigures, error) {
	var fig restartFigures
	old := r.broker
	if clean {
		begin := time.Now()
		if err := old.Stop(); err != nil {
			return fig, fmt.Errorf("the broker did not stop cleanly on SIGTERM: %w", err)
		}
		fig.stop = time.Since(begin)
	} else {
		if err := old.Cmd.Process.Kill(); err != nil {
			return fig, fmt.Errorf("SIGKILL: %w", err)
		}
		<-old.Exited()
	}
	timeout := r.cfg.Scale.RestartTimeout
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	exec := time.Now()
	p, err := r.startBroker(ctx, filepath.Join(r.cfg.DataDir, "main"), old.Addr, timeout)
	if err != nil {
		return fig, fmt.Errorf("the broker did not come back: %w", err)
	}
	r.use(p)
	cl, err := r.client()
	if err != nil {
		return fig, err
	}
	defer cl.Close()
	// Both polled at once, each from the exec: a broker that starts
	// lazily may serve one well before the other.
	var metaErr, fetchErr error
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		led, last := 0, error(nil)
		metaErr = poll(ctx, func() bool {
			var err error
			if led, _, err = r.metadataAll(ctx, cl); err != nil {
				last = err
			}
			return led == r.cfg.Partitions
		})
		fig.metadata = time.Since(exec)
		if metaErr != nil {
			metaErr = fmt.Errorf("no Metadata listed every partition with a leader within %v (the last listed %d of %d; last error: %v)",
				timeout, led, r.cfg.Partitions, last)
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		var last error
		fetchErr = poll(ctx, func() bool {
			err := r.fetchOne(ctx, cl)
			last = err
			return err == nil
		})
		fig.fetch = time.Since(exec)
		if fetchErr != nil {
			topic, part := r.at(r.cfg.Partitions - 1)
			fetchErr = fmt.Errorf("no fetch returned partition %s/%d's record within %v (the last attempt: %v)",
				topic, part, timeout, last)
		}
	}()
	<-done
	<-done
	return fig, errors.Join(metaErr, fetchErr)
}

// poll calls try until it reports true, pollEvery apart, until ctx ends.
func poll(ctx context.Context, try func() bool) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		if try() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// errNoRecord: a fetch answered without the record.
var errNoRecord = errors.New("the fetch returned no record")

// fetchOne fetches the last partition created from offset 0, and succeeds
// when its record comes back.
func (r *run) fetchOne(ctx context.Context, cl *kgo.Client) error {
	topic, part := r.at(r.cfg.Partitions - 1)
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1 // no session
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = part, 0, 1<<20
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return err
			}
			var b kmsg.RecordBatch
			if len(rp.RecordBatches) > 0 && b.ReadFrom(rp.RecordBatches) == nil && b.NumRecords > 0 {
				return nil
			}
		}
	}
	return errNoRecord
}
