package topics

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/recompress"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/vfs"
)

// MaxPartitions bounds one topic's partition count. Every partition holds
// open files and memory, so a CreateTopics request must not be able to ask for
// millions of them.
const MaxPartitions = 10000

// producerIDBlock is how many producer ids one metadata write reserves.
const producerIDBlock = 1000

// DefaultProducerExpiry is how long a partition remembers an idle idempotent
// producer (Kafka's producer.id.expiration.ms).
const DefaultProducerExpiry = 24 * time.Hour

// Options configure a Registry.
type Options struct {
	// FS is the file system. Default vfs.Default.
	FS vfs.FS
	// Dir is the data directory (required): <Dir>/<topic>-<partition>/ per
	// partition and <Dir>/weir-meta.json.
	Dir string
	// Defaults are broker-wide topic configs (Kafka names, see the Config*
	// keys) that apply where a topic sets nothing. They are validated like a
	// topic's own, and read at every Open, so changing them changes existing
	// topics too.
	Defaults map[string]string
	// DefaultPartitions is the partition count of auto-created topics and of
	// Create with partitions -1. Default 1.
	DefaultPartitions int32
	// Clock is the partition logs' clock and the producer-expiry clock.
	// Default partlog.SystemClock{}.
	Clock partlog.Clock
	// Logger receives what Open found and cleaned up. Default: discarded.
	Logger *slog.Logger
	// ProducerExpiry: ApplyRetention forgets an idempotent producer that has
	// not appended to a partition for this long. Default DefaultProducerExpiry;
	// negative never forgets.
	ProducerExpiry time.Duration
	// Plugins builds the flush policies (weir.flush.policy) and codecs
	// (compression.type) that configs name, including external plugins.
	// Default: built-ins only (topicconfig.BuiltinPlugins).
	Plugins topicconfig.Plugins
}

func (o Options) validate() (Options, error) {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Dir == "" {
		return o, errors.New("topics: Options.Dir is empty")
	}
	switch {
	case o.DefaultPartitions == 0:
		o.DefaultPartitions = 1
	case o.DefaultPartitions < 0 || o.DefaultPartitions > MaxPartitions:
		return o, fmt.Errorf("%w: DefaultPartitions %d outside [1, %d]", ErrInvalidPartitions, o.DefaultPartitions, MaxPartitions)
	}
	if o.Clock == nil {
		o.Clock = partlog.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Plugins == nil {
		o.Plugins = topicconfig.BuiltinPlugins{}
	}
	if o.ProducerExpiry == 0 {
		o.ProducerExpiry = DefaultProducerExpiry
	}
	return o, nil
}

// Registry owns the topics of one data directory and their partition logs.
// It is safe for concurrent use.
type Registry struct {
	o        Options
	defaults map[string]string // normalised Options.Defaults
	logs     *logs.Manager

	// metaMu serialises every change of weir-meta.json (Create, Delete,
	// InitProducerID reservations, Close) and guards the producer-id counter.
	metaMu   sync.Mutex
	nextPID  int64 // the next id InitProducerID hands out
	reserved int64 // ids below it are reserved on disk (nextProducerID in the file)
	// deleting are topics being deleted whose directories may remain
	// (weir-meta.json's "deleting"); written with every metadata change.
	deleting []metaTopic

	mu     sync.RWMutex // guards topics and closed; held only briefly
	topics map[string]*Topic
	closed bool
}

// Topic is one topic. Its fields do not change after creation; treat Configs
// as read-only.
type Topic struct {
	Name string
	ID   [16]byte // random, non-zero; Kafka's topic UUID
	// Configs are the effective configs: the keys the topic set explicitly,
	// plus the broker Defaults for keys it did not set (the flush keys come as
	// a group from one of the two, see the package doc). Keys set nowhere are
	// absent and mean Kafka's default.
	Configs    map[string]string
	Partitions []*logs.Partition

	explicit   map[string]string        // what Create was given, persisted
	recompress *recompress.Recompressor // shared by the partitions; nil keeps batches as produced
}

// Open loads <Dir>/weir-meta.json, finishes the deletions it records as
// pending, opens and recovers every partition log (creating those a crash
// left missing), and rebuilds idempotent-producer state from the active
// segments. It never deletes data because something is missing: a partition
// directory that no topic owns is set aside (renamed <dir>.<topic id>-stray)
// and logged, and a missing weir-meta.json in a directory that holds
// partition directories is ErrMissingMetadata, naming them.
func Open(o Options) (*Registry, error) {
	o, err := o.validate()
	if err != nil {
		return nil, err
	}
	defaults, err := topicconfig.Normalize(o.Defaults, o.Plugins)
	if err != nil {
		return nil, fmt.Errorf("topics: Options.Defaults: %w", err)
	}
	lm, err := logs.NewManager(logs.Options{FS: o.FS, Dir: o.Dir, Clock: o.Clock, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	r := &Registry{o: o, defaults: defaults, logs: lm, topics: map[string]*Topic{}}
	if err := o.FS.Remove(filepath.Join(o.Dir, metaTmpFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("topics: %w", err)
	}
	m, exists, err := readMeta(o.FS, o.Dir)
	if err != nil {
		return nil, err
	}
	if !exists {
		if err := r.refuseWithoutMeta(); err != nil {
			return nil, err
		}
	}
	r.nextPID, r.reserved = m.NextProducerID, m.NextProducerID
	r.deleting = m.Deleting
	if err := r.finishDeletes(); err != nil {
		return nil, err
	}
	owned := map[string]bool{}
	for _, mt := range m.Topics {
		for i := range mt.Partitions {
			owned[logs.DirName(mt.Name, i)] = true
		}
	}
	if err := r.logs.SetAside(func(name string) bool { return !owned[name] }); err != nil {
		return nil, err
	}
	for _, mt := range m.Topics {
		explicit, err := topicconfig.Normalize(mt.Configs, nil)
		if err != nil {
			_ = r.closeAll()
			return nil, fmt.Errorf("%w: %s: topic %q: %w", ErrCorruptMetadata, metaFile, mt.Name, err)
		}
		id, _ := logs.ParseTopicID(mt.ID) // checked by readMeta
		t, err := r.openTopic(mt.Name, id, mt.Partitions, explicit)
		if err != nil {
			_ = r.closeAll()
			return nil, err
		}
		r.topics[t.Name] = t
	}
	if err := o.FS.SyncDir(o.Dir); err != nil { // partition directories a crash left missing
		_ = r.closeAll()
		return nil, fmt.Errorf("topics: %w", err)
	}
	o.Logger.Info("topics opened", "dir", o.Dir, "topics", len(r.topics), "next_producer_id", r.nextPID)
	return r, nil
}

// refuseWithoutMeta returns ErrMissingMetadata naming the partition
// directories (with a partition.metadata marker) found in a data directory
// that has no weir-meta.json, or nil when there are none.
func (r *Registry) refuseWithoutMeta() error {
	found, err := r.logs.PartitionDirs()
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return nil
	}
	shown := found
	if len(shown) > 10 {
		shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(found)-10))
	}
	return fmt.Errorf("%w: %s has no %s but holds %d partition directories (%s): restore %s, or move the directories away",
		ErrMissingMetadata, r.o.Dir, metaFile, len(found), strings.Join(shown, ", "), metaFile)
}

// finishDeletes removes the partition directories of the topics the
// metadata says are being deleted (those whose marker names the deleted
// topic's id, or that are empty), then drops them from the metadata. The
// caller holds metaMu, or is Open.
func (r *Registry) finishDeletes() error {
	if len(r.deleting) == 0 {
		return nil
	}
	var errs []error
	var left []metaTopic
	for _, d := range r.deleting {
		id, _ := logs.ParseTopicID(d.ID) // checked by readMeta
		if err := r.logs.Remove(d.Name, id, d.Partitions); err != nil {
			errs = append(errs, err)
			left = append(left, d)
			continue
		}
		r.o.Logger.Info("finished deleting topic", "topic", d.Name)
	}
	if len(left) == len(r.deleting) {
		return errors.Join(errs...)
	}
	old := r.deleting
	r.deleting = left
	if err := r.writeMetaLocked(nil, ""); err != nil {
		r.deleting = old
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// openTopic opens (creating where missing) the partitions of a topic. On
// error it closes what it opened.
func (r *Registry) openTopic(name string, id [16]byte, partitions int32, explicit map[string]string) (*Topic, error) {
	eff := topicconfig.Resolve(explicit, r.defaults)
	pc, err := logs.ConfigFor(eff, r.o.Plugins, r.o.Clock)
	if err != nil {
		return nil, fmt.Errorf("topics: topic %q: %w", name, err)
	}
	t := &Topic{Name: name, ID: id, Configs: eff, explicit: explicit, recompress: pc.Recompress, Partitions: make([]*logs.Partition, 0, partitions)}
	for i := range partitions {
		p, err := r.logs.Open(name, i, id, pc)
		if errors.Is(err, logs.ErrForeignPartition) {
			err = fmt.Errorf("%w: %s: %w", ErrCorruptMetadata, metaFile, err)
		}
		if err != nil {
			closeTopic(t)
			return nil, fmt.Errorf("topics: open %s: %w", logs.DirName(name, i), err)
		}
		t.Partitions = append(t.Partitions, p)
	}
	return t, nil
}

func closeTopic(t *Topic) error {
	var errs []error
	if t.recompress != nil {
		defer t.recompress.Close() // after the logs: appends may still be using it
	}
	for _, p := range t.Partitions {
		if err := p.Close(); err != nil && !errors.Is(err, partlog.ErrClosed) {
			errs = append(errs, fmt.Errorf("topics: close %s: %w", logs.DirName(t.Name, p.Index), err))
		}
	}
	return errors.Join(errs...)
}

// closeAll closes every partition of every registered topic, in name order.
func (r *Registry) closeAll() error {
	var errs []error
	for _, t := range r.Topics() {
		errs = append(errs, closeTopic(t))
	}
	return errors.Join(errs...)
}

// Create creates a topic with partitions partitions (-1: DefaultPartitions)
// and the given configs (Kafka names; nil for none). It returns
// logs.ErrInvalidTopic, ErrInvalidPartitions, topicconfig.ErrInvalidConfig or ErrTopicExists
// (wrapped) before changing anything. The metadata is written first, then the
// partition directories; a crash in between leaves a topic whose missing
// partitions the next Open creates.
func (r *Registry) Create(name string, partitions int32, configs map[string]string) (*Topic, error) {
	partitions, explicit, err := r.checkCreate(name, partitions, configs)
	if err != nil {
		return nil, err
	}
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	r.mu.RLock()
	_, exists := r.topics[name]
	closed := r.closed
	r.mu.RUnlock()
	switch {
	case closed:
		return nil, ErrClosed
	case exists:
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	// Directories of this name belong to no topic (a deletion that could
	// not remove them): set them aside before the metadata claims the name,
	// so the new topic starts empty and their data is kept.
	if err := r.logs.SetAside(func(n string) bool { t, _, _ := logs.ParseDirName(n); return t == name }); err != nil {
		return nil, err
	}
	for i := range partitions {
		switch exists, err := r.logs.Exists(name, i); {
		case err != nil:
			return nil, err
		case exists:
			return nil, fmt.Errorf("%w: %q: %s exists in %s and is not a weir partition directory",
				logs.ErrInvalidTopic, name, logs.DirName(name, i), r.o.Dir)
		}
	}
	id, err := newID()
	if err != nil {
		return nil, err
	}
	stub := &Topic{Name: name, ID: id, Partitions: make([]*logs.Partition, partitions), explicit: explicit}
	if err := r.commitMeta(stub, ""); err != nil {
		return nil, err
	}
	t, err := r.openTopic(name, id, partitions, explicit)
	if err == nil {
		err = r.o.FS.SyncDir(r.o.Dir) // the new partition directories
		if err != nil {
			_ = closeTopic(t)
			err = fmt.Errorf("topics: %w", err)
		}
	}
	if err != nil {
		// Undo: the metadata must not keep a topic the caller was told
		// failed. It records the topic as being deleted, so that if the
		// removal fails too, the next Open finishes it (or, if this write
		// fails, brings the topic back whole).
		if uerr := r.deleteDirs(stub, ""); uerr != nil {
			err = errors.Join(err, fmt.Errorf("topics: undoing create of %q: %w", name, uerr))
		}
		return nil, err
	}
	r.mu.Lock()
	r.topics[name] = t
	r.mu.Unlock()
	r.o.Logger.Info("topic created", "topic", name, "partitions", partitions, "configs", explicit)
	return t, nil
}

// ValidateCreate runs Create's checks without creating anything (for
// CreateTopics with validate_only): logs.ErrInvalidTopic, ErrInvalidPartitions,
// ErrInvalidConfig, ErrTopicExists or ErrClosed, wrapped. Create can still
// fail on I/O, or lose a race with another Create of the name.
func (r *Registry) ValidateCreate(name string, partitions int32, configs map[string]string) error {
	if _, _, err := r.checkCreate(name, partitions, configs); err != nil {
		return err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return ErrClosed
	}
	if _, ok := r.topics[name]; ok {
		return fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	return nil
}

// checkCreate validates Create's arguments, returning the partition count
// (-1 resolved) and the normalised configs.
func (r *Registry) checkCreate(name string, partitions int32, configs map[string]string) (int32, map[string]string, error) {
	if err := logs.ValidateName(name); err != nil {
		return 0, nil, err
	}
	if partitions == -1 {
		partitions = r.o.DefaultPartitions
	}
	if partitions < 1 || partitions > MaxPartitions {
		return 0, nil, fmt.Errorf("%w: %d for topic %q, want 1..%d", ErrInvalidPartitions, partitions, name, MaxPartitions)
	}
	explicit, err := topicconfig.Normalize(configs, r.o.Plugins)
	if err != nil {
		return 0, nil, fmt.Errorf("topic %q: %w", name, err)
	}
	return partitions, explicit, nil
}

// Delete deletes a topic: the metadata first, then its logs are closed and
// their directories removed. A crash after the first step leaves directories
// that the next Open removes. Appends racing with Delete fail with
// partlog.ErrClosed.
func (r *Registry) Delete(name string) error {
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	r.mu.RLock()
	t, ok := r.topics[name]
	closed := r.closed
	r.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case !ok:
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	err := r.deleteDirs(t, name)
	if !errors.Is(err, errMetaNotWritten) {
		r.o.Logger.Info("topic deleted", "topic", name, "err", err)
	}
	return err
}

// errMetaNotWritten: deleteDirs could not record the deletion; nothing
// changed.
var errMetaNotWritten = errors.New("topics: deletion not recorded")

// deleteDirs deletes topic t's partitions. First the metadata records t as
// being deleted (and no longer lists it when remove names it), the explicit
// instruction that lets the next Open finish after a crash; then the logs
// are closed (appends racing with it fail with partlog.ErrClosed) and their
// directories removed; then the record is dropped. The caller holds metaMu.
func (r *Registry) deleteDirs(t *Topic, remove string) error {
	d := metaTopic{Name: t.Name, ID: hex.EncodeToString(t.ID[:]), Partitions: int32(len(t.Partitions))}
	r.deleting = append(r.deleting, d)
	if err := r.commitMeta(nil, remove); err != nil {
		r.deleting = r.deleting[:len(r.deleting)-1]
		if rerr := r.writeMetaLocked(nil, ""); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("%w: %w", errMetaNotWritten, err)
	}
	if remove != "" {
		r.mu.Lock()
		delete(r.topics, remove)
		r.mu.Unlock()
	}
	var errs []error
	if t.Partitions[0] != nil { // a Create's stub has no open partitions
		errs = append(errs, closeTopic(t))
	}
	if err := r.logs.Remove(t.Name, t.ID, int32(len(t.Partitions))); err != nil {
		// The record stays: the next Open (or deletion) tries again.
		return errors.Join(append(errs, err)...)
	}
	r.deleting = slices.DeleteFunc(r.deleting, func(m metaTopic) bool {
		return m.Name == d.Name && m.ID == d.ID
	})
	if err := r.writeMetaLocked(nil, ""); err != nil {
		errs = append(errs, err) // the record stays on disk; Open finishes
	}
	return errors.Join(errs...)
}

// commitMeta writes the metadata with add added and remove left out, before
// the caller changes the registry in memory. If the write fails it rewrites
// the metadata as memory has it: a failure after the rename (the directory
// fsync) would otherwise leave the file ahead of memory, and a restart would
// bring back a topic whose Create reported failure. The caller holds metaMu.
func (r *Registry) commitMeta(add *Topic, remove string) error {
	err := r.writeMetaLocked(add, remove)
	if err != nil {
		if rerr := r.writeMetaLocked(nil, ""); rerr != nil {
			err = errors.Join(err, fmt.Errorf("topics: restoring %s: %w", metaFile, rerr))
		}
	}
	return err
}

// writeMetaLocked writes the registry's metadata with add added and remove
// left out. The caller holds metaMu.
func (r *Registry) writeMetaLocked(add *Topic, remove string) error {
	r.mu.RLock()
	ts := make([]*Topic, 0, len(r.topics)+1)
	for _, t := range r.topics {
		if t.Name != remove {
			ts = append(ts, t)
		}
	}
	r.mu.RUnlock()
	if add != nil {
		ts = append(ts, add)
	}
	slices.SortFunc(ts, func(a, b *Topic) int { return strings.Compare(a.Name, b.Name) })
	m := metaJSON{Version: metaVersion, NextProducerID: r.reserved, Topics: make([]metaTopic, len(ts)),
		Deleting: slices.Clone(r.deleting)}
	for i, t := range ts {
		m.Topics[i] = metaTopic{Name: t.Name, ID: hex.EncodeToString(t.ID[:]), Partitions: int32(len(t.Partitions)),
			Configs: maps.Clone(t.explicit)}
		if len(m.Topics[i].Configs) == 0 {
			m.Topics[i].Configs = nil
		}
	}
	return writeMeta(r.o.FS, r.o.Dir, m)
}

// Topic returns the named topic.
func (r *Registry) Topic(name string) (*Topic, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.topics[name]
	return t, ok
}

// Topics returns every topic, sorted by name.
func (r *Registry) Topics() []*Topic {
	r.mu.RLock()
	ts := make([]*Topic, 0, len(r.topics))
	for _, t := range r.topics {
		ts = append(ts, t)
	}
	r.mu.RUnlock()
	slices.SortFunc(ts, func(a, b *Topic) int { return strings.Compare(a.Name, b.Name) })
	return ts
}

// Partition returns partition p of topic: ErrUnknownTopic or
// ErrUnknownPartition (wrapped) when there is none, ErrClosed after Close.
func (r *Registry) Partition(topic string, p int32) (*logs.Partition, error) {
	r.mu.RLock()
	t, ok := r.topics[topic]
	closed := r.closed
	r.mu.RUnlock()
	switch {
	case closed:
		return nil, ErrClosed
	case !ok:
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	case p < 0 || int(p) >= len(t.Partitions):
		return nil, fmt.Errorf("%w: %q has %d partitions, not %d", ErrUnknownPartition, topic, len(t.Partitions), p)
	}
	return t.Partitions[p], nil
}

// ApplyRetention applies every partition's retention (partlog.Log.ApplyRetention)
// and forgets idempotent producers idle for longer than ProducerExpiry. The
// broker calls it periodically. Errors are joined, one per failing partition.
func (r *Registry) ApplyRetention() error {
	var errs []error
	var before int64 = -1
	if r.o.ProducerExpiry > 0 {
		before = r.o.Clock.Now().Add(-r.o.ProducerExpiry).UnixMilli()
	}
	for _, t := range r.Topics() {
		for _, p := range t.Partitions {
			if err := p.ApplyRetention(before); err != nil && !errors.Is(err, partlog.ErrClosed) {
				errs = append(errs, fmt.Errorf("topics: retention of %s: %w", logs.DirName(t.Name, p.Index), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Close closes every partition log cleanly (each writes its clean-shutdown
// marker). Later calls of Create, Delete, Partition and InitProducerID return
// ErrClosed; Close again returns nil.
func (r *Registry) Close() error {
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	err := r.closeAll()
	r.mu.Lock()
	r.topics = map[string]*Topic{}
	r.mu.Unlock()
	return err
}

// InitProducerID hands out a new idempotent-producer id, with epoch 0. Ids
// are reserved on disk in blocks of 1000 (one metadata write per block), so
// an id is never handed out twice, even across crashes; a crash skips the
// rest of its block.
func (r *Registry) InitProducerID() (id int64, epoch int16, err error) {
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	r.mu.RLock()
	closed := r.closed
	r.mu.RUnlock()
	if closed {
		return -1, -1, ErrClosed
	}
	if r.nextPID >= r.reserved {
		old := r.reserved
		r.reserved = r.nextPID + producerIDBlock
		if err := r.writeMetaLocked(nil, ""); err != nil {
			r.reserved = old
			return -1, -1, err
		}
	}
	id = r.nextPID
	r.nextPID++
	return id, 0, nil
}
