package spec

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/weir-broker/weir/cluster/zk"
	"github.com/weir-broker/weir/cluster/zk/zkserver"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/harness/clusterproc"
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
	maxBrokers     = 64
	// maxReplicationFactor is Kafka's: the field is an int16.
	maxReplicationFactor = 32767
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
// durable acks only for targets the runner starts, replication factors
// within the target's brokers, and every matrix point's workload as its
// factors make it (min_insync within the point's replication factor). The error wraps ErrInvalid and lists every
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
	s.validateScale(&p)
	s.validateDevice(&p)

	// Each workload and factor level on its own...
	s.validateWorkload(&p, "workload", &s.Workload, plugins)
	if s.NoLoad {
		if !s.Factors.empty() || len(s.Points) > 0 || len(s.Experiments) > 0 {
			p.add("no_load", "a spec without load has no factors, points or experiments")
		}
		if s.Probes.Disk == nil && s.Probes.Memory == nil {
			p.add("no_load", "a spec without load needs probes: there is nothing to run")
		}
	}
	if s.Interleave {
		switch {
		case s.Durability != nil || s.Scale != nil:
			p.add("interleave", "load experiments only: durability and scale runs start a broker per repetition")
		case s.Target.IsCluster():
			p.add("interleave", "not on a cluster target: it would keep a cluster per point running at once")
		}
	}
	if s.Durability != nil && s.Baseline != "" {
		p.add("baseline", "not for durability experiments: their report compares each point with its bound")
	}
	if len(s.Experiments) > 0 {
		if !s.Factors.empty() || len(s.Points) > 0 {
			p.add("factors", "a spec with experiments gives factors or points per experiment")
		}
		if s.Baseline != "" {
			p.add("baseline", "a spec with experiments gives a baseline per experiment")
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
			if s.Durability != nil && e.Baseline != "" {
				p.add(field+".baseline", "not for durability experiments: their report compares each point with its bound")
			}
			s.validateMatrix(&p, field, &e.Factors, e.Points, plugins)
		}
	} else {
		s.validateMatrix(&p, "", &s.Factors, s.Points, plugins)
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
	for i, sec := range sections {
		name := sec.Name
		if s.Durability != nil {
			name = "durability" + strings.TrimPrefix(name, "load")
		}
		ids := map[string]bool{}
		for j, pt := range sec.Points {
			field := "workload"
			if pt.ID != "" {
				field = name + " point " + pt.ID + ": workload"
			}
			if ids[pt.ID] {
				p.add(matrixField(len(s.Experiments) > 0, i, "points", j), "repeats point %s", pt.ID)
			}
			ids[pt.ID] = true
			s.validateWorkload(&p, field, &pt.Workload, plugins)
			if w := pt.Workload; w.MinInsync > w.ReplicationFactor && w.ReplicationFactor >= 1 {
				p.add(field+".min_insync", "%d exceeds replication_factor %d: no more replicas can be in sync than there are", w.MinInsync, w.ReplicationFactor)
			}
			if s.Durability != nil {
				validateDurabilityWorkload(&p, field, &pt.Workload)
			}
		}
		if sec.Baseline != "" && !ids[sec.Baseline] {
			known := slices.Sorted(maps.Keys(ids))
			p.add(matrixField(len(s.Experiments) > 0, i, "baseline", -1), "%q is not a point of section %s (its points: %s)",
				sec.Baseline, name, strings.Join(known, ", "))
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

// matrixField names a field of the matrix of section i: "points[j]" or
// "baseline" at the top level, "experiments[i].points[j]" in a spec with
// experiments; j < 0 leaves the index out.
func matrixField(experiments bool, i int, name string, j int) string {
	f := name
	if j >= 0 {
		f = fmt.Sprintf("%s[%d]", name, j)
	}
	if experiments {
		f = fmt.Sprintf("experiments[%d].%s", i, f)
	}
	return f
}

func (s *Spec) validateTarget(p *problems) {
	t := s.Target
	given := 0
	for _, set := range []bool{t.Embedded != nil, t.Bootstrap != "", t.Cluster != nil} {
		if set {
			given++
		}
	}
	if given > 1 {
		p.add("target", "give one of embedded, bootstrap and cluster")
	}
	if t.Bootstrap != "" {
		if _, _, err := net.SplitHostPort(t.Bootstrap); err != nil {
			p.add("target.bootstrap", "%q: want host:port", t.Bootstrap)
		}
		return
	}
	reserved := []string{"--data-dir", "--listen", "--metrics-listen", "--advertised"}
	if c := t.Cluster; c != nil {
		if c.Brokers < 1 || c.Brokers > maxBrokers {
			p.add("target.cluster.brokers", "must be in 1..%d, got %d", maxBrokers, c.Brokers)
		}
		if c.ZooKeeper == "" {
			p.add("target.cluster.zookeeper", "required: %q (the default) or host:port[/chroot]", ZooKeeperEmbedded)
		} else if c.ZooKeeper != ZooKeeperEmbedded {
			if _, err := zk.ParseConnectString(c.ZooKeeper); err != nil {
				p.add("target.cluster.zookeeper", "%q: want %q or host:port[,host:port][/chroot]: %v", c.ZooKeeper, ZooKeeperEmbedded, err)
			}
		}
		switch st := c.SessionTimeout; {
		case st < 0:
			p.add("target.cluster.session_timeout", "must be >= 0 (0: the broker's default, 18s), got %v", st)
		case st > 0 && c.ZooKeeper == ZooKeeperEmbedded && (st < clusterproc.ZooKeeperMinSessionTimeout || st > clusterproc.ZooKeeperMaxSessionTimeout):
			p.add("target.cluster.session_timeout", "%v: the embedded ZooKeeper grants %v..%v", st,
				clusterproc.ZooKeeperMinSessionTimeout, clusterproc.ZooKeeperMaxSessionTimeout)
		}
		switch c.Networking {
		case clusterproc.NetworkingLoopback, clusterproc.NetworkingAuto:
		case clusterproc.NetworkingNetns:
			if c.ZooKeeper != ZooKeeperEmbedded {
				if err := clusterproc.NetnsReachable(c.ZooKeeper); err != nil {
					p.add("target.cluster.networking", "netns: %v", err)
				}
			}
		default:
			p.add("target.cluster.networking", "%q: want %s (the default), %s or %s", c.Networking,
				clusterproc.NetworkingLoopback, clusterproc.NetworkingNetns, clusterproc.NetworkingAuto)
		}
		reserved = append(reserved, "--broker-id", "--zookeeper", "--zookeeper-session-timeout")
		checkBrokerFlags(p, "target.cluster.broker_flags", c.BrokerFlags, reserved)
		return
	}
	if e := t.Embedded; e != nil {
		checkBrokerFlags(p, "target.embedded.broker_flags", e.BrokerFlags, reserved)
		for i, kv := range e.BrokerEnv {
			if name, _, ok := strings.Cut(kv, "="); !ok || name == "" || strings.ContainsAny(name, " \t") {
				p.add(fmt.Sprintf("target.embedded.broker_env[%d]", i), "%q: want NAME=value", kv)
			}
		}
		if l := e.OpenFilesLimit; l != 0 && (l < minOpenFilesLimit || l > maxOpenFilesLimit) {
			p.add("target.embedded.open_files_limit", "must be 0 (the runner's limit) or in %d..%d, got %d", minOpenFilesLimit, maxOpenFilesLimit, l)
		}
		if s.Durability != nil && (len(e.BrokerEnv) > 0 || e.OpenFilesLimit != 0) {
			p.add("target.embedded", "broker_env and open_files_limit are for load and scale experiments; the durability lab starts its brokers without them")
		}
	}
}

// checkBrokerFlags checks extra `weir broker` flags: each --flag or
// --flag=value, none that the runner sets itself.
func checkBrokerFlags(p *problems, field string, flags, reserved []string) {
	for i, f := range flags {
		lf := fmt.Sprintf("%s[%d]", field, i)
		name, _, _ := strings.Cut(f, "=")
		switch {
		case !strings.HasPrefix(f, "--"):
			p.add(lf, "%q: want --flag or --flag=value (see `weir broker --help`)", f)
		case slices.Contains(reserved, name):
			p.add(lf, "%s is set by the runner", name)
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
func (s *Spec) validateWorkload(p *problems, field string, w *Workload, plugins Plugins) {
	managed := s.Target.Managed()
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
	validateLevel(p, f("codec"), "codec", w.Codec, plugins, managed)
	validateLevel(p, f("partitioner"), "partitioner", w.Partitioner, plugins, managed)
	if w.FlushPolicy != "" {
		validateLevel(p, f("flush_policy"), "flush_policy", w.FlushPolicy, plugins, managed)
	}
	if w.DurableAcks && !managed {
		p.add(f("durable_acks"), "%s", onlyManaged)
	}
	s.validateReplicationFactor(p, f("replication_factor"), w.ReplicationFactor)
	if w.MinInsync < 1 {
		p.add(f("min_insync"), "must be >= 1, got %d", w.MinInsync)
	}
	validateLevel(p, f("acks"), "acks", w.Acks, plugins, managed)
	s.validateSecurityProtocol(p, f("security_protocol"), w.SecurityProtocol)
	validateBatchMaxBytes(p, f("batch_max_bytes"), w.BatchMaxBytes)
	validateLinger(p, f("linger"), w.Linger)
	for k := range w.TopicConfig {
		switch {
		case strings.TrimSpace(k) == "":
			p.add(f("topic_config"), "empty config name")
		case k == topicconfig.MinInsyncReplicas:
			p.add(f("topic_config"), "%s: set it with min_insync (a factor too)", k)
		}
	}
}

// onlyManaged is the complaint about broker and topic settings the runner
// cannot make on a bootstrap target.
const onlyManaged = "only for targets the runner starts (embedded, cluster): a bootstrap target's brokers are configured as they are"

// validateReplicationFactor checks a replication factor against the
// target's brokers.
func (s *Spec) validateReplicationFactor(p *problems, field string, rf int) {
	switch brokers := s.Target.Brokers(); {
	case rf < 1 || rf > maxReplicationFactor:
		p.add(field, "must be in 1..%d, got %d", maxReplicationFactor, rf)
	case brokers == 0:
	case s.Target.IsEmbedded() && rf > 1:
		p.add(field, "%d: an embedded target is one broker, so 1 (target.cluster has more)", rf)
	case rf > brokers:
		p.add(field, "%d exceeds target.cluster.brokers (%d): each replica needs a broker of its own", rf, brokers)
	}
}

// validateLevel checks one value of the factors that are specs or enums;
// full names where it sits (workload.codec, factors.codec[2]) and name is
// the factor.
func validateLevel(p *problems, full, name, v string, plugins Plugins, managed bool) {
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
		if !managed {
			p.add(full, "%s", onlyManaged)
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

// SecurityProtocols are the levels of security_protocol, Kafka's names.
var SecurityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// validateSecurityProtocol checks a security_protocol level: one of
// Kafka's, and anything but PLAINTEXT only on the brokers the runner
// starts (embedded or cluster) for a load experiment (the runner sets
// their listeners up; a bootstrap target's listeners are what they are,
// target.security says how to reach them).
func (s *Spec) validateSecurityProtocol(p *problems, field, v string) {
	if v == "" || v == "PLAINTEXT" {
		return
	}
	if !slices.Contains(SecurityProtocols, v) {
		p.add(field, "unknown security protocol %q (known: %s)", v, strings.Join(SecurityProtocols, ", "))
		return
	}
	switch {
	case s.Target.Bootstrap != "":
		p.add(field, "%s: the runner sets up listeners only on a broker it starts; a bootstrap target's clients connect as target.security says", v)
	case s.Durability != nil || s.Scale != nil:
		p.add(field, "%s: load experiments only (durability and scale start their brokers with PLAINTEXT)", v)
	case s.Target.Security != nil:
		p.add(field, "%s: target.security is for a bootstrap target; the runner makes the credentials of the brokers it starts", v)
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

// validateMatrix checks a section's factors, or else its points: each
// level on its own, no level repeated. prefix is "" at the top level, or
// "experiments[i]".
func (s *Spec) validateMatrix(p *problems, prefix string, fs *Factors, points []Levels, plugins Plugins) {
	at := func(name string) string {
		if prefix == "" {
			return name
		}
		return prefix + "." + name
	}
	if len(points) == 0 {
		s.validateFactors(p, fs, plugins, func(factor string, i int) string { return fmt.Sprintf("%s.%s[%d]", at("factors"), factor, i) })
		return
	}
	if !fs.empty() {
		p.add(at("points"), "give factors or points, not both")
	}
	for j := range points {
		pf := fmt.Sprintf("%s[%d]", at("points"), j)
		lv := (*Factors)(&points[j])
		if lv.empty() {
			p.add(pf, "names no factor: give at least one level ({acks: all, ...})")
		}
		s.validateFactors(p, lv, plugins, func(factor string, _ int) string { return pf + "." + factor })
	}
}

// validateFactors checks each level on its own and that no level repeats;
// at names level i of a factor.
func (s *Spec) validateFactors(p *problems, fs *Factors, plugins Plugins, at func(factor string, i int) string) {
	managed := s.Target.Managed()
	for _, d := range factorDefs {
		n := d.n(fs)
		ids := map[string]int{}
		for i := range n {
			lf := at(d.name, i)
			id := d.levelID(fs, i)
			if j, dup := ids[id]; dup {
				p.add(lf, "repeats level %d (%s)", j, id)
			}
			ids[id] = i
			switch d.name {
			case "codec":
				validateLevel(p, lf, d.name, fs.Codec[i], plugins, managed)
			case "partitioner":
				validateLevel(p, lf, d.name, fs.Partitioner[i], plugins, managed)
			case "flush_policy":
				validateLevel(p, lf, d.name, fs.FlushPolicy[i], plugins, managed)
			case "acks":
				validateLevel(p, lf, d.name, fs.Acks[i], plugins, managed)
			case "security_protocol":
				s.validateSecurityProtocol(p, lf, fs.SecurityProtocol[i])
			case "durable_acks":
				if !managed {
					p.add(lf, "%s", onlyManaged)
				}
			case "replication_factor":
				s.validateReplicationFactor(p, lf, fs.ReplicationFactor[i])
			case "min_insync":
				if v := fs.MinInsync[i]; v < 1 {
					p.add(lf, "must be >= 1, got %d", v)
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
		if !s.Target.Managed() {
			p.add("probes.disk", "only for targets the runner starts (embedded, cluster): it measures the disk under the brokers' data directories")
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
		switch span := d.RandomWriteSpan; {
		case span.Device && s.Device == nil:
			p.add("probes.disk.random_write_span", "%q needs an emulated disk (device:, or weir run --device)", WriteSpanDevice)
		case span.Bytes < 0 || span.Bytes%4096 != 0 || (span.Bytes > 0 && span.Bytes < max(d.FileSize, 256<<20)):
			p.add("probes.disk.random_write_span", "must be a multiple of 4KiB of at least file_size (default 256MiB), got %d", span.Bytes)
		}
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

// CheckTarget makes sure the target can be had before anything runs: a
// bootstrap target accepts TCP connections within timeout; a cluster's
// external ZooKeeper does too, and for an embedded one ZooKeeper is
// installed; netns networking can be set up (clusterproc.NetnsAvailable). The error wraps ErrUnreachable and names the field.
// Embedded targets pass.
func (s *Spec) CheckTarget(ctx context.Context, timeout time.Duration) error {
	if c := s.Target.Cluster; c != nil && s.Target.Bootstrap == "" {
		zookeeper := ""
		if c.ZooKeeper == ZooKeeperEmbedded {
			if err := zkserver.Debian().Check(); err != nil {
				return fmt.Errorf("%w: target.cluster.zookeeper: embedded: %w (or name an external one)", ErrUnreachable, err)
			}
		} else {
			if err := clusterproc.Reachable(ctx, c.ZooKeeper, timeout); err != nil {
				return fmt.Errorf("%w: target.cluster.zookeeper: %w", ErrUnreachable, dialCause(err))
			}
			zookeeper = c.ZooKeeper
		}
		if c.Networking == clusterproc.NetworkingNetns {
			if err := clusterproc.NetnsAvailable(zookeeper); err != nil {
				return fmt.Errorf("%w: target.cluster.networking: netns: %w (or networking: auto)", ErrUnreachable, err)
			}
		}
		return nil
	}
	addr := s.Target.Bootstrap
	if addr == "" {
		return nil
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("%w: target.bootstrap: cannot connect to %s: %w", ErrUnreachable, addr, dialCause(err))
	}
	return conn.Close()
}

// dialCause strips a dial error down to its cause ("connection refused").
func dialCause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var prefix string
		if msg, _, ok := strings.Cut(err.Error(), ": dial "); ok {
			prefix = msg + ": "
		}
		return fmt.Errorf("%s%w", prefix, op.Err)
	}
	return err
}
