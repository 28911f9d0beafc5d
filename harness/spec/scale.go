package spec

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/weir-broker/weir/harness/result"
)

// Scale makes a spec a partition-scale experiment (package harness/scale):
// every partition count N of Partitions is a point, run against a fresh
// `weir broker` subprocess with its own data directory, in steps:
//
//  1. create N partitions (topics of PartitionsPerTopic, CreateBatch topics
//     per CreateTopics request): the time, then the broker's open
//     descriptors, resident memory and goroutines;
//  2. Metadata for every topic, MetadataRequests times: median and p99;
//  3. one record produced to each partition, then one consumer reading all
//     N of them (it must see exactly N);
//  4. Restarts clean restarts (SIGTERM, start on the same data): from exec
//     to a Metadata listing every partition led, and to the first fetch of a
//     record; descriptors and memory after;
//  5. as many unclean restarts (SIGKILL), the same figures;
//  6. a consumer of min(N, SessionPartitions) partitions, with and without
//     fetch sessions (KIP-227), while a producer writes SessionRate
//     records/s to SessionHot of them: bytes per fetch request and
//     response, and the broker's CPU, over SessionWindow each;
//  7. HotRounds rounds of the spec's workload (its hot partitions, in
//     topics of their own) against this broker, beside its N idle
//     partitions, and against a second fresh broker holding nothing else,
//     alternating, the broker not measured stopped (SIGSTOP): throughput
//     with idle partitions over without, each round's own ratio, their
//     median.
//
// A step that fails ends the point's repetition with an error naming the
// step; the figures of the steps before it are kept, and none is made up
// for the rest. The workload is the hot load of step 7 only; the other
// steps' records are small, written by the experiment itself.
type Scale struct {
	// Partitions are the partition counts to measure, one point each.
	// Required.
	Partitions []int `yaml:"partitions"`
	// PartitionsPerTopic is the size of the topics N is made of (the last
	// one smaller when N is not a multiple). Default 100.
	PartitionsPerTopic int `yaml:"partitions_per_topic"`
	// CreateBatch is how many topics one CreateTopics request creates.
	// Default 10 (1,000 partitions in the default topics), so a failure
	// says how far creation got.
	CreateBatch int `yaml:"create_batch"`
	// MetadataRequests is how many Metadata requests for every topic step
	// 2 times. Default 20.
	MetadataRequests int `yaml:"metadata_requests"`
	// Restarts is how many clean restarts, and then as many unclean ones,
	// each point makes. 0 leaves steps 4 and 5 out. Default 2.
	Restarts int `yaml:"restarts"`
	// RestartTimeout bounds one restart, from exec until a record is
	// fetched. Default 5m.
	RestartTimeout time.Duration `yaml:"restart_timeout"`
	// StepTimeout bounds each of steps 1, 2 and 3 (creating, Metadata,
	// producing and consuming N records). Default 10m.
	StepTimeout time.Duration `yaml:"step_timeout"`
	// RequestTimeout bounds each request of steps 1 and 2 (a CreateTopics
	// batch, a Metadata request): a broker that stops answering (out of
	// descriptors, today's hangs) fails the step then, not at its
	// timeout. Default 2m.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// SessionPartitions is the most partitions step 6's consumer reads;
	// 0 leaves step 6 out. Default 10000.
	SessionPartitions int `yaml:"session_partitions"`
	// SessionWindow is how long each mode of step 6 is measured, after
	// the consumer has seen the producer's first records. Default 5s.
	SessionWindow time.Duration `yaml:"session_window"`
	// SessionRate is step 6's producer's records/s, spread round robin
	// over SessionHot partitions (at most the consumer's). Defaults 100
	// and 4.
	SessionRate float64 `yaml:"session_rate"`
	SessionHot  int     `yaml:"session_hot"`
	// HotRounds is how many times step 7 runs the workload beside the
	// idle partitions and alone; 0 leaves step 7 out. Default 3.
	HotRounds int `yaml:"hot_rounds"`
}

// FactorTotalPartitions is a scale section's factor: the partitions the
// broker holds.
const FactorTotalPartitions = "total_partitions"

// SectionScale names a scale experiment's section.
const SectionScale = "scale"

// DefaultScale returns a scale block's defaults.
func DefaultScale() Scale {
	return Scale{
		PartitionsPerTopic: 100,
		CreateBatch:        10,
		MetadataRequests:   20,
		Restarts:           2,
		RestartTimeout:     5 * time.Minute,
		StepTimeout:        10 * time.Minute,
		RequestTimeout:     2 * time.Minute,
		SessionPartitions:  10000,
		SessionWindow:      5 * time.Second,
		SessionRate:        100,
		SessionHot:         4,
		HotRounds:          3,
	}
}

// UnmarshalYAML decodes a scale block over the defaults, rejecting unknown
// fields like the rest of the spec.
func (sc *Scale) UnmarshalYAML(n *yaml.Node) error {
	type plain Scale // without this method
	p := plain(DefaultScale())
	if err := decodeStrict(n, "scale", &p); err != nil {
		return err
	}
	*sc = Scale(p)
	return nil
}

// Limits of a scale block.
const (
	maxScalePartitions = 1_000_000
	maxOpenFilesLimit  = 1 << 20 // Linux's default fs.nr_open
	minOpenFilesLimit  = 64      // the broker's own files, sockets and pipes
)

// Topics is how many topics n partitions make.
func (sc *Scale) Topics(n int) int { return (n + sc.PartitionsPerTopic - 1) / sc.PartitionsPerTopic }

func (s *Spec) validateScale(p *problems) {
	sc := s.Scale
	if sc == nil {
		return
	}
	if !s.Target.IsEmbedded() {
		p.add("scale", "only for embedded targets: the experiment restarts and kills the broker, and reads its /proc")
	}
	if s.Durability != nil {
		p.add("scale", "a spec is a scale or a durability experiment, not both")
	}
	if s.NoLoad {
		p.add("scale", "a scale experiment is a load (no_load: true)")
	}
	if !s.Factors.empty() || len(s.Points) > 0 || len(s.Experiments) > 0 {
		p.add("scale", "a scale experiment varies scale.partitions only: no factors, points or experiments")
	}
	if s.Baseline != "" {
		p.add("baseline", "not for scale experiments: step 7 sets each point against a broker of its own")
	}
	if len(sc.Partitions) == 0 {
		p.add("scale.partitions", "required: the partition counts to measure, e.g. [1000, 10000, 100000]")
	}
	seen := map[int]int{}
	for i, n := range sc.Partitions {
		field := fmt.Sprintf("scale.partitions[%d]", i)
		if n < 1 || n > maxScalePartitions {
			p.add(field, "must be in 1..%d, got %d", maxScalePartitions, n)
		}
		if j, dup := seen[n]; dup {
			p.add(field, "repeats level %d (%d)", j, n)
		}
		seen[n] = i
	}
	if sc.PartitionsPerTopic < 1 || sc.PartitionsPerTopic > maxPartitions {
		p.add("scale.partitions_per_topic", "must be in 1..%d, got %d", maxPartitions, sc.PartitionsPerTopic)
	}
	if sc.CreateBatch < 1 || sc.CreateBatch > 10000 {
		p.add("scale.create_batch", "must be in 1..10000 topics per request, got %d", sc.CreateBatch)
	}
	if sc.MetadataRequests < 1 || sc.MetadataRequests > 10000 {
		p.add("scale.metadata_requests", "must be in 1..10000, got %d", sc.MetadataRequests)
	}
	if sc.Restarts < 0 || sc.Restarts > 100 {
		p.add("scale.restarts", "must be in 0..100, got %d", sc.Restarts)
	}
	if sc.RestartTimeout <= 0 {
		p.add("scale.restart_timeout", "must be > 0, got %v", sc.RestartTimeout)
	}
	if sc.StepTimeout <= 0 {
		p.add("scale.step_timeout", "must be > 0, got %v", sc.StepTimeout)
	}
	if sc.RequestTimeout <= 0 {
		p.add("scale.request_timeout", "must be > 0, got %v", sc.RequestTimeout)
	}
	if sc.SessionPartitions < 0 || sc.SessionPartitions > maxScalePartitions {
		p.add("scale.session_partitions", "must be in 0..%d (0: no fetch session step), got %d", maxScalePartitions, sc.SessionPartitions)
	}
	if sc.SessionPartitions > 0 {
		if sc.SessionWindow <= 0 {
			p.add("scale.session_window", "must be > 0, got %v", sc.SessionWindow)
		}
		if sc.SessionRate <= 0 || sc.SessionRate > 100000 {
			p.add("scale.session_rate", "must be in (0, 100000] records/s: the producer beside the consumer is light, got %v", sc.SessionRate)
		}
		if sc.SessionHot < 1 {
			p.add("scale.session_hot", "must be >= 1, got %d", sc.SessionHot)
		}
	}
	if sc.HotRounds < 0 || sc.HotRounds > 100 {
		p.add("scale.hot_rounds", "must be in 0..100, got %d", sc.HotRounds)
	}
	if sc.HotRounds > 0 && s.Workload.Consumers < 1 {
		p.add("workload.consumers", "the hot load of a scale experiment produces and fetches: must be >= 1")
	}
}

// scaleSections is a scale experiment's one section: a point per
// partition count, each with the spec's workload as its hot load.
func (s *Spec) scaleSections() []Section {
	sec := Section{Name: SectionScale, Factors: []string{FactorTotalPartitions}}
	for _, n := range s.Scale.Partitions {
		v := strconv.Itoa(n)
		sec.Points = append(sec.Points, Point{
			ID:              FactorTotalPartitions + "=" + v,
			Factors:         []result.FactorValue{{Name: FactorTotalPartitions, Value: v}},
			Workload:        s.Workload,
			TotalPartitions: n,
		})
	}
	return []Section{sec}
}

// write prints the scale line of a dry run.
func (sc *Scale) write(w io.Writer) {
	ns := make([]string, len(sc.Partitions))
	for i, n := range sc.Partitions {
		ns[i] = strconv.Itoa(n)
	}
	fmt.Fprintf(w, "scale: partitions %s, in topics of %d, %d topics per CreateTopics request; Metadata %d times; ",
		strings.Join(ns, ", "), sc.PartitionsPerTopic, sc.CreateBatch, sc.MetadataRequests)
	if sc.Restarts > 0 {
		fmt.Fprintf(w, "%d clean and %d unclean restarts (timeout %v); ", sc.Restarts, sc.Restarts, sc.RestartTimeout)
	} else {
		fmt.Fprint(w, "no restarts; ")
	}
	if sc.SessionPartitions > 0 {
		fmt.Fprintf(w, "fetch sessions on and off: up to %d partitions read, %g records/s to %d of them, %v each; ",
			sc.SessionPartitions, sc.SessionRate, sc.SessionHot, sc.SessionWindow)
	} else {
		fmt.Fprint(w, "no fetch session step; ")
	}
	if sc.HotRounds > 0 {
		fmt.Fprintf(w, "hot beside idle: %d rounds of the workload, beside the point's partitions and alone\n", sc.HotRounds)
	} else {
		fmt.Fprint(w, "no hot beside idle step\n")
	}
}

// Estimate is a rough lower bound on a scale point's time: the hot
// rounds' windows and step 6's, and a few seconds for the rest; creating,
// producing and restarting grow with N at rates only a run can tell.
func (sc *Scale) Estimate(w Workload, reps int) time.Duration {
	per := 5 * time.Second
	if sc.SessionPartitions > 0 {
		per += 2 * (sc.SessionWindow + time.Second)
	}
	per += time.Duration(2*sc.HotRounds) * (w.Warmup + w.Duration)
	return time.Duration(reps) * per
}
