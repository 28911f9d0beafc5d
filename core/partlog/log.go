package partlog

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/segment"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/wakeup"
)

var (
	// ErrOffsetOutOfRange: a read below the log start or past the log end.
	ErrOffsetOutOfRange = errors.New("partlog: offset out of range")
	// ErrBatchTooLarge: a batch larger than Config.MaxBatchBytes.
	ErrBatchTooLarge = errors.New("partlog: batch too large")
	// ErrFailed: a write or fsync failed, so the log no longer knows what is
	// on disk; it refuses appends until it recovers (by itself, on an append
	// once Config.RecoveryBackoff has passed; or by Recover, or a reopen).
	// Reads keep working. Kafka: KAFKA_STORAGE_ERROR, which clients retry.
	ErrFailed = errors.New("partlog: log failed")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("partlog: closed")
)

// Files in the partition directory besides the segments.
const (
	cleanShutdownFile = "clean-shutdown"
	recoveryPointFile = "recovery-point"
	// freshTailDir holds a recovery's new empty segment until it is renamed
	// over the one a cut emptied (see freshTail); a leftover is removed.
	freshTailDir = "fresh-tail.tmp"
)

// Log is one partition's log: an ordered list of segments, the last of them
// active. One writer appends at a time; any number of readers read without
// blocking it.
type Log struct {
	fs  vfs.FS
	dir string
	cfg Config
	// live is cfg with what Reconfigure changed (reconfigure.go); read the
	// settings it lists through conf().
	live atomic.Pointer[Config]

	// segs is the ordered segment list, replaced (never modified) under
	// appendMu, and loaded by readers without locks.
	segs atomic.Pointer[[]*segment.Segment]

	appendMu   sync.Mutex   // the writer: appends, rolls, truncation, retention
	activeBorn atomic.Int64 // when the active segment was created, unix ms (SegmentAge)
	hdrs       []record.Header
	// notify is closed (and cleared) by the next append, when someone waits
	// (Wait); atomic, so that long polls never wait for appendMu.
	notify atomic.Pointer[chan struct{}]
	closed atomic.Bool

	// watchers is fired with notify (Watch, watch.go).
	watchers wakeup.Source

	// syncMu serialises fsyncs; whoever holds it syncs everything appended so
	// far, so appenders waiting behind it find their data already covered
	// (group commit).
	syncMu  sync.Mutex
	flushed atomic.Int64 // every offset below this is durable
	end     atomic.Int64 // the log end offset (next offset to assign)

	// statMu guards the unflushed counters, the timer, the cuts and the
	// flush policy's queue. It is held for a few field updates only: never
	// across I/O or a policy call.
	statMu    sync.Mutex
	unMsgs    int64
	unBytes   int64
	unOldest  time.Time
	timer     Timer
	timerAt   time.Time
	syncCount atomic.Int64

	// The flush policy's calls (policy.go), under statMu.
	polQ     []policyCall // calls owed, oldest first, from polHead on
	polHead  int
	polBusy  bool      // the policy lock: its holder calls the policy without statMu
	polTurns int64     // the last turn handed to a queued Appended call
	polIdle  sync.Cond // L is &statMu; broadcast when polBusy clears

	// Failure and recovery (recover.go).
	failed     atomic.Pointer[error]
	lostPages  atomic.Bool   // an fsync failed: what it was writing may be gone
	readLimit  atomic.Int64  // readers see offsets below it only (NoLimit unless lostPages)
	retryAt    atomic.Int64  // unix ns (cfg.Clock): appends before it do not try to recover
	held       atomic.Bool   // HoldRecovery: no automatic recovery
	backoff    time.Duration // the wait after the next failed recovery; appendMu
	recoveries atomic.Int64
	gen        atomic.Int64 // see Generation
	cuts       []cut        // the last maxCuts generations' cuts; statMu
	// recoverSeq is odd while a recovery runs, which may cut files under
	// readers; they wait on recoverDone and read again.
	recoverSeq  atomic.Int64
	recoverDone atomic.Pointer[chan struct{}]

	// rp is the recovery point last written (writeCheckpoint): segments
	// ending at or below it are sealed and durable.
	rp atomic.Int64

	// The log cleaner (clean.go). Lock order: cleanMu, fileMu, appendMu,
	// syncMu, cpMu; load, under the other two, only tries cleanMu.
	cleanMu sync.Mutex // held by a Clean pass; Close takes it after setting stopClean
	// fileMu guards the files of the sealed segments against a cleaner's
	// swap: Truncate, ApplyRetention, Reset and recoveries hold it (before
	// appendMu; a recovery an Append starts only tries it, and waits for the
	// next append if a swap holds it), and a swap holds it across its
	// renames and directory fsyncs, taking appendMu only to check the log
	// and to publish the new segment, so appends do not wait for the fsyncs.
	fileMu sync.Mutex
	// cpMu serialises the cleaner-point file's writes, and its reads by a
	// recovery, so that the file never gets ahead of memory: Truncate,
	// Reset, Open and recoveries hold it (under appendMu); a pass saves the
	// point it reached under cpMu alone, so that appends do not wait for
	// that write's two fsyncs.
	cpMu       sync.Mutex
	stopClean  atomic.Bool // Close asks a running pass to stop
	cleanTemps atomic.Bool // an abandoned pass left .cleaned files behind
	// cleanUnsaved: the cleaner point in memory is past the file's, whose
	// write failed; under cpMu.
	cleanUnsaved atomic.Bool
	// cleaned is the cleaner point and when offsets were first cleaned
	// (cleanpoint.go); replaced under appendMu.
	cleaned atomic.Pointer[cleanHistory]

	// epochs is the leader-epoch cache (epochs.go), oldest first: an
	// immutable slice replaced under appendMu, the checkpoint file written
	// first.
	epochs atomic.Pointer[[]EpochEntry]
	// appendFloor is the lowest leader epoch an Append may carry (Fence);
	// raised under appendMu, never lowered; in memory only.
	appendFloor atomic.Int32

	// pristine: opened after a clean shutdown and not changed since, so
	// the clean-shutdown marker and the recovery point still describe the
	// files exactly (see touch). Cleared under appendMu and syncMu.
	pristine atomic.Bool
	// markCurrent: the clean-shutdown marker found at Open records the
	// log end (an older weir's is empty, and a pristine Close rewrites it).
	markCurrent bool

	// logStart is the explicit log start offset (logstart.go): the log
	// starts at the larger of it and the first segment's base. Raised by
	// DeleteRecordsBefore, lowered by cuts below it; under appendMu.
	logStart atomic.Int64
}

// Report says what Open found.
type Report struct {
	Clean         bool  // the log had been closed cleanly
	RecoveryPoint int64 // offsets below it were trusted without re-reading
	Segments      int   // segments opened
	Recovered     int   // segments re-read batch by batch
	Batches       int   // batches re-read
	Truncated     int64 // bytes cut from torn or corrupt tails
	Deleted       []int64
	// Causes lists why bytes were cut or segments deleted: one per truncated
	// segment, and one per gap that ended the log early.
	Causes []error
	// CleanSwaps counts the swaps of cleaned segments that a crash (or a
	// failure) interrupted after their commit point, and that Open finished.
	CleanSwaps int
	// EpochsRebuilt says why the leader-epoch cache was rebuilt from the
	// batches instead of read from its checkpoint (nil: it was read).
	EpochsRebuilt error
	// ResetFinished: a Reset had passed its commit point (a crash or a
	// failure interrupted it), and Open finished it: the log is empty.
	ResetFinished bool
	Duration      time.Duration
}

// Open opens (creating if needed) the partition log in dir. Without a
// clean-shutdown marker it recovers: segments after the recovery point are
// re-read, cut at the first bad batch, and their indexes rebuilt. Segments
// following a cut are deleted, so offsets never skip.
func Open(fsys vfs.FS, dir string, cfg Config) (*Log, Report, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, Report{}, err
	}
	l := &Log{fs: fsys, dir: dir, cfg: cfg, backoff: cfg.RecoveryBackoff}
	l.live.Store(&cfg)
	l.polIdle.L = &l.statMu
	l.readLimit.Store(NoLimit)
	l.cleaned.Store(&cleanHistory{})
	start := cfg.Clock.Now()
	rep, err := l.open()
	rep.Duration = cfg.Clock.Now().Sub(start)
	if err != nil {
		for _, s := range l.segments() {
			_ = s.Close()
		}
		return nil, rep, err
	}
	if rep.Truncated > 0 || len(rep.Deleted) > 0 || rep.CleanSwaps > 0 || rep.ResetFinished {
		cfg.Logger.Warn("partition log recovered", "dir", dir, "truncated_bytes", rep.Truncated,
			"deleted_segments", len(rep.Deleted), "clean_swaps_finished", rep.CleanSwaps, "reset_finished", rep.ResetFinished,
			"causes", errors.Join(rep.Causes...))
	}
	return l, rep, nil
}

func (l *Log) open() (Report, error) {
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	ld, err := l.load(true)
	if err != nil {
		return ld.rep, err
	}
	l.setSegments(ld.segs)
	active := ld.segs[len(ld.segs)-1]
	l.end.Store(active.NextOffset())
	if ld.cpOK && ld.cp.activeBase == active.Base() && ld.cp.activeBorn > 0 {
		l.activeBorn.Store(ld.cp.activeBorn)
	} else {
		l.activeBorn.Store(l.cfg.Clock.Now().UnixMilli())
	}
	// The epoch cache before the recovery point moves (settle): what the
	// checkpoint is trusted for must stay below it.
	if ld.rep.EpochsRebuilt, err = l.loadEpochs(ld.recoveredFrom, ld.mark); err != nil {
		return ld.rep, err
	}
	if l.untouched(ld) {
		// A clean shutdown left every file durable and described: no
		// fsync, checkpoint or marker removal until the first change
		// (touch). A broker of many idle partitions starts without
		// writing to them, and stops without writing to them again.
		l.flushed.Store(l.end.Load())
		l.rp.Store(ld.cp.recoveryPoint)
		if err := l.loadCleanHistory(ld.cleaned, ld.cleanedDamage); err != nil {
			return ld.rep, err
		}
		if err := l.afterLoad(ld); err != nil {
			return ld.rep, err
		}
		l.pristine.Store(true)
		if l.markCurrent = ld.mark != nil; !l.markCurrent {
			_, l.markCurrent = l.readCleanMark()
		}
		return ld.rep, nil
	}

	// Make the recovered state durable (truncations, rebuilt indexes), then
	// drop the clean-shutdown marker before any append can happen.
	if err := l.settle(); err != nil {
		return ld.rep, err
	}
	if err := l.loadCleanHistory(ld.cleaned, ld.cleanedDamage); err != nil {
		return ld.rep, err
	}
	if err := l.afterLoad(ld); err != nil {
		return ld.rep, err
	}
	if ld.rep.Clean {
		if err := l.fs.Remove(l.path(cleanShutdownFile)); err != nil {
			return ld.rep, fmt.Errorf("partlog: %w", err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return ld.rep, fmt.Errorf("partlog: %w", err)
	}
	return ld.rep, nil
}

// untouched reports whether load found the log exactly as a clean Close
// left it: the marker there, nothing re-read, cut, deleted or finished, and
// the recovery point covering the whole log with its active segment.
func (l *Log) untouched(ld loaded) bool {
	r := ld.rep
	active := ld.segs[len(ld.segs)-1]
	return r.Clean && r.Recovered == 0 && r.Truncated == 0 && len(r.Deleted) == 0 && r.CleanSwaps == 0 &&
		!r.ResetFinished && r.EpochsRebuilt == nil && ld.cpOK && ld.cp.activeBase == active.Base() &&
		ld.cp.recoveryPoint >= active.NextOffset()
}

// touch ends the pristine state before the first change to the log's
// files: what Open skips after a clean shutdown is done now (settle, the
// marker removed, the directory fsynced), so that a crash after the change
// makes the next Open recover. appendMu held; it takes syncMu.
func (l *Log) touch() error {
	if !l.pristine.Load() {
		return nil
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.touchLocked()
}

// touchLocked is touch with appendMu and syncMu held.
func (l *Log) touchLocked() error {
	if !l.pristine.Load() {
		return nil
	}
	if err := l.settle(); err != nil {
		return l.fail(err)
	}
	if err := l.fs.Remove(l.path(cleanShutdownFile)); err != nil && !errors.Is(err, errNotExist) {
		return l.fail(fmt.Errorf("partlog: %w", err))
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("partlog: %w", err))
	}
	l.pristine.Store(false)
	return nil
}

// settle makes the published segments durable as they are: the active
// segment's log is fsynced and the recovery point moves to its base (load
// sealed and fsynced every other segment). The caller fsyncs the directory.
// A failed fsync is one (markLostPages): in a recovery, the next attempt then
// cuts back to FlushedOffset instead of trusting a second fsync.
func (l *Log) settle() error {
	if err := l.active().Sync(); err != nil {
		l.markLostPages()
		return fmt.Errorf("partlog: %w", err)
	}
	l.flushed.Store(l.end.Load())
	return l.writeCheckpoint(l.active().Base())
}

// loaded is what load found on disk.
type loaded struct {
	segs []*segment.Segment // oldest first; the last one active, the others sealed
	cp   checkpoint
	cpOK bool
	rep  Report
	// The cleaner point read, and why it could not be (it is then empty).
	cleaned       *cleanHistory
	cleanedDamage error
	// recoveredFrom is the base of the first segment re-read batch by
	// batch (Recover), or the log end when none was: below it the
	// checkpoints are trusted.
	recoveredFrom int64
	// reset: load finished a Reset; the reset file is still there.
	reset bool
	// mark: the segments were opened lazily on the word of the
	// clean-shutdown marker, which says this.
	mark *shutdownMark
}

// loadLazily opens the segments of a log a clean shutdown left (and
// nothing touched since: no cleaner or reset files, the checkpoint naming
// the last segment as active and the log end as its recovery point) without
// reading them: segment.OpenLazy, each segment's end its successor's base
// (the last one's the recovery point) and its size from a stat. The files
// are read at first use, and a segment found other than described fails
// that use (the log then recovers). ok is false when the log does not
// qualify, or a stat fails: the caller opens it as usual.
func (l *Log) loadLazily(ld *loaded, bases []int64, plain bool, opts segment.Options) ([]*segment.Segment, bool) {
	if !ld.rep.Clean || !plain || !ld.cpOK || len(bases) == 0 || ld.cp.activeBase != bases[len(bases)-1] {
		return nil, false
	}
	// The log end the clean Close recorded: the recovery point is not it
	// once a first change began (touch moves it to the active base) and
	// failed before the marker went.
	mark, ok := l.readCleanMark()
	end := mark.end
	if !ok || end < ld.cp.activeBase {
		return nil, false
	}
	ld.mark = &mark
	segs := make([]*segment.Segment, 0, len(bases))
	for i, base := range bases {
		fi, err := l.fs.Stat(segment.Name(l.dir, base, segment.LogSuffix))
		if err != nil {
			for _, s := range segs {
				s.Drop()
			}
			return nil, false
		}
		next, last := end, i == len(bases)-1
		if !last {
			next = bases[i+1]
		}
		segs = append(segs, segment.OpenLazy(l.fs, l.dir, base, opts, next, fi.Size(), last))
	}
	return segs, true
}

// afterLoad ends Open and recoveries: the CutHook hears of the log end (-1 when
// load finished a Reset), and only then does a finished Reset's file go.
// appendMu held (or the log not yet published).
func (l *Log) afterLoad(ld loaded) error {
	l.loadLogStart()
	end := l.end.Load()
	if ld.reset {
		end = -1
	}
	if err := l.afterCut(end); err != nil {
		return err
	}
	if ld.reset {
		return l.removeResetFile()
	}
	return nil
}

// load opens the segments in the directory as Open describes, recovering
// those the recovery point does not cover, and returns them without
// publishing anything. On error it closes what it opened. With lazy (Open,
// not a recovery, which must not take the marker's word again), a log a
// clean shutdown left is opened without reading its segments (loadLazily).
func (l *Log) load(lazy bool) (ld loaded, err error) {
	rep := &ld.rep
	defer func() {
		if err != nil {
			for _, s := range ld.segs {
				_ = s.Close()
			}
			ld.segs = nil
		}
	}()
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return ld, fmt.Errorf("partlog: %w", err)
	}
	names, err := l.fs.List(l.dir)
	if err != nil {
		return ld, fmt.Errorf("partlog: %w", err)
	}
	// A Reset past its commit point is finished first: its log is empty.
	if slices.Contains(names, resetFile) {
		resetTo, resetting, err := l.readResetFile()
		if err != nil {
			return ld, err
		}
		if resetting {
			if err := l.finishReset(resetTo, l.cfg.Clock.Now().UnixMilli()); err != nil {
				return ld, err
			}
			ld.reset, rep.ResetFinished = true, true
			if names, err = l.fs.List(l.dir); err != nil {
				return ld, fmt.Errorf("partlog: %w", err)
			}
		}
	}
	var bases []int64
	var temps []tempFile
	others := map[int64][]string{}
	for _, n := range names {
		if n == cleanShutdownFile {
			rep.Clean = true
		}
		if n == freshTailDir {
			if err := l.fs.RemoveAll(l.path(n)); err != nil {
				return ld, fmt.Errorf("partlog: %w", err)
			}
			continue
		}
		if tag := cleanerTag(n); tag != "" {
			if base, suffix, ok := segment.ParseName(strings.TrimSuffix(n, tag)); ok {
				temps = append(temps, tempFile{name: n, base: base, suffix: suffix, tag: tag})
			}
			continue
		}
		base, suffix, ok := segment.ParseName(n)
		if !ok {
			continue
		}
		if suffix == segment.LogSuffix {
			bases = append(bases, base)
		} else {
			others[base] = append(others[base], n)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	if err := l.finishCleans(temps, &bases, others, rep); err != nil {
		return ld, err
	}
	// Index files without their log are leftovers of an interrupted delete.
	for base, ns := range others {
		if i := sort.Search(len(bases), func(i int) bool { return bases[i] >= base }); i < len(bases) && bases[i] == base {
			continue
		}
		for _, n := range ns {
			if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil {
				return ld, fmt.Errorf("partlog: %w", err)
			}
		}
	}
	ld.cp, ld.cpOK = l.readCheckpoint()
	ld.cleaned = &cleanHistory{}
	if slices.Contains(names, cleanerPointFile) { // absent unless the topic was ever compacted
		if ld.cleaned, ld.cleanedDamage, err = l.readCleanHistory(); err != nil {
			return ld, err
		}
	}
	rp := int64(-1)
	if !rep.Clean && ld.cpOK {
		rp = ld.cp.recoveryPoint
	}
	rep.RecoveryPoint = rp

	opts := segment.Options{Files: l.cfg.Files, IndexIntervalBytes: l.cfg.IndexIntervalBytes}
	ld.recoveredFrom = -1
	if segs, ok := l.loadLazily(&ld, bases, lazy && len(temps) == 0 && !ld.reset, opts); ok {
		ld.segs = segs
		rep.Segments = len(segs)
		ld.recoveredFrom = segs[len(segs)-1].NextOffset() // nothing re-read
		return ld, nil
	}
	for i, base := range bases {
		end := int64(-1)
		if i+1 < len(bases) {
			end = bases[i+1]
		}
		mode := segment.Recover
		if rep.Clean || (end >= 0 && end <= rp) {
			mode = segment.Trust
		}
		s, r, err := segment.Open(l.fs, l.dir, base, opts, mode, end)
		if err != nil {
			return ld, fmt.Errorf("partlog: %w", err)
		}
		ld.segs = append(ld.segs, s)
		rep.Segments++
		if mode == segment.Recover {
			rep.Recovered++
			if ld.recoveredFrom < 0 {
				ld.recoveredFrom = base
			}
		}
		rep.Batches += r.Batches
		if r.Truncated > 0 {
			rep.Truncated += r.Truncated
			rep.Causes = append(rep.Causes, r.Cause)
		}
		if end >= 0 && s.NextOffset() != end {
			// A cut (or a gap) inside the log: what follows cannot be
			// reached without skipping offsets, so it goes.
			rep.Causes = append(rep.Causes, fmt.Errorf("segment %d ends at %d, next segment starts at %d", base, s.NextOffset(), end))
			for _, b := range bases[i+1:] {
				if err := l.removeSegmentFiles(b); err != nil {
					return ld, err
				}
				rep.Deleted = append(rep.Deleted, b)
			}
			if err := s.Unseal(); err != nil {
				return ld, fmt.Errorf("partlog: %w", err)
			}
			break
		}
	}
	if len(ld.segs) == 0 {
		s, err := segment.Create(l.fs, l.dir, 0, opts)
		if err != nil {
			return ld, fmt.Errorf("partlog: %w", err)
		}
		ld.segs = append(ld.segs, s)
	}
	if ld.recoveredFrom < 0 {
		ld.recoveredFrom = ld.segs[len(ld.segs)-1].NextOffset()
	}
	return ld, nil
}

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

func (l *Log) removeSegmentFiles(base int64) error {
	for _, suf := range []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix} {
		if err := l.fs.Remove(segment.Name(l.dir, base, suf)); err != nil && !errors.Is(err, errNotExist) {
			return fmt.Errorf("partlog: %w", err)
		}
	}
	return nil
}

func (l *Log) segments() []*segment.Segment {
	if p := l.segs.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *Log) setSegments(s []*segment.Segment) { l.segs.Store(&s) }

func (l *Log) active() *segment.Segment {
	segs := l.segments()
	return segs[len(segs)-1]
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// ActiveBase is the base offset of the active segment: it changes when the
// log rolls, and when a cut, Reset or recovery starts a new file. It takes
// no lock.
func (l *Log) ActiveBase() int64 { return l.active().Base() }

// StartOffset is the first offset still in the log: the first segment's
// base, or the explicit log start offset (DeleteRecordsBefore) past it.
func (l *Log) StartOffset() int64 { return l.startIn(l.segments()) }

// EndOffset is the offset the next record will get (the log end offset), and
// the high watermark readers are served up to. After a failed fsync, until the
// log recovers, it is FlushedOffset instead: what lies beyond may be lost
// (see the package doc), so it is not served.
func (l *Log) EndOffset() int64 { return min(l.end.Load(), l.readLimit.Load()) }

// FlushedOffset: every offset below it is durable (fsynced).
func (l *Log) FlushedOffset() int64 { return l.flushed.Load() }

// Syncs counts the fsync rounds the log has made (group commits, rolls, closes).
func (l *Log) Syncs() int64 { return l.syncCount.Load() }

// SegmentInfo describes one segment.
type SegmentInfo struct {
	Base, Next, Size, MaxTimestamp int64
	MemBytes                       int
}

// Segments describes the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	segs := l.segments()
	out := make([]SegmentInfo, len(segs))
	for i, s := range segs {
		out[i] = SegmentInfo{Base: s.Base(), Next: s.NextOffset(), Size: s.Size(), MaxTimestamp: s.MaxTimestamp(), MemBytes: s.MemBytes()}
	}
	return out
}

// Size is the total bytes of the log's segments.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segments() {
		n += s.Size()
	}
	return n
}

// Err returns the error that failed the log, or nil.
func (l *Log) Err() error {
	if p := l.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Close flushes and seals the active segment, checkpoints the recovery point
// and writes the clean-shutdown marker, so the next Open trusts the files.
// Readers must be done (their Slices released) for the files to close. A failed
// log is closed without the marker, so the next Open recovers it.
//
// A Clean pass in progress is stopped first, and its temporary files
// removed: Close waits for it to notice, at its next read (every MiB of
// batches) or once the swap it is making is done, and so for a codec call
// it is in. Close does not wait for a flush policy call in progress. Fsyncs
// the policy has not been told of yet are told now, unless a call is in
// progress: its caller tells them.
func (l *Log) Close() error {
	l.stopClean.Store(true)
	l.cleanMu.Lock()
	err := l.close(false)
	l.cleanMu.Unlock()
	l.tellQueuedFlushes()
	return err
}

// Discard closes a log that is about to be removed (its topic deleted):
// as Close, but nothing is flushed, sealed, checkpointed or marked clean,
// since the files are deleted next (Kafka closes a deleted log's handlers
// without a flush too). Flushing gigabytes only to unlink them would stall
// every other partition's fsyncs behind the device. A log left on disk by
// a crash between Discard and the removal has no clean-shutdown marker and
// is recovered like any other; its topic's deletion is driven again.
func (l *Log) Discard() error {
	l.stopClean.Store(true)
	l.cleanMu.Lock()
	err := l.close(true)
	l.cleanMu.Unlock()
	l.tellQueuedFlushes()
	return err
}

// close marks the log closed and closes its segments: sealed, with the
// checkpoint and the clean-shutdown marker written, or (discard) dropped
// as they are.
func (l *Log) close(discard bool) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	l.closed.Store(true)
	l.wake()
	l.statMu.Lock()
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.statMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	var errs []error
	segs := l.segments()
	if discard || l.pristine.Load() && l.markCurrent {
		// Discarded: the files are removed next. Or unchanged since a
		// clean shutdown: its files, checkpoint and marker are as that
		// Close left them.
		for _, s := range segs {
			s.Drop()
		}
		return nil
	}
	for _, s := range segs {
		errs = append(errs, s.Close())
	}
	if err := errors.Join(errs...); err != nil || l.Err() != nil {
		return errors.Join(err, l.Err())
	}
	l.flushed.Store(l.end.Load())
	l.syncCount.Add(1)
	if err := l.writeCheckpoint(l.end.Load()); err != nil {
		return err
	}
	f, err := l.fs.Create(l.path(cleanShutdownFile))
	if err != nil {
		return fmt.Errorf("partlog: %w", err)
	}
	nums := fmt.Sprintf("%d %08x", l.end.Load(), epochsSum(l.epochList()))
	_, err = f.Write([]byte("v1 " + nums + " " + checksum(nums) + "\n"))
	if err := errors.Join(err, f.Sync(), f.Close(), l.fs.SyncDir(l.dir)); err != nil {
		return fmt.Errorf("partlog: clean-shutdown marker: %w", err)
	}
	return nil
}

// shutdownMark is what a clean Close records in the clean-shutdown marker
// ("v1 <log end> <epoch checkpoint CRC-32C, hex> <crc of the two>"): where
// the log ended, and the checksum of the leader-epoch checkpoint it left.
type shutdownMark struct {
	end       int64
	epochsSum uint32
}

// readCleanMark reads the marker, false when it holds nothing (an older
// weir wrote it empty) or is damaged.
func (l *Log) readCleanMark() (shutdownMark, bool) {
	b, err := vfs.ReadFile(l.fs, l.path(cleanShutdownFile))
	if err != nil || len(b) > 96 {
		return shutdownMark{}, false
	}
	f := strings.Fields(string(b))
	if len(f) != 4 || f[0] != "v1" || f[3] != checksum(f[1]+" "+f[2]) {
		return shutdownMark{}, false
	}
	end, err := strconv.ParseInt(f[1], 10, 64)
	sum, serr := strconv.ParseUint(f[2], 16, 32)
	if err != nil || serr != nil || end < 0 {
		return shutdownMark{}, false
	}
	return shutdownMark{end: end, epochsSum: uint32(sum)}, true
}
