// Package result holds what an experiment run produces, the one schema that
// the runner writes, and the report, the plots and `weir compare` read.
//
// A Run has sections (the disk probe, the load matrix, ...). A section's
// points are the cells of its factor matrix (codec=zstd/flush=never); each
// point holds one Rep per repetition, and a Rep is a flat map of metrics.
// Statistics (median, spread, confidence intervals) are computed from the
// Reps when reporting, never stored, so a results directory keeps the raw
// figures and any later tool can recompute them.
//
// Metric names carry their unit as a suffix ("produce-MB/s", "ack-p99-us"),
// the way Go benchmark lines do, so the benchmark-format output reads
// naturally and benchstat can slice it.
package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// SchemaVersion is the Version of runs this package writes.
const SchemaVersion = 1

// Metric names used by the load and probe experiments.
const (
	ProduceMsgsPerSec = "produce-msgs/s"
	ProduceMBPerSec   = "produce-MB/s"
	ConsumeMsgsPerSec = "consume-msgs/s"
	ConsumeMBPerSec   = "consume-MB/s"

	AckP50  = "ack-p50-us" // produce request sent -> acknowledged, per record
	AckP95  = "ack-p95-us"
	AckP99  = "ack-p99-us"
	AckP999 = "ack-p99.9-us"
	AckMax  = "ack-max-us"
	E2EP50  = "e2e-p50-us" // record created -> consumed
	E2EP95  = "e2e-p95-us"
	E2EP99  = "e2e-p99-us"
	E2EP999 = "e2e-p99.9-us"
	E2EMax  = "e2e-max-us"

	BrokerCPUSeconds = "broker-cpu-s" // user+system CPU of the broker (a cluster's: all its brokers) during the measured window
	ClientCPUSeconds = "client-cpu-s" // user+system CPU of the load generator's process (producers and consumers) during the measured window
	// BrokerCPUPerGBProduced is broker-cpu-s over the GB (2^30 bytes, as
	// MB is 2^20) produced in the window: all the broker did in it, live
	// consumers served included.
	BrokerCPUPerGBProduced = "broker-cpu-s-per-GB-produced"
	// BrokerConsumeCPUSeconds (consume: backlog) is the broker's CPU time
	// while the consumers read the backlog, from their start to the last
	// record; BrokerCPUPerGBConsumed divides it by the GB they read.
	BrokerConsumeCPUSeconds = "broker-consume-cpu-s"
	BrokerCPUPerGBConsumed  = "broker-cpu-s-per-GB-consumed"
	DiskWriteBytes          = "disk-write-bytes" // bytes the broker wrote to its data directory's device
	Fsyncs                  = "fsyncs"
	CompressionRatio        = "compression-ratio" // uncompressed record bytes / stored batch bytes
	PartitionSkew           = "partition-skew"    // max records on one partition / mean per partition

	MsgsProduced  = "msgs-produced" // acknowledged
	MsgsConsumed  = "msgs-consumed"
	BytesProduced = "bytes-produced" // record values+keys acknowledged
	BytesConsumed = "bytes-consumed"

	// Probes.
	MBPerSec     = "MB/s"
	OpsPerSec    = "ops/s"
	ValuesPerSec = "values/s"
	LatP50       = "p50-us"
	LatP99       = "p99-us"
	LatP999      = "p99.9-us"
	LatMax       = "max-us"
)

// HigherIsBetter reports the direction of a metric, for reports and
// comparisons: throughputs and compression ratio go up, latencies, CPU, bytes
// written, fsyncs and skew go down. Counts (msgs-produced...) are neither;
// they report false.
func HigherIsBetter(metric string) bool {
	switch {
	case strings.HasSuffix(metric, "/s"), metric == CompressionRatio:
		return true
	}
	return false
}

// Run is one execution of an experiment spec.
type Run struct {
	Version int       `json:"version"`
	Name    string    `json:"name"`    // the spec's name (or preset name)
	Spec    string    `json:"spec"`    // the spec file as given, for reproduction
	Seed    int64     `json:"seed"`    // the seed the run used
	Env     Env       `json:"env"`     // where it ran
	Started time.Time `json:"started"` // wall clock
	Ended   time.Time `json:"ended"`   // wall clock
	// Interrupted is set when the run stopped early (Ctrl-C): the points that
	// finished are kept, the rest are missing.
	Interrupted bool `json:"interrupted,omitempty"`
	// Skipped says why the run measured nothing (an emulated disk that could not be mounted here).
	Skipped    string      `json:"skipped,omitempty"`
	Sections   []Section   `json:"sections"`
	References []Reference `json:"references,omitempty"`
}

// Section is one experiment of a run: a factor matrix and its points.
type Section struct {
	Name    string   `json:"name"`    // "disk", "memory", "load", ...
	Factors []string `json:"factors"` // factor names, in matrix order
	Points  []Point  `json:"points"`
	// Baseline is the ID of the point the report sets the others against
	// (ratios of medians); "" for none, as in every run written before
	// baselines existed.
	Baseline string `json:"baseline,omitempty"`
	// OwnReport marks a section whose experiment's package writes its
	// tables and plots (the scale experiment's figures are per step, and
	// some reps fail part way, their earlier figures still good): the
	// generic report lists only its failed repetitions.
	OwnReport bool `json:"own_report,omitempty"`
}

// Point is one cell of a section's matrix.
type Point struct {
	// ID is the factor values joined in matrix order, "codec=zstd/flush=never",
	// the form Go benchmark names use for sub-benchmarks.
	ID      string        `json:"id"`
	Factors []FactorValue `json:"factors"`
	Reps    []Rep         `json:"reps"`
}

// FactorValue is one factor's level at a point.
type FactorValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Rep is one repetition of a point.
type Rep struct {
	Started  time.Time          `json:"started"`
	Duration time.Duration      `json:"duration"` // the measured window
	Metrics  map[string]float64 `json:"metrics"`
	// Error is set when the repetition failed; its Metrics may be partial and
	// statistics skip it.
	Error string `json:"error,omitempty"`
	// Brokers are a cluster target's per-broker figures over the window
	// (broker-cpu-s, disk-write-bytes, fsyncs), by broker id; Metrics hold
	// their sums. Absent for other targets.
	Brokers map[string]map[string]float64 `json:"brokers,omitempty"`
	// Faults are the faults a cluster fault-lab run injected, in order,
	// as they happened; Timeline is the cluster as sampled through the
	// run. Absent for other runs.
	Faults   []Fault  `json:"faults,omitempty"`
	Timeline []Sample `json:"timeline,omitempty"`
	// Failures counts a fault-lab run's records whose produce failed, by
	// the client's error.
	Failures map[string]int64 `json:"failures,omitempty"`
}

// Fault is one fault of a cluster fault-lab run, as it happened. Times
// count from the run's first acknowledgement.
type Fault struct {
	Kind string `json:"kind"`
	// Target says what the fault aimed at ("leader of 0/1", "controller",
	// "broker 2", "zookeeper", "every broker").
	Target string `json:"target"`
	// Broker is the broker struck (0: ZooKeeper, or every broker).
	Broker int32         `json:"broker,omitempty"`
	At     time.Duration `json:"at"`
	// Healed is when the fault ended (the broker restarted or woke up,
	// ZooKeeper served again).
	Healed time.Duration `json:"healed"`
	// Lost are acknowledged records lost that were acknowledged after the
	// previous fault struck and before this one: those it most likely
	// cost.
	Lost  int64  `json:"lost"`
	Error string `json:"error,omitempty"`
}

// Sample is the cluster at one moment of a fault-lab run, from Metadata:
// partitions with fewer in-sync replicas than replicas, partitions
// without a leader, and the largest replica lag (records) a leader
// reported.
type Sample struct {
	At              time.Duration `json:"at"`
	UnderReplicated int           `json:"under_replicated"`
	Offline         int           `json:"offline"`
	MaxLag          int64         `json:"max_lag"`
}

// Reference is a published figure to print beside this machine's: the
// DESIGN.md §8 comparisons and Kreps' 2014 benchmark.
type Reference struct {
	Section string  `json:"section"` // which section it belongs beside
	PointID string  `json:"point"`   // the point it compares with ("" = the section as a whole)
	Metric  string  `json:"metric"`
	Value   float64 `json:"value"`
	Label   string  `json:"label"`  // what was measured, in words
	Source  string  `json:"source"` // citation
}

// Env is the environment a run measured, captured at its start.
type Env struct {
	Hostname   string `json:"hostname"`
	CPUModel   string `json:"cpu_model"`
	CPUs       int    `json:"cpus"`
	MemoryMiB  int64  `json:"memory_mib"`
	Kernel     string `json:"kernel"`
	GoVersion  string `json:"go_version"`
	WeirCommit string `json:"weir_commit"` // "unknown" when the binary has no VCS stamp
	// The data directory and what it sits on.
	DataDir      string `json:"data_dir"`
	FileSystem   string `json:"file_system"`   // ext4, xfs, tmpfs, ...
	MountOptions string `json:"mount_options"` // rw,relatime,...
	Device       string `json:"device"`        // /dev/vda1
	DeviceModel  string `json:"device_model"`
	Rotational   *bool  `json:"rotational,omitempty"` // nil when unknown
	Scheduler    string `json:"scheduler"`            // mq-deadline, none, ...
	RAID         string `json:"raid,omitempty"`       // raid5 (from /proc/mdstat or sysfs), "" when none
	// Target is "embedded", "cluster" or the bootstrap address measured.
	Target string `json:"target"`
	// Brokers is how many brokers the runner started per point: 1 for an
	// embedded broker, the cluster's count; 0 for a bootstrap target (and
	// in runs written before clusters).
	Brokers int `json:"brokers,omitempty"`
	// ZooKeeper is a cluster target's ZooKeeper: "embedded" (one started
	// per point) or the external connect string; "" otherwise.
	ZooKeeper string `json:"zookeeper,omitempty"`
	// Networking is how the runner's brokers reached each other and the
	// clients: "loopback" (every process on 127.0.0.1) or "netns" (each
	// broker in a network namespace of its own, on a bridge); "" for a
	// bootstrap target.
	Networking string `json:"networking,omitempty"`
	// TLSFetch says how the broker sent Fetch responses on the TLS
	// listeners a run's points used (security_protocol SSL or SASL_SSL):
	// the copy path, and whether this kernel would have kTLS; "" when no
	// point used TLS.
	TLSFetch string `json:"tls_fetch,omitempty"`
	// BrokerOpenFiles is the open-file limit (RLIMIT_NOFILE) the broker
	// process ran under, as its /proc/<pid>/limits said ("soft 20000,
	// hard 20000"); recorded by experiments that read it (scale), "" in
	// others.
	BrokerOpenFiles string `json:"broker_open_files,omitempty"`
	// EmulatedDevice is the emulated disk the data directory was on (spec device:): its profile, numbers and time
	// mode; "" for a real device.
	EmulatedDevice string `json:"emulated_device,omitempty"`
	// ProbeRandom4KUs is the disk probe's median latency of random 4 KiB O_DIRECT reads, in µs, when the run
	// probed them; DiskVerdict says what that latency makes the device, and whether the kernel's rotational flag
	// agrees.
	ProbeRandom4KUs float64 `json:"probe_random_4k_us,omitempty"`
	DiskVerdict     string  `json:"disk_verdict,omitempty"`
}

// Write stores r as indented JSON at path.
func (r *Run) Write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("result: encode: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	return nil
}

// ErrSchema: a results file is not a run this package can read.
var ErrSchema = errors.New("result: unsupported results file")

// Read loads a run written by Write.
func Read(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSchema, path, err)
	}
	if r.Version != SchemaVersion {
		return nil, fmt.Errorf("%w: %s: version %d, want %d", ErrSchema, path, r.Version, SchemaVersion)
	}
	return &r, nil
}

// Values returns a metric's values over the successful reps of p, in rep
// order; reps without the metric are skipped.
func (p *Point) Values(metric string) []float64 {
	var vs []float64
	for _, r := range p.Reps {
		if r.Error != "" {
			continue
		}
		if v, ok := r.Metrics[metric]; ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// Factor returns the level of factor name at p, and whether p has it.
func (p *Point) Factor(name string) (string, bool) {
	for _, f := range p.Factors {
		if f.Name == name {
			return f.Value, true
		}
	}
	return "", false
}
