package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/montanaflynn/stats"

	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/spec"
)

// Points of a run that ProfileFromRun reads: the plan-profile preset's
// sections, and the disk probe's.
const (
	profileProduce        = "load-produce"
	profileProduceConsume = "load-produce-consume"
	diskSeqDirect         = "op=write/pattern=seq/io=direct/block=1M"
	diskSeqBuffered       = "op=write/pattern=seq/io=buffered/block=1M"
	diskFdatasync         = "op=append+fdatasync/pattern=seq/io=buffered/block=4K"
)

// ProfileFromRun takes a hardware profile from a measured run of one
// broker (the plan-profile preset; any run with a load section and a disk
// probe gives part of it). Every figure is the median over the point's
// successful repetitions:
//
//   - broker produce MB/s, k_l (broker-cpu-s per MB) and k_c (client-cpu-s
//     per MB): section load-produce, else the first load section's first
//     point;
//   - broker consume MB/s, k_s and k_cc: section load-produce-consume, by
//     difference from load-produce (clamped at 0);
//   - disk MB/s: the probe's sequential 1 MiB O_DIRECT writes (buffered
//     when there are none); fsync latency: its 4 KiB append+fdatasync p50;
//   - per-partition produce MB/s: broker produce MB/s over the point's
//     partitions (topics × partitions);
//   - cores, memory: the run's environment; HostCPU: (broker-cpu-s +
//     client-cpu-s) / window of the produce point.
func ProfileFromRun(r *result.Run, source string) (Hardware, error) {
	h := Hardware{Source: source, Cores: float64(r.Env.CPUs), MemoryGiB: float64(r.Env.MemoryMiB) / 1024}
	if r.Env.Brokers > 1 {
		return h, fmt.Errorf("%w: %s ran %d brokers; a profile is one broker's (the plan-profile preset)", ErrInput, source, r.Env.Brokers)
	}
	if p := findPoint(r, "disk", diskSeqDirect); p != nil {
		h.DiskSeqWriteMBps = median(p.Values(result.MBPerSec))
	} else if p := findPoint(r, "disk", diskSeqBuffered); p != nil {
		h.DiskSeqWriteMBps = median(p.Values(result.MBPerSec))
		h.Notes = append(h.Notes, "disk MB/s from buffered writes (no O_DIRECT point): the page cache's rate, not the device's")
	}
	if p := findPoint(r, "disk", diskFdatasync); p != nil {
		h.FsyncLatency = time.Duration(median(p.Values(result.LatP50)) * float64(time.Microsecond))
	}

	prod := findPoint(r, profileProduce, "")
	if prod == nil {
		for i := range r.Sections {
			if strings.HasPrefix(r.Sections[i].Name, "load") && len(r.Sections[i].Points) > 0 {
				prod = &r.Sections[i].Points[0]
				h.Notes = append(h.Notes, fmt.Sprintf("produce figures from %s %s (no %s section)", r.Sections[i].Name, prod.ID, profileProduce))
				break
			}
		}
	}
	if prod == nil {
		if h.DiskSeqWriteMBps == 0 {
			return h, fmt.Errorf("%w: %s has neither a load section nor a disk probe", ErrInput, source)
		}
		return h, nil
	}
	h.BrokerProduceMBps = median(prod.Values(result.ProduceMBPerSec))
	h.AppendCPUPerMB = median(perMB(prod, result.BrokerCPUSeconds))
	h.ProducerCPUPerMB = median(perMB(prod, result.ClientCPUSeconds))
	h.HostCPU = median(busy(prod))
	if parts := partitionsOf(r, prod.ID); parts > 0 {
		h.PartitionProduceMBps = h.BrokerProduceMBps / float64(parts)
		h.Notes = append(h.Notes, fmt.Sprintf("p = %.4g MB/s: the broker's %.4g MB/s over the run's %d partitions, a lower bound of what one partition takes (give --partition-produce-mbps from a one-partition run to do better)", h.PartitionProduceMBps, h.BrokerProduceMBps, parts))
	}
	if pc := findPoint(r, profileProduceConsume, ""); pc != nil {
		h.BrokerConsumeMBps = median(pc.Values(result.ConsumeMBPerSec))
		// Per MB produced; live consumers read each produced byte once.
		h.ServeCPUPerMB = max(0, median(perMB(pc, result.BrokerCPUSeconds))-h.AppendCPUPerMB)
		h.ConsumerCPUPerMB = max(0, median(perMB(pc, result.ClientCPUSeconds))-h.ProducerCPUPerMB)
	} else {
		h.Notes = append(h.Notes, "no produce-consume section: consume rate and serving CPU unknown (k_s = 0)")
	}
	return h, nil
}

func findPoint(r *result.Run, section, id string) *result.Point {
	for i := range r.Sections {
		s := &r.Sections[i]
		if s.Name != section {
			continue
		}
		for j := range s.Points {
			if id == "" || s.Points[j].ID == id {
				return &s.Points[j]
			}
		}
	}
	return nil
}

// perMB is a metric per MB produced, per successful rep that has both.
func perMB(p *result.Point, metric string) []float64 {
	var out []float64
	for _, rp := range p.Reps {
		v, ok := rp.Metrics[metric]
		b := rp.Metrics[result.BytesProduced]
		if rp.Error != "" || !ok || b <= 0 {
			continue
		}
		out = append(out, v/(b/MB))
	}
	return out
}

// busy is the cores a rep kept busy: brokers' and clients' CPU over the
// window.
func busy(p *result.Point) []float64 {
	var out []float64
	for _, rp := range p.Reps {
		c, ok := rp.Metrics[result.ClientCPUSeconds]
		if rp.Error != "" || !ok || rp.Duration <= 0 {
			continue
		}
		out = append(out, (c+rp.Metrics[result.BrokerCPUSeconds])/rp.Duration.Seconds())
	}
	return out
}

// median is 0 for no values.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m, err := stats.Median(xs)
	if err != nil {
		return 0
	}
	return m
}

// workloadOf is the workload of the run's point id, from its spec; ok is
// false when the spec cannot be read back.
func workloadOf(r *result.Run, section, id string) (spec.Workload, bool) {
	s, err := spec.Parse([]byte(r.Spec), "")
	if err != nil {
		return spec.Workload{}, false
	}
	secs, err := s.Sections()
	if err != nil {
		return spec.Workload{}, false
	}
	for _, sec := range secs {
		if section != "" && sec.Name != section {
			continue
		}
		for _, p := range sec.Points {
			if p.ID == id {
				return p.Workload, true
			}
		}
	}
	return spec.Workload{}, false
}

func partitionsOf(r *result.Run, id string) int {
	w, ok := workloadOf(r, profileProduce, id)
	if !ok {
		if w, ok = workloadOf(r, "", id); !ok {
			return 0
		}
	}
	return w.Topics * w.Partitions
}
