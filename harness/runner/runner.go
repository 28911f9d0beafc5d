// Package runner executes an experiment spec end to end: it validates the
// spec, captures the environment, runs the probes, expands the load matrix
// and runs each point's repetitions (against a fresh `weir broker`
// subprocess per point for embedded targets, a fresh cluster per point for
// cluster targets), then writes and prints the report. A spec with a durability block runs durability experiments
// instead (package harness/durability): a fresh broker per repetition,
// killed or powered off at a random moment, restarted and read back. A
// spec with a scale block runs the partition-scale experiment (package
// harness/scale): a fresh broker per partition count and repetition,
// filled, timed, restarted and loaded; a step that fails is reported with
// the figures before it, and the run goes on to the next count.
//
// The broker runs as a subprocess, not in the runner's process, so that its
// CPU time and disk writes can be read apart from the load generator's
// (/proc/<pid>/stat and /proc/<pid>/io), and so a point starts from a cold
// broker with a fresh data directory: no page cache of a previous point's
// segments, no leftover topics. Each point's data directory is removed when
// the point ends.
//
// With interleave, a load section's points are all set up first (each its
// broker) and their repetitions run in rounds, one of every point per
// round. A point with security_protocol other than PLAINTEXT gets a broker
// (every broker of its cluster) serving that listener beside a PLAINTEXT
// one for the runner (and a cluster's replication), with a throwaway CA
// and certificate and, for SASL, a SCRAM user (security.go); its clients
// connect to the secure listeners.
//
// A cluster target (package harness/clusterproc) starts, per point, a
// ZooKeeper from Debian's package (or a fresh chroot of an external one)
// and N brokers with ids 1..N, and waits until every broker lists all N
// before any topic is created; the brokers' CPU time, disk writes and
// fsyncs are summed over them (and kept per broker in run.json). Every
// repetition's topics are created with the point's replication factor and
// min.insync.replicas, and the load starts only once every partition has a
// leader and its full ISR (package harness/load).
//
// Nothing runs before the whole spec is valid (values, plugin specs through
// the plugin host, a reachable bootstrap address or external ZooKeeper, an
// installed ZooKeeper for an embedded one). Ctrl-C (ctx cancelled) stops
// the current point cleanly (producers and consumers first, then the
// brokers, then a cluster's ZooKeeper), keeps every repetition that
// finished, marks the run interrupted and still writes the report. A
// broker or cluster that fails to start, or a broker that dies during a
// point, is stopped with everything else of the point and ends the run.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/harness/clusterproc"
	"github.com/weir-broker/weir/harness/durability"
	"github.com/weir-broker/weir/harness/env"
	"github.com/weir-broker/weir/harness/load"
	"github.com/weir-broker/weir/harness/probe"
	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/scale"
	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/plugins/host"
	"github.com/weir-broker/weir/plugins/partitioner"
)

// Errors of Run.
var (
	// ErrBroker: the broker subprocess, or a cluster's broker or
	// ZooKeeper, failed to start, serve or stop.
	ErrBroker = errors.New("runner: broker")
	// ErrInterrupted: the run was stopped (ctx cancelled) before it
	// finished; the report holds what finished.
	ErrInterrupted = errors.New("runner: interrupted")
)

// DefaultResultsRoot is where runs go without Options.Out.
const DefaultResultsRoot = "results/runs"

// targetDialTimeout bounds the reachability check of a bootstrap target.
const targetDialTimeout = 3 * time.Second

// Options configure Run. Only Spec is required.
type Options struct {
	// Spec is the experiment; Run validates it.
	Spec *spec.Spec
	// Out is the results directory. Default: ResultsRoot/<UTC time>-<name>.
	Out string
	// ResultsRoot is where Out defaults to a new directory. Default
	// DefaultResultsRoot.
	ResultsRoot string
	// DataDir overrides target.embedded.data_dir and
	// target.cluster.data_dir.
	DataDir string
	// Weir is the weir binary that serves `weir broker` for embedded and
	// cluster targets. Default: os.Executable() (the running weir).
	Weir string
	// PluginDir is searched for plugin binaries named by specs.
	PluginDir string
	// References are published figures added to the spec's (presets).
	References []result.Reference
	// Stdout receives the tables (report.Print); nil discards them.
	Stdout io.Writer
	// Stderr receives progress: bars on a terminal, else a line per point;
	// nil discards it.
	Stderr io.Writer
	// DrainTimeout overrides load.Config.DrainTimeout (tests).
	DrainTimeout time.Duration

	// afterSetup is load.Config.AfterSetup, for tests to look at the
	// topics of each repetition before its load.
	afterSetup func(ctx context.Context, cl *kgo.Client, topics []string) error
}

// Run executes opts.Spec and returns the run and the directory its report
// was written to. A spec error returns before anything runs. After an
// interruption the report of what finished is written and the error wraps
// ErrInterrupted and ctx's error.
func Run(ctx context.Context, opts Options) (*result.Run, string, error) {
	s := opts.Spec
	if s == nil {
		return nil, "", fmt.Errorf("%w: no spec", spec.ErrInvalid)
	}
	stderr := opts.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	h := host.New(host.Config{Dir: opts.PluginDir, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	defer h.Close()
	if err := s.Validate(h); err != nil {
		return nil, "", err
	}
	if err := s.CheckTarget(ctx, targetDialTimeout); err != nil {
		return nil, "", err
	}
	sections, err := s.Sections()
	if err != nil {
		return nil, "", err
	}
	managed := s.Target.Managed()
	weir := opts.Weir
	if managed && weir == "" {
		if weir, err = os.Executable(); err != nil {
			return nil, "", fmt.Errorf("%w: find the weir binary: %w", ErrBroker, err)
		}
	}

	// Where the brokers' data directories and the probes' files go.
	var dataRoot string
	if managed {
		dataRoot = opts.DataDir
		if dataRoot == "" {
			dataRoot = s.Target.DataDir()
		}
		if dataRoot == "" {
			dataRoot = os.TempDir()
		} else if err := os.MkdirAll(dataRoot, 0o755); err != nil {
			return nil, "", fmt.Errorf("runner: data directory: %w", err)
		}
	}
	// An emulated disk (spec device:) is mounted under the data root and
	// becomes it; it is unmounted when Run returns (after workDir is removed).
	var dev *deviceMount
	skip := ""
	if managed && s.Device != nil {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if dev, skip, err = mountDevice(s.Device, dataRoot, logger); err != nil {
			return nil, "", err
		}
		if dev != nil {
			defer func() {
				if err := dev.unmount(); err != nil {
					fmt.Fprintf(stderr, "weir run: warning: %v\n", err)
				}
			}()
			// The disk-power faults mount a disk per broker, backed
			// beside the run's disk, not on it.
			dev.backingRoot = dataRoot
			dataRoot = dev.m.Dir()
		}
	}
	// The run works in a directory of its own under the data root, removed
	// at the end, so nothing of the user's there is touched.
	workDir := ""
	if managed && skip == "" {
		if workDir, err = os.MkdirTemp(dataRoot, "weir-run-"); err != nil {
			return nil, "", fmt.Errorf("runner: data directory: %w", err)
		}
		defer os.RemoveAll(workDir)
	}

	started := time.Now().UTC()
	out := opts.Out
	if out == "" {
		root := opts.ResultsRoot
		if root == "" {
			root = DefaultResultsRoot
		}
		out = filepath.Join(root, started.Format("20060102T150405Z")+"-"+s.Name)
	}
	run := &result.Run{Version: result.SchemaVersion, Name: s.Name, Spec: s.Text, Seed: s.Seed, Started: started}
	run.Env = env.Capture(dataRoot)
	if dev != nil {
		run.Env.EmulatedDevice = dev.describe()
	}
	if skip != "" {
		run.Skipped, run.Ended = skip, time.Now().UTC()
		fmt.Fprintf(stderr, "weir run: skipped: %s\n", skip)
		return run, out, report.Write(out, run)
	}
	networking := ""
	switch {
	case s.Target.IsCluster():
		sc := s.Target.Cluster
		run.Env.Target, run.Env.Brokers, run.Env.ZooKeeper = "cluster", sc.Brokers, sc.ZooKeeper
		// Resolved once (auto: netns or loopback), so every point gets the
		// same networking, and recorded.
		zookeeper := sc.ZooKeeper
		if zookeeper == spec.ZooKeeperEmbedded {
			zookeeper = ""
		}
		var why error
		networking, why = clusterproc.ResolveNetworking(sc.Networking, zookeeper)
		if why != nil {
			fmt.Fprintf(stderr, "weir run: warning: target.cluster.networking: %s: using %s: %v\n", sc.Networking, networking, why)
		}
		run.Env.Networking = networking
		if usesTLS(sections) {
			run.Env.TLSFetch = tlsFetchPath() // security.go
		}
	case managed:
		run.Env.Target, run.Env.Brokers, run.Env.Networking = "embedded", 1, clusterproc.NetworkingLoopback
		if usesTLS(sections) {
			run.Env.TLSFetch = tlsFetchPath() // security.go
		}
	default:
		run.Env.Target = s.Target.Bootstrap
	}
	for _, w := range s.Warnings {
		fmt.Fprintf(stderr, "weir run: warning: %s\n", w)
	}

	r := &runner{opts: opts, spec: s, host: h, weir: weir, workDir: workDir, device: dev, out: out, networking: networking, runID: started.Format("150405"),
		runStamp: started.Format("20060102T150405.000000000")}
	var estimate time.Duration
	points := 0
	for _, sec := range sections {
		for _, p := range sec.Points {
			estimate += r.pointEstimate(p.Workload)
			points++
			if s.Interleave {
				points += s.Repetitions - 1 // a step per repetition (runInterleaved)
			}
		}
	}
	r.progress = newProgress(stderr, isTerminal(stderr), points, estimate)

	runErr := r.probes(ctx, run)
	judgeDisk(run)
	switch {
	case runErr != nil:
	case s.Durability != nil:
		runErr = r.durability(ctx, run, sections)
	case s.Scale != nil:
		runErr = r.scale(ctx, run, sections)
	default:
		runErr = r.load(ctx, run, sections)
	}
	run.Ended = time.Now().UTC()
	run.References = append(run.References, opts.References...)
	for _, ref := range s.References {
		run.References = append(run.References, result.Reference{Section: ref.Section, PointID: ref.Point, Metric: ref.Metric, Value: ref.Value, Label: ref.Label, Source: ref.Source})
	}
	if ctx.Err() != nil {
		run.Interrupted = true
		runErr = fmt.Errorf("%w: %w", ErrInterrupted, context.Cause(ctx))
	}
	if err := report.Write(out, run); err != nil {
		return run, out, errors.Join(runErr, err)
	}
	if s.Durability != nil {
		if err := durability.WriteReport(out, run); err != nil {
			return run, out, errors.Join(runErr, err)
		}
	}
	if s.Scale != nil {
		if err := scale.WriteReport(out, run); err != nil {
			return run, out, errors.Join(runErr, err)
		}
	}
	if opts.Stdout != nil {
		if err := report.Print(opts.Stdout, run); err != nil {
			return run, out, errors.Join(runErr, err)
		}
		if err := scale.Print(opts.Stdout, run); err != nil {
			return run, out, errors.Join(runErr, err)
		}
	}
	return run, out, runErr
}

// runner is the state of one Run.
type runner struct {
	opts     Options
	spec     *spec.Spec
	host     *host.Host
	weir     string
	workDir  string // the run's own directory under the data root (embedded targets)
	out      string // the run's results directory
	runID    string // names topics, so runs against one cluster do not collide
	runStamp string // names a cluster's ZooKeeper chroots, unique across runs
	progress *progress
	point    int // load points started, over all sections

	networking string       // the cluster target's, resolved (clusterproc.ResolveNetworking)
	device     *deviceMount // the spec's emulated disk, nil without device:
}

// pointEstimate is a point's expected time: its reps' windows and warm-ups,
// plus a second per rep for topics and drains and a second for the broker
// (three for a cluster: ZooKeeper, the brokers, their agreeing).
// A durability rep ends at its fault, on average half way through the
// window, and then restarts the broker and reads back: half a second.
func (r *runner) pointEstimate(w spec.Workload) time.Duration {
	reps := time.Duration(r.spec.Repetitions)
	if sc := r.spec.Scale; sc != nil {
		return sc.Estimate(w, r.spec.Repetitions)
	}
	if r.spec.Durability != nil && r.spec.Target.IsCluster() {
		// The whole window under faults, then a cluster to start, heal,
		// read back and stop.
		return reps * (w.Warmup + w.Duration + 10*time.Second)
	}
	if r.spec.Durability != nil {
		return reps * (w.Warmup + w.Duration/2 + time.Second/2)
	}
	start := time.Second
	if r.spec.Target.IsCluster() {
		start = 3 * time.Second
	}
	return reps*(w.Warmup+w.Duration+time.Second) + start
}

// probes runs the spec's disk and memory probes, adding their sections and
// the published figures they compare with.
func (r *runner) probes(ctx context.Context, run *result.Run) error {
	d, m := r.spec.Probes.Disk, r.spec.Probes.Memory
	if d == nil && m == nil {
		return nil
	}
	// On an emulated disk the probes also report their figures over the
	// device time the disk charged them (the wall clock adds FUSE's round
	// trips), and the published figures are set beside both.
	var deviceTime func() time.Duration
	if r.device != nil {
		deviceTime = func() time.Duration { return r.device.m.Status().Waited }
	}
	if d != nil {
		var blocks []int // nil: the probe's defaults
		for _, b := range d.BlockSizes {
			blocks = append(blocks, int(b))
		}
		span := int64(d.RandomWriteSpan.Bytes)
		if d.RandomWriteSpan.Device && r.device != nil {
			span = int64(float64(r.device.profile.DataBytes())*spec.DeviceSpanFraction) / 4096 * 4096
		}
		update, end := r.progress.probe(probe.SectionDisk)
		sec, err := probe.Disk(ctx, probe.DiskOptions{
			Dir: r.workDir, FileSize: int64(d.FileSize), BlockSizes: blocks, Ops: d.Ops, Patterns: d.Patterns, IO: d.IO,
			BufferedRandomReads: d.BufferedRandomReads, PointDuration: d.PointDuration, FsyncOps: d.FsyncOps,
			FsyncBlock: int(d.FsyncBlock), FsyncTimeout: d.FsyncTimeout, Reps: d.Reps, Seed: r.spec.Seed,
			RandomWriteSpan: span, DeviceTime: deviceTime,
		}, update)
		end(fmt.Sprintf("%d points", len(sec.Points)))
		if len(sec.Points) > 0 {
			run.Sections = append(run.Sections, sec)
		}
		if err != nil {
			return err
		}
	}
	if m != nil {
		dir := ""
		if !m.NoDisk {
			dir = r.workDir
		}
		update, end := r.progress.probe(probe.SectionMemory)
		sec, err := probe.Memory(ctx, probe.MemoryOptions{
			Bytes: int64(m.Bytes), Dir: dir, DiskBytes: int64(m.DiskBytes), PointDuration: m.PointDuration, Reps: m.Reps, Seed: r.spec.Seed,
			DeviceTime: deviceTime,
		}, update)
		end(fmt.Sprintf("%d points", len(sec.Points)))
		if len(sec.Points) > 0 {
			run.Sections = append(run.Sections, sec)
		}
		if err != nil {
			return err
		}
	}
	run.References = append(run.References, probe.References()...)
	if r.device != nil {
		run.References = append(run.References, probe.DeviceReferences()...)
	}
	return nil
}

// load runs every load section's points. A section keeps the points with at
// least one finished repetition. With interleave, a section's points are
// all set up first (their brokers started) and their repetitions run in
// rounds: rep 1 of every point, then rep 2, and so on.
func (r *runner) load(ctx context.Context, run *result.Run, sections []spec.Section) error {
	for _, sec := range sections {
		rs := result.Section{Name: sec.Name, Factors: slices.Clone(sec.Factors), Baseline: sec.Baseline}
		var err error
		if r.spec.Interleave {
			var pts []result.Point
			pts, err = r.runInterleaved(ctx, sec)
			rs.Points = pts
		} else {
			for _, p := range sec.Points {
				var pt result.Point
				pt, err = r.runPoint(ctx, sec.Name, p)
				if len(pt.Reps) > 0 {
					rs.Points = append(rs.Points, pt)
				}
				if err != nil {
					break
				}
			}
		}
		run.Sections = append(run.Sections, rs)
		if err != nil {
			return err
		}
	}
	return nil
}

// pointRun is a point set up to run repetitions: its load config, its
// target started, and its finished repetitions.
type pointRun struct {
	index int // over all sections: seeds and topic names
	label string
	pt    result.Point
	cfg   load.Config
	alive func() error
	stop  func() error // stops the target, then closes the codec
}

// preparePoint sets a point up: its load config (client security, payload,
// codec, partitioner) and its target (a fresh broker for embedded targets).
// On error nothing of it is left running.
func (r *runner) preparePoint(ctx context.Context, section string, p spec.Point) (*pointRun, error) {
	pr := &pointRun{index: r.point, label: section, pt: result.Point{ID: p.ID, Factors: slices.Clone(p.Factors)}}
	r.point++
	if p.ID != "" {
		pr.label += " " + p.ID
	}
	w := p.Workload
	cfg := load.Config{Workload: w, DrainTimeout: r.opts.DrainTimeout, TopicConfigs: maps.Clone(w.TopicConfig), AfterSetup: r.opts.afterSetup}
	if cfg.TopicConfigs == nil {
		cfg.TopicConfigs = map[string]string{}
	}
	var err error
	if cfg.ClientOpts, err = securityOpts(r.spec.Target.Security); err != nil { // security.go
		return nil, err
	}
	if path := r.spec.PayloadPath(w); path != "" {
		if cfg.PayloadFile, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("runner: payload_file: %w", err)
		}
	}
	c, err := r.host.Codec(w.Codec)
	if err != nil {
		return nil, err
	}
	closeCodec := func() {
		if cl, ok := c.(io.Closer); ok {
			cl.Close()
		}
	}
	cfg.Codec = c
	if w.Partitioner != "" {
		specStr := w.Partitioner
		cfg.NewPartitioner = func() (partitioner.Partitioner, error) { return r.host.Partitioner(specStr) }
	}
	alive, stop, err := r.startTarget(ctx, pr.index, &cfg)
	if err != nil {
		closeCodec()
		return nil, err
	}
	pr.cfg, pr.alive = cfg, alive
	pr.stop = func() error {
		defer closeCodec()
		return stop()
	}
	return pr, nil
}

// runRep runs repetition rep of a prepared point, adding it to
// the point. The error is for what stops the run (ctx, a broker that died);
// a failed repetition is recorded in it instead.
func (r *runner) runRep(ctx context.Context, pr *pointRun, rep int) error {
	if err := pr.alive(); err != nil {
		return err
	}
	cfg := pr.cfg
	cfg.Seed = r.spec.Seed + 1000*int64(pr.index) + int64(rep)
	cfg.TopicPrefix = fmt.Sprintf("weir-run-%s-p%d-r%d", r.runID, pr.index, rep)
	begin := time.Now()
	res, err := load.Run(ctx, cfg)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	rp := result.Rep{Started: res.Started.UTC(), Duration: res.Window, Metrics: res.Metrics, Brokers: res.Brokers}
	if res.Metrics == nil {
		rp.Started, rp.Metrics = begin.UTC(), map[string]float64{}
	}
	if err != nil {
		rp.Error = err.Error()
	}
	pr.pt.Reps = append(pr.pt.Reps, rp)
	return nil
}

// runPoint runs one point's repetitions, with its own broker for embedded
// targets. Failed repetitions are recorded in the point; the error is for
// what stops the run (ctx, a broker that will not start or stop).
func (r *runner) runPoint(ctx context.Context, section string, p spec.Point) (pt result.Point, err error) {
	label := section
	if p.ID != "" {
		label += " " + p.ID
	}
	pp := r.progress.point(label, r.pointEstimate(p.Workload))
	summary := "not run"
	defer func() { pp.end(summary) }()
	pr, err := r.preparePoint(ctx, section, p)
	if err != nil {
		if errors.Is(err, ErrBroker) {
			summary = "the target did not start"
		}
		return result.Point{ID: p.ID, Factors: slices.Clone(p.Factors)}, err
	}
	defer func() {
		if stopErr := pr.stop(); stopErr != nil && err == nil && ctx.Err() == nil {
			err = stopErr
		}
	}()
	reps := r.spec.Repetitions
	for rep := range reps {
		pp.rep(rep, reps)
		if err := r.runRep(ctx, pr, rep); err != nil {
			if ctx.Err() != nil {
				summary = fmt.Sprintf("interrupted after %d of %d reps", len(pr.pt.Reps), reps)
			} else {
				summary = fmt.Sprintf("broker died after %d of %d reps", len(pr.pt.Reps), reps)
			}
			return pr.pt, err
		}
	}
	summary = pointSummary(&pr.pt)
	return pr.pt, nil
}

// runInterleaved runs a section with interleave: every point set up (its
// broker started) before any load, then the repetitions in rounds, each
// round running one repetition of every point in order, so that a machine
// whose load drifts weighs on every point alike. Progress reports each
// point's repetition as a step. Points with a finished repetition are
// returned, in order.
func (r *runner) runInterleaved(ctx context.Context, sec spec.Section) (pts []result.Point, err error) {
	var prs []*pointRun
	defer func() {
		for _, pr := range prs {
			if stopErr := pr.stop(); stopErr != nil && err == nil && ctx.Err() == nil {
				err = stopErr
			}
			if len(pr.pt.Reps) > 0 {
				pts = append(pts, pr.pt)
			}
		}
	}()
	for _, p := range sec.Points {
		pr, err := r.preparePoint(ctx, sec.Name, p)
		if err != nil {
			return nil, err
		}
		prs = append(prs, pr)
	}
	reps := r.spec.Repetitions
	for rep := range reps {
		for i, pr := range prs {
			pp := r.progress.point(fmt.Sprintf("%s rep %d/%d", pr.label, rep+1, reps), r.pointEstimate(sec.Points[i].Workload)/time.Duration(reps))
			if err := r.runRep(ctx, pr, rep); err != nil {
				pp.end("stopped: " + err.Error())
				return nil, err
			}
			last := result.Point{Reps: pr.pt.Reps[len(pr.pt.Reps)-1:]}
			pp.end(pointSummary(&last))
		}
	}
	return nil, nil
}

// startTarget starts what a point of a managed target runs against (a
// broker or a cluster, with a fresh data directory) and points cfg at it;
// for a bootstrap target it only sets cfg.Bootstrap. alive reports a
// broker that died (checked before each rep); stop stops everything the
// point started and removes its data. Errors wrap ErrBroker.
func (r *runner) startTarget(ctx context.Context, index int, cfg *load.Config) (alive, stop func() error, err error) {
	alive = func() error { return nil }
	if !r.spec.Target.Managed() {
		cfg.Bootstrap = r.spec.Target.Bootstrap
		return alive, alive, nil
	}
	w := cfg.Workload
	if w.FlushPolicy != "" {
		cfg.TopicConfigs[topicconfig.FlushPolicy] = w.FlushPolicy
	}
	cfg.TopicConfigs[topicconfig.DurableAcks] = strconv.FormatBool(w.DurableAcks)
	dir := filepath.Join(r.workDir, fmt.Sprintf("point-%03d", index))
	var flags []string
	if r.opts.PluginDir != "" {
		// The broker resolves flush policy plugins itself.
		flags = append(flags, "--plugin-dir", r.opts.PluginDir)
	}
	// A listener other than PLAINTEXT: a throwaway CA and certificate
	// (and SCRAM user) of the point's own, beside its data directory,
	// shared by a cluster's brokers.
	secDir := dir + "-security"
	ls, err := newListenerSecurity(w.SecurityProtocol, secDir) // security.go
	if err != nil {
		os.RemoveAll(secDir)
		return nil, nil, err
	}
	if sc := r.spec.Target.Cluster; sc != nil {
		return r.startClusterTarget(ctx, index, dir, secDir, ls, append(flags, sc.BrokerFlags...), cfg) // after ours: the spec's win
	}
	var env []string
	openFiles := 0
	if e := r.spec.Target.Embedded; e != nil {
		flags = append(flags, e.BrokerFlags...) // after ours: the spec's win
		env, openFiles = e.BrokerEnv, e.OpenFilesLimit
	}
	o := brokerproc.Options{Weir: r.weir, DataDir: dir, Env: env, OpenFilesLimit: openFiles}
	if ls != nil {
		o.SecureProtocol = ls.protocol
		flags = append(slices.Clone(ls.flags), flags...) // before the spec's: they win
	}
	o.Flags = flags
	b, err := startBrokerOpts(ctx, o)
	if err != nil {
		os.RemoveAll(dir)
		os.RemoveAll(secDir)
		return nil, nil, err
	}
	stop = func() error {
		err := removeAfter(dir, b.stop())
		os.RemoveAll(secDir)
		return err
	}
	cfg.Bootstrap, cfg.Broker = b.Addr, b
	if ls != nil {
		opts, err := ls.ready(ctx, b.Addr, []string{b.SecureAddr})
		if err != nil {
			return nil, nil, errors.Join(err, stop())
		}
		cfg.Bootstrap, cfg.ClientOpts = b.SecureAddr, opts
	}
	alive = func() error {
		select {
		case <-b.Exited():
			return fmt.Errorf("%w: exited during the point (%v): %s", ErrBroker, b.ExitErr(), b.Output())
		default:
			return nil
		}
	}
	return alive, stop, nil
}

// removeAfter removes a point's data directory once what used it has
// stopped (with stopErr), and returns stopErr wrapped in ErrBroker.
func removeAfter(dir string, stopErr error) error {
	os.RemoveAll(dir)
	if stopErr != nil && !errors.Is(stopErr, ErrBroker) {
		return fmt.Errorf("%w: %w", ErrBroker, stopErr)
	}
	return stopErr
}

// pointSummary is the one line a finished point prints: its medians.
func pointSummary(pt *result.Point) string {
	var parts []string
	failed := 0
	for _, rp := range pt.Reps {
		if rp.Error != "" {
			failed++
		}
	}
	parts = append(parts, fmt.Sprintf("%d reps", len(pt.Reps)))
	if failed > 0 {
		parts[0] += fmt.Sprintf(" (%d failed)", failed)
	}
	add := func(metric, format string) {
		if vs := pt.Values(metric); len(vs) > 0 {
			parts = append(parts, fmt.Sprintf(format, report.FormatValue(median(vs))))
		}
	}
	add(result.ProduceMsgsPerSec, "produce %s msgs/s")
	add(result.ProduceMBPerSec, "%s MB/s")
	add(result.ConsumeMsgsPerSec, "consume %s msgs/s")
	add(result.AckP99, "ack p99 %s us")
	add(result.E2EP99, "e2e p99 %s us")
	add(result.CompressionRatio, "compression %s")
	return strings.Join(parts, ", ")
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
