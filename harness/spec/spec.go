package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Errors of this package.
var (
	// ErrInvalid: the spec cannot be read, or a field is out of range; the
	// message names the field (and its line when the YAML decoder knows it).
	ErrInvalid = errors.New("spec: invalid")
	// ErrUnreachable: the bootstrap target does not accept connections.
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
	// Experiments, if given, replace the single load section by several,
	// each with workload overrides and its own factors.
	Experiments []Experiment `yaml:"experiments"`
	// Probes are the optional disk and memory probes, run before the load.
	Probes Probes `yaml:"probes"`
	// NoLoad leaves the load out: a spec of probes only.
	NoLoad bool `yaml:"no_load"`
	// Durability, if given, makes the load a durability experiment: each
	// point runs until a fault, restarts the broker and counts what was
	// lost (see Durability).
	Durability *Durability `yaml:"durability"`
	// References are published figures to print beside this machine's.
	References []Reference `yaml:"references"`

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

// Target is the system under test: exactly one of Embedded and Bootstrap.
type Target struct {
	// Embedded starts `weir broker` as a subprocess for each matrix point.
	Embedded *Embedded `yaml:"embedded"`
	// Bootstrap is a host:port of any Kafka-compatible cluster.
	Bootstrap string `yaml:"bootstrap"`
}

// IsEmbedded reports whether the target is an embedded broker.
func (t Target) IsEmbedded() bool { return t.Bootstrap == "" }

// Embedded configures the broker subprocesses.
type Embedded struct {
	// DataDir is where each point's fresh data directory is made. Default:
	// a temporary directory, removed after the run.
	DataDir string `yaml:"data_dir"`
	// BrokerFlags are extra `weir broker` flags. The runner sets --data-dir,
	// --listen, --metrics-listen and --advertised itself.
	BrokerFlags []string `yaml:"broker_flags"`
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

	Codec         string            `yaml:"codec"`           // default none
	Partitioner   string            `yaml:"partitioner"`     // "": franz-go's default (sticky, murmur2 for keys)
	FlushPolicy   string            `yaml:"flush_policy"`    // "": the broker's default; embedded only
	DurableAcks   bool              `yaml:"durable_acks"`    // embedded only
	Acks          string            `yaml:"acks"`            // 0 | 1 | all; default all
	BatchMaxBytes ByteSize          `yaml:"batch_max_bytes"` // default 1000012 (franz-go's)
	Linger        time.Duration     `yaml:"linger"`          // default 10ms (franz-go's)
	TopicConfig   map[string]string `yaml:"topic_config"`    // configs of the topics created
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
	Codec         []string        `yaml:"codec"`
	Partitioner   []string        `yaml:"partitioner"`
	FlushPolicy   []string        `yaml:"flush_policy"`
	DurableAcks   []bool          `yaml:"durable_acks"`
	Acks          []string        `yaml:"acks"`
	BatchMaxBytes []ByteSize      `yaml:"batch_max_bytes"`
	Linger        []time.Duration `yaml:"linger"`
	Partitions    []int           `yaml:"partitions"`
	MessageSize   []MessageSize   `yaml:"message_size"`
	Producers     []int           `yaml:"producers"`
	Consumers     []int           `yaml:"consumers"`
}

// Experiment is one load section of a spec that has several.
type Experiment struct {
	// Name names the section ("load-" + Name).
	Name string `yaml:"name"`
	// Workload holds overrides applied over the spec's workload.
	Workload Workload `yaml:"workload"`
	Factors  Factors  `yaml:"factors"`
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
}

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
			Topics:        1,
			Partitions:    1,
			MessageSize:   MessageSize{Distribution: Fixed, Size: 1024},
			Payload:       "random",
			Keys:          Keys{Kind: "none", Count: 1000, ZipfS: 1.2},
			Producers:     1,
			Consumers:     1,
			Consume:       "live",
			Warmup:        time.Second,
			Duration:      10 * time.Second,
			Codec:         "none",
			Acks:          "all",
			BatchMaxBytes: 1000012,
			Linger:        10 * time.Millisecond,
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
