package spec

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/partitioner"
	pspec "github.com/weir-broker/weir/plugins/spec"
)

// Plugin kinds passed to Plugins.CheckSpec.
const (
	KindCodec       = "codec"
	KindPartitioner = "partitioner"
	KindFlushPolicy = "flushpolicy"
)

// Plugins checks plugin specs without running any load: that a built-in is
// registered and takes the parameters given, or that an external plugin
// starts and answers. plugins/host.Host implements it.
type Plugins interface {
	CheckSpec(kind, spec string) error
}

// Builtins checks specs against the built-in registries only; a path to an
// external plugin must name an executable file. Use it where no plugin host
// is at hand.
type Builtins struct{}

// CheckSpec implements Plugins.
func (Builtins) CheckSpec(kind, s string) error {
	sp, err := pspec.Parse(s)
	if err != nil {
		return err
	}
	if sp.IsPath() {
		fi, err := os.Stat(sp.Name)
		if err != nil {
			return fmt.Errorf("%s plugin: %w", kind, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s plugin %s: not an executable file", kind, sp.Name)
		}
		return nil
	}
	switch kind {
	case KindCodec:
		_, err = codec.New(s)
	case KindPartitioner:
		_, err = partitioner.New(s)
	case KindFlushPolicy:
		_, err = flushpolicy.New(s)
	default:
		err = fmt.Errorf("unknown plugin kind %q", kind)
	}
	return err
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Limits that keep a typo from asking for something absurd.
const (
	maxRepetitions = 1000
	maxTopics      = 1000
	maxPartitions  = 10000
	maxClients     = 256
	maxMessageSize = 64 << 20
)

// problems collects validation failures, each naming its field.
type problems []string

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, field+": "+fmt.Sprintf(format, args...))
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n  %s", ErrInvalid, strings.Join(slices.Compact(p), "\n  "))
}

// Validate checks every value of s without touching the target: ranges,
// plugin specs (through plugins; nil means Builtins), flush policy and
// durable acks only for embedded targets, and every matrix point's workload
// as its factors make it. The error wraps ErrInvalid and lists every
// problem, one per line, each naming its field.
func (s *Spec) Validate(plugins Plugins) error {
	if plugins == nil {
		plugins = Builtins{}
	}
	var p problems
	if s.Name == "" {
		p.add("name", "required")
	} else if !nameRE.MatchString(s.Name) {
		p.add("name", "%q: use letters, digits, '.', '_' and '-' (it names the results directory)", s.Name)
	}
	if s.Repetitions < 1 || s.Repetitions > maxRepetitions {
		p.add("repetitions", "must be in 1..%d, got %d", maxRepetitions, s.Repetitions)
	}
	s.validateTarget(&p)
	s.validateDurability(&p)
	embedded := s.Target.IsEmbedded()

	// Each workload and factor level on its own...
	s.validateWorkload(&p, "workload", &s.Workload, plugins, embedded)
	if s.NoLoad {
		if !s.Factors.empty() || len(s.Experiments) > 0 {
			p.add("no_load", "a spec without load has no factors or experiments")
		}
		if s.Probes.Disk == nil && s.Probes.Memory == nil {
			p.add("no_load", "a spec without load needs probes: there is nothing to run")
		}
	}
	if len(s.Experiments) > 0 {
		if !s.Factors.empty() {
			p.add("factors", "a spec with experiments gives factors per experiment")
		}
		seen := map[string]bool{}
		for i, e := range s.Experiments {
			field := fmt.Sprintf("experiments[%d]", i)
			switch {
			case e.Name == "":
				p.add(field+".name", "required")
			case !nameRE.MatchString(e.Name):
				p.add(field+".name", "%q: use letters, digits, '.', '_' and '-'", e.Name)
			case seen[e.Name]:
				p.add(field+".name", "%q given twice", e.Name)
			}
			seen[e.Name] = true
			validateFactors(&p, field+".factors", &e.Factors, plugins, embedded)
		}
	} else {
		validateFactors(&p, "factors", &s.Factors, plugins, embedded)
	}
	if len(p) > 0 {
		return p.err()
	}
	// ...then every point's workload as a whole, for the constraints
	// between fields (consumers and partitions, sizes and batches). A
	// durability section repeats each workload per fault: check it once.
	sections, err := s.loadSections()
	if err != nil {
		return err
	}
	for _, sec := range sections {
		name := sec.Name
		if s.Durability != nil {
			name = "durability" + strings.TrimPrefix(name, "load")
		}
		for _, pt := range sec.Points {
			field := "workload"
			if pt.ID != "" {
				field = name + " point " + pt.ID + ": workload"
			}
			s.validateWorkload(&p, field, &pt.Workload, plugins, embedded)
			if s.Durability != nil {
				validateDurabilityWorkload(&p, field, &pt.Workload)
			}
		}
	}
	s.validateProbes(&p)
	for i, r := range s.References {
		field := fmt.Sprintf("references[%d]", i)
		if r.Metric == "" {
			p.add(field+".metric", "required")
		}
		if r.Source == "" {
			p.add(field+".source", "required: say where the figure was published")
		}
	}
	return p.err()
}

func (s *Spec) validateTarget(p *problems) {
	t := s.Target
	if t.Bootstrap != "" {
		if t.Embedded != nil {
			p.add("target", "give embedded or bootstrap, not both")
		}
		if _, _, err := net.SplitHostPort(t.Bootstrap); err != nil {
			p.add("target.bootstrap", "%q: want host:port", t.Bootstrap)
		}
		return
	}
	if t.Embedded == nil {
		return
	}
	reserved := []string{"--data-dir", "--listen", "--metrics-listen", "--advertised"}
	for i, f := range t.Embedded.BrokerFlags {
		field := fmt.Sprintf("target.embedded.broker_flags[%d]", i)
		name, _, _ := strings.Cut(f, "=")
		switch {
		case !strings.HasPrefix(f, "--"):
			p.add(field, "%q: want --flag or --flag=value (see `weir broker --help`)", f)
		case slices.Contains(reserved, name):
			p.add(field, "%s is set by the runner", name)
		}
	}
}

func validateSpecString(p *problems, field, kind, s string, plugins Plugins) {
	if err := plugins.CheckSpec(kind, s); err != nil {
		p.add(field, "%v", err)
	}
}

var acksLevels = []string{"0", "1", "all", "-1"}

// validateWorkload checks one workload; field prefixes its fields' names.
func (s *Spec) validateWorkload(p *problems, field string, w *Workload, plugins Plugins, embedded bool) {
	f := func(name string) string { return field + "." + name }
	if w.Topics < 1 || w.Topics > maxTopics {
		p.add(f("topics"), "must be in 1..%d, got %d", maxTopics, w.Topics)
	}
	if w.Partitions < 1 || w.Partitions > maxPartitions {
		p.add(f("partitions"), "must be in 1..%d, got %d", maxPartitions, w.Partitions)
	}
	if msg := w.MessageSize.validate(); msg != "" {
		p.add(f("message_size"), "%s", msg)
	} else if _, hi := w.MessageSize.Bounds(); hi > maxMessageSize {
		p.add(f("message_size"), "must be <= %v, got %d", ByteSize(maxMessageSize), hi)
	} else if hi > int64(w.BatchMaxBytes)-100 && w.BatchMaxBytes > 0 {
		p.add(f("message_size"), "up to %d bytes does not fit in batch_max_bytes %d (a record needs ~100 bytes of overhead)", hi, w.BatchMaxBytes)
	}
	switch w.Payload {
	case "random", "json", "text":
	default:
		p.add(f("payload"), "unknown payload %q (known: random, json, text)", w.Payload)
	}
	if w.PayloadFile != "" {
		path := s.resolve(w.PayloadFile)
		if fi, err := os.Stat(path); err != nil {
			p.add(f("payload_file"), "%v", err)
		} else if fi.Size() == 0 || fi.IsDir() {
			p.add(f("payload_file"), "%s: want a non-empty file", path)
		}
	}
	switch w.Keys.Kind {
	case "none":
	case "uniform", "zipf", "sequential":
		if w.Keys.Count < 1 {
			p.add(f("keys.count"), "must be >= 1, got %d", w.Keys.Count)
		}
		if w.Keys.Kind == "zipf" && w.Keys.ZipfS <= 1 {
			p.add(f("keys.zipf_s"), "must be > 1, got %v", w.Keys.ZipfS)
		}
	default:
		p.add(f("keys.kind"), "unknown kind %q (known: none, uniform, zipf, sequential)", w.Keys.Kind)
	}
	if w.Producers < 1 || w.Producers > maxClients {
		p.add(f("producers"), "must be in 1..%d, got %d", maxClients, w.Producers)
	}
	switch {
	case w.Consumers < 0 || w.Consumers > maxClients:
		p.add(f("consumers"), "must be in 0..%d, got %d", maxClients, w.Consumers)
	case w.Consumers > w.Topics*w.Partitions:
		p.add(f("consumers"), "%d consumers for %d partitions: each consumer reads its own partitions, so some would idle", w.Consumers, w.Topics*w.Partitions)
	}
	switch w.Consume {
	case "live":
	case "backlog":
		if w.Consumers == 0 {
			p.add(f("consume"), "backlog needs consumers >= 1")
		}
	default:
		p.add(f("consume"), "unknown mode %q (known: live, backlog)", w.Consume)
	}
	if w.Rate < 0 {
		p.add(f("rate"), "must be >= 0, got %v", w.Rate)
	}
	if w.Warmup < 0 {
		p.add(f("warmup"), "must be >= 0, got %v", w.Warmup)
	}
	if w.Duration <= 0 {
		p.add(f("duration"), "must be > 0, got %v", w.Duration)
	}
	validateLevel(p, field, "codec", w.Codec, plugins, embedded)
	validateLevel(p, field, "partitioner", w.Partitioner, plugins, embedded)
	if w.FlushPolicy != "" {
		validateLevel(p, field, "flush_policy", w.FlushPolicy, plugins, embedded)
	}
	if w.DurableAcks && !embedded {
		p.add(f("durable_acks"), "only for embedded targets")
	}
	validateLevel(p, field, "acks", w.Acks, plugins, embedded)
	validateBatchMaxBytes(p, f("batch_max_bytes"), w.BatchMaxBytes)
	validateLinger(p, f("linger"), w.Linger)
	for k := range w.TopicConfig {
		if strings.TrimSpace(k) == "" {
			p.add(f("topic_config"), "empty config name")
		}
	}
}

// validateLevel checks one value of the factors that are specs or enums;
// field is where it sits (workload or factors) and name the factor.
func validateLevel(p *problems, field, name, v string, plugins Plugins, embedded bool) {
	full := field + "." + name
	if strings.HasSuffix(field, "]") {
		full = field // a factor level, already named: factors.codec[2]
	}
	if v == "default" && (name == "partitioner" || name == "flush_policy") {
		v = "" // the client's or the broker's default
	}
	switch name {
	case "codec":
		validateSpecString(p, full, KindCodec, v, plugins)
	case "partitioner":
		if v != "" {
			validateSpecString(p, full, KindPartitioner, v, plugins)
		}
	case "flush_policy":
		if !embedded {
			p.add(full, "only for embedded targets")
			return
		}
		if v != "" {
			validateSpecString(p, full, KindFlushPolicy, v, plugins)
		}
	case "acks":
		if !slices.Contains(acksLevels, v) {
			p.add(full, "unknown acks %q (known: 0, 1, all)", v)
		}
	}
}

func validateBatchMaxBytes(p *problems, field string, b ByteSize) {
	if b < 512 || b > 1<<30 {
		p.add(field, "must be in 512..1GiB, got %d", b)
	}
}

func validateLinger(p *problems, field string, d time.Duration) {
	if d < 0 || d > time.Minute {
		p.add(field, "must be in 0..1m, got %v", d)
	}
}

func (f *Factors) empty() bool {
	for _, d := range factorDefs {
		if d.n(f) > 0 {
			return false
		}
	}
	return true
}

// validateFactors checks each level on its own and that no level repeats.
func validateFactors(p *problems, field string, fs *Factors, plugins Plugins, embedded bool) {
	for _, d := range factorDefs {
		n := d.n(fs)
		ids := map[string]int{}
		for i := range n {
			lf := fmt.Sprintf("%s.%s[%d]", field, d.name, i)
			id := d.id(fs, i)
			if j, dup := ids[id]; dup {
				p.add(lf, "repeats level %d (%s)", j, id)
			}
			ids[id] = i
			switch d.name {
			case "codec":
				validateLevel(p, lf, d.name, fs.Codec[i], plugins, embedded)
			case "partitioner":
				validateLevel(p, lf, d.name, fs.Partitioner[i], plugins, embedded)
			case "flush_policy":
				validateLevel(p, lf, d.name, fs.FlushPolicy[i], plugins, embedded)
			case "acks":
				validateLevel(p, lf, d.name, fs.Acks[i], plugins, embedded)
			case "durable_acks":
				if !embedded {
					p.add(lf, "only for embedded targets")
				}
			case "batch_max_bytes":
				validateBatchMaxBytes(p, lf, fs.BatchMaxBytes[i])
			case "linger":
				validateLinger(p, lf, fs.Linger[i])
			case "partitions":
				if v := fs.Partitions[i]; v < 1 || v > maxPartitions {
					p.add(lf, "must be in 1..%d, got %d", maxPartitions, v)
				}
			case "message_size":
				if msg := fs.MessageSize[i].validate(); msg != "" {
					p.add(lf, "%s", msg)
				}
			case "producers":
				if v := fs.Producers[i]; v < 1 || v > maxClients {
					p.add(lf, "must be in 1..%d, got %d", maxClients, v)
				}
			case "consumers":
				if v := fs.Consumers[i]; v < 0 || v > maxClients {
					p.add(lf, "must be in 0..%d, got %d", maxClients, v)
				}
			}
		}
	}
}

func (s *Spec) validateProbes(p *problems) {
	if d := s.Probes.Disk; d != nil {
		if !s.Target.IsEmbedded() {
			p.add("probes.disk", "only for embedded targets (it measures the disk under the broker's data directory)")
		}
		if d.FileSize < 0 || d.FileSize%4096 != 0 {
			p.add("probes.disk.file_size", "must be a multiple of 4KiB, got %d", d.FileSize)
		}
		for i, b := range d.BlockSizes {
			if b < 512 || b > 64<<20 || b%512 != 0 || (d.FileSize > 0 && b > d.FileSize) {
				p.add(fmt.Sprintf("probes.disk.block_sizes[%d]", i), "must be a multiple of 512 in 512..64MiB, at most file_size, got %d", b)
			}
		}
		checkEnum(p, "probes.disk.ops", d.Ops, "write", "read", "append+fdatasync", "append+fsync")
		checkEnum(p, "probes.disk.patterns", d.Patterns, "seq", "rand")
		checkEnum(p, "probes.disk.io", d.IO, "buffered", "direct")
		nonNegative(p, "probes.disk.fsync_ops", int64(d.FsyncOps))
		nonNegative(p, "probes.disk.fsync_block", int64(d.FsyncBlock))
		nonNegative(p, "probes.disk.reps", int64(d.Reps))
		nonNegative(p, "probes.disk.point_duration", int64(d.PointDuration))
		nonNegative(p, "probes.disk.fsync_timeout", int64(d.FsyncTimeout))
	}
	if m := s.Probes.Memory; m != nil {
		if m.Bytes < 0 || m.Bytes%8 != 0 || (m.Bytes != 0 && (m.Bytes < 64<<10 || m.Bytes > 16<<30)) {
			p.add("probes.memory.bytes", "must be a multiple of 8 in 64KiB..16GiB, got %d", m.Bytes)
		}
		if m.DiskBytes < 0 || m.DiskBytes%4096 != 0 || (m.DiskBytes != 0 && m.DiskBytes < 64<<10) {
			p.add("probes.memory.disk_bytes", "must be a multiple of 4KiB, at least 64KiB, got %d", m.DiskBytes)
		}
		nonNegative(p, "probes.memory.reps", int64(m.Reps))
		nonNegative(p, "probes.memory.point_duration", int64(m.PointDuration))
	}
}

func checkEnum(p *problems, field string, vs []string, known ...string) {
	for i, v := range vs {
		if !slices.Contains(known, v) {
			p.add(fmt.Sprintf("%s[%d]", field, i), "unknown %q (known: %s)", v, strings.Join(known, ", "))
		}
	}
}

func nonNegative(p *problems, field string, v int64) {
	if v < 0 {
		p.add(field, "must be >= 0, got %d", v)
	}
}

// resolve finds a relative path: in the spec's directory, else in the
// working directory, else in the spec directory's parent (OpenMessaging
// Benchmark keeps workloads/ and payload/ side by side, and names payload
// files relative to the repository). The first candidate is returned when
// none exists, for the error message.
func (s *Spec) resolve(path string) string {
	if filepath.IsAbs(path) || s.Dir == "" {
		return path
	}
	candidates := []string{filepath.Join(s.Dir, path), path, filepath.Join(s.Dir, "..", path)}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	return candidates[0]
}

// PayloadPath is w.PayloadFile resolved (see resolve), or ""
// when the workload has none.
func (s *Spec) PayloadPath(w Workload) string {
	if w.PayloadFile == "" {
		return ""
	}
	return s.resolve(w.PayloadFile)
}

// CheckTarget makes sure a bootstrap target accepts TCP connections within
// timeout, so an unreachable cluster fails before anything else runs. The
// error wraps ErrUnreachable and names target.bootstrap. Embedded targets
// pass.
func (s *Spec) CheckTarget(ctx context.Context, timeout time.Duration) error {
	addr := s.Target.Bootstrap
	if addr == "" {
		return nil
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err
		}
		return fmt.Errorf("%w: target.bootstrap: cannot connect to %s: %w", ErrUnreachable, addr, err)
	}
	return conn.Close()
}
