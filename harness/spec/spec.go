package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/weir-broker/weir/harness/clusterproc"
)

// Errors of this package.
var (
	// ErrInvalid: the spec cannot be read, or a field is out of range; the
	// message names the field (and its line when the YAML decoder knows it).
	ErrInvalid = errors.New("spec: invalid")
	// ErrUnreachable: the bootstrap target (or a cluster's external
	// ZooKeeper) does not accept connections, or the embedded ZooKeeper
	// is not installed.
	ErrUnreachable = errors.New("spec: target unreachable")
)

// Spec is one experiment. Parse fills the defaults documented on each field
// before decoding, so a field the file leaves out keeps its default, and one
// the file gives (even as zero) is taken as given.
type Spec struct {
	// Name names the run and its results directory. Default: the file name
	// without extension.
	Name string `yaml:"name"`
	// Seed seeds payloads, keys and message sizes. Rep r of the point with
	// index i (0-based, over all sections) uses Seed + 1000*i + r.
	Seed int64 `yaml:"seed"`
	// Repetitions of each matrix point. Default 5.
	Repetitions int `yaml:"repetitions"`
	// Target is what is measured. Default: an embedded broker.
	Target Target `yaml:"target"`
	// Workload is the load every point applies, before its factors.
	Workload Workload `yaml:"workload"`
	// Factors are the levels to vary; their full product is the matrix.
	Factors Factors `yaml:"factors"`
	// Points, instead of Factors, lists the matrix's points one by one:
	// for combinations that are not a full product (see Levels).
	Points []Levels `yaml:"points"`
	// Baseline is the ID of the point the report sets the others against
	// (ratios of their medians to its); "" for none. With experiments,
	// each gives its own.
	Baseline string `yaml:"baseline"`
	// Experiments, if given, replace the single load section by several,
	// each with workload overrides and its own factors (or points).
	Experiments []Experiment `yaml:"experiments"`
	// Interleave runs each load section's repetitions in rounds, one
	// repetition of every point per round, instead of all of a point's
	// repetitions in a row: every point's broker is started before the
	// first round and kept to the last, so that a machine whose load
	// drifts (other jobs, a VM neighbour) weighs on every point alike and
	// the ratios to the baseline hold. Embedded and bootstrap targets;
	// default false.
	Interleave bool `yaml:"interleave"`
	// Probes are the optional disk and memory probes, run before the load.
	Probes Probes `yaml:"probes"`
	// NoLoad leaves the load out: a spec of probes only.
	NoLoad bool `yaml:"no_load"`
	// Durability, if given, makes the load a durability experiment: each
	// point runs until a fault, restarts the broker and counts what was
	// lost (see Durability).
	Durability *Durability `yaml:"durability"`
	// Scale, if given, makes the spec a partition-scale experiment: a
	// point per partition count, each creating, restarting and loading a
	// broker that holds that many partitions (see Scale).
	Scale *Scale `yaml:"scale"`
	// References are published figures to print beside this machine's.
	References []Reference `yaml:"references"`
	// Device, if given, runs everything on an emulated disk (see Device).
	Device *Device `yaml:"device"`

	// Text is the file as given, kept with the results for reproduction.
	Text string `yaml:"-"`
	// Dir is the directory relative paths (payload_file) are resolved in
	// first; then the working directory and Dir's parent are tried.
	Dir string `yaml:"-"`
	// Warnings lists what was read but is not supported (OMB fields).
	Warnings []string `yaml:"-"`
	// experimentNodes are the experiments' raw workload overrides, applied
	// over Workload by Sections.
	experimentNodes []yaml.Node
}

// Target is the system under test: at most one of Embedded, Bootstrap and
// Cluster; none means an embedded broker with the defaults.
type Target struct {
	// Embedded starts `weir broker` as a subprocess for each matrix point.
	Embedded *Embedded `yaml:"embedded"`
	// Bootstrap is a host:port of any Kafka-compatible cluster.
	Bootstrap string `yaml:"bootstrap"`
	// Cluster starts a cluster of `weir broker` subprocesses on a
	// ZooKeeper for each matrix point.
	Cluster *Cluster `yaml:"cluster"`
	// Security is how the load's clients connect (TLS, SASL), for a
	// bootstrap target whose listener asks for it (security.go).
	Security *Security `yaml:"security"`
}

// IsEmbedded reports whether the target is an embedded broker.
func (t Target) IsEmbedded() bool { return t.Bootstrap == "" && t.Cluster == nil }

// IsCluster reports whether the target is a cluster the runner starts.
func (t Target) IsCluster() bool { return t.Cluster != nil && t.Bootstrap == "" }

// Managed reports whether the runner starts the brokers (an embedded
// broker or a cluster), so that broker and topic settings of its own
// (flush_policy, durable_acks) and the brokers' CPU and disk figures are
// at its disposal.
func (t Target) Managed() bool { return t.Bootstrap == "" }

// Brokers is how many brokers the target has: 1 for an embedded broker,
// the cluster's count, 0 (unknown) for a bootstrap address.
func (t Target) Brokers() int {
	switch {
	case t.Bootstrap != "":
		return 0
	case t.Cluster != nil:
		return t.Cluster.Brokers
	}
	return 1
}

// DataDir is where a managed target's data directories go (the
// embedded broker's or the cluster's data_dir); "" for the default.
func (t Target) DataDir() string {
	switch {
	case t.Cluster != nil:
		return t.Cluster.DataDir
	case t.Embedded != nil:
		return t.Embedded.DataDir
	}
	return ""
}

// Embedded configures the broker subprocesses.
type Embedded struct {
	// DataDir is where each point's fresh data directory is made. Default:
	// a temporary directory, removed after the run.
	DataDir string `yaml:"data_dir"`
	// BrokerFlags are extra `weir broker` flags. The runner sets --data-dir,
	// --listen, --metrics-listen and --advertised itself.
	BrokerFlags []string `yaml:"broker_flags"`
	// BrokerEnv are NAME=value pairs added to the broker's environment.
	// Load and scale experiments; default none.
	BrokerEnv []string `yaml:"broker_env"`
	// OpenFilesLimit, when > 0, is the broker process's open-file limit
	// (RLIMIT_NOFILE, soft and hard, as `ulimit -n` sets it); above the
	// runner's own hard limit it needs root. Load and scale experiments;
	// default 0: the runner's limit.
	OpenFilesLimit int `yaml:"open_files_limit"`
}

// ZooKeeperEmbedded is target.cluster.zookeeper's default: the runner
// starts a ZooKeeper (Debian's package) for each point's cluster.
const ZooKeeperEmbedded = "embedded"

// Cluster configures the clusters the runner starts (package
// harness/clusterproc): for each matrix point a ZooKeeper, unless an
// external one is named, and Brokers `weir broker` processes with broker
// ids 1..Brokers, each with a fresh data directory and free loopback
// ports (or, with netns networking, a network namespace and an address
// of its own), so every point starts from an empty cluster.
type Cluster struct {
	// Brokers is the number of brokers. Default 3.
	Brokers int `yaml:"brokers"`
	// ZooKeeper is "embedded" (the default: a standalone ZooKeeper on a
	// free loopback port per point) or an external ensemble's connect
	// string, host:port[,host:port][/chroot]; each point's brokers then
	// live under a fresh chroot below it, so no point sees another's
	// brokers or topics.
	ZooKeeper string `yaml:"zookeeper"`
	// DataDir is where each point's data directories (and the embedded
	// ZooKeeper's) are made. Default: a temporary directory, removed after
	// the run.
	DataDir string `yaml:"data_dir"`
	// BrokerFlags are extra `weir broker` flags for every broker. The
	// runner sets --broker-id, --zookeeper, --zookeeper-session-timeout,
	// --data-dir, --listen, --metrics-listen and --advertised itself.
	BrokerFlags []string `yaml:"broker_flags"`
	// SessionTimeout is the brokers' ZooKeeper session timeout
	// (--zookeeper-session-timeout). Default 0: the broker's, 18s. The
	// embedded ZooKeeper grants 1s..1m.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// Networking is how the brokers are reached: "loopback" (the default:
	// every process on 127.0.0.1, as results before it), "netns" (each
	// broker in a network namespace of its own, on a bridge, so that one
	// can be cut off; needs root) or "auto" (netns when it can be set up,
	// else loopback). The result's env says which was used.
	Networking string `yaml:"networking"`
}

// DefaultCluster returns a cluster block's defaults.
func DefaultCluster() Cluster {
	return Cluster{Brokers: 3, ZooKeeper: ZooKeeperEmbedded, Networking: clusterproc.NetworkingLoopback}
}

// UnmarshalYAML decodes a cluster block over the defaults, rejecting
// unknown fields like the rest of the spec.
func (c *Cluster) UnmarshalYAML(n *yaml.Node) error {
	type plain Cluster // without this method
	p := plain(DefaultCluster())
	if err := decodeStrict(n, "target.cluster", &p); err != nil {
		return err
	}
	*c = Cluster(p)
	return nil
}

// decodeStrict decodes a mapping node into v (a pointer to a struct),
// failing on a key that is none of the struct's yaml names: a Node's
// Decode does not check them itself. where names the block in errors.
func decodeStrict(n *yaml.Node, where string, v any) error {
	var known []string
	t := reflect.TypeOf(v).Elem()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			known = append(known, name)
		}
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s: want a map of %s", n.Line, where, strings.Join(known, ", "))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !slices.Contains(known, k.Value) {
			return fmt.Errorf("line %d: unknown field %q in %s (known: %s)", k.Line, k.Value, where, strings.Join(known, ", "))
		}
	}
	return n.Decode(v)
}

// Workload is the load of a point. Every factor is also a workload field:
// the workload gives the level used when the factor does not vary.
type Workload struct {
	Topics      int         `yaml:"topics"`       // default 1
	Partitions  int         `yaml:"partitions"`   // per topic; default 1
	MessageSize MessageSize `yaml:"message_size"` // record value bytes, the 8-byte timestamp included; default 1024
	Payload     string      `yaml:"payload"`      // random | json | text; default random
	PayloadFile string      `yaml:"payload_file"` // a file whose bytes values are cut from (overrides payload)
	Keys        Keys        `yaml:"keys"`         // default none
	Producers   int         `yaml:"producers"`    // default 1
	Consumers   int         `yaml:"consumers"`    // 0: produce only; default 1
	// Consume is live (consumers run with the producers; end-to-end latency
	// is measured) or backlog (consumers start when the producers are done
	// and read everything they wrote: consumer throughput on its own).
	// Default live.
	Consume  string        `yaml:"consume"`
	Rate     float64       `yaml:"rate"`     // records/s over all producers; 0: as fast as possible
	Warmup   time.Duration `yaml:"warmup"`   // default 1s
	Duration time.Duration `yaml:"duration"` // the measured window; default 10s

	Codec       string `yaml:"codec"`        // default none
	Partitioner string `yaml:"partitioner"`  // "": franz-go's default (sticky, murmur2 for keys)
	FlushPolicy string `yaml:"flush_policy"` // "": the broker's default; embedded and cluster targets
	DurableAcks bool   `yaml:"durable_acks"` // embedded and cluster targets
	// ReplicationFactor is the topics' replication factor: at most the
	// target's brokers (1 for an embedded broker). Default 1.
	ReplicationFactor int `yaml:"replication_factor"`
	// MinInsync is the topics' min.insync.replicas: with acks=all, a
	// produce fails while fewer replicas are in sync. 1..replication
	// factor; default 1.
	MinInsync int `yaml:"min_insync"`
	// UncleanElection is the topics' unclean.leader.election.enable: with
	// no in-sync replica left, the controller may elect one that is not,
	// losing what it lacks rather than staying without a leader. Default
	// false (Kafka's).
	UncleanElection bool              `yaml:"unclean_election"`
	Acks            string            `yaml:"acks"`            // 0 | 1 | all; default all
	BatchMaxBytes   ByteSize          `yaml:"batch_max_bytes"` // default 1000012 (franz-go's)
	Linger          time.Duration     `yaml:"linger"`          // default 10ms (franz-go's)
	TopicConfig     map[string]string `yaml:"topic_config"`    // configs of the topics created
	// SecurityProtocol is the listener the load's clients use on a broker
	// the runner starts: PLAINTEXT (the default), SSL, SASL_PLAINTEXT or
	// SASL_SSL. For the others the runner makes a throwaway CA and
	// certificate per point, serves that listener beside a PLAINTEXT one
	// (its own, for setup, and a cluster's replication) and, for SASL,
	// creates a SCRAM-SHA-512 user the clients log in as. Embedded and
	// cluster targets, load experiments only.
	SecurityProtocol string `yaml:"security_protocol"`
}

// Keys says which keys records carry.
type Keys struct {
	// Kind is none (null keys), uniform (random over Count keys), zipf
	// (Zipf-distributed over Count keys, a few hot ones), or sequential
	// (round robin over Count keys).
	Kind  string  `yaml:"kind"`
	Count int     `yaml:"count"`  // distinct keys; default 1000
	ZipfS float64 `yaml:"zipf_s"` // the Zipf exponent, > 1; default 1.2
}

// Factors lists the levels of each factor; an empty list does not vary.
// The field order is the matrix order (see the package doc).
type Factors struct {
	SecurityProtocol  []string        `yaml:"security_protocol"`
	Codec             []string        `yaml:"codec"`
	Partitioner       []string        `yaml:"partitioner"`
	FlushPolicy       []string        `yaml:"flush_policy"`
	DurableAcks       []bool          `yaml:"durable_acks"`
	ReplicationFactor []int           `yaml:"replication_factor"`
	MinInsync         []int           `yaml:"min_insync"`
	UncleanElection   []bool          `yaml:"unclean_election"`
	Acks              []string        `yaml:"acks"`
	BatchMaxBytes     []ByteSize      `yaml:"batch_max_bytes"`
	Linger            []time.Duration `yaml:"linger"`
	Partitions        []int           `yaml:"partitions"`
	MessageSize       []MessageSize   `yaml:"message_size"`
	Producers         []int           `yaml:"producers"`
	Consumers         []int           `yaml:"consumers"`
}

// Experiment is one load section of a spec that has several.
type Experiment struct {
	// Name names the section ("load-" + Name).
	Name string `yaml:"name"`
	// Workload holds overrides applied over the spec's workload.
	Workload Workload `yaml:"workload"`
	// Factors, or else Points, make the section's matrix.
	Factors Factors  `yaml:"factors"`
	Points  []Levels `yaml:"points"`
	// Baseline is the ID of the point the report sets the section's
	// others against; "" for none.
	Baseline string `yaml:"baseline"`
}

// Levels is one point of an explicit list (points:): one level of each
// factor it names, written as the workload field of that name is
// ({replication_factor: 3, min_insync: 2, acks: all}). A section made of
// points has as its factors every factor some point names, in matrix
// order; a point that does not name one takes the workload's value, so all
// its points' IDs name the same factors. Points run in the order listed.
type Levels Factors

// UnmarshalYAML reads a point's levels: each value is read as a factor's
// one-level list would be.
func (l *Levels) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a point: want a map of factor levels ({acks: all, ...})", n.Line)
	}
	names := FactorNames()
	lists := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(names, k.Value) {
			return fmt.Errorf("line %d: unknown factor %q in a point (known: %s)", k.Line, k.Value, strings.Join(names, ", "))
		}
		if v.Kind == yaml.SequenceNode {
			return fmt.Errorf("line %d: %s: a point gives one level; a list of levels belongs in factors", v.Line, k.Value)
		}
		lists.Content = append(lists.Content, k, &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: v.Line, Column: v.Column, Content: []*yaml.Node{v}})
	}
	return lists.Decode((*Factors)(l))
}

// Probes are the optional probes; nil means not run.
type Probes struct {
	Disk   *DiskProbe   `yaml:"disk"`
	Memory *MemoryProbe `yaml:"memory"`
}

// DiskProbe configures the disk probe (harness/probe.Disk), run in the
// target's data directory: it measures the disk the broker would use, so it
// is for embedded targets only. Zero fields take the probe's defaults.
type DiskProbe struct {
	FileSize            ByteSize      `yaml:"file_size"`             // default 256 MiB
	BlockSizes          []ByteSize    `yaml:"block_sizes"`           // default 4 KiB, 64 KiB, 1 MiB
	Ops                 []string      `yaml:"ops"`                   // write, read, append+fdatasync, append+fsync; default all
	Patterns            []string      `yaml:"patterns"`              // seq, rand; default both
	IO                  []string      `yaml:"io"`                    // buffered, direct; default both
	BufferedRandomReads bool          `yaml:"buffered_random_reads"` // default false (they measure the page cache)
	PointDuration       time.Duration `yaml:"point_duration"`        // default 500ms
	FsyncOps            int           `yaml:"fsync_ops"`             // default 1000
	FsyncBlock          ByteSize      `yaml:"fsync_block"`           // default 4 KiB
	FsyncTimeout        time.Duration `yaml:"fsync_timeout"`         // default 5s
	Reps                int           `yaml:"reps"`                  // default 1
	// RandomWriteSpan spreads the random write points over a preallocated
	// file of this size (probe.DiskOptions.RandomWriteSpan), or with
	// `device` over 98% of the emulated disk's capacity (needs device:).
	RandomWriteSpan WriteSpan `yaml:"random_write_span"` // default: the probe file
}

// WriteSpan is probes.disk.random_write_span: a byte size, or the word
// `device` for most of the run's emulated disk.
type WriteSpan struct {
	Bytes  ByteSize
	Device bool
}

// WriteSpanDevice is the word that makes a WriteSpan the emulated disk's.
const WriteSpanDevice = "device"

// DeviceSpanFraction is the share of an emulated disk's capacity a
// `device` span takes: the rest keeps room for the probe's other files and
// the load's data, since the emulated disk does not reuse freed space.
const DeviceSpanFraction = 0.98

// UnmarshalYAML reads `device` or a byte size.
func (w *WriteSpan) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == WriteSpanDevice {
		*w = WriteSpan{Device: true}
		return nil
	}
	var b ByteSize
	if err := b.UnmarshalYAML(n); err != nil {
		return fmt.Errorf("%w, or %q", err, WriteSpanDevice)
	}
	*w = WriteSpan{Bytes: b}
	return nil
}

// MarshalYAML writes `device` or the byte size.
func (w WriteSpan) MarshalYAML() (any, error) {
	if w.Device {
		return WriteSpanDevice, nil
	}
	return w.Bytes.String(), nil
}

// String is the spec's form: `device` or the byte size.
func (w WriteSpan) String() string {
	if w.Device {
		return WriteSpanDevice
	}
	return w.Bytes.String()
}

// IsZero leaves an unset span out of a written spec.
func (w WriteSpan) IsZero() bool { return !w.Device && w.Bytes == 0 }

// MemoryProbe configures the memory probe (harness/probe.Memory): random
// and sequential reads from memory and, for embedded targets, from a file in
// the data directory. Zero fields take the probe's defaults.
type MemoryProbe struct {
	Bytes         ByteSize      `yaml:"bytes"`          // the array; default 256 MiB
	DiskBytes     ByteSize      `yaml:"disk_bytes"`     // the file; default 256 MiB
	NoDisk        bool          `yaml:"no_disk"`        // leave the disk points out
	PointDuration time.Duration `yaml:"point_duration"` // default 1s
	Reps          int           `yaml:"reps"`           // default 1
}

// Reference is a published figure, copied into the run's References.
type Reference struct {
	Section string  `yaml:"section"`
	Point   string  `yaml:"point"`
	Metric  string  `yaml:"metric"`
	Value   float64 `yaml:"value"`
	Label   string  `yaml:"label"`
	Source  string  `yaml:"source"`
}

// Defaults returns a Spec holding every default; Parse decodes files over
// it.
func Defaults() Spec {
	return Spec{
		Repetitions: 5,
		Workload: Workload{
			Topics:            1,
			Partitions:        1,
			MessageSize:       MessageSize{Distribution: Fixed, Size: 1024},
			Payload:           "random",
			Keys:              Keys{Kind: "none", Count: 1000, ZipfS: 1.2},
			Producers:         1,
			Consumers:         1,
			Consume:           "live",
			Warmup:            time.Second,
			Duration:          10 * time.Second,
			Codec:             "none",
			ReplicationFactor: 1,
			MinInsync:         1,
			Acks:              "all",
			BatchMaxBytes:     1000012,
			Linger:            10 * time.Millisecond,
			SecurityProtocol:  "PLAINTEXT",
		},
	}
}

// Load reads and parses a spec file; see Parse.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	s, err := Parse(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return s, nil
}

// Parse decodes a spec (or an OpenMessaging Benchmark workload) over the
// defaults. dir resolves relative paths in it. Unknown fields are errors
// that name the field and its line. Parse checks the syntax only; Validate
// checks the values.
func Parse(data []byte, dir string) (*Spec, error) {
	if isOMB(data) {
		return parseOMB(data, dir)
	}
	s := Defaults()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: the file is empty", ErrInvalid)
		}
		return nil, fmt.Errorf("%w: %s", ErrInvalid, yamlMessage(err))
	}
	// The experiments' workloads are overrides: decode them again, this
	// time as raw nodes, to apply over the top-level workload. The strict
	// pass above has checked their fields.
	if len(s.Experiments) > 0 {
		var raw struct {
			Experiments []struct {
				Workload yaml.Node `yaml:"workload"`
			} `yaml:"experiments"`
		}
		if err := yaml.Unmarshal(data, &raw); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrInvalid, yamlMessage(err))
		}
		for _, e := range raw.Experiments {
			s.experimentNodes = append(s.experimentNodes, e.Workload)
		}
	}
	s.Text = string(data)
	s.Dir = dir
	return &s, nil
}

// yamlTypePaths names the spec's Go types by where they sit in the file, so
// that the decoder's "field x not found in type spec.Workload" reads as
// "unknown field x in workload".
var yamlTypePaths = map[string]string{
	"spec.Spec":        "the spec",
	"spec.Target":      "target",
	"spec.Embedded":    "target.embedded",
	"spec.Workload":    "workload",
	"spec.Keys":        "workload.keys",
	"spec.Factors":     "factors",
	"spec.Experiment":  "experiments[]",
	"spec.Probes":      "probes",
	"spec.DiskProbe":   "probes.disk",
	"spec.MemoryProbe": "probes.memory",
	"spec.Reference":   "references[]",
	"spec.plain":       "durability",
}

var notFoundRE = regexp.MustCompile(`field (\S+) not found in type (\S+)`)

// yamlMessage rewrites the YAML decoder's messages in the spec's words.
func yamlMessage(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n")
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = notFoundRE.ReplaceAllStringFunc(msg, func(m string) string {
		sub := notFoundRE.FindStringSubmatch(m)
		where := yamlTypePaths[sub[2]]
		if where == "" {
			where = sub[2]
		}
		return fmt.Sprintf("unknown field %q in %s", sub[1], where)
	})
	var lines []string
	for l := range strings.SplitSeq(msg, "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	return strings.Join(lines, "; ")
}
