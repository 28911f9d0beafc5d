package groups

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

const (
	currentFile = "CURRENT"
	currentTemp = "CURRENT.tmp"
	logPrefix   = "offsets-"
	// batchTarget bounds the records section of one batch the store writes,
	// well below partlog's default MaxBatchBytes (1 MiB); a commit of many
	// partitions is several batches appended with one write.
	batchTarget = 256 << 10
	// offsetsSegmentBytes is the segment size of the offsets log.
	offsetsSegmentBytes = 64 << 20
)

// offsetStore keeps committed offsets in memory and in an append-only log
// of record batches (see the package doc). It is not safe for concurrent
// use: the Coordinator's mutex guards it.
type offsetStore struct {
	o   Options
	cfg partlog.Config
	seq int // number of the live log directory, offsets-<seq>
	log *partlog.Log
	// offsets by group, then partition.
	offsets map[string]map[TopicPartition]stored
	live    int   // entries in offsets
	records int64 // records in the log: live, superseded and tombstones

	// compacting is the compaction between its start and its switch (see
	// compact.go); while it is set, every record written is also kept in
	// delta, for the new log.
	compacting *compaction
	delta      []entry
	// retryAt: after a failed compaction, the next waits until the log
	// holds this many records.
	retryAt int64
	// compactions counts the compactions finished.
	compactions int
}

func logDir(seq int) string { return fmt.Sprintf("%s%06d", logPrefix, seq) }

// parseLogDir returns the number of an offsets-<seq> directory name.
func parseLogDir(name string) (int, bool) {
	num, ok := strings.CutPrefix(name, logPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 || logDir(n) != name {
		return 0, false
	}
	return n, true
}

// openStore opens the store in o.Dir: it follows CURRENT to the live log,
// removes what an interrupted compaction left, replays the log and compacts
// it when it holds many superseded records.
func openStore(o Options) (*offsetStore, error) {
	s := &offsetStore{
		o: o,
		cfg: partlog.Config{
			SegmentBytes: offsetsSegmentBytes,
			RetentionAge: -1,
			Clock:        o.Clock,
			Logger:       o.Logger,
		},
		offsets: map[string]map[TopicPartition]stored{},
	}
	if err := o.FS.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("groups: create offsets dir: %w", err)
	}
	names, err := o.FS.List(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("groups: list offsets dir: %w", err)
	}
	s.seq, err = s.readCurrent()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A new store. CURRENT is written before the first log directory,
		// so a log directory without it is not ours to guess about.
		for _, name := range names {
			if _, ok := parseLogDir(name); ok {
				return nil, fmt.Errorf("%w: %s without %s", ErrCorrupt, path.Join(o.Dir, name), currentFile)
			}
		}
		s.seq = 1
		if _, err := s.writeCurrent(s.seq); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	}
	if err := s.removeLeftovers(names); err != nil {
		return nil, err
	}
	if s.log, _, err = partlog.Open(o.FS, path.Join(o.Dir, logDir(s.seq)), s.cfg); err != nil {
		return nil, fmt.Errorf("groups: open offsets log: %w", err)
	}
	start := o.Clock.Now()
	if err := s.replay(); err != nil {
		s.log.Close()
		return nil, err
	}
	o.Logger.Info("offsets loaded", "groups", len(s.offsets), "offsets", s.live,
		"superseded", s.records-int64(s.live), "took", o.Clock.Now().Sub(start))
	if s.compactDue() {
		s.compactNow()
	}
	return s, nil
}

// readCurrent returns the number of the live log directory named in
// CURRENT ("offsets-000001\n").
func (s *offsetStore) readCurrent() (int, error) {
	b, err := vfs.ReadFile(s.o.FS, path.Join(s.o.Dir, currentFile))
	if err != nil {
		return 0, fmt.Errorf("groups: read %s: %w", currentFile, err)
	}
	name, ok := strings.CutSuffix(string(b), "\n")
	seq, valid := parseLogDir(name)
	if !ok || !valid {
		return 0, fmt.Errorf("%w: %s holds %q", ErrCorrupt, path.Join(s.o.Dir, currentFile), b)
	}
	return seq, nil
}

// writeCurrent points CURRENT at offsets-<seq>, atomically and durably: a
// synced temporary file renamed over it, then the directory synced. renamed
// says whether the rename happened: after it, CURRENT may name offsets-<seq>
// even when err is not nil (the directory sync failed), so neither log may
// be removed.
func (s *offsetStore) writeCurrent(seq int) (renamed bool, err error) {
	fsys, dir := s.o.FS, s.o.Dir
	tmp := path.Join(dir, currentTemp)
	f, err := fsys.Create(tmp)
	if err != nil {
		return false, fmt.Errorf("groups: write %s: %w", currentFile, err)
	}
	_, err = f.Write([]byte(logDir(seq) + "\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path.Join(dir, currentFile))
		renamed = err == nil
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		return renamed, fmt.Errorf("groups: write %s: %w", currentFile, err)
	}
	return true, nil
}

// removeLeftovers deletes log directories other than the live one (the
// output of an interrupted compaction, or the input of a finished one) and
// a temporary CURRENT.
func (s *offsetStore) removeLeftovers(names []string) error {
	removed := false
	for _, name := range names {
		n, ok := parseLogDir(name)
		if !(ok && n != s.seq) && name != currentTemp {
			continue
		}
		if err := s.o.FS.RemoveAll(path.Join(s.o.Dir, name)); err != nil {
			return fmt.Errorf("groups: remove leftover %s: %w", name, err)
		}
		s.o.Logger.Info("removed leftover", "path", path.Join(s.o.Dir, name))
		removed = true
	}
	if removed {
		if err := s.o.FS.SyncDir(s.o.Dir); err != nil {
			return fmt.Errorf("groups: sync offsets dir: %w", err)
		}
	}
	return nil
}

// replay reads the whole log into memory.
func (s *offsetStore) replay() error {
	for off, end := s.log.StartOffset(), s.log.EndOffset(); off < end; {
		sl, err := s.log.Read(off, 1<<20, partlog.NoLimit)
		if err != nil {
			return fmt.Errorf("groups: read offsets log at %d: %w", off, err)
		}
		b, err := sl.Bytes()
		next := sl.NextOffset
		sl.Release()
		if err != nil {
			return fmt.Errorf("groups: read offsets log at %d: %w", off, err)
		}
		if next <= off {
			return fmt.Errorf("%w: offsets log does not advance at %d", ErrCorrupt, off)
		}
		for len(b) > 0 {
			_, n, err := record.Next(b, 0)
			if err != nil {
				return fmt.Errorf("groups: offsets log at %d: %w", off, err)
			}
			recs, err := record.Records(b[:n], nil)
			if err != nil {
				return fmt.Errorf("groups: offsets log at %d: %w", off, err)
			}
			for _, r := range recs {
				if err := s.apply(r.Key, r.Value); err != nil {
					return fmt.Errorf("groups: offsets log at %d: %w", off, err)
				}
			}
			b = b[n:]
		}
		off = next
	}
	return nil
}

// apply applies one record: a value sets the offset, a tombstone (nil
// value) removes it.
func (s *offsetStore) apply(key, value []byte) error {
	k, err := decodeKey(key)
	if err != nil {
		return err
	}
	s.records++
	if value == nil {
		s.remove(k)
		return nil
	}
	v, err := decodeValue(value)
	if err != nil {
		return err
	}
	s.set(k, v)
	return nil
}

func (s *offsetStore) set(k offsetKey, v stored) {
	m := s.offsets[k.group]
	if m == nil {
		m = map[TopicPartition]stored{}
		s.offsets[k.group] = m
	}
	if _, ok := m[k.TopicPartition]; !ok {
		s.live++
	}
	m[k.TopicPartition] = v
}

func (s *offsetStore) remove(k offsetKey) {
	m := s.offsets[k.group]
	if _, ok := m[k.TopicPartition]; !ok {
		return
	}
	delete(m, k.TopicPartition)
	s.live--
	if len(m) == 0 {
		delete(s.offsets, k.group)
	}
}

// entry is one record to write: a value, or a tombstone when v is nil.
type entry struct {
	k offsetKey
	v *stored
}

// write appends entries to log in batches of about batchTarget bytes, with
// one Append (one write): the page cache, not the disk, as Kafka
// acknowledges commits.
func writeEntries(log *partlog.Log, entries []entry, now int64) error {
	var buf []byte
	var recs []record.Record
	size := 0
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		var err error
		buf, err = record.AppendBatch(buf, record.DefaultBuildOptions(), recs)
		recs, size = recs[:0], 0
		return err
	}
	for _, e := range entries {
		r := record.Record{Key: appendKey(nil, e.k), Timestamp: now}
		if e.v != nil {
			r.Value = appendValue(nil, *e.v)
		}
		if size+len(r.Key)+len(r.Value) > batchTarget {
			if err := flush(); err != nil {
				return err
			}
		}
		recs = append(recs, r)
		size += len(r.Key) + len(r.Value) + 16
	}
	if err := flush(); err != nil {
		return err
	}
	if len(buf) == 0 {
		return nil
	}
	_, err := log.Append(context.Background(), buf, 0)
	return err
}

// commit stores offsets of one group; on error nothing changes in memory
// (the log may still hold some of the records, which is what recovery would
// find: a commit is not acknowledged, and a later one supersedes it).
func (s *offsetStore) commit(group string, offsets []OffsetCommit, now time.Time) error {
	entries := make([]entry, len(offsets))
	for i, oc := range offsets {
		v := stored{Committed: Committed{Offset: oc.Offset, LeaderEpoch: oc.LeaderEpoch}, commitTime: now.UnixMilli()}
		if oc.Metadata != nil {
			v.Metadata = *oc.Metadata
		}
		entries[i] = entry{k: offsetKey{group: group, TopicPartition: oc.TopicPartition}, v: &v}
	}
	if err := writeEntries(s.log, entries, now.UnixMilli()); err != nil {
		return err
	}
	for _, e := range entries {
		s.set(e.k, *e.v)
	}
	s.records += int64(len(entries))
	s.recordDelta(entries)
	return nil
}

// removeWhere writes tombstones for every offset for which drop is true.
func (s *offsetStore) removeWhere(now time.Time, drop func(k offsetKey) bool) error {
	var entries []entry
	for g, m := range s.offsets {
		for tp := range m {
			if k := (offsetKey{group: g, TopicPartition: tp}); drop(k) {
				entries = append(entries, entry{k: k})
			}
		}
	}
	if err := writeEntries(s.log, entries, now.UnixMilli()); err != nil {
		return err
	}
	for _, e := range entries {
		s.remove(e.k)
	}
	s.records += int64(len(entries))
	s.recordDelta(entries)
	return nil
}

// fetch returns the group's offsets for parts (all when nil).
func (s *offsetStore) fetch(group string, parts []TopicPartition) map[TopicPartition]Committed {
	m := s.offsets[group]
	out := make(map[TopicPartition]Committed, min(len(m), max(len(parts), 1)))
	if parts == nil {
		for tp, v := range m {
			out[tp] = v.Committed
		}
		return out
	}
	for _, tp := range parts {
		if v, ok := m[tp]; ok {
			out[tp] = v.Committed
		}
	}
	return out
}

// groups lists the groups that have offsets.
func (s *offsetStore) groups() []string {
	var gs []string
	for g := range s.offsets {
		gs = append(gs, g)
	}
	slices.Sort(gs)
	return gs
}

// liveEntries returns every live offset, in no order.
func (s *offsetStore) liveEntries() []entry {
	entries := make([]entry, 0, s.live)
	for g, m := range s.offsets {
		for tp, v := range m {
			entries = append(entries, entry{k: offsetKey{group: g, TopicPartition: tp}, v: &v})
		}
	}
	return entries
}

// sortEntries sorts entries by group, topic and partition.
func sortEntries(entries []entry) {
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.k.group, b.k.group), cmp.Compare(a.k.Topic, b.k.Topic),
			cmp.Compare(a.k.Partition, b.k.Partition))
	})
}

// close closes the log cleanly.
func (s *offsetStore) close() error {
	if err := s.log.Close(); err != nil {
		return fmt.Errorf("groups: close offsets log: %w", err)
	}
	return nil
}
