package logs

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/weir-broker/weir/core/clock"
	"github.com/weir-broker/weir/core/filecache"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/recompress"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

var (
	// ErrInvalidTopic: the name breaks Kafka's rules ([a-zA-Z0-9._-], 1..249
	// characters, not "." or ".."), or a directory that is not a weir
	// partition is in the way of the topic's partition directories.
	ErrInvalidTopic = errors.New("logs: invalid topic")
	// ErrForeignPartition: a partition directory's marker names another
	// topic id than the one it is opened for (an older topic of the same
	// name): it is refused rather than served as the wrong topic's data.
	ErrForeignPartition = errors.New("logs: partition directory belongs to another topic id")
)

// Options configure a Manager.
type Options struct {
	// FS is the file system. Default vfs.Default.
	FS vfs.FS
	// Dir is the data directory holding <topic>-<partition>/ directories
	// (required).
	Dir string
	// Clock is the partition logs' clock. Default clock.System.
	Clock clock.Clock
	// Logger receives what the manager finds and changes. Default: discarded.
	Logger *slog.Logger
	// Files bounds the descriptors of every partition's segment files
	// (package filecache). Default: no bound.
	Files *filecache.Cache
}

// Manager opens, creates, sets aside and removes the partition logs of one
// data directory, as it is told: it keeps no list of what should exist
// (that is the metadata's), and removes a directory only when asked to, and
// only if its marker names the topic id it is asked to remove. It is safe for
// concurrent use as long as one partition is not opened twice.
type Manager struct {
	o Options
}

// NewManager returns a manager of o.Dir, creating the directory if needed.
func NewManager(o Options) (*Manager, error) {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Dir == "" {
		return nil, errors.New("logs: Options.Dir is empty")
	}
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := o.FS.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	return &Manager{o: o}, nil
}

// PartitionConfig is what a partition is opened with.
type PartitionConfig struct {
	// Log configures the partition log; its Clock and Logger are the
	// manager's.
	Log partlog.Config
	// FlushPolicy, when not nil, builds the partition's flush policy at
	// Open, in place of Log.FlushPolicy. If it fails (a plugin that is
	// gone), the partition still opens and fsyncs every append, the safe
	// direction, and the error is logged.
	FlushPolicy func() (flushpolicy.Policy, error)
	// DurableAcks: Append returns only after the covering fsync.
	DurableAcks bool
	// MinInsyncReplicas (min.insync.replicas), at least 1.
	MinInsyncReplicas int32
	// Recompress, when not nil, recompresses appended batches (shared by
	// the topic's partitions; the caller closes it after them).
	Recompress *recompress.Recompressor
	// Compaction: cleanup.policy=compact and its settings.
	Compaction Compaction
}

// Compaction says whether and how the log cleaner compacts a partition
// (cleanup.policy=compact): it keeps the last record of every key.
type Compaction struct {
	Enabled bool
	// DeleteRetention (delete.retention.ms): how long a tombstone is kept
	// after it was first cleaned.
	DeleteRetention time.Duration
	// MinCleanableRatio (min.cleanable.dirty.ratio): clean when at least
	// this share of the cleanable log was never cleaned.
	MinCleanableRatio float64
	// MinCompactionLag (min.compaction.lag.ms): records younger than this
	// stay uncompacted. Default 0.
	MinCompactionLag time.Duration
	// MaxCompactionLag (max.compaction.lag.ms): a log with a dirty record
	// older than this is cleaned whatever its dirty ratio; math.MaxInt64
	// (the default) is no bound.
	MaxCompactionLag time.Duration
}

// Open opens partition index of topic (whose id is topicID), creating its
// directory, marker and log when missing, recovering the log, and rebuilding
// its idempotent-producer state from its latest snapshot and the batch
// headers after it (see the package doc).
// A directory whose marker names another topic id is ErrForeignPartition.
func (m *Manager) Open(topic string, index int32, topicID [16]byte, pc PartitionConfig) (*Partition, error) {
	fsys := m.o.FS
	dir := filepath.Join(m.o.Dir, DirName(topic, index))
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	id, ok, err := ReadMarker(fsys, dir)
	opened := OpenedUnclean
	switch {
	case err != nil:
		return nil, err
	case !ok:
		opened = OpenedNew
		// New, or a crash came before the marker was durable; in both
		// cases no log data can be here yet (the marker is written first).
		if err := WriteMarker(fsys, dir, topicID); err != nil {
			return nil, err
		}
	case id != topicID:
		return nil, fmt.Errorf("%w: %s says %s, expected %s", ErrForeignPartition, filepath.Join(dir, MarkerFile),
			hex.EncodeToString(id[:]), hex.EncodeToString(topicID[:]))
	}
	cfg := pc.Log
	cfg.Clock = m.o.Clock
	cfg.Files = m.o.Files
	cfg.Logger = m.o.Logger.With("topic", topic, "partition", index)
	if pc.FlushPolicy != nil {
		if cfg.FlushPolicy, err = pc.FlushPolicy(); err != nil {
			cfg.Logger.Error("flush policy unavailable; fsyncing every append", "err", err)
			cfg.FlushPolicy = flushpolicy.EveryBatch()
		}
	}
	snaps := &snapshots{fs: fsys, dir: dir, logger: cfg.Logger}
	idx, err := loadTxnIndex(fsys, dir, cfg.Logger)
	if err != nil {
		return nil, err
	}
	// Before any append can reuse cut offsets, snapshots and aborted
	// transactions past them go.
	cfg.CutHook = cutHooks{snaps: snaps, idx: idx}
	l, rep, err := partlog.Open(fsys, dir, cfg)
	if err != nil {
		return nil, err
	}
	p := newPartition(topic, index, l, pc, m.o.Clock, snaps, idx)
	if rep.Clean && opened != OpenedNew {
		opened = OpenedClean
	}
	p.opened = opened
	batches, used, err := p.rebuildProducers(rep.Clean)
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("rebuild producer state: %w", err)
	}
	if !used && l.EndOffset() > l.StartOffset() {
		// The next Open starts from here instead of reading again.
		if err := p.writeSnapshot(); err != nil {
			cfg.Logger.Warn("producer-state snapshot failed", "dir", dir, "err", err)
		}
	}
	m.o.Logger.Debug("partition opened", "topic", topic, "partition", index, "clean", rep.Clean,
		"start", l.StartOffset(), "end", l.EndOffset(), "producers", p.prod.Count(), "producer_batches", batches,
		"producer_snapshot", used)
	return p, nil
}

// PartitionDirs lists the names of the weir partition directories (those
// with a marker) in the data directory.
func (m *Manager) PartitionDirs() ([]string, error) {
	names, err := m.o.FS.List(m.o.Dir)
	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	var found []string
	for _, n := range names {
		if _, _, ok := ParseDirName(n); !ok {
			continue
		}
		if _, marked, err := ReadMarker(m.o.FS, filepath.Join(m.o.Dir, n)); err == nil && marked {
			found = append(found, n)
		}
	}
	return found, nil
}

// Remove removes the directories of partitions 0..partitions-1 of a deleted
// topic: those whose marker names id, or that hold nothing. A directory of
// the name that belongs to another topic id is left alone (SetAside deals
// with it). Then it fsyncs the data directory. The caller has closed the
// logs.
func (m *Manager) Remove(topic string, id [16]byte, partitions int32) error {
	var errs []error
	for i := range partitions {
		dir := filepath.Join(m.o.Dir, DirName(topic, i))
		names, err := m.o.FS.List(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("logs: delete %s: %w", DirName(topic, i), err))
			continue
		}
		if len(names) > 0 {
			mid, marked, err := ReadMarker(m.o.FS, dir)
			if err != nil {
				errs = append(errs, fmt.Errorf("logs: delete %s: %w", DirName(topic, i), err))
				continue
			}
			if !marked || mid != id {
				continue // another topic's, or not weir's
			}
		}
		if err := m.o.FS.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("logs: delete %s: %w", DirName(topic, i), err))
		}
	}
	if err := m.o.FS.SyncDir(m.o.Dir); err != nil {
		errs = append(errs, fmt.Errorf("logs: delete %q: %w", topic, err))
	}
	return errors.Join(errs...)
}

// SetAside renames the weir partition directories whose names stray accepts
// to <name>.<topic id>-stray, keeping their data for an operator to inspect,
// and removes those that are empty. Directories without a marker are not
// weir's and are left alone (logged). It fsyncs the data directory if it
// changed anything.
func (m *Manager) SetAside(stray func(name string) bool) error {
	names, err := m.o.FS.List(m.o.Dir)
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	changed := false
	for _, n := range names {
		if _, _, ok := ParseDirName(n); !ok || !stray(n) {
			continue
		}
		dir := filepath.Join(m.o.Dir, n)
		st, err := m.o.FS.Stat(dir)
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		if !st.IsDir() {
			continue
		}
		entries, err := m.o.FS.List(dir)
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		if len(entries) == 0 {
			if err := m.o.FS.Remove(dir); err != nil {
				return fmt.Errorf("logs: remove empty %s: %w", n, err)
			}
			changed = true
			continue
		}
		id, marked, err := ReadMarker(m.o.FS, dir)
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		if !marked {
			m.o.Logger.Warn("directory looks like a partition but has no partition.metadata; left alone", "dir", dir)
			continue
		}
		to, err := m.strayName(n, id)
		if err != nil {
			return err
		}
		if err := m.o.FS.Rename(dir, filepath.Join(m.o.Dir, to)); err != nil {
			return fmt.Errorf("logs: set aside %s: %w", n, err)
		}
		m.o.Logger.Warn("partition directory of no known topic set aside, data kept", "dir", dir, "now", to)
		changed = true
	}
	if changed {
		if err := m.o.FS.SyncDir(m.o.Dir); err != nil {
			return fmt.Errorf("logs: %w", err)
		}
	}
	return nil
}

// strayName is a free name <name>.<topic id>-stray (or -stray<k>) in the
// data directory. It never parses as a partition directory.
func (m *Manager) strayName(name string, id [16]byte) (string, error) {
	base := name + "." + hex.EncodeToString(id[:]) + "-stray"
	for k := 0; ; k++ {
		to := base
		if k > 0 {
			to = fmt.Sprintf("%s%d", base, k)
		}
		switch _, err := m.o.FS.Stat(filepath.Join(m.o.Dir, to)); {
		case errors.Is(err, fs.ErrNotExist):
			return to, nil
		case err != nil:
			return "", fmt.Errorf("logs: %w", err)
		}
	}
}

// Exists reports whether something (a directory or file) has the name of
// the partition's directory.
func (m *Manager) Exists(topic string, index int32) (bool, error) {
	_, err := m.o.FS.Stat(filepath.Join(m.o.Dir, DirName(topic, index)))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("logs: %w", err)
}
