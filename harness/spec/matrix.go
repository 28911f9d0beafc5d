package spec

import (
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-broker/weir/harness/result"
)

// Section is one load experiment of a spec, expanded: its factors (the
// ones with levels, in matrix order) and every point of their product.
type Section struct {
	Name    string // "load", or "load-" + the experiment's name
	Factors []string
	Points  []Point
	// Baseline is the ID of the point the report sets the others
	// against; "" for none.
	Baseline string
}

// Point is one cell of a section's matrix: the workload with the cell's
// factor levels applied.
type Point struct {
	// ID joins the levels in matrix order, "codec=zstd/flush_policy=never";
	// "" for a section without factors.
	ID       string
	Factors  []result.FactorValue
	Workload Workload
	// Fault is the fault a durability section's point injects
	// (FaultKill, FaultPower); "" in load sections.
	Fault string
	// TotalPartitions is the partitions a scale section's point creates
	// (Scale.Partitions); 0 in other sections.
	TotalPartitions int
}

// factorDef describes one factor: how many levels a Factors value gives it,
// how a level sets a workload, and the form of a workload's value in point
// IDs.
type factorDef struct {
	name  string
	n     func(*Factors) int
	apply func(*Factors, int, *Workload)
	of    func(*Workload) string
}

// factorDefs is the matrix order (see the package doc): what changes the
// broker, the topics or the client's encoding first, the load's shape last.
var factorDefs = []factorDef{
	{"security_protocol",
		func(f *Factors) int { return len(f.SecurityProtocol) },
		func(f *Factors, i int, w *Workload) { w.SecurityProtocol = f.SecurityProtocol[i] },
		func(w *Workload) string { return w.SecurityProtocol }},
	{"codec",
		func(f *Factors) int { return len(f.Codec) },
		func(f *Factors, i int, w *Workload) { w.Codec = f.Codec[i] },
		func(w *Workload) string { return idValue(w.Codec) }},
	{"partitioner",
		func(f *Factors) int { return len(f.Partitioner) },
		func(f *Factors, i int, w *Workload) { w.Partitioner = noDefault(f.Partitioner[i]) },
		func(w *Workload) string { return orDefault(idValue(w.Partitioner)) }},
	{"flush_policy",
		func(f *Factors) int { return len(f.FlushPolicy) },
		func(f *Factors, i int, w *Workload) { w.FlushPolicy = noDefault(f.FlushPolicy[i]) },
		func(w *Workload) string { return orDefault(idValue(w.FlushPolicy)) }},
	{"durable_acks",
		func(f *Factors) int { return len(f.DurableAcks) },
		func(f *Factors, i int, w *Workload) { w.DurableAcks = f.DurableAcks[i] },
		func(w *Workload) string { return strconv.FormatBool(w.DurableAcks) }},
	{"replication_factor",
		func(f *Factors) int { return len(f.ReplicationFactor) },
		func(f *Factors, i int, w *Workload) { w.ReplicationFactor = f.ReplicationFactor[i] },
		func(w *Workload) string { return strconv.Itoa(w.ReplicationFactor) }},
	{"min_insync",
		func(f *Factors) int { return len(f.MinInsync) },
		func(f *Factors, i int, w *Workload) { w.MinInsync = f.MinInsync[i] },
		func(w *Workload) string { return strconv.Itoa(w.MinInsync) }},
	{"unclean_election",
		func(f *Factors) int { return len(f.UncleanElection) },
		func(f *Factors, i int, w *Workload) { w.UncleanElection = f.UncleanElection[i] },
		func(w *Workload) string { return strconv.FormatBool(w.UncleanElection) }},
	{"acks",
		func(f *Factors) int { return len(f.Acks) },
		func(f *Factors, i int, w *Workload) { w.Acks = f.Acks[i] },
		func(w *Workload) string { return w.Acks }},
	{"batch_max_bytes",
		func(f *Factors) int { return len(f.BatchMaxBytes) },
		func(f *Factors, i int, w *Workload) { w.BatchMaxBytes = f.BatchMaxBytes[i] },
		func(w *Workload) string { return w.BatchMaxBytes.String() }},
	{"linger",
		func(f *Factors) int { return len(f.Linger) },
		func(f *Factors, i int, w *Workload) { w.Linger = f.Linger[i] },
		func(w *Workload) string { return w.Linger.String() }},
	{"partitions",
		func(f *Factors) int { return len(f.Partitions) },
		func(f *Factors, i int, w *Workload) { w.Partitions = f.Partitions[i] },
		func(w *Workload) string { return strconv.Itoa(w.Partitions) }},
	{"message_size",
		func(f *Factors) int { return len(f.MessageSize) },
		func(f *Factors, i int, w *Workload) { w.MessageSize = f.MessageSize[i] },
		func(w *Workload) string { return w.MessageSize.String() }},
	{"producers",
		func(f *Factors) int { return len(f.Producers) },
		func(f *Factors, i int, w *Workload) { w.Producers = f.Producers[i] },
		func(w *Workload) string { return strconv.Itoa(w.Producers) }},
	{"consumers",
		func(f *Factors) int { return len(f.Consumers) },
		func(f *Factors, i int, w *Workload) { w.Consumers = f.Consumers[i] },
		func(w *Workload) string { return strconv.Itoa(w.Consumers) }},
}

// levelID is level i of factor d in point IDs: the form its workload
// value takes.
func (d factorDef) levelID(f *Factors, i int) string {
	var w Workload
	d.apply(f, i, &w)
	return d.of(&w)
}

// noDefault maps the level "default" (the client's partitioner, the
// broker's flush policy) to the workload's "".
func noDefault(s string) string {
	if s == "default" {
		return ""
	}
	return s
}

// FactorNames lists every factor a spec may vary, in matrix order.
func FactorNames() []string {
	names := make([]string, len(factorDefs))
	for i, d := range factorDefs {
		names[i] = d.name
	}
	return names
}

// idValue is a spec string's form in point IDs: a plugin path by its file
// name (a '/' would split the ID), white space removed.
func idValue(s string) string {
	s = strings.Join(strings.Fields(s), "")
	if name, params, _ := strings.Cut(s, ":"); strings.Contains(name, "/") {
		s = filepath.Base(name)
		if params != "" {
			s += ":" + params
		}
	}
	return s
}

// Sections expands the spec's matrix: one section for a spec without
// experiments, one per experiment otherwise (none with no_load), each
// point's workload being
// the top-level workload, then the experiment's overrides, then the point's
// levels. With a durability block the sections are durability sections,
// each point repeated per fault (see Durability); with a scale block, one
// scale section with a point per partition count (see Scale).
func (s *Spec) Sections() ([]Section, error) {
	if s.Scale != nil {
		return s.scaleSections(), nil
	}
	secs, err := s.loadSections()
	if err != nil || s.Durability == nil {
		return secs, err
	}
	return s.durabilitySections(secs), nil
}

func (s *Spec) loadSections() ([]Section, error) {
	if s.NoLoad {
		return nil, nil
	}
	if len(s.Experiments) == 0 {
		return []Section{expand("load", s.Workload, &s.Factors, s.Points, s.Baseline)}, nil
	}
	out := make([]Section, 0, len(s.Experiments))
	for i, e := range s.Experiments {
		w := s.Workload
		w.TopicConfig = maps.Clone(w.TopicConfig)
		if i < len(s.experimentNodes) {
			if err := s.experimentNodes[i].Decode(&w); err != nil {
				return nil, fmt.Errorf("%w: experiments[%d].workload: %s", ErrInvalid, i, yamlMessage(err))
			}
		} else {
			// A Spec built in code: its Workload is the complete override.
			w = e.Workload
		}
		out = append(out, expand("load-"+e.Name, w, &e.Factors, e.Points, e.Baseline))
	}
	return out, nil
}

// expand builds a section's points: the full product of the factors with
// levels, the first factor varying slowest; or, when points are listed,
// those points in their order.
func expand(name string, base Workload, f *Factors, points []Levels, baseline string) Section {
	base.Partitioner = noDefault(base.Partitioner)
	base.FlushPolicy = noDefault(base.FlushPolicy)
	sec := Section{Name: name, Baseline: baseline}
	if len(points) > 0 {
		defs := pointsFactors(points)
		for _, d := range defs {
			sec.Factors = append(sec.Factors, d.name)
		}
		for i := range points {
			lv := (*Factors)(&points[i])
			sec.Points = append(sec.Points, makePoint(base, defs, func(_ int, d factorDef, w *Workload) {
				if d.n(lv) > 0 {
					d.apply(lv, 0, w)
				}
			}))
		}
		return sec
	}
	var defs []factorDef
	for _, d := range factorDefs {
		if d.n(f) > 0 {
			defs = append(defs, d)
			sec.Factors = append(sec.Factors, d.name)
		}
	}
	idx := make([]int, len(defs)) // the current level of each factor
	for {
		sec.Points = append(sec.Points, makePoint(base, defs, func(k int, d factorDef, w *Workload) { d.apply(f, idx[k], w) }))
		// Advance like an odometer: the last factor fastest.
		k := len(defs) - 1
		for ; k >= 0; k-- {
			idx[k]++
			if idx[k] < defs[k].n(f) {
				break
			}
			idx[k] = 0
		}
		if k < 0 {
			return sec
		}
	}
}

// pointsFactors are the factors some point of the list names, in matrix
// order.
func pointsFactors(points []Levels) []factorDef {
	var defs []factorDef
	for _, d := range factorDefs {
		for i := range points {
			if d.n((*Factors)(&points[i])) > 0 {
				defs = append(defs, d)
				break
			}
		}
	}
	return defs
}

// makePoint applies the level of each factor k (set) to a copy of base,
// and names the point by the resulting workload's values of the factors,
// in order.
func makePoint(base Workload, defs []factorDef, set func(k int, d factorDef, w *Workload)) Point {
	w := base
	w.TopicConfig = maps.Clone(base.TopicConfig)
	var p Point
	var ids []string
	for k, d := range defs {
		set(k, d, &w)
		v := d.of(&w)
		p.Factors = append(p.Factors, result.FactorValue{Name: d.name, Value: v})
		ids = append(ids, d.name+"="+v)
	}
	p.ID = strings.Join(ids, "/")
	p.Workload = w
	return p
}

// Summary is a one-line description of w, for dry runs and reports.
func (w Workload) Summary() string {
	rate := "max"
	if w.Rate > 0 {
		rate = strconv.FormatFloat(w.Rate, 'f', -1, 64) + "/s"
	}
	parts := []string{
		fmt.Sprintf("topics=%d", w.Topics),
		fmt.Sprintf("partitions=%d", w.Partitions),
		"message_size=" + w.MessageSize.String(),
		"payload=" + w.payloadName(),
		"keys=" + w.Keys.String(),
		fmt.Sprintf("producers=%d", w.Producers),
		fmt.Sprintf("consumers=%d", w.Consumers),
	}
	if w.Consumers > 0 {
		parts = append(parts, "consume="+w.Consume)
	}
	parts = append(parts,
		"rate="+rate,
		"warmup="+w.Warmup.String(),
		"duration="+w.Duration.String(),
		"acks="+w.Acks,
		"codec="+w.Codec,
		"partitioner="+orDefault(w.Partitioner),
		"flush_policy="+orDefault(w.FlushPolicy),
		fmt.Sprintf("durable_acks=%t", w.DurableAcks),
		fmt.Sprintf("replication_factor=%d", w.ReplicationFactor),
		fmt.Sprintf("min_insync=%d", w.MinInsync),
		"batch_max_bytes="+w.BatchMaxBytes.String(),
		"linger="+w.Linger.String(),
	)
	if w.UncleanElection {
		parts = append(parts, "unclean_election=true")
	}
	if w.SecurityProtocol != "" && w.SecurityProtocol != "PLAINTEXT" {
		parts = append(parts, "security_protocol="+w.SecurityProtocol)
	}
	for _, k := range slices.Sorted(maps.Keys(w.TopicConfig)) {
		parts = append(parts, "topic_config."+k+"="+w.TopicConfig[k])
	}
	return strings.Join(parts, " ")
}

func (w Workload) payloadName() string {
	if w.PayloadFile != "" {
		return "file:" + w.PayloadFile
	}
	return w.Payload
}

// String is the key distribution in words: "none", "zipf-1000-s1.2".
func (k Keys) String() string {
	switch k.Kind {
	case "none":
		return "none"
	case "zipf":
		return fmt.Sprintf("zipf-%d-s%v", k.Count, k.ZipfS)
	}
	return fmt.Sprintf("%s-%d", k.Kind, k.Count)
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

// WriteMatrix prints what a run of s would do: the target, the probes, and
// every section's points with their workloads, and a lower bound on the
// load's duration (reps x (warm-up + window), without broker starts and
// drains). It is `weir run --dry-run`'s output.
func (s *Spec) WriteMatrix(w io.Writer) error {
	sections, err := s.Sections()
	if err != nil {
		return err
	}
	target := s.Target.describe()
	fmt.Fprintf(w, "spec %s: seed %d, %d repetitions, target %s\n", s.Name, s.Seed, s.Repetitions, target)
	if s.Interleave {
		fmt.Fprintln(w, "interleave: each section's repetitions run in rounds, one of every point per round, its points' brokers all up")
	}
	for _, warn := range s.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if d := s.Device; d != nil {
		fmt.Fprintf(w, "device: emulated disk %s, %s time (needs root and /dev/fuse)\n", d.Profile, d.Time)
	}
	if d := s.Probes.Disk; d != nil {
		fmt.Fprintf(w, "probe disk: %s\n", setFields(d))
	}
	if m := s.Probes.Memory; m != nil {
		fmt.Fprintf(w, "probe memory: %s\n", setFields(m))
	}
	if d := s.Durability; d != nil {
		d.write(w)
	}
	if sc := s.Scale; sc != nil {
		sc.write(w)
	}
	var total time.Duration
	for _, sec := range sections {
		factors := "no factors"
		if len(sec.Factors) > 0 {
			factors = strings.Join(sec.Factors, " x ")
		}
		fmt.Fprintf(w, "section %s: %d points (%s)\n", sec.Name, len(sec.Points), factors)
		if sec.Baseline != "" {
			fmt.Fprintf(w, "  baseline: %s\n", sec.Baseline)
		}
		for i, p := range sec.Points {
			id := p.ID
			if id == "" {
				id = "(single point)"
			}
			if s.Scale == nil {
				fmt.Fprintf(w, "  %d. %s\n     %s\n", i+1, id, p.Workload.Summary())
			} else {
				fmt.Fprintf(w, "  %d. %s\n", i+1, id)
			}
			if sc := s.Scale; sc != nil {
				fmt.Fprintf(w, "     %d partitions in %d topics; hot load (step 7): %s\n", p.TotalPartitions, sc.Topics(p.TotalPartitions),
					p.Workload.Summary())
				total += sc.Estimate(p.Workload, s.Repetitions)
				continue
			}
			if s.Durability != nil && s.Target.IsCluster() {
				// The cluster lab runs the whole window under its faults.
				total += time.Duration(s.Repetitions) * (p.Workload.Warmup + p.Workload.Duration)
				continue
			}
			if s.Durability != nil {
				// A run ends at its fault: half way through the window on average.
				total += time.Duration(s.Repetitions) * (p.Workload.Warmup + p.Workload.Duration/2)
				continue
			}
			total += time.Duration(s.Repetitions) * (p.Workload.Warmup + p.Workload.Duration)
		}
	}
	if s.NoLoad {
		_, err = fmt.Fprintln(w, "no load (no_load: true)")
		return err
	}
	if s.Durability != nil && s.Target.IsCluster() {
		_, err = fmt.Fprintf(w, "load time: about %v under faults, plus each run's cluster start, heal, read-back and stop\n", total)
		return err
	}
	if s.Scale != nil {
		_, err = fmt.Fprintf(w, "load time: at least %v of timed windows, plus creating, producing, reading and restarting "+
			"N partitions per point, which grows with N\n", total)
		return err
	}
	if s.Durability != nil {
		_, err = fmt.Fprintf(w, "load time: about %v until the faults, plus each run's restart and read-back\n", total)
		return err
	}
	_, err = fmt.Fprintf(w, "load time: at least %v\n", total)
	return err
}

// describe is the target in words, for dry runs.
func (t Target) describe() string {
	var parts []string
	var flags []string
	switch {
	case t.Bootstrap != "":
		return "bootstrap " + t.Bootstrap
	case t.Cluster != nil:
		c := t.Cluster
		zk := "an embedded ZooKeeper"
		if c.ZooKeeper != ZooKeeperEmbedded {
			zk = "ZooKeeper " + c.ZooKeeper + " (a fresh chroot per point)"
		}
		parts = append(parts, fmt.Sprintf("cluster of %d brokers on %s", c.Brokers, zk))
		if c.SessionTimeout > 0 {
			parts = append(parts, "session timeout "+c.SessionTimeout.String())
		}
		flags = c.BrokerFlags
	default:
		parts = append(parts, "embedded broker")
		if e := t.Embedded; e != nil {
			flags = e.BrokerFlags
			if e.OpenFilesLimit > 0 {
				parts = append(parts, fmt.Sprintf("open-file limit %d", e.OpenFilesLimit))
			}
			if len(e.BrokerEnv) > 0 {
				parts = append(parts, "env "+strings.Join(e.BrokerEnv, " "))
			}
		}
	}
	if d := t.DataDir(); d != "" {
		parts = append(parts, "data under "+d)
	}
	if len(flags) > 0 {
		parts = append(parts, "flags "+strings.Join(flags, " "))
	}
	return strings.Join(parts, ", ")
}

// setFields lists the fields of a probe's options that the spec set, by
// their YAML names; the others take the probe's defaults.
func setFields(v any) string {
	var parts []string
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		if f.IsZero() {
			continue
		}
		name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("yaml"), ",")
		val := fmt.Sprint(f.Interface())
		if f.Kind() == reflect.Slice {
			var items []string
			for j := range f.Len() {
				items = append(items, fmt.Sprint(f.Index(j).Interface()))
			}
			val = "[" + strings.Join(items, ", ") + "]"
		}
		parts = append(parts, name+" "+val)
	}
	if len(parts) == 0 {
		return "the probe's defaults"
	}
	return strings.Join(parts, ", ") + "; the rest at the probe's defaults"
}
