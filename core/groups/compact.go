package groups

import (
	"errors"
	"fmt"
	"path"
	"sync/atomic"
	"time"

	"github.com/weir-broker/weir/core/partlog"
)

// rewriteChunk is how many offsets a compaction's rewrite writes with one
// Append (a few hundred KiB of records); it checks for Close between two.
const rewriteChunk = 4096

var errCompactionStopped = errors.New("groups: compaction stopped by Close")

// compaction is one rewrite of the offsets log into offsets-<seq> (see the
// package doc). beginCompaction copies the live offsets, under the
// coordinator's mutex; rewrite writes them to the new log without it, while
// commits go on into the old log and into offsetStore.delta;
// finishCompaction, under the mutex again, appends the delta to the new log
// and switches CURRENT to it; retire closes and removes the old log without
// the mutex.
type compaction struct {
	from, seq int          // the live log's number and the new one's
	live      []entry      // the live offsets when it began
	log       *partlog.Log // the new log, from rewrite until the switch
	start     time.Time

	// stop asks rewrite to give up: the coordinator is closing.
	stop atomic.Bool
	// started: the coordinator's goroutine has taken it (under its mutex);
	// done is closed when that goroutine is through with it.
	started bool
	done    chan struct{}
}

// compactDue reports whether the log is worth rewriting, Kafka's
// min.cleanable.dirty.ratio of 0.5 with a floor: its dead records
// (superseded commits, tombstones and the commits they removed) are at least
// CompactMinSuperseded and outnumber the live offsets. Rewriting live records
// only after at least max(live, CompactMinSuperseded) dead ones came keeps
// the cost at one record rewritten per record committed, at most. After a
// failed compaction, the next waits until as many records again came.
func (s *offsetStore) compactDue() bool {
	dead := s.records - int64(s.live)
	return s.compacting == nil && s.records >= s.retryAt &&
		dead >= int64(s.o.CompactMinSuperseded) && dead > int64(s.live)
}

// beginCompaction starts a compaction into offsets-<seq+1>: it copies the
// live offsets (O(live), with the coordinator's mutex held) and from now on
// keeps every record written in s.delta.
func (s *offsetStore) beginCompaction() *compaction {
	j := &compaction{from: s.seq, seq: s.seq + 1, live: s.liveEntries(), start: s.o.Clock.Now(),
		done: make(chan struct{})}
	s.compacting, s.delta = j, nil
	return j
}

// recordDelta keeps entries, just written to the live log, for the new log
// of a compaction in progress.
func (s *offsetStore) recordDelta(entries []entry) {
	if s.compacting != nil {
		s.delta = append(s.delta, entries...)
	}
}

// rewrite removes what earlier compactions left behind, writes j.live to
// the new log offsets-<j.seq> and fsyncs it. It reads only the store's
// options and touches only directories no one else uses (one compaction
// runs at a time), so it runs without the coordinator's mutex.
func (s *offsetStore) rewrite(j *compaction) error {
	fsys, dir := s.o.FS, s.o.Dir
	names, err := fsys.List(dir)
	if err != nil {
		return fmt.Errorf("groups: compact: %w", err)
	}
	synced := false
	for _, name := range names {
		if n, ok := parseLogDir(name); !ok || n == j.from {
			continue
		}
		if !synced {
			// A switch whose directory sync failed leaves the old log
			// behind (finishCompaction): CURRENT must be durable before
			// that log may go.
			if err := fsys.SyncDir(dir); err != nil {
				return fmt.Errorf("groups: compact: %w", err)
			}
			synced = true
		}
		if err := fsys.RemoveAll(path.Join(dir, name)); err != nil {
			return fmt.Errorf("groups: compact: remove leftover %s: %w", name, err)
		}
	}
	if j.log, _, err = partlog.Open(fsys, path.Join(dir, logDir(j.seq)), s.cfg); err != nil {
		return fmt.Errorf("groups: compact: %w", err)
	}
	sortEntries(j.live)
	now := s.o.Clock.Now().UnixMilli()
	for live := j.live; len(live) > 0; {
		if j.stop.Load() {
			return errCompactionStopped
		}
		n := min(len(live), rewriteChunk)
		if err := writeEntries(j.log, live[:n], now); err != nil {
			return fmt.Errorf("groups: compact: %w", err)
		}
		live = live[n:]
	}
	if err := j.log.Flush(j.log.EndOffset()); err != nil {
		return fmt.Errorf("groups: compact: %w", err)
	}
	return nil
}

// finishCompaction appends the records written since j began to the new
// log, closes it (fsynced; the bulk of it rewrite already fsynced), reopens
// it and points CURRENT at it: from then on the store writes to it. It
// returns the old log for retire, and whether its directory may be removed:
// not when the directory sync after CURRENT's rename failed, as CURRENT on
// disk may still name it. On error nothing has switched and the caller
// abandons j. The coordinator's mutex is held: commits wait for the
// delta's append, its fsyncs, the reopen and the switch, not the rewrite.
func (s *offsetStore) finishCompaction(j *compaction) (old *partlog.Log, removeOld bool, err error) {
	if err := writeEntries(j.log, s.delta, s.o.Clock.Now().UnixMilli()); err != nil {
		return nil, false, fmt.Errorf("groups: compact: %w", err)
	}
	err = j.log.Close()
	j.log = nil
	if err == nil {
		err = s.o.FS.SyncDir(s.o.Dir)
	}
	if err == nil {
		j.log, _, err = partlog.Open(s.o.FS, path.Join(s.o.Dir, logDir(j.seq)), s.cfg)
	}
	if err != nil {
		return nil, false, fmt.Errorf("groups: compact: %w", err)
	}
	renamed, err := s.writeCurrent(j.seq)
	if !renamed {
		return nil, false, fmt.Errorf("groups: compact: %w", err)
	}
	if err != nil {
		s.o.Logger.Warn("offsets log switched, but not durably; keeping the old one", "err", err)
	}
	before := s.records
	old, s.log, j.log = s.log, j.log, nil
	s.seq = j.seq
	s.records = int64(len(j.live) + len(s.delta))
	s.compacting, s.delta = nil, nil
	s.compactions++
	s.o.Logger.Info("offsets compacted", "records_before", before, "records_after", s.records,
		"dir", path.Join(s.o.Dir, logDir(j.seq)), "took", s.o.Clock.Now().Sub(j.start))
	return old, err == nil, nil
}

// abandonCompaction gives j up after err: the live log stays, the new one
// is closed and removed (if that fails, the next compaction or Open removes
// it), and the next compaction waits until as many records came again as
// the trigger needs.
func (s *offsetStore) abandonCompaction(j *compaction, err error) {
	if j.log != nil {
		_ = j.log.Close() // it is removed next
		j.log = nil
	}
	dir := path.Join(s.o.Dir, logDir(j.seq))
	if rerr := s.o.FS.RemoveAll(dir); rerr != nil {
		s.o.Logger.Warn("remove abandoned offsets log", "dir", dir, "err", rerr)
	}
	s.compacting, s.delta = nil, nil
	s.retryAt = s.records + max(int64(s.live), int64(s.o.CompactMinSuperseded))
	if errors.Is(err, errCompactionStopped) {
		return
	}
	s.o.Logger.Error("offsets compaction abandoned", "err", err)
}

// retire closes the log a compaction replaced and, when remove is set,
// removes its directory; a failure leaves a directory for the next
// compaction or Open to remove. It touches only that log, so it runs
// without the coordinator's mutex.
func (s *offsetStore) retire(old *partlog.Log, seq int, remove bool) {
	dir := path.Join(s.o.Dir, logDir(seq))
	if err := old.Close(); err != nil {
		s.o.Logger.Warn("close replaced offsets log", "dir", dir, "err", err)
	}
	if !remove {
		return
	}
	err := s.o.FS.RemoveAll(dir)
	if err == nil {
		err = s.o.FS.SyncDir(s.o.Dir)
	}
	if err != nil {
		s.o.Logger.Warn("remove replaced offsets log", "dir", dir, "err", err)
	}
}

// compactNow runs a whole compaction (Open, before anyone else can use the
// store); a failed one is abandoned.
func (s *offsetStore) compactNow() {
	j := s.beginCompaction()
	err := s.rewrite(j)
	var old *partlog.Log
	var remove bool
	if err == nil {
		old, remove, err = s.finishCompaction(j)
	}
	if err != nil {
		s.abandonCompaction(j, err)
		return
	}
	s.retire(old, j.from, remove)
}

// maybeCompact starts a compaction when the store is due one and none is
// queued or running: Options.startCompaction runs it (on its own goroutine
// by default). Called with mu held, after every write to the store.
func (c *Coordinator) maybeCompact() {
	if c.closed || c.compaction != nil || !c.store.compactDue() {
		return
	}
	j := c.store.beginCompaction()
	c.compaction = j
	c.o.startCompaction(func() { c.compact(j) })
}

// compact runs j: the rewrite without mu, the switch with it, and the old
// log's removal without it again. Close abandons j if compact has not
// taken it yet, and otherwise stops it and waits for done.
func (c *Coordinator) compact(j *compaction) {
	c.mu.Lock()
	if c.compaction != j {
		c.mu.Unlock()
		return
	}
	j.started = true
	c.mu.Unlock()
	defer close(j.done)

	err := c.store.rewrite(j)
	c.mu.Lock()
	var old *partlog.Log
	var remove bool
	if err == nil && j.stop.Load() {
		err = errCompactionStopped
	}
	if err == nil {
		old, remove, err = c.store.finishCompaction(j)
	}
	if err != nil {
		c.store.abandonCompaction(j, err)
	}
	c.mu.Unlock()
	if old != nil {
		c.store.retire(old, j.from, remove)
	}
	c.mu.Lock()
	c.compaction = nil
	c.mu.Unlock()
}
