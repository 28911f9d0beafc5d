package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/weir-broker/weir/harness/compare"
	"github.com/weir-broker/weir/harness/plan"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/spec"
)

const planLong = `Plan a cluster's capacity: brokers, disks per broker and their size,
partitions, network in and out per broker, and page cache, from a workload
and one broker's hardware profile, with every formula shown beside its
numbers and the input that bound each answer.

The workload comes from flags: ingress (--ingress-mbps or --records-per-sec,
with --record-size), --peak-factor, retention (--retention as a duration,
e.g. 168h or 7d, and/or --retention-bytes per partition), --rf,
--consumer-groups, and --partitions or the per-partition rates.

The hardware comes from a measured run (--profile: a results directory or
run.json of the plan-profile preset, or any run with a disk probe and a
load section), a YAML file of the same fields (--hardware), and flags that
override either (--disk-mbps, --network-mbps, --disks, --disk-size, ...).
A figure nobody gave is unknown, and the constraint it would set is listed
as skipped.

--validate RUN predicts a measured cluster run (the replication preset's
3 brokers at RF 3 on the same machine) from the --profile run, and prints
each prediction beside the run's median; the exit status is 1 when one is
off by more than --tolerance. MB is 2^20 bytes, GiB 2^30.`

type planFlags struct {
	w              plan.Workload
	retention      string
	retentionBytes string
	hw             plan.Hardware
	profile        []string
	hardware       string
	validate       []string
	tolerance      float64
	asJSON         bool
	format         string
	capacityJSON   string
	firstBrokerID  int
}

func newPlanCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan [flags]",
		Short: "Plan brokers, disks, partitions, network and page cache for a workload",
		Long:  planLong,
		Args:  cobra.NoArgs,
		Example: `  weir plan --ingress-mbps 50 --record-size 1024 --peak-factor 2 --retention 7d --rf 3 \
      --consumer-groups 3 --partition-produce-mbps 10 --disk-mbps 200 --disks 4 --network-mbps 1190
  weir run --preset plan-profile --out results/plan-profile
  weir plan --profile results/plan-profile --ingress-mbps 100 --record-size 100 --retention 24h --rf 3
  weir plan --profile results/plan-profile --validate results/plan-validate/replication`,
		RunE: func(cmd *cobra.Command, _ []string) error { return runPlan(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.Float64Var(&f.w.IngressMBps, "ingress-mbps", 0, "average produce rate, MB/s of record key+value bytes")
	fl.Float64Var(&f.w.RecordsPerSec, "records-per-sec", 0, "average produce rate in records/s (instead of --ingress-mbps)")
	fl.Float64Var(&f.w.RecordBytes, "record-size", 0, "average record key+value size, bytes (required)")
	fl.Float64Var(&f.w.PeakFactor, "peak-factor", 1, "peak over average ingress")
	fl.StringVar(&f.retention, "retention", "", "how long records are kept: a Go duration or Nd days (168h, 7d)")
	fl.StringVar(&f.retentionBytes, "retention-bytes", "", "retention.bytes per partition (1GiB, 500MB); with --retention the smaller wins")
	fl.IntVar(&f.w.ReplicationFactor, "rf", 3, "replication factor")
	fl.IntVar(&f.w.ConsumerGroups, "consumer-groups", 1, "consumer groups reading everything (fan-out)")
	fl.IntVar(&f.w.Partitions, "partitions", 0, "partitions to plan for (0: max(W/p, W/c) from the per-partition rates)")
	fl.Float64Var(&f.w.PartitionProduceMBps, "partition-produce-mbps", 0, "per-partition producer rate p (0: the profile's)")
	fl.Float64Var(&f.w.PartitionConsumeMBps, "partition-consume-mbps", 0, "per-partition consumer rate c (0: p)")
	fl.DurationVar(&f.w.TailWindow, "tail-window", time.Minute, "consumer lag to serve from page cache")
	fl.StringSliceVar(&f.profile, "profile", nil, "measured run(s) to take the hardware profile from (results directories or run.json; several: medians over all their repetitions)")
	fl.StringVar(&f.hardware, "hardware", "", "YAML file of hardware figures (the fields of --json's hardware)")
	fl.Float64Var(&f.hw.BrokerProduceMBps, "broker-produce-mbps", 0, "MB/s one broker absorbs (overrides the profile)")
	fl.Float64Var(&f.hw.BrokerConsumeMBps, "broker-consume-mbps", 0, "MB/s one broker serves (overrides the profile)")
	fl.Float64Var(&f.hw.DiskSeqWriteMBps, "disk-mbps", 0, "one disk's sequential write MB/s (overrides the profile)")
	fl.IntVar(&f.hw.DisksPerBroker, "disks", 1, "disks (log directories) per broker")
	fl.Float64Var(&f.hw.DiskGiB, "disk-size", 0, "one disk's size in GiB (0: size the disks to the plan)")
	fl.Float64Var(&f.hw.NetworkMBps, "network-mbps", 0, "NIC rate per direction, MB/s (10 GbE: 1190)")
	fl.Float64Var(&f.hw.Cores, "cores", 0, "CPU cores per broker (overrides the profile)")
	fl.Float64Var(&f.hw.MemoryGiB, "memory-gib", 0, "memory per broker, GiB (overrides the profile)")
	fl.StringSliceVar(&f.validate, "validate", nil, "measured cluster run(s) of one spec to predict from --profile and compare with (several: medians over all their repetitions)")
	fl.Float64Var(&f.tolerance, "tolerance", 0.2, "with --validate: the largest relative error that passes")
	fl.BoolVar(&f.asJSON, "json", false, "print the plan (or the comparison) as JSON")
	fl.StringVar(&f.format, "format", "text", "table format: text or md (Markdown)")
	fl.StringVar(&f.capacityJSON, "capacity-json", "", "write Cruise Control's capacity.json for the planned brokers to FILE")
	fl.IntVar(&f.firstBrokerID, "first-broker-id", 1, "broker id of the first planned broker in --capacity-json")
	return cmd
}

func runPlan(cmd *cobra.Command, f *planFlags) error {
	if f.format != "text" && f.format != "md" {
		return fmt.Errorf("plan: --format %q: want text or md", f.format)
	}
	hw, err := planHardware(cmd.Flags(), f)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if len(f.validate) > 0 {
		return planValidate(cmd, f, hw)
	}
	w := f.w
	if w.Retention, err = parseRetention(f.retention); err != nil {
		return err
	}
	if f.retentionBytes != "" {
		b, err := spec.ParseByteSize(f.retentionBytes)
		if err != nil || b < 0 {
			return fmt.Errorf("%w: --retention-bytes %q: want a byte size ≥ 0", plan.ErrInput, f.retentionBytes)
		}
		w.RetentionBytes = float64(b)
	}
	p, err := plan.Make(w, hw)
	if err != nil {
		return err
	}
	if f.capacityJSON != "" {
		if err := os.WriteFile(f.capacityJSON, p.Capacity(f.firstBrokerID).JSON(), 0o644); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
	}
	if f.asJSON {
		return writeJSON(out, p)
	}
	return p.Write(out, f.format == "md")
}

func planValidate(cmd *cobra.Command, f *planFlags, hw plan.Hardware) error {
	if len(f.profile) == 0 && f.hardware == "" {
		return fmt.Errorf("%w: --validate needs --profile (a run of the plan-profile preset) to predict from", plan.ErrInput)
	}
	run, err := loadRuns(f.validate)
	if err != nil {
		return err
	}
	cs, err := plan.Compare(hw, run)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.asJSON {
		if err := writeJSON(out, struct {
			Hardware    plan.Hardware     `json:"hardware"`
			Comparisons []plan.Comparison `json:"comparisons"`
		}{hw, cs}); err != nil {
			return err
		}
	} else {
		if _, err := fmt.Fprintf(out, "profile %s (host CPU %.3g cores, k_c %.3g, k_l %.3g, k_s %.3g, k_cc %.3g ms/MB) predicting %s (%d brokers, weir commit %s)\n\n",
			hw.Source, hw.HostCPU, hw.ProducerCPUPerMB*1000, hw.AppendCPUPerMB*1000, hw.ServeCPUPerMB*1000, hw.ConsumerCPUPerMB*1000,
			strings.Join(f.validate, ", "), run.Env.Brokers, run.Env.WeirCommit); err != nil {
			return err
		}
		if err := plan.WriteComparisons(out, cs, f.tolerance, f.format == "md"); err != nil {
			return err
		}
	}
	var off []string
	for _, c := range cs {
		if c.Fails(f.tolerance) {
			off = append(off, fmt.Sprintf("%s %s %s %+.1f%%", c.Section, c.Point, c.Metric, 100*c.Error))
		}
	}
	if len(off) > 0 {
		return fmt.Errorf("plan: %d predictions off by more than %.0f%%: %s", len(off), 100*f.tolerance, strings.Join(off, "; "))
	}
	return nil
}

// planHardware is the profile run's figures, then the hardware file's,
// then the flags the command line set.
func planHardware(fl *pflag.FlagSet, f *planFlags) (plan.Hardware, error) {
	var hw plan.Hardware
	source := strings.Join(f.profile, ", ")
	if len(f.profile) > 0 {
		run, err := loadRuns(f.profile)
		if err != nil {
			return hw, err
		}
		if hw, err = plan.ProfileFromRun(run, source); err != nil {
			return hw, err
		}
	}
	if f.hardware != "" {
		b, err := os.ReadFile(f.hardware)
		if err != nil {
			return hw, fmt.Errorf("plan: hardware file: %w", err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&hw); err != nil {
			return hw, fmt.Errorf("%w: hardware file %s: %w", plan.ErrInput, f.hardware, err)
		}
		if hw.Source == "" || hw.Source == source {
			hw.Source = strings.TrimPrefix(hw.Source+" + "+f.hardware, " + ")
		}
	}
	set := func(name string, dst *float64, v float64) {
		if fl.Changed(name) {
			*dst = v
		}
	}
	set("broker-produce-mbps", &hw.BrokerProduceMBps, f.hw.BrokerProduceMBps)
	set("broker-consume-mbps", &hw.BrokerConsumeMBps, f.hw.BrokerConsumeMBps)
	set("disk-mbps", &hw.DiskSeqWriteMBps, f.hw.DiskSeqWriteMBps)
	set("disk-size", &hw.DiskGiB, f.hw.DiskGiB)
	set("network-mbps", &hw.NetworkMBps, f.hw.NetworkMBps)
	set("cores", &hw.Cores, f.hw.Cores)
	set("memory-gib", &hw.MemoryGiB, f.hw.MemoryGiB)
	if fl.Changed("disks") || hw.DisksPerBroker == 0 {
		hw.DisksPerBroker = f.hw.DisksPerBroker
	}
	if hw.Source == "" {
		hw.Source = "flags"
	} else if fl.Changed("broker-produce-mbps") || fl.Changed("broker-consume-mbps") || fl.Changed("disk-mbps") || fl.Changed("disk-size") ||
		fl.Changed("network-mbps") || fl.Changed("cores") || fl.Changed("memory-gib") || fl.Changed("disks") {
		hw.Source += " + flags"
	}
	return hw, nil
}

// loadRuns reads results directories or run.json files and pools them
// (plan.MergeRuns).
func loadRuns(paths []string) (*result.Run, error) {
	var runs []*result.Run
	for _, p := range paths {
		r, err := compare.Load(p)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return plan.MergeRuns(runs...)
}

// parseRetention reads a Go duration, or a whole number of days ("7d").
func parseRetention(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%w: --retention %q: want a duration (168h) or days (7d)", plan.ErrInput, s)
		}
		return time.Duration(n * 24 * float64(time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: --retention %q: want a duration (168h) or days (7d)", plan.ErrInput, s)
	}
	return d, nil
}

func writeJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("plan: encode: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
