package scale

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/plugins/codec"
)

// Errors of this package.
var (
	// ErrConfig: a Config field is missing or out of range.
	ErrConfig = errors.New("scale: invalid config")
	// ErrStep: a step failed; the error is a *StepError.
	ErrStep = errors.New("scale: step failed")
)

// The steps, numbered as the issue lists them.
const (
	StepCreate = iota + 1
	StepMetadata
	StepRecords
	StepCleanRestart
	StepUncleanRestart
	StepSessions
	StepHot
)

// StepNames name the steps in errors and reports, by number.
var StepNames = map[int]string{
	StepCreate:         "create the partitions",
	StepMetadata:       "Metadata for every topic",
	StepRecords:        "one record to each partition, one consumer reading them all",
	StepCleanRestart:   "clean restart (SIGTERM)",
	StepUncleanRestart: "unclean restart (SIGKILL)",
	StepSessions:       "fetch sessions on and off",
	StepHot:            "hot partitions beside idle ones",
}

// StepError is the step a run failed at.
type StepError struct {
	Step int
	Err  error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("step %d (%s): %v", e.Step, StepNames[e.Step], e.Err)
}

func (e *StepError) Unwrap() []error { return []error{ErrStep, e.Err} }

// ParseStep returns the step a StepError's message names ("step 3 (...):
// ..."), for reports reading errors back from run.json; 0 when it names
// none.
func ParseStep(msg string) int {
	rest, ok := strings.CutPrefix(msg, "step ")
	if !ok {
		return 0
	}
	num, _, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(num)
	if err != nil || StepNames[n] == "" {
		return 0
	}
	return n
}

// Config is one run: one broker, N partitions.
type Config struct {
	// Scale is the spec's block, its defaults filled.
	Scale spec.Scale
	// Partitions is N. Required.
	Partitions int
	// Workload is step 7's hot load (the spec's workload).
	Workload spec.Workload
	// Codec compresses the hot load's batches; nil: none.
	Codec codec.Codec
	// Weir is the weir binary. Required.
	Weir string
	// DataDir is a directory of the run's own: the broker's data goes to
	// DataDir/main, step 7's second broker's to DataDir/alone. Required.
	DataDir string
	// BrokerFlags, BrokerEnv and OpenFilesLimit are brokerproc.Options'
	// Flags, Env and OpenFilesLimit, for both brokers.
	BrokerFlags    []string
	BrokerEnv      []string
	OpenFilesLimit int
	// Seed seeds the hot load.
	Seed int64
	// TopicPrefix names the topics: PREFIX-000000, PREFIX-000001, ...
	// Required.
	TopicPrefix string
	// Progress, when set, is told what the run is doing: each step's start
	// and end, and the advance of long ones.
	Progress func(msg string)
}

func (c *Config) validate() error {
	switch {
	case c.Partitions < 1:
		return fmt.Errorf("%w: Partitions %d", ErrConfig, c.Partitions)
	case c.Weir == "" || c.DataDir == "" || c.TopicPrefix == "":
		return fmt.Errorf("%w: Weir, DataDir and TopicPrefix are required", ErrConfig)
	case c.Scale.PartitionsPerTopic < 1 || c.Scale.CreateBatch < 1 || c.Scale.MetadataRequests < 1 ||
		c.Scale.RestartTimeout <= 0 || c.Scale.StepTimeout <= 0 || c.Scale.RequestTimeout <= 0:
		return fmt.Errorf("%w: the scale block is not validated (%+v)", ErrConfig, c.Scale)
	}
	return nil
}

// MaxOpenFilesFlag is the broker flag the descriptor budget is expected
// under; when BrokerFlags give it, its value is the run's fd-budget.
const MaxOpenFilesFlag = "--max-open-files"

// flagBudget returns the value of --max-open-files in flags (either
// --max-open-files=N or --max-open-files N), or 0.
func flagBudget(flags []string) int {
	for i, f := range flags {
		v, ok := strings.CutPrefix(f, MaxOpenFilesFlag+"=")
		if !ok && f == MaxOpenFilesFlag && i+1 < len(flags) {
			v, ok = flags[i+1], true
		}
		if ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}
