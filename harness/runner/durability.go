package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/weir-broker/weir/harness/clusterproc"
	"github.com/weir-broker/weir/harness/durability"
	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/plugins/codec"
)

// durability runs the points of durability sections (see spec.Durability):
// each repetition is one durability.Run with its own broker and fault,
// checked against the guarantees its setting promises; a broken guarantee
// is the repetition's error, its figures kept. Each section gets a loss
// section beside it (durability.Summarize).
func (r *runner) durability(ctx context.Context, run *result.Run, sections []spec.Section) error {
	for _, sec := range sections {
		rs := result.Section{Name: sec.Name, Factors: slices.Clone(sec.Factors)}
		bounds := map[string]string{}
		var err error
		for _, p := range sec.Points {
			var pt result.Point
			pt, err = r.durabilityPoint(ctx, sec.Name, p)
			if len(pt.Reps) > 0 {
				rs.Points = append(rs.Points, pt)
			}
			if r.spec.Target.IsCluster() {
				bounds[p.ID] = durability.ClusterBound(p.Workload).String()
			} else if b, berr := durability.ExpectedBound(durability.Fault(p.Fault), p.Workload.DurableAcks, p.Workload.FlushPolicy); berr == nil {
				bounds[p.ID] = b.String()
			}
			if err != nil {
				break
			}
		}
		run.Sections = append(run.Sections, rs)
		if len(rs.Points) > 0 {
			run.Sections = append(run.Sections, durability.Summarize(&rs, func(id string) string { return bounds[id] }))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// durabilityPoint runs one point's repetitions.
func (r *runner) durabilityPoint(ctx context.Context, section string, p spec.Point) (pt result.Point, err error) {
	index := r.point
	r.point++
	pt = result.Point{ID: p.ID, Factors: slices.Clone(p.Factors)}
	w := p.Workload
	d := r.spec.Durability
	pp := r.progress.point(section+" "+p.ID, r.pointEstimate(w))
	summary := "not run"
	defer func() { pp.end(summary) }()

	c, err := r.host.Codec(w.Codec)
	if err != nil {
		return pt, err
	}
	if cl, ok := c.(io.Closer); ok {
		defer cl.Close()
	}
	if r.spec.Target.IsCluster() {
		return r.clusterDurabilityPoint(ctx, pt, index, p, c, pp, &summary)
	}
	bound, err := durability.ExpectedBound(durability.Fault(p.Fault), w.DurableAcks, w.FlushPolicy)
	if err != nil {
		return pt, err
	}
	var flags []string
	if r.opts.PluginDir != "" {
		flags = append(flags, "--plugin-dir", r.opts.PluginDir)
	}
	if e := r.spec.Target.Embedded; e != nil {
		flags = append(flags, e.BrokerFlags...)
	}
	stderr := r.opts.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	lost, broken := 0.0, 0
	for rep := range r.spec.Repetitions {
		pp.rep(rep, r.spec.Repetitions)
		seed := r.spec.Seed + 1000*int64(index) + int64(rep)
		dir := filepath.Join(r.workDir, fmt.Sprintf("point-%03d-rep-%03d", index, rep))
		cfg := durability.Config{
			Workload:        w,
			Fault:           durability.Fault(p.Fault),
			Seed:            seed,
			Torn:            rand.New(rand.NewPCG(uint64(seed), 7)).Float64() < d.Torn,
			SyncLatency:     d.SyncLatency,
			Codec:           c,
			Weir:            r.weir,
			DataDir:         dir,
			BrokerFlags:     flags,
			PluginDir:       r.opts.PluginDir,
			VerifyRecords:   d.VerifyRecords,
			RecoveryTimeout: d.RecoveryTimeout,
			Logger:          slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		}
		backing := ""
		if cfg.Fault == durability.DiskPower {
			if r.device == nil {
				return pt, fmt.Errorf("runner: the %s fault needs the spec's device:", cfg.Fault)
			}
			if backing, err = r.device.backing(); err != nil {
				return pt, err
			}
			cfg.Device = r.device.durabilityDevice(filepath.Join(backing, "disk"))
		}
		begin := time.Now()
		o, err := durability.Run(ctx, cfg)
		os.RemoveAll(dir)
		if backing != "" {
			os.RemoveAll(backing)
		}
		if ctx.Err() != nil {
			summary = fmt.Sprintf("interrupted after %d of %d reps", len(pt.Reps), r.spec.Repetitions)
			return pt, ctx.Err()
		}
		rp := result.Rep{Started: begin.UTC(), Metrics: map[string]float64{}}
		if o != nil {
			rp.Duration, rp.Metrics = o.Window, o.Metrics()
			lost = max(lost, float64(o.AckedLost))
			if verr := o.Verify(bound, d.AgeSlack); verr != nil && err == nil {
				err = fmt.Errorf("guarantee broken (bound: %v): %w", bound, verr)
				broken++
			}
		}
		if err != nil {
			rp.Error = err.Error()
		}
		pt.Reps = append(pt.Reps, rp)
	}
	summary = fmt.Sprintf("%s; worst run lost %s acknowledged records", pointSummary(&pt), report.FormatValue(lost))
	if broken > 0 {
		summary += fmt.Sprintf("; %d broke a guarantee", broken)
	}
	return pt, nil
}

// clusterDurabilityPoint runs one point of the cluster fault lab: each
// repetition a fresh cluster (an embedded ZooKeeper, or a chroot of its
// own on the external one), a load, and a schedule of faults of the
// point's kind (durability.RunCluster), checked against
// durability.ClusterBound. The faults as they happened and the cluster's
// samples go into the repetition's result.
func (r *runner) clusterDurabilityPoint(ctx context.Context, pt result.Point, index int, p spec.Point, c codec.Codec,
	pp *pointProgress, summary *string) (result.Point, error) {
	w := p.Workload
	d := r.spec.Durability
	sc := r.spec.Target.Cluster
	bound := durability.ClusterBound(w)
	var flags []string
	if r.opts.PluginDir != "" {
		flags = append(flags, "--plugin-dir", r.opts.PluginDir)
	}
	flags = append(flags, sc.BrokerFlags...)
	kinds := make([]durability.ClusterFault, len(d.MixedKinds))
	for i, k := range d.MixedKinds {
		kinds[i] = durability.ClusterFault(k)
	}
	lost, broken, faults := 0.0, 0, 0
	for rep := range r.spec.Repetitions {
		pp.rep(rep, r.spec.Repetitions)
		seed := r.spec.Seed + 1000*int64(index) + int64(rep)
		dir := filepath.Join(r.workDir, fmt.Sprintf("point-%03d-rep-%03d", index, rep))
		cfg := durability.ClusterConfig{
			Workload:       w,
			Fault:          durability.ClusterFault(p.Fault),
			Kinds:          kinds,
			Faults:         d.FaultsPerRun,
			Hold:           d.FaultHold,
			Seed:           seed,
			Codec:          c,
			Weir:           r.weir,
			Dir:            dir,
			Brokers:        sc.Brokers,
			SessionTimeout: sc.SessionTimeout,
			BrokerFlags:    flags,
			Networking:     r.networking,
			VerifyRecords:  d.VerifyRecords,
			HealTimeout:    d.HealTimeout,
			Progress:       func(s string) { pp.note(s) },
		}
		if sc.ZooKeeper != spec.ZooKeeperEmbedded {
			zk, err := clusterproc.Chroot(sc.ZooKeeper, fmt.Sprintf("weir-run-%s-p%03d-r%03d", r.runStamp, index, rep))
			if err != nil {
				return pt, fmt.Errorf("%w: target.cluster.zookeeper: %w", ErrBroker, err)
			}
			cfg.ZooKeeper = zk
		}
		backing := ""
		if r.device != nil {
			// Each broker on a disk of its own (disk-power-cut cuts one).
			var err error
			if backing, err = r.device.backing(); err != nil {
				return pt, err
			}
			cfg.Device, cfg.DiskBacking = r.device.durabilityDevice(""), backing
		}
		begin := time.Now()
		o, err := durability.RunCluster(ctx, cfg)
		if backing != "" {
			os.RemoveAll(backing) // the cluster stopped: its disks are unmounted
		}
		var verr error // the guarantee the run broke
		if o != nil && !o.Partial {
			verr = o.Verify(bound, 0)
		}
		if (err != nil || verr != nil) && ctx.Err() == nil {
			// The brokers' and ZooKeeper's logs of a failed run, or of
			// one that broke a guarantee, go with the results, to tell
			// why.
			if kept, kerr := keepLogs(dir, filepath.Join(r.out, "logs", fmt.Sprintf("point-%03d-rep-%03d", index, rep))); kerr == nil && kept > 0 {
				where := fmt.Sprintf("the cluster's logs: logs/point-%03d-rep-%03d", index, rep)
				if err != nil {
					err = fmt.Errorf("%w (%s)", err, where)
				} else {
					verr = fmt.Errorf("%w (%s)", verr, where)
				}
			}
		}
		if sc.DataDir == "" {
			os.RemoveAll(dir)
		}
		if ctx.Err() != nil {
			*summary = fmt.Sprintf("interrupted after %d of %d reps", len(pt.Reps), r.spec.Repetitions)
			return pt, ctx.Err()
		}
		rp := result.Rep{Started: begin.UTC(), Metrics: map[string]float64{}}
		if o != nil && o.Partial {
			rp.Faults, rp.Timeline = o.Schedule, o.Timeline
			faults += len(o.Schedule)
		} else if o != nil {
			rp.Duration, rp.Metrics = o.Window, o.Metrics()
			rp.Faults, rp.Timeline, rp.Failures = o.Schedule, o.Timeline, o.FailedBy
			lost = max(lost, float64(o.AckedLost))
			faults += len(o.Schedule)
			if verr != nil && err == nil {
				err = fmt.Errorf("guarantee broken (bound: %v): %w", bound, verr)
				broken++
			}
		}
		if err != nil {
			rp.Error = err.Error()
		}
		pt.Reps = append(pt.Reps, rp)
	}
	*summary = fmt.Sprintf("%s; %d faults; worst run lost %s acknowledged records", pointSummary(&pt), faults, report.FormatValue(lost))
	if broken > 0 {
		*summary += fmt.Sprintf("; %d broke a guarantee", broken)
	}
	return pt, nil
}

// keepLogs copies the logs of a cluster directory (broker-N.log, and
// ZooKeeper's) into to, and returns how many it copied.
func keepLogs(dir, to string) (int, error) {
	logs, _ := filepath.Glob(filepath.Join(dir, "broker-*.log"))
	logs = append(logs, filepath.Join(dir, "zookeeper", "zookeeper.log"))
	n := 0
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if err := os.MkdirAll(to, 0o755); err != nil {
			return n, err
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(l)), b, 0o644); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
