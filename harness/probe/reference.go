package probe

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/harness/result"
)

// Point IDs the references are tied to. The default probes produce all of
// them.
const (
	PointSeqWrite1M    = "op=write/pattern=seq/io=buffered/block=1M"
	PointRandWrite4K   = "op=write/pattern=rand/io=direct/block=4K"
	PointMemorySeq     = "medium=memory/access=seq"
	PointMemoryRand    = "medium=memory/access=rand"
	PointDiskValueSeq  = "medium=disk/access=seq"
	PointDiskValueRand = "medium=disk/access=rand"
)

const (
	sourceKafka = "Apache Kafka documentation, Design: Persistence, \"Don't fear the filesystem!\" " +
		"(https://kafka.apache.org/documentation/#design_filesystem)"
	sourceKafkaOld = "Apache Kafka documentation, older editions of the same section"
	sourceJacobs   = "Adam Jacobs, \"The Pathologies of Big Data\", ACM Queue 7(6), 2009, Figure 3 " +
		"(https://queue.acm.org/detail.cfm?id=1563874)"
)

// References returns the published figures of DESIGN.md §8, each tied to the
// section, point and metric of this package's probes that it compares with.
// The hardware differs (a 2009 RAID array against today's disk); the point
// of printing them side by side is the ratio between sequential and random,
// which is what a log-structured broker relies on.
func References() []result.Reference {
	return []result.Reference{
		{Section: SectionDisk, PointID: PointSeqWrite1M, Metric: result.MBPerSec, Value: 600, Source: sourceKafka,
			Label: "linear writes, six 7200 rpm SATA disks in RAID-5 (JBOD configuration)"},
		{Section: SectionDisk, PointID: PointRandWrite4K, Metric: result.MBPerSec, Value: 0.1, Source: sourceKafka,
			Label: "random writes (~100 KB/s; block size not stated), same array: \"a difference of over 6000X\""},
		{Section: SectionDisk, PointID: PointSeqWrite1M, Metric: result.MBPerSec, Value: 300, Source: sourceKafkaOld,
			Label: "linear writes, six 7200 rpm SATA disks in RAID-5 (older wording)"},
		{Section: SectionDisk, PointID: PointRandWrite4K, Metric: result.MBPerSec, Value: 0.05, Source: sourceKafkaOld,
			Label: "random writes (~50 KB/s), same array (older wording)"},
		{Section: SectionMemory, PointID: PointDiskValueRand, Metric: result.ValuesPerSec, Value: 316, Source: sourceJacobs,
			Label: "random disk reads, values/s"},
		{Section: SectionMemory, PointID: PointDiskValueSeq, Metric: result.ValuesPerSec, Value: 53.2e6, Source: sourceJacobs,
			Label: "sequential disk reads, values/s"},
		{Section: SectionMemory, PointID: PointDiskValueSeq, Metric: result.ValuesPerSec, Value: 42.2e6, Source: sourceJacobs,
			Label: "sequential SSD reads, values/s"},
		{Section: SectionMemory, PointID: PointMemoryRand, Metric: result.ValuesPerSec, Value: 36.7e6, Source: sourceJacobs,
			Label: "random memory reads, values/s (from the paper's chart; DESIGN.md §8 quotes only the disk figures)"},
		{Section: SectionMemory, PointID: PointMemorySeq, Metric: result.ValuesPerSec, Value: 358.2e6, Source: sourceJacobs,
			Label: "sequential memory reads, values/s (from the paper's chart; DESIGN.md §8 quotes only the disk figures)"},
	}
}

// DeviceReferences are References' disk figures again, tied to the
// figures over device time (MetricDeviceMBPerSec,
// MetricDeviceValuesPerSec) that points measured on an emulated disk also
// report, so a report sets the published figures beside both.
func DeviceReferences() []result.Reference {
	var out []result.Reference
	for _, r := range References() {
		switch {
		case r.Section == SectionDisk && r.Metric == result.MBPerSec:
			r.Metric = MetricDeviceMBPerSec
		case r.PointID == PointDiskValueRand || r.PointID == PointDiskValueSeq:
			r.Metric = MetricDeviceValuesPerSec
		default:
			continue
		}
		r.Label += " (device time of the emulated disk)"
		out = append(out, r)
	}
	return out
}

// Describe says in words what a point of one of this package's sections
// measured, for progress lines and report captions: "random 4 KiB reads with
// O_DIRECT (the device; page cache bypassed)". It returns "" for a point it
// does not know.
func Describe(section string, p result.Point) string {
	f := func(name string) string { v, _ := p.Factor(name); return v }
	switch section {
	case SectionDisk:
		return describeDisk(f(FactorOp), f(FactorPattern), f(FactorIO), f(FactorBlock))
	case SectionMemory:
		return describeMemory(f(FactorMedium), f(FactorAccess))
	}
	return ""
}

func describeDisk(op, pattern, io, block string) string {
	size := blockWords(block)
	switch op {
	case OpAppendFdatasync, OpAppendFsync:
		sync := strings.TrimPrefix(op, "append+")
		return fmt.Sprintf("%s appends to a new file, each followed by %s (the cost of a durable ack without group commit)", size, sync)
	case OpWrite, OpRead:
	default:
		return ""
	}
	order := map[string]string{PatternSeq: "sequential", PatternRand: "random"}[pattern]
	if order == "" {
		return ""
	}
	what := fmt.Sprintf("%s %s %ss", order, size, op)
	switch {
	case io == IODirect:
		return what + " with O_DIRECT (the device; page cache bypassed)"
	case io != IOBuffered:
		return ""
	case op == OpWrite && pattern == PatternSeq:
		return what + " through the page cache, closing fdatasync included (what reaches the device, as Kafka writes)"
	case op == OpWrite:
		return what + " through the page cache, closing fdatasync included (writeback sorts them: not the device's random-write speed)"
	case pattern == PatternSeq:
		return what + " through the page cache, starting uncached (the device plus kernel readahead)"
	default:
		return what + " through the page cache, starting uncached (blocks read twice, and readahead, come from memory)"
	}
}

// blockWords turns a block factor value (4K, 1M, 1536) into words.
func blockWords(block string) string {
	mult := 1
	switch {
	case strings.HasSuffix(block, "M"):
		mult, block = 1<<20, strings.TrimSuffix(block, "M")
	case strings.HasSuffix(block, "K"):
		mult, block = 1<<10, strings.TrimSuffix(block, "K")
	}
	n, err := strconv.Atoi(block)
	if err != nil {
		return block
	}
	return sizeWords(n * mult)
}

func describeMemory(medium, access string) string {
	switch medium + "/" + access {
	case MediumMemory + "/" + AccessSeq:
		return "sequential reads of int64 values from an array in memory (memory bandwidth)"
	case MediumMemory + "/" + AccessRand:
		return "random reads of int64 values from an array in memory, independent indexes (cache misses, overlapped by the CPU)"
	case MediumDisk + "/" + AccessSeq:
		return "sequential reads of int64 values from a file, O_DIRECT in 1 MiB blocks, values summed"
	case MediumDisk + "/" + AccessRand:
		return "random reads of int64 values from a file, one O_DIRECT 4 KiB read per value"
	}
	return ""
}
