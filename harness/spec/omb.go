package spec

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// OpenMessaging Benchmark workload files (github.com/openmessaging/benchmark,
// workloads/*.yaml) describe one load in camelCase fields. Those that
// overlap with a weir workload are mapped; the others become warnings.
var ombFields = []string{
	"name", "topics", "partitionsPerTopic", "messageSize", "payloadFile",
	"subscriptionsPerTopic", "consumerPerSubscription", "producersPerTopic",
	"producerRate", "testDurationMinutes", "warmupDurationMinutes",
	"keyDistributor", "consumerBacklogSizeGB",
}

// ombMarkers are fields only OMB workloads have: any of them marks a file
// as one.
var ombMarkers = []string{
	"partitionsPerTopic", "messageSize", "payloadFile", "subscriptionsPerTopic",
	"consumerPerSubscription", "producersPerTopic", "producerRate",
	"testDurationMinutes", "keyDistributor",
}

// ombKeyCount is OMB's KeyDistributor.UNIQUE_COUNT: its keyed distributors
// pick among this many keys.
const ombKeyCount = 10000

// ombWarmup is OMB's warm-up when the file does not say.
const ombWarmup = time.Minute

func isOMB(data []byte) bool {
	var top map[string]yaml.Node
	if yaml.Unmarshal(data, &top) != nil {
		return false
	}
	for _, k := range ombMarkers {
		if _, ok := top[k]; ok {
			return true
		}
	}
	return false
}

var unsafeNameRE = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// parseOMB reads an OMB workload into a spec with an embedded target and
// the defaults for everything OMB does not say (repetitions, seed, acks,
// codec).
func parseOMB(data []byte, dir string) (*Spec, error) {
	var top yaml.Node
	if err := yaml.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, yamlMessage(err))
	}
	if len(top.Content) == 0 || top.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: an OpenMessaging Benchmark workload must be a map", ErrInvalid)
	}
	m := top.Content[0]
	s := Defaults()
	s.Workload.Warmup = ombWarmup
	s.Dir = dir
	s.Text = string(data)
	var p problems
	vals := map[string]string{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if !slices.Contains(ombFields, k.Value) {
			s.Warnings = append(s.Warnings, fmt.Sprintf("OpenMessaging Benchmark field %s (line %d) is not supported: ignored", k.Value, k.Line))
			continue
		}
		if v.Kind != yaml.ScalarNode {
			p.add(k.Value, "line %d: want a single value", v.Line)
			continue
		}
		vals[k.Value] = v.Value
	}
	num := func(key string, def float64) float64 {
		v, ok := vals[key]
		if !ok {
			return def
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			p.add(key, "%q is not a number", v)
			return def
		}
		return f
	}
	integer := func(key string, def int) int {
		f := num(key, float64(def))
		if f != math.Trunc(f) || math.Abs(f) > 1e9 {
			p.add(key, "%v is not a whole number", f)
			return def
		}
		return int(f)
	}
	if name := strings.Trim(unsafeNameRE.ReplaceAllString(vals["name"], "-"), "-."); name != "" {
		s.Name = name
	}
	w := &s.Workload
	w.Topics = integer("topics", 1)
	w.Partitions = integer("partitionsPerTopic", 1)
	w.MessageSize = MessageSize{Distribution: Fixed, Size: ByteSize(integer("messageSize", 1024))}
	w.PayloadFile = vals["payloadFile"]
	w.Producers = integer("producersPerTopic", 1) * w.Topics
	subs := integer("subscriptionsPerTopic", 1)
	w.Consumers = integer("consumerPerSubscription", 1) * w.Topics
	if subs == 0 {
		w.Consumers = 0
	}
	if subs > 1 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("subscriptionsPerTopic %d: weir measures one subscription (its consumers share the partitions), not %d fan-out copies", subs, subs))
	}
	rate := num("producerRate", 0)
	if rate < 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("producerRate %v: read as 0, as fast as possible", rate))
		rate = 0
	}
	w.Rate = rate
	w.Duration = time.Duration(num("testDurationMinutes", 10/60.0) * float64(time.Minute))
	w.Warmup = time.Duration(num("warmupDurationMinutes", ombWarmup.Minutes()) * float64(time.Minute))
	switch kd := vals["keyDistributor"]; kd {
	case "", "NO_KEY":
		w.Keys.Kind = "none"
	case "KEY_ROUND_ROBIN":
		w.Keys = Keys{Kind: "sequential", Count: ombKeyCount, ZipfS: w.Keys.ZipfS}
	case "RANDOM_NANO":
		w.Keys = Keys{Kind: "uniform", Count: ombKeyCount, ZipfS: w.Keys.ZipfS}
	default:
		p.add("keyDistributor", "unknown distributor %q (known: NO_KEY, KEY_ROUND_ROBIN, RANDOM_NANO)", kd)
	}
	if gb := num("consumerBacklogSizeGB", 0); gb > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("consumerBacklogSizeGB %v is not supported: consumers read live (a weir spec can say consume: backlog)", gb))
	}
	if err := p.err(); err != nil {
		return nil, fmt.Errorf("OpenMessaging Benchmark workload: %w", err)
	}
	return &s, nil
}
