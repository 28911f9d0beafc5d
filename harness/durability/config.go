package durability

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/harness/device/model"
	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/plugins/codec"
)

// Errors of this package.
var (
	// ErrConfig: a Config field is out of range; the message names it.
	ErrConfig = errors.New("durability: invalid config")
	// ErrBroker: a broker failed to start, serve, die or restart as the
	// experiment needs.
	ErrBroker = errors.New("durability: broker")
	// ErrClient: producing or reading back failed for a reason other than
	// the fault (the first produce never acknowledged, a fetch error).
	ErrClient = errors.New("durability: client")
	// ErrPowerCut is what every file operation of a broker returns after
	// its power was cut: vfs.ErrPowerCut, the power fault's file system
	// being a vfs.PowerFS.
	ErrPowerCut = vfs.ErrPowerCut

	// The guarantees; Outcome.Verify wraps one per violation.

	// ErrLoss: acknowledged records were lost where nothing may be, or more
	// than the flush policy's bound allows.
	ErrLoss = errors.New("durability: acknowledged records lost")
	// ErrCorrupt: the broker served a batch failing its CRC, a record
	// failing its checksum, or a record nobody produced.
	ErrCorrupt = errors.New("durability: corrupt record served")
	// ErrOffsets: offsets served skip (a gap), repeat, move, or the records
	// produced after recovery do not continue right after the recovered end.
	ErrOffsets = errors.New("durability: offsets broken")
	// ErrDuplicate: a record was served twice (by an idempotent producer's
	// broker).
	ErrDuplicate = errors.New("durability: duplicate record served")
	// ErrTruncatedRead: a consumer was served a record the log no longer
	// holds at that offset (cluster runs): it read what was never
	// committed.
	ErrTruncatedRead = errors.New("durability: a consumer read a record later truncated")
	// ErrReplicas: after the cluster healed, a partition's replicas differ.
	ErrReplicas = errors.New("durability: replicas differ")
)

// Fault is a way to crash the broker.
type Fault string

// The faults.
const (
	// Kill sends SIGKILL to a `weir broker` subprocess and restarts it on
	// the same data directory: the process dies, the kernel (and its page
	// cache) lives on.
	Kill Fault = "kill"
	// Power cuts the power of an in-process broker on an in-memory file
	// system and restarts one on its crash clone: only fsynced data
	// survives (core/vfs's crash model).
	Power Fault = "power"
	// DiskPower cuts the power of a real `weir broker` process whose data
	// directory is an emulated disk (harness/device/diskfs): SIGKILL, the
	// mount loses every write no fsync covered, a fresh mount of the same
	// backing directory (the machine powered on), a new process on it.
	DiskPower Fault = "disk-power"
)

// Faults lists the faults, in the order reports use.
var Faults = []Fault{Kill, Power, DiskPower}

// Device is the emulated disk a DiskPower run's broker keeps its data on.
type Device struct {
	// Profile is the modelled device (model.ParseProfile).
	Profile model.Profile
	// RealTime makes every operation take the modelled time on the wall
	// clock; otherwise time is simulated (accounted, nothing sleeps).
	RealTime bool
	// Backing is the directory that stores the disk's files; it must not
	// be on another emulated disk. Default DataDir + ".disk". Removed when
	// the run ends.
	Backing string
}

// Defaults of Config.
const (
	DefaultVerifyRecords   = 10
	DefaultRecoveryTimeout = 30 * time.Second
	// defaultDrainTimeout bounds the wait for the last promises after the
	// producers stop (they fail as soon as the clients close).
	defaultDrainTimeout = 30 * time.Second
)

// Config is one run of the experiment: one broker, one load, one fault.
type Config struct {
	// Workload is the load, as a spec point gives it. Used: topics,
	// partitions, message_size (at least MinMessageSize), producers, rate,
	// acks (1 or all: acks=0 acknowledges nothing), flush_policy,
	// durable_acks, batch_max_bytes, linger, topic_config, and warmup and
	// duration, which place the fault (see FaultAt). Payloads are seeded
	// random bytes, records have no key and go to partitions round robin,
	// and the experiment reads everything back itself after the restart,
	// so payload, keys, partitioner and consumers are not used.
	Workload spec.Workload
	// Fault is the crash to inject. Required.
	Fault Fault
	// Seed seeds the payloads, the message sizes, the fault's moment and
	// the torn clone.
	Seed int64
	// FaultAt is when the fault strikes, after the first acknowledgement
	// (so it strikes the load, however long the clients take to connect).
	// Zero: a moment drawn uniformly from [warmup, warmup+duration) with
	// Seed.
	FaultAt time.Duration
	// Torn makes a power cut keep a random prefix of each file's unsynced
	// bytes (vfs.MemFS.CrashCloneTorn) instead of none (CrashClone).
	Torn bool
	// SyncLatency is the simulated duration of an fsync on the power
	// fault's in-memory file system (default 0: as fast as memory), so its
	// throughput and latency can be made to pay what a disk charges.
	SyncLatency time.Duration
	// Codec compresses the producers' batches; nil: none. The caller
	// resolves Workload.Codec (which is not read here).
	Codec codec.Codec

	// Weir is the weir binary whose `weir broker` the kill fault runs.
	// Required for Kill.
	Weir string
	// DataDir is the kill and disk-power faults' broker data directory
	// (for DiskPower, the emulated disk's mountpoint); it must not exist or
	// be empty. Required for Kill and DiskPower; the caller removes it.
	DataDir string
	// Device is the emulated disk of the DiskPower fault. Required for
	// DiskPower (which also needs root and /dev/fuse: diskfs.CanMount).
	Device *Device
	// BrokerFlags are extra `weir broker` flags (kill, disk-power).
	BrokerFlags []string
	// PluginDir is where the in-process brokers (power) look for external
	// flush policy and codec plugins; kill brokers take --plugin-dir in
	// BrokerFlags.
	PluginDir string

	// VerifyRecords are produced per partition after recovery, to check
	// that offsets continue right after the recovered end. Default
	// DefaultVerifyRecords.
	VerifyRecords int
	// RecoveryTimeout bounds the restart, until every partition serves a
	// fetch. Default DefaultRecoveryTimeout.
	RecoveryTimeout time.Duration
	// Logger receives the in-process brokers' warnings (power). Default:
	// discarded.
	Logger *slog.Logger
}

// validate returns c with defaults filled, or an error wrapping ErrConfig.
func (c Config) validate() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	w := c.Workload
	switch c.Fault {
	case Kill:
		if c.Weir == "" {
			return bad("Weir (the weir binary) is required for the kill fault")
		}
		if c.DataDir == "" {
			return bad("DataDir is required for the kill fault")
		}
	case DiskPower:
		if c.Weir == "" {
			return bad("Weir (the weir binary) is required for the %s fault", c.Fault)
		}
		if c.DataDir == "" {
			return bad("DataDir is required for the %s fault", c.Fault)
		}
		if c.Device == nil {
			return bad("Device (the emulated disk) is required for the %s fault", c.Fault)
		}
		if err := c.Device.Profile.Validate(); err != nil {
			return bad("Device: %v", err)
		}
	case Power:
	default:
		return bad("Fault %q: want %s, %s or %s", c.Fault, Kill, Power, DiskPower)
	}
	switch {
	case w.Topics < 1:
		return bad("Workload.Topics %d: want >= 1", w.Topics)
	case w.Partitions < 1:
		return bad("Workload.Partitions %d: want >= 1", w.Partitions)
	case w.Producers < 1 || w.Producers > maxProducers-1:
		return bad("Workload.Producers %d: want 1..%d", w.Producers, maxProducers-1)
	case w.Rate < 0:
		return bad("Workload.Rate %v: want >= 0", w.Rate)
	case w.Warmup < 0 || w.Duration < 0:
		return bad("Workload.Warmup %v, Duration %v: want >= 0", w.Warmup, w.Duration)
	case c.FaultAt < 0:
		return bad("FaultAt %v: want >= 0", c.FaultAt)
	case c.FaultAt == 0 && w.Warmup+w.Duration <= 0:
		return bad("no moment for the fault: FaultAt, Workload.Warmup and Workload.Duration are all zero")
	case c.SyncLatency < 0:
		return bad("SyncLatency %v: want >= 0", c.SyncLatency)
	case c.VerifyRecords < 0:
		return bad("VerifyRecords %d: want >= 0", c.VerifyRecords)
	case c.RecoveryTimeout < 0:
		return bad("RecoveryTimeout %v: want >= 0", c.RecoveryTimeout)
	}
	if lo, _ := w.MessageSize.Bounds(); lo < MinMessageSize {
		return bad("Workload.MessageSize %v: records need at least %d bytes (id, send time, checksum)", w.MessageSize, MinMessageSize)
	}
	if _, err := requiredAcks(w.Acks); err != nil {
		return c, err
	}
	if c.VerifyRecords == 0 {
		c.VerifyRecords = DefaultVerifyRecords
	}
	if c.RecoveryTimeout == 0 {
		c.RecoveryTimeout = DefaultRecoveryTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
