package spec

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/weir-broker/weir/harness/result"
)

// Durability makes a spec a durability experiment (package
// harness/durability): every matrix point runs, once per fault and
// repetition, the workload's producers against a fresh broker until a
// fault strikes at a random moment of [warmup, warmup+duration), restarts
// the broker, and reads everything back to count what acknowledged data
// was lost, what was corrupted, and whether offsets continue.
//
// Each point's workload supplies topics, partitions, message_size (at
// least 20 bytes: each record carries its id, send time and checksum),
// producers, rate, acks (1 or all), codec, flush_policy, durable_acks,
// batch_max_bytes, linger and topic_config. Payloads are seeded random
// bytes, records are keyless and spread round robin, and the experiment
// reads everything back itself, so payload, payload_file, keys,
// partitioner, consumers and consume are not used (and the first four
// are refused).
type Durability struct {
	// Faults are levels of one more factor, "fault", varying fastest:
	// kill (SIGKILL of a `weir broker` subprocess, restarted on the same
	// data directory: the page cache survives) and power (a simulated
	// power cut of an in-process broker on an in-memory file system: only
	// fsynced data survives), and disk-power (a real power cut of a
	// `weir broker` process whose data directory is an emulated disk of the
	// spec's device: SIGKILL, the disk loses what no fsync covered, mounted
	// again, restarted; needs device:). Default [kill, power]. A cluster's:
	// ClusterFaults or mixed; disk-power-cut needs device:, which then
	// gives each broker a disk of its own.
	Faults []string `yaml:"faults"`
	// Torn is the fraction of power cuts whose crash clone keeps a random
	// prefix of each file's unsynced bytes (torn writes) rather than none.
	// Default 0.5.
	Torn float64 `yaml:"torn"`
	// SyncLatency is the simulated duration of an fsync on the power
	// fault's in-memory file system, so its throughput pays what a disk
	// charges. Default 0 (memory speed).
	SyncLatency time.Duration `yaml:"sync_latency"`
	// RecoveryTimeout bounds a restart, until every partition serves a
	// fetch. Default 30s.
	RecoveryTimeout time.Duration `yaml:"recovery_timeout"`
	// VerifyRecords are produced per partition after recovery, to check
	// that offsets continue right after the recovered end. Default 10.
	VerifyRecords int `yaml:"verify_records"`
	// AgeSlack is added to a flush policy's Age bound when checking it,
	// besides the run's longest fsync and the timer lateness measured in
	// the broker's process: the flushing goroutine's own run. Default 25ms.
	AgeSlack time.Duration `yaml:"age_slack"`

	// The cluster fault lab (a cluster target): each repetition starts a
	// fresh cluster and injects FaultsPerRun faults of the point's kind
	// (ClusterFaults, or mixed: each drawn from MixedKinds, default all),
	// one after the other at seeded moments of [warmup, warmup+duration),
	// each lasting FaultHold. Default faults [mixed], 3 per run, 2s.
	FaultsPerRun int           `yaml:"faults_per_run"`
	FaultHold    time.Duration `yaml:"fault_hold"`
	MixedKinds   []string      `yaml:"mixed_kinds"`
	// HealTimeout bounds the wait, after the last fault, until every
	// partition is led with a full ISR. Default 1m.
	HealTimeout time.Duration `yaml:"heal_timeout"`
}

// The cluster faults (package harness/durability), and mixed.
var ClusterFaults = []string{"kill-leader", "kill-controller", "kill-random", "pause", "session-expiry", "term",
	"rolling-restart", "zk-stop", "link-down", "slow-links", "flaky-links", "one-way", "disk-full", "power-cut",
	FaultDiskPowerCut}

// FaultMixed draws each fault of a run from the cluster faults.
const FaultMixed = "mixed"

// FactorFault is the factor a durability experiment adds.
const FactorFault = "fault"

// Fault levels.
const (
	FaultKill  = "kill"
	FaultPower = "power"
	// FaultDiskPower cuts the power of a real `weir broker` process on an
	// emulated disk (the spec's device:), and FaultDiskPowerCut that of
	// any broker of a cluster, each on a disk of its own.
	FaultDiskPower    = "disk-power"
	FaultDiskPowerCut = "disk-power-cut"
)

// DefaultDurability returns the defaults of a durability block.
func DefaultDurability() Durability {
	return Durability{
		Faults:          []string{FaultKill, FaultPower},
		Torn:            0.5,
		RecoveryTimeout: 30 * time.Second,
		VerifyRecords:   10,
		AgeSlack:        25 * time.Millisecond,
		FaultsPerRun:    3,
		FaultHold:       2 * time.Second,
		HealTimeout:     time.Minute,
	}
}

// UnmarshalYAML decodes a durability block over the defaults, rejecting
// unknown fields like the rest of the spec.
func (d *Durability) UnmarshalYAML(n *yaml.Node) error {
	type plain Durability // without this method
	p := plain(DefaultDurability())
	p.Faults = nil // a list given replaces the default, never appends to it
	if err := decodeStrict(n, "durability", &p); err != nil {
		return err
	}
	*d = Durability(p) // Faults stays nil when not given: its default depends on the target
	return nil
}

// MinDurabilityMessageSize is the smallest record of a durability
// experiment: id, send time and checksum.
const MinDurabilityMessageSize = 20

func (s *Spec) validateDurability(p *problems) {
	d := s.Durability
	if d == nil {
		return
	}
	cluster := s.Target.IsCluster()
	if !s.Target.IsEmbedded() && !cluster {
		p.add("durability", "only for embedded and cluster targets: the experiment kills, stops and restarts brokers")
	}
	if s.NoLoad {
		p.add("durability", "a durability experiment needs the load (no_load: true)")
	}
	known := []string{FaultKill, FaultPower, FaultDiskPower}
	if cluster {
		known = append(slices.Clone(ClusterFaults), FaultMixed)
	}
	if d.Faults == nil {
		d.Faults = DefaultDurability().Faults
		if cluster {
			d.Faults = []string{FaultMixed}
		}
	}
	if len(d.Faults) == 0 {
		p.add("durability.faults", "give at least one of %s", strings.Join(known, ", "))
	}
	seen := map[string]int{}
	for i, f := range d.Faults {
		field := fmt.Sprintf("durability.faults[%d]", i)
		if !slices.Contains(known, f) {
			p.add(field, "unknown fault %q for this target (known: %s)", f, strings.Join(known, ", "))
		}
		if f == "zk-stop" && cluster && s.Target.Cluster.ZooKeeper != ZooKeeperEmbedded {
			p.add(field, "zk-stop stops the ZooKeeper the runner starts; this target's is external")
		}
		if (f == FaultDiskPower || f == FaultDiskPowerCut) && s.Device == nil {
			p.add(field, "%s cuts the power of an emulated disk: needs the device: field (its profile and time)", f)
		}
		if f == "disk-full" && cluster && s.Device != nil {
			p.add(field, "disk-full fills a broker's tmpfs; with device: the brokers run on emulated disks, which are not filled")
		}
		if f == "link-down" && cluster && s.Target.Cluster.Networking == "loopback" {
			p.add(field, "link-down cuts a broker's network namespace off: needs target.cluster.networking netns (or auto)")
		}
		if j, dup := seen[f]; dup {
			p.add(field, "repeats level %d (%s)", j, f)
		}
		seen[f] = i
	}
	if d.Torn < 0 || d.Torn > 1 {
		p.add("durability.torn", "must be in 0..1 (a fraction of the power cuts), got %v", d.Torn)
	}
	if d.SyncLatency < 0 || d.SyncLatency > time.Second {
		p.add("durability.sync_latency", "must be in 0..1s, got %v", d.SyncLatency)
	}
	if d.RecoveryTimeout <= 0 {
		p.add("durability.recovery_timeout", "must be > 0, got %v", d.RecoveryTimeout)
	}
	if d.VerifyRecords < 1 || d.VerifyRecords > 10000 {
		p.add("durability.verify_records", "must be in 1..10000, got %d", d.VerifyRecords)
	}
	if d.AgeSlack < 0 {
		p.add("durability.age_slack", "must be >= 0, got %v", d.AgeSlack)
	}
	if d.FaultsPerRun < 1 || d.FaultsPerRun > 10000 {
		p.add("durability.faults_per_run", "must be in 1..10000, got %d", d.FaultsPerRun)
	}
	if d.FaultHold <= 0 {
		p.add("durability.fault_hold", "must be > 0, got %v", d.FaultHold)
	}
	if d.HealTimeout <= 0 {
		p.add("durability.heal_timeout", "must be > 0, got %v", d.HealTimeout)
	}
	for i, k := range d.MixedKinds {
		if k == FaultDiskPowerCut && s.Device == nil {
			p.add(fmt.Sprintf("durability.mixed_kinds[%d]", i), "%s needs the device: field (the brokers' emulated disks)", k)
		}
		if !slices.Contains(ClusterFaults, k) {
			p.add(fmt.Sprintf("durability.mixed_kinds[%d]", i), "unknown cluster fault %q (known: %s)", k, strings.Join(ClusterFaults, ", "))
		}
	}
	if !cluster && (len(d.MixedKinds) > 0) {
		p.add("durability.mixed_kinds", "only for cluster targets")
	}
}

// validateDurabilityWorkload checks what a durability experiment needs of
// one point's workload.
func validateDurabilityWorkload(p *problems, field string, w *Workload) {
	f := func(name string) string { return field + "." + name }
	if w.Acks == "0" {
		p.add(f("acks"), "acks 0 acknowledges nothing, so a durability experiment has nothing to check: use 1 or all")
	}
	if lo, _ := w.MessageSize.Bounds(); lo < MinDurabilityMessageSize {
		p.add(f("message_size"), "durability records carry a %d-byte header (id, send time, checksum): must be >= %d, got %d",
			MinDurabilityMessageSize, MinDurabilityMessageSize, lo)
	}
	if w.Payload != "random" || w.PayloadFile != "" {
		p.add(f("payload"), "durability payloads are seeded random bytes; payload and payload_file are not used")
	}
	if w.Keys.Kind != "none" {
		p.add(f("keys"), "durability records have no keys (they go to partitions round robin)")
	}
	if w.Partitioner != "" {
		p.add(f("partitioner"), "durability records go to partitions round robin; no partitioner is used")
	}
	if w.Warmup+w.Duration <= 0 {
		p.add(f("duration"), "the fault strikes in [warmup, warmup+duration): give it room")
	}
	if w.UncleanElection && w.ReplicationFactor < 2 {
		p.add(f("unclean_election"), "needs replication_factor 2 or more: one replica has nobody to fall back on")
	}
}

// durabilitySections turns load sections into durability sections: named
// "durability" (or "durability-" + the experiment's name), with the fault
// factor last, varying fastest.
func (s *Spec) durabilitySections(load []Section) []Section {
	out := make([]Section, 0, len(load))
	for _, sec := range load {
		ds := Section{Name: "durability" + strings.TrimPrefix(sec.Name, "load"), Factors: append(slices.Clone(sec.Factors), FactorFault)}
		for _, p := range sec.Points {
			for _, f := range s.Durability.Faults {
				dp := p
				dp.Fault = f
				dp.Factors = append(slices.Clone(p.Factors), result.FactorValue{Name: FactorFault, Value: f})
				if dp.ID != "" {
					dp.ID += "/"
				}
				dp.ID += FactorFault + "=" + f
				ds.Points = append(ds.Points, dp)
			}
		}
		out = append(out, ds)
	}
	return out
}

// write prints the durability line of a dry run.
func (d *Durability) write(w io.Writer) {
	if len(d.Faults) > 0 && (slices.Contains(ClusterFaults, d.Faults[0]) || d.Faults[0] == FaultMixed) {
		kinds := "every kind"
		if len(d.MixedKinds) > 0 {
			kinds = strings.Join(d.MixedKinds, ", ")
		}
		fmt.Fprintf(w, "durability (cluster fault lab): faults %s (mixed: %s); %d per run, one after the other at seeded moments "+
			"of [warmup, warmup+duration), each held %v; %d records per partition after healing; heal timeout %v\n",
			strings.Join(d.Faults, ", "), kinds, d.FaultsPerRun, d.FaultHold, d.VerifyRecords, d.HealTimeout)
		return
	}
	power := ""
	if slices.Contains(d.Faults, FaultPower) {
		power = fmt.Sprintf("torn writes in %g%% of power cuts; fsync latency %v (power); ", d.Torn*100, d.SyncLatency)
	}
	if slices.Contains(d.Faults, FaultDiskPower) {
		power += "disk-power: on the emulated disk, unsynced writes lost whole (no torn writes); "
	}
	fmt.Fprintf(w, "durability: faults %s; the fault at a uniformly random moment of [warmup, warmup+duration); "+
		"%s%d records per partition after recovery; recovery timeout %v; age slack %v\n",
		strings.Join(d.Faults, ", "), power, d.VerifyRecords, d.RecoveryTimeout, d.AgeSlack)
}
