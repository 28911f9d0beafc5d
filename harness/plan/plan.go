package plan

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// ErrInput: a workload or hardware value is missing or out of range; the
// message names the field.
var ErrInput = errors.New("plan: invalid input")

// MB is the unit of every MB/s figure: 2^20 bytes, as the harness's.
const MB = 1 << 20

// Defaults and headroom the formulas use (see the package doc).
const (
	// RecordOverheadBytes is the v2 record format's per-record overhead:
	// length, attributes, timestamp and offset deltas, key and value
	// lengths, header count, as varints (7 to 12 bytes for small records).
	RecordOverheadBytes = 10
	// BatchHeaderBytes is a record batch's fixed header.
	BatchHeaderBytes = 61
	// BatchBytes is the batch size the overhead assumes: the Java
	// producer's batch.size default.
	BatchBytes = 16 << 10
	// IndexFraction is the offset index (8 B) and time index (12 B) per
	// index.interval.bytes (4096) of log.
	IndexFraction = 20.0 / 4096
	// DiskFull is the fraction of a disk the plan fills: Cruise Control's
	// default disk.capacity.threshold.
	DiskFull = 0.8
	// DiskWriteUse is the fraction of a disk's sequential write rate the
	// plan uses.
	DiskWriteUse = 0.8
	// NetworkHeadroom multiplies the network a broker needs: Netflix's
	// service-capacity-modeling keeps 40% for node recovery.
	NetworkHeadroom = 1.4
	// CPUUse is the fraction of a broker's cores the plan uses (Cruise
	// Control's CPU threshold is 0.7 to 0.8 in its sample configs).
	CPUUse = 0.7
	// MaxReplicasPerBroker bounds partition replicas per broker (Confluent's
	// guidance after Kafka 1.1: about 4,000).
	MaxReplicasPerBroker = 4000
)

// Workload is what the cluster must carry.
type Workload struct {
	// IngressMBps is the average produce rate in MB/s of record key+value
	// bytes. Give it or RecordsPerSec.
	IngressMBps float64 `json:"ingress_mbps" yaml:"ingress_mbps"`
	// RecordsPerSec is the average produce rate in records/s; with
	// RecordBytes it gives IngressMBps when that is 0.
	RecordsPerSec float64 `json:"records_per_sec" yaml:"records_per_sec"`
	// RecordBytes is a record's average key+value size. Required.
	RecordBytes float64 `json:"record_bytes" yaml:"record_bytes"`
	// PeakFactor multiplies the average to the peak the cluster must take.
	// Default 1.
	PeakFactor float64 `json:"peak_factor" yaml:"peak_factor"`
	// Retention is how long records are kept. Give it, RetentionBytes, or
	// both (the smaller wins, as in Kafka).
	Retention time.Duration `json:"retention" yaml:"retention"`
	// RetentionBytes is Kafka's retention.bytes: per partition.
	RetentionBytes float64 `json:"retention_bytes" yaml:"retention_bytes"`
	// ReplicationFactor is R. Required, ≥ 1.
	ReplicationFactor int `json:"replication_factor" yaml:"replication_factor"`
	// ConsumerGroups is the fan-out G: how many groups read everything.
	ConsumerGroups int `json:"consumer_groups" yaml:"consumer_groups"`
	// Partitions, when > 0, is the partition count to plan for; else it
	// comes from the per-partition rates.
	Partitions int `json:"partitions" yaml:"partitions"`
	// PartitionProduceMBps and PartitionConsumeMBps are p and c of
	// max(W/p, W/c); 0 takes the profile's.
	PartitionProduceMBps float64 `json:"partition_produce_mbps" yaml:"partition_produce_mbps"`
	PartitionConsumeMBps float64 `json:"partition_consume_mbps" yaml:"partition_consume_mbps"`
	// TailWindow is how far behind the newest record consumers may read
	// and still be served from memory (the consumer lag window). Default
	// 1 minute.
	TailWindow time.Duration `json:"tail_window" yaml:"tail_window"`
}

// Hardware is one broker's machine: measured (ProfileFromRun) or given.
// A zero figure is unknown, and the constraint it would set is skipped
// (and said so).
type Hardware struct {
	// Source says where the figures came from (a run's path, "flags").
	Source string `json:"source" yaml:"source"`
	// BrokerProduceMBps is what one broker was measured to absorb (RF 1).
	BrokerProduceMBps float64 `json:"broker_produce_mbps" yaml:"broker_produce_mbps"`
	// BrokerConsumeMBps is what one broker was measured to serve.
	BrokerConsumeMBps float64 `json:"broker_consume_mbps" yaml:"broker_consume_mbps"`
	// PartitionProduceMBps is the measured produce rate per partition.
	PartitionProduceMBps float64 `json:"partition_produce_mbps" yaml:"partition_produce_mbps"`
	// DiskSeqWriteMBps is one disk's sequential write rate (the disk
	// probe's 1 MiB writes).
	DiskSeqWriteMBps float64 `json:"disk_seq_write_mbps" yaml:"disk_seq_write_mbps"`
	// FsyncLatency is the probe's median 4 KiB append+fdatasync.
	FsyncLatency time.Duration `json:"fsync_latency" yaml:"fsync_latency"`
	// DisksPerBroker is the disks (log directories) of a broker. Default 1.
	DisksPerBroker int `json:"disks_per_broker" yaml:"disks_per_broker"`
	// DiskGiB is one disk's size; 0 sizes the disks to the plan.
	DiskGiB float64 `json:"disk_gib" yaml:"disk_gib"`
	// NetworkMBps is the NIC's rate per direction.
	NetworkMBps float64 `json:"network_mbps" yaml:"network_mbps"`
	// Cores is the broker's CPUs.
	Cores float64 `json:"cores" yaml:"cores"`
	// MemoryGiB is the broker machine's memory.
	MemoryGiB float64 `json:"memory_gib" yaml:"memory_gib"`
	// AppendCPUPerMB (k_l) is a broker's CPU seconds per MB produced to it.
	AppendCPUPerMB float64 `json:"append_cpu_s_per_mb" yaml:"append_cpu_s_per_mb"`
	// ServeCPUPerMB (k_s) is a broker's CPU seconds per MB it serves.
	ServeCPUPerMB float64 `json:"serve_cpu_s_per_mb" yaml:"serve_cpu_s_per_mb"`
	// ProducerCPUPerMB (k_c) and ConsumerCPUPerMB (k_cc) are the load
	// generator's CPU seconds per MB produced and consumed (for Predict).
	ProducerCPUPerMB float64 `json:"producer_cpu_s_per_mb" yaml:"producer_cpu_s_per_mb"`
	ConsumerCPUPerMB float64 `json:"consumer_cpu_s_per_mb" yaml:"consumer_cpu_s_per_mb"`
	// HostCPU is the cores the profile run kept busy (brokers' and
	// clients' CPU seconds over the window): the budget Predict splits.
	HostCPU float64 `json:"host_cpu" yaml:"host_cpu"`
	// Notes say how figures were derived.
	Notes []string `json:"notes,omitempty" yaml:"-"`
}

// Answer is one figure of a plan, with its working.
type Answer struct {
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Unit    string  `json:"unit"`
	Formula string  `json:"formula"`
	Numbers string  `json:"numbers"`
	// BoundBy names the input or constraint that decided the value.
	BoundBy string `json:"bound_by"`
}

// Constraint is one lower bound on the broker count.
type Constraint struct {
	Name    string `json:"name"`
	Brokers int    `json:"brokers"`
	Formula string `json:"formula"`
	Numbers string `json:"numbers"`
	// Binding is set on the constraints that need the most brokers.
	Binding bool `json:"binding"`
	// Skipped says why the constraint could not be computed ("" if it was).
	Skipped string `json:"skipped,omitempty"`
}

// Plan is the planner's answer.
type Plan struct {
	Workload    Workload     `json:"workload"`
	Hardware    Hardware     `json:"hardware"`
	Brokers     int          `json:"brokers"`
	Partitions  int          `json:"partitions"`
	Constraints []Constraint `json:"constraints"`
	Answers     []Answer     `json:"answers"`
	// DiskPerBrokerMiB is the disk each broker is provisioned with (all its
	// disks), NetworkMBps the NIC each needs with headroom (or the NIC
	// given): what the Cruise Control capacity file carries.
	DiskPerBrokerMiB float64  `json:"disk_per_broker_mib"`
	NetworkInMBps    float64  `json:"network_in_mbps"`
	NetworkOutMBps   float64  `json:"network_out_mbps"`
	Warnings         []string `json:"warnings,omitempty"`
}

// Answer returns the answer named name, and whether there is one.
func (p *Plan) Answer(name string) (Answer, bool) {
	for _, a := range p.Answers {
		if a.Name == name {
			return a, true
		}
	}
	return Answer{}, false
}

// Normalize fills the workload's defaults and rejects nonsense, naming
// the field.
func (w Workload) Normalize() (Workload, error) {
	bad := func(format string, a ...any) (Workload, error) {
		return w, fmt.Errorf("%w: "+format, append([]any{ErrInput}, a...)...)
	}
	for name, v := range map[string]float64{
		"ingress MB/s": w.IngressMBps, "records/s": w.RecordsPerSec, "record size": w.RecordBytes,
		"peak factor": w.PeakFactor, "retention bytes": w.RetentionBytes,
		"partition produce MB/s": w.PartitionProduceMBps, "partition consume MB/s": w.PartitionConsumeMBps,
	} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return bad("%s %v must be a finite number ≥ 0", name, v)
		}
	}
	switch {
	case w.RecordBytes <= 0:
		return bad("record size is required (bytes of key+value per record)")
	case w.IngressMBps == 0 && w.RecordsPerSec == 0:
		return bad("ingress is required: MB/s or records/s")
	case w.ReplicationFactor < 1:
		return bad("replication factor %d: must be at least 1", w.ReplicationFactor)
	case w.ConsumerGroups < 0:
		return bad("consumer groups %d: must be ≥ 0", w.ConsumerGroups)
	case w.Partitions < 0:
		return bad("partitions %d: must be ≥ 0 (0: from the per-partition rates)", w.Partitions)
	case w.Retention < 0 || w.TailWindow < 0:
		return bad("retention %v and tail window %v must be ≥ 0", w.Retention, w.TailWindow)
	case w.Retention == 0 && w.RetentionBytes == 0:
		return bad("retention is required: a time (retention.ms) or bytes per partition (retention.bytes)")
	}
	if w.IngressMBps == 0 {
		w.IngressMBps = w.RecordsPerSec * w.RecordBytes / MB
	} else if w.RecordsPerSec == 0 {
		w.RecordsPerSec = w.IngressMBps * MB / w.RecordBytes
	} else if d := w.RecordsPerSec * w.RecordBytes / MB / w.IngressMBps; d < 0.99 || d > 1.01 {
		return bad("ingress %.4g MB/s disagrees with %.4g records/s of %.4g bytes (%.4g MB/s): give one", w.IngressMBps, w.RecordsPerSec, w.RecordBytes, w.RecordsPerSec*w.RecordBytes/MB)
	}
	if w.PeakFactor == 0 {
		w.PeakFactor = 1
	}
	if w.PeakFactor < 1 {
		return bad("peak factor %v: must be ≥ 1 (peak over average)", w.PeakFactor)
	}
	if w.TailWindow == 0 {
		w.TailWindow = time.Minute
	}
	return w, nil
}

// Normalize fills the hardware's defaults and rejects negative figures.
func (h Hardware) Normalize() (Hardware, error) {
	for name, v := range map[string]float64{
		"broker produce MB/s": h.BrokerProduceMBps, "broker consume MB/s": h.BrokerConsumeMBps,
		"partition produce MB/s": h.PartitionProduceMBps, "disk MB/s": h.DiskSeqWriteMBps,
		"disk size": h.DiskGiB, "network MB/s": h.NetworkMBps, "cores": h.Cores, "memory": h.MemoryGiB,
		"append CPU/MB": h.AppendCPUPerMB, "serve CPU/MB": h.ServeCPUPerMB,
		"producer CPU/MB": h.ProducerCPUPerMB, "consumer CPU/MB": h.ConsumerCPUPerMB, "host CPU": h.HostCPU,
	} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return h, fmt.Errorf("%w: hardware %s %v must be a finite number ≥ 0", ErrInput, name, v)
		}
	}
	if h.DisksPerBroker < 0 {
		return h, fmt.Errorf("%w: disks per broker %d: must be ≥ 1", ErrInput, h.DisksPerBroker)
	}
	if h.DisksPerBroker == 0 {
		h.DisksPerBroker = 1
	}
	return h, nil
}

// Expansion is e of the package doc: stored bytes per key+value byte
// for records of the given size, before indexes.
func Expansion(recordBytes float64) float64 {
	perBatch := math.Max(1, math.Floor(BatchBytes/(recordBytes+RecordOverheadBytes)))
	return (recordBytes + RecordOverheadBytes + BatchHeaderBytes/perBatch) / recordBytes
}

// Make plans a cluster for w on hardware h.
func Make(w Workload, h Hardware) (*Plan, error) {
	w, err := w.Normalize()
	if err != nil {
		return nil, err
	}
	if h, err = h.Normalize(); err != nil {
		return nil, err
	}
	p := &Plan{Workload: w, Hardware: h}
	R, G := float64(w.ReplicationFactor), float64(w.ConsumerGroups)
	W := w.IngressMBps * w.PeakFactor
	e := Expansion(w.RecordBytes)
	disks := float64(h.DisksPerBroker)

	p.Answers = append(p.Answers, Answer{Name: "peak ingress", Value: W, Unit: "MB/s",
		Formula: "W = ingress × peak factor", Numbers: fmt.Sprintf("%s × %s", num(w.IngressMBps), num(w.PeakFactor)),
		BoundBy: "ingress, peak factor"})

	// Partitions: given, or Rao's max(W/p, W/c).
	p.Partitions, err = partitions(p, w, h, W)
	if err != nil {
		return nil, err
	}

	// Stored bytes.
	perByte := e * (1 + IndexFraction)
	var storedMiB float64
	storedBy := ""
	if w.Retention > 0 {
		storedMiB = w.IngressMBps * w.Retention.Seconds() * R * perByte
		storedBy = "retention time"
	}
	if w.RetentionBytes > 0 {
		byBytes := w.RetentionBytes / MB * float64(p.Partitions) * R * (1 + IndexFraction)
		if storedBy == "" || byBytes < storedMiB {
			storedMiB, storedBy = byBytes, "retention bytes"
		}
	}
	if storedBy == "retention time" {
		p.Answers = append(p.Answers, Answer{Name: "stored (cluster)", Value: storedMiB / 1024, Unit: "GiB",
			Formula: "S = ingress × retention × R × e × (1 + index)",
			Numbers: fmt.Sprintf("%s MB/s × %s s × %d × %.4f × %.4f", num(w.IngressMBps), num(w.Retention.Seconds()), w.ReplicationFactor, e, 1+IndexFraction),
			BoundBy: "retention time"})
	} else {
		p.Answers = append(p.Answers, Answer{Name: "stored (cluster)", Value: storedMiB / 1024, Unit: "GiB",
			Formula: "S = retention.bytes × partitions × R × (1 + index)",
			Numbers: fmt.Sprintf("%s MiB × %d × %d × %.4f", num(w.RetentionBytes/MB), p.Partitions, w.ReplicationFactor, 1+IndexFraction),
			BoundBy: "retention bytes"})
	}

	// Broker constraints.
	cs := []Constraint{{Name: "replication", Brokers: w.ReplicationFactor, Formula: "N ≥ R", Numbers: fmt.Sprintf("%d", w.ReplicationFactor)}}
	add := func(name, formula string, need, capacity float64, numbers string, missing string) {
		c := Constraint{Name: name, Formula: formula}
		if capacity <= 0 {
			c.Skipped = missing
		} else {
			c.Brokers = ceil(need / capacity)
			c.Numbers = numbers
		}
		cs = append(cs, c)
	}
	add("broker produce", "⌈W × R / P⌉", W*R, h.BrokerProduceMBps,
		fmt.Sprintf("⌈%s × %d / %s⌉", num(W), w.ReplicationFactor, num(h.BrokerProduceMBps)), "no measured broker produce MB/s")
	if w.ConsumerGroups > 0 {
		add("broker consume", "⌈W × G / C⌉", W*G, h.BrokerConsumeMBps,
			fmt.Sprintf("⌈%s × %d / %s⌉", num(W), w.ConsumerGroups, num(h.BrokerConsumeMBps)), "no measured broker consume MB/s")
	}
	add("disk write", "⌈W × R × e / (disks × D × 0.8)⌉", W*R*e, disks*h.DiskSeqWriteMBps*DiskWriteUse,
		fmt.Sprintf("⌈%s × %d × %.4f / (%d × %s × %.1f)⌉", num(W), w.ReplicationFactor, e, h.DisksPerBroker, num(h.DiskSeqWriteMBps), DiskWriteUse), "no disk sequential MB/s")
	netNeed := math.Max(W*R, W*(G+R-1))
	add("network", "⌈max(W × R, W × (G + R − 1)) × 1.4 / NIC⌉", netNeed*NetworkHeadroom, h.NetworkMBps,
		fmt.Sprintf("⌈max(%s × %d, %s × %d) × %.1f / %s⌉", num(W), w.ReplicationFactor, num(W), w.ConsumerGroups+w.ReplicationFactor-1, NetworkHeadroom, num(h.NetworkMBps)), "no NIC rate given")
	cpuPerMB := h.AppendCPUPerMB + (R-1)*(h.AppendCPUPerMB+h.ServeCPUPerMB) + G*h.ServeCPUPerMB
	cpuCap := h.Cores * CPUUse
	if h.AppendCPUPerMB == 0 {
		cpuCap = 0
	}
	add("CPU", "⌈W × (k_l + (R−1)(k_l + k_s) + G × k_s) / (cores × 0.7)⌉", W*cpuPerMB, cpuCap,
		fmt.Sprintf("⌈%s × (%.4g + %d × (%.4g + %.4g) + %d × %.4g) / (%s × %.1f)⌉", num(W), h.AppendCPUPerMB, w.ReplicationFactor-1, h.AppendCPUPerMB, h.ServeCPUPerMB, w.ConsumerGroups, h.ServeCPUPerMB, num(h.Cores), CPUUse),
		"no cores or CPU per MB measured")
	add("storage", "⌈S / (disks × disk size × 0.8)⌉", storedMiB/1024, disks*h.DiskGiB*DiskFull,
		fmt.Sprintf("⌈%s GiB / (%d × %s GiB × %.1f)⌉", num(storedMiB/1024), h.DisksPerBroker, num(h.DiskGiB), DiskFull), "disk size not given: disks are sized to the plan")
	add("partitions", "⌈partitions × R / 4000⌉", float64(p.Partitions)*R, MaxReplicasPerBroker,
		fmt.Sprintf("⌈%d × %d / %d⌉", p.Partitions, w.ReplicationFactor, MaxReplicasPerBroker), "")
	for _, c := range cs {
		p.Brokers = max(p.Brokers, c.Brokers)
	}
	var binding []string
	for i := range cs {
		if cs[i].Skipped == "" && cs[i].Brokers == p.Brokers {
			cs[i].Binding = true
			binding = append(binding, cs[i].Name)
		}
	}
	p.Constraints = cs
	N := float64(p.Brokers)
	p.Answers = append(p.Answers, Answer{Name: "brokers", Value: N, Unit: "",
		Formula: "N = max over the constraints", Numbers: constraintsLine(cs), BoundBy: strings.Join(binding, ", ")})

	// Disk per broker.
	perBroker := storedMiB / N
	p.Answers = append(p.Answers, Answer{Name: "stored per broker", Value: perBroker / 1024, Unit: "GiB",
		Formula: "S / N", Numbers: fmt.Sprintf("%s GiB / %d", num(storedMiB/1024), p.Brokers), BoundBy: storedBy + ", brokers"})
	if h.DiskGiB > 0 {
		p.DiskPerBrokerMiB = disks * h.DiskGiB * 1024
		p.Answers = append(p.Answers, Answer{Name: "disk per broker", Value: disks * h.DiskGiB, Unit: "GiB",
			Formula: "disks × disk size", Numbers: fmt.Sprintf("%d × %s GiB (%.0f%% full)", h.DisksPerBroker, num(h.DiskGiB), 100*perBroker/1024/(disks*h.DiskGiB)),
			BoundBy: "disk size given"})
	} else {
		p.DiskPerBrokerMiB = perBroker / DiskFull
		p.Answers = append(p.Answers, Answer{Name: "disk size", Value: perBroker / DiskFull / disks / 1024, Unit: "GiB",
			Formula: "S / N / 0.8 / disks", Numbers: fmt.Sprintf("%s GiB / %.1f / %d", num(perBroker/1024), DiskFull, h.DisksPerBroker),
			BoundBy: storedBy + ", brokers"})
	}
	p.Answers = append(p.Answers, Answer{Name: "disks per broker", Value: disks, Unit: "",
		Formula: "given", Numbers: fmt.Sprintf("%d", h.DisksPerBroker), BoundBy: "disks per broker"})

	// Network.
	in, out := W*R/N, W*(G+R-1)/N
	p.Answers = append(p.Answers,
		Answer{Name: "network in per broker", Value: in, Unit: "MB/s", Formula: "W × R / N",
			Numbers: fmt.Sprintf("%s × %d / %d", num(W), w.ReplicationFactor, p.Brokers), BoundBy: "ingress, replication factor"},
		Answer{Name: "network out per broker", Value: out, Unit: "MB/s", Formula: "W × (G + R − 1) / N",
			Numbers: fmt.Sprintf("%s × (%d + %d − 1) / %d", num(W), w.ConsumerGroups, w.ReplicationFactor, p.Brokers), BoundBy: outBound(G, R)})
	nic := math.Max(in, out) * NetworkHeadroom
	p.Answers = append(p.Answers, Answer{Name: "NIC per broker", Value: nic, Unit: "MB/s",
		Formula: "max(in, out) × 1.4", Numbers: fmt.Sprintf("max(%s, %s) × %.1f", num(in), num(out), NetworkHeadroom),
		BoundBy: map[bool]string{true: "network in", false: "network out"}[in >= out]})
	p.NetworkInMBps, p.NetworkOutMBps = in*NetworkHeadroom, out*NetworkHeadroom
	if h.NetworkMBps > 0 {
		p.NetworkInMBps, p.NetworkOutMBps = h.NetworkMBps, h.NetworkMBps
	}

	// Disk reads when consumers miss the cache (worst case).
	p.Answers = append(p.Answers, Answer{Name: "disk read per broker (all misses)", Value: W * (R - 1 + G) / N, Unit: "MB/s",
		Formula: "W × (R − 1 + G) / N", Numbers: fmt.Sprintf("%s × (%d − 1 + %d) / %d", num(W), w.ReplicationFactor, w.ConsumerGroups, p.Brokers),
		BoundBy: "consumer groups, replication factor"})

	// Page cache.
	cache := w.IngressMBps / N * w.TailWindow.Seconds()
	p.Answers = append(p.Answers, Answer{Name: "page cache per broker", Value: cache / 1024, Unit: "GiB",
		Formula: "ingress / N × tail window", Numbers: fmt.Sprintf("%s / %d × %s s", num(w.IngressMBps), p.Brokers, num(w.TailWindow.Seconds())),
		BoundBy: "tail window"})
	if h.MemoryGiB > 0 && cache/1024 > h.MemoryGiB*0.75 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("the page cache wanted (%.1f GiB) is more than 3/4 of the broker's memory (%.1f GiB): consumers lagging by the tail window will read from disk", cache/1024, h.MemoryGiB))
	}
	if h.FsyncLatency > 0 {
		p.Answers = append(p.Answers, Answer{Name: "fsyncs/s per disk (one appender)", Value: 1 / h.FsyncLatency.Seconds(), Unit: "/s",
			Formula: "1 / fsync latency", Numbers: fmt.Sprintf("1 / %v", h.FsyncLatency), BoundBy: "disk fsync latency"})
	}
	return p, nil
}

func partitions(p *Plan, w Workload, h Hardware, W float64) (int, error) {
	if w.Partitions > 0 {
		p.Answers = append(p.Answers, Answer{Name: "partitions", Value: float64(w.Partitions), Formula: "given",
			Numbers: fmt.Sprintf("%d", w.Partitions), BoundBy: "partitions given"})
		return w.Partitions, nil
	}
	pr, cr := w.PartitionProduceMBps, w.PartitionConsumeMBps
	prFrom, crFrom := "p", "c"
	if pr == 0 && h.PartitionProduceMBps > 0 {
		pr, prFrom = h.PartitionProduceMBps, "p (measured)"
	}
	if cr == 0 {
		cr, crFrom = pr, "c = p"
	}
	if pr == 0 {
		return 0, fmt.Errorf("%w: partitions: give a partition count, or a per-partition producer rate (or a profile that measured one)", ErrInput)
	}
	np, nc := ceil(W/pr), ceil(W/cr)
	n := max(np, nc, 1)
	bound := "per-partition producer rate"
	if nc > np {
		bound = "per-partition consumer rate"
	}
	p.Answers = append(p.Answers, Answer{Name: "partitions", Value: float64(n), Formula: "max(⌈W/p⌉, ⌈W/c⌉)",
		Numbers: fmt.Sprintf("max(⌈%s/%s⌉, ⌈%s/%s⌉) with %s, %s", num(W), num(pr), num(W), num(cr), prFrom, crFrom), BoundBy: bound})
	return n, nil
}

func outBound(G, R float64) string {
	if G >= R-1 {
		return "consumer groups"
	}
	return "replication factor"
}

func constraintsLine(cs []Constraint) string {
	var parts []string
	for _, c := range cs {
		if c.Skipped != "" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d", c.Name, c.Brokers))
	}
	return "max(" + strings.Join(parts, ", ") + ")"
}

// ceil rounds up, treating values within 1e-9 of an integer as it (so
// 3.0000000001 from float arithmetic is 3).
func ceil(x float64) int {
	r := math.Round(x)
	if math.Abs(x-r) < 1e-9 {
		return int(r)
	}
	return int(math.Ceil(x))
}

// num prints a figure with 4 significant digits, no exponent for the
// sizes a plan meets.
func num(x float64) string {
	switch {
	case x == math.Trunc(x) && math.Abs(x) < 1e9:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.4g", x)
	}
}
