package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/harness/presets"
	"github.com/weir-broker/weir/harness/runner"
	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/plugins/host"
)

const runLong = `Run an experiment: a spec file (YAML, or an OpenMessaging Benchmark workload)
or a built-in preset. The spec names the target (a weir broker started per
matrix point, a cluster of N weir brokers on a ZooKeeper started per matrix
point, or any Kafka bootstrap address), the workload, and the factors to
vary (codec, partitioner, flush policy, durable acks, replication factor,
min insync replicas, acks, batch size, linger, partitions, message size,
producers, consumers), as a full product or as a list of points; see the
harness/spec package documentation for the format.

The whole spec is checked before anything runs: unknown fields, impossible
values (a replication factor above the brokers, min_insync above the
replication factor at any point), missing plugins, an unreachable bootstrap
address or external ZooKeeper, and a missing ZooKeeper install fail at once,
naming the field. Then the disk and memory probes run (if the spec has any),
then every matrix point, each repetition in fresh topics (loaded only once
every partition has a leader and all its replicas in sync) and each point on
a fresh broker or cluster with fresh data directories. A cluster target
starts Debian's ZooKeeper (package zookeeper) on a free loopback port, or
uses a fresh chroot of an external one, then brokers 1..N on free loopback
ports (networking: netns puts each in a network namespace of its own, on a
bridge, as root; auto does when it can), and waits until every broker lists
all N. The brokers' CPU time is summed over the cluster (per broker in
run.json).

A section may name a baseline point: the report then gives every point's
medians as ratios of the baseline's (the replication preset sets RF 3 with
acks=all against RF 1 with acks=1 this way).

A spec with a durability block (--preset durability) runs the durability
experiment instead: each repetition produces until the broker is killed
(SIGKILL) or its power cut (in process, only fsynced data survives) at a
random moment, restarts it, reads everything back, and reports the
acknowledged records lost next to the throughput each flush policy and ack
mode bought.

A spec with a scale block (--preset scale, --preset scale-quick) runs the
partition-scale experiment instead: for each partition count, a fresh broker
(under target.embedded.open_files_limit when given) is filled with that many
partitions and timed: creating them, Metadata for all, a record to each read
back by one consumer, clean and unclean restarts to serving, a consumer of
up to 10,000 partitions with and without fetch sessions, and a few hot
partitions beside the idle ones against the same load alone. Descriptors,
memory and goroutines are read from the broker's /proc and pprof; the report
sets them against the issue's goals, and a step that fails is reported as
such, with the figures before it and none after.

Results go to results/runs/<UTC time>-<name>/ (or --out): run.json (every
repetition's figures and the environment), report.md (tables and plots),
bench.txt (Go benchmark format, for benchstat or weir compare) and plots/.
The tables are printed when the run ends; progress goes to stderr.

Ctrl-C stops the current point cleanly (clients first, then the brokers,
then a cluster's ZooKeeper), keeps the repetitions that finished, and writes
the report, marked interrupted.`

const runExample = `  weir run --preset quick
  weir run --preset replication
  weir run --preset scale --data-dir /mnt/nvme/weir
  weir run --list-presets
  weir run experiments/codecs.yaml --data-dir /mnt/nvme/weir --reps 10
  weir run omb-workloads/1-topic-16-partitions-1kb.yaml --dry-run`

// runSettings are `weir run`'s flags.
type runSettings struct {
	preset      string
	out         string
	dataDir     string
	reps        int
	seed        int64
	pluginDir   string
	listPresets bool
	dryRun      bool
	device      string
}

func newRunCmd() *cobra.Command {
	var s runSettings
	cmd := &cobra.Command{
		Use:     "run [spec.yaml]",
		Short:   "Run an experiment spec or preset and write its report",
		Long:    runLong,
		Example: runExample,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd, s, args)
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&s.preset, "preset", "", "run a built-in spec `NAME` instead of a file (see --list-presets)")
	f.StringVar(&s.out, "out", "", "results `dir`ectory (default: results/runs/<UTC time>-<name>)")
	f.StringVar(&s.dataDir, "data-dir", "", "`dir`ectory for the brokers' data and the probes' files, on the disk to measure (default: the spec's target.embedded.data_dir or target.cluster.data_dir, else a temporary directory)")
	f.IntVar(&s.reps, "reps", 0, "repetitions of each point, overriding the spec's (default: the spec's, 5 if it says none)")
	f.Int64Var(&s.seed, "seed", 0, "seed for payloads, keys and sizes, overriding the spec's")
	f.StringVar(&s.device, "device", "", "run on an emulated disk of this `profile` (see weir disk profiles), overriding the spec's device: (needs root)")
	f.StringVar(&s.pluginDir, "plugin-dir", "", "`dir`ectory searched for codec and partitioner plugins named by the spec")
	f.BoolVar(&s.listPresets, "list-presets", false, "list the built-in presets and exit")
	f.BoolVar(&s.dryRun, "dry-run", false, "validate the spec and print the expanded matrix, without running anything")
	return cmd
}

func runRun(cmd *cobra.Command, s runSettings, args []string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if s.listPresets {
		return writePresets(stdout)
	}
	var sp *spec.Spec
	var err error
	switch {
	case s.preset != "" && len(args) > 0:
		return errors.New("run: give a spec file or --preset, not both")
	case s.preset != "":
		sp, err = presets.Spec(s.preset)
	case len(args) == 1:
		sp, err = spec.Load(args[0])
	default:
		return errors.New("run: give a spec file or --preset NAME (weir run --list-presets lists them)")
	}
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("reps") {
		sp.Repetitions = s.reps
	}
	if cmd.Flags().Changed("seed") {
		sp.Seed = s.seed
	}
	if cmd.Flags().Changed("data-dir") {
		switch {
		case sp.Target.IsCluster():
			sp.Target.Cluster.DataDir = s.dataDir
		case sp.Target.IsEmbedded():
			if sp.Target.Embedded == nil {
				sp.Target.Embedded = &spec.Embedded{}
			}
			sp.Target.Embedded.DataDir = s.dataDir
		}
	}
	if cmd.Flags().Changed("device") {
		if sp.Device == nil {
			sp.Device = &spec.Device{}
		}
		sp.Device.Profile = s.device
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if s.dryRun {
		h := host.New(host.Config{Dir: s.pluginDir})
		defer h.Close()
		if err := sp.Validate(h); err != nil {
			return err
		}
		if err := sp.CheckTarget(ctx, 3*time.Second); err != nil {
			return err
		}
		return sp.WriteMatrix(stdout)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills the process the default way
	}()
	_, dir, err := runner.Run(ctx, runner.Options{
		Spec: sp, Out: s.out, DataDir: s.dataDir, PluginDir: s.pluginDir, Stdout: stdout, Stderr: stderr,
	})
	if dir != "" {
		fmt.Fprintf(stderr, "weir run: report in %s\n", dir)
	}
	return err
}

func writePresets(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PRESET\tDESCRIPTION")
	for _, p := range presets.All() {
		fmt.Fprintf(tw, "%s\t%s\n", p.Name, p.Summary)
	}
	return tw.Flush()
}
