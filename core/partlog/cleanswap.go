package partlog

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weir-broker/weir/core/segment"
)

// Swapping a cleaned segment into the log, crash-safely, as Kafka does; see
// "Compaction" in the package doc. A cleaned segment n replacing the group
// of segments [b, e) is written and fsynced as <b>.*.cleaned; then, under
// fileMu (which keeps Truncate, retention, Reset and recoveries away; appends
// go on), once the log is checked and the group's files held for readers
// under appendMu and syncMu, briefly:
//
//  1. its index files, then its log, are renamed to <b>.*.swap and the
//     directory fsynced: the commit point is <b>.log.swap being durable;
//  2. the group's other segments' files are deleted, and n's index files
//     renamed over b's, and the directory fsynced;
//  3. n's log is renamed over b's, and the directory fsynced;
//  4. n is opened from its final files and published in place of the group
//     (under appendMu and syncMu, briefly), whose segment objects are
//     closed (Slices of them keep their files).
//
// load, at Open and in a recovery, undoes what did not reach the commit
// point (removes .cleaned files, and .swap index files without a .swap log)
// and finishes what did: it re-reads <b>.log.swap, rebuilding its indexes
// (so whatever state the index files were left in does not matter), which
// tells e; deletes the segments with base offsets in (b, e); renames the
// swap files into place, and fsyncs the directory after each step.

// cleanFile is the path of one of the files of a cleaned segment at base.
func (l *Log) cleanFile(base int64, suffix, tag string) string {
	return segment.Name(l.dir, base, suffix) + tag
}

// swapClean replaces group, consecutive segments of the log, by n, cleaned
// from them (read up to end) and sealed in .cleaned files, if they are still
// as they were in generation gen. committed reports that the swap passed its
// commit point: from there on n's files belong to the log (the caller only
// closes n), and an error has failed the log, whose recovery finishes the
// swap. Before it, nothing changed: the error says why (the log changed
// meanwhile, ErrLogChanged, or a rename failed) and the caller deletes n.
func (l *Log) swapClean(group []*segment.Segment, end, gen int64, n *segment.Segment, held func(since time.Time)) (committed bool, err error) {
	// fileMu keeps Truncate, retention, Reset and recoveries off the files
	// throughout; appendMu is taken only to check the log and to publish.
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	base := group[0].Base()
	if err := l.checkSwap(group, end, gen, held); err != nil {
		return false, err
	}

	// 1. Commit.
	for _, suf := range []string{segment.IndexSuffix, segment.TimeIndexSuffix, segment.LogSuffix} {
		if err := l.fs.Rename(l.cleanFile(base, suf, segment.CleanedTag), l.cleanFile(base, suf, segment.SwapTag)); err != nil {
			err = fmt.Errorf("partlog: clean: swap %d: %w", base, err)
			if suf == segment.LogSuffix {
				if _, serr := l.fs.Stat(l.cleanFile(base, suf, segment.SwapTag)); serr == nil {
					// It happened after all: a later load would
					// finish it, so it must be finished now.
					return true, l.fail(err)
				}
			}
			for _, s := range []string{segment.IndexSuffix, segment.TimeIndexSuffix} {
				if rerr := l.fs.Remove(l.cleanFile(base, s, segment.SwapTag)); rerr != nil && !errors.Is(rerr, errNotExist) {
					err = errors.Join(err, rerr) // load removes it: a .swap index without its log
				}
			}
			return false, err
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return true, l.fail(fmt.Errorf("partlog: clean: swap %d: %w", base, err))
	}
	// 2.
	for _, s := range group[1:] {
		if err := l.removeSegmentFiles(s.Base()); err != nil {
			return true, l.fail(err)
		}
	}
	for _, suf := range []string{segment.IndexSuffix, segment.TimeIndexSuffix} {
		if err := l.fs.Rename(l.cleanFile(base, suf, segment.SwapTag), l.cleanFile(base, suf, "")); err != nil {
			return true, l.fail(fmt.Errorf("partlog: clean: swap %d: %w", base, err))
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return true, l.fail(fmt.Errorf("partlog: clean: swap %d: %w", base, err))
	}
	// 3.
	if err := l.fs.Rename(l.cleanFile(base, segment.LogSuffix, segment.SwapTag), l.cleanFile(base, segment.LogSuffix, "")); err != nil {
		return true, l.fail(fmt.Errorf("partlog: clean: swap %d: %w", base, err))
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return true, l.fail(fmt.Errorf("partlog: clean: swap %d: %w", base, err))
	}
	// 4.
	s, _, err := segment.Open(l.fs, l.dir, base, segment.Options{Files: l.cfg.Files, IndexIntervalBytes: l.cfg.IndexIntervalBytes}, segment.Trust, end)
	if err != nil {
		return true, l.fail(fmt.Errorf("partlog: clean: swap %d: %w", base, err))
	}
	l.publishSwap(group, s, held)
	for _, g := range group {
		_ = g.Close() // sealed: drops the owner's reference; Slices keep their files
	}
	return true, nil
}

// checkSwap checks, under appendMu and syncMu, that the log is open and not
// failed and that group is as the pass read it, then ends the log's pristine
// state (touch) and holds the group's files for readers. fileMu held.
func (l *Log) checkSwap(group []*segment.Segment, end, gen int64, held func(since time.Time)) error {
	l.appendMu.Lock()
	defer held(time.Now())
	defer l.appendMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.Err(); err != nil {
		return err
	}
	base := group[0].Base()
	segs := l.segments()
	k := slices.Index(segs, group[0])
	// The same segment objects, none of them the active one, all durable,
	// ending where they did, and no cut below their end since: a cut
	// into one (Truncate unseals it) followed by appends and a roll would
	// otherwise look the same, with other records in it. Until the swap
	// ends, only appends change the log (fileMu): they add segments after
	// the group.
	if k < 0 || k+len(group) >= len(segs) || !slices.Equal(segs[k:k+len(group)], group) ||
		group[len(group)-1].NextOffset() != end || end > l.rp.Load() || l.lostPages.Load() ||
		!l.Survived(AppendResult{NextOffset: end, Generation: gen}) {
		return fmt.Errorf("%w: segments [%d, %d) are not as they were", ErrLogChanged, base, end)
	}
	if err := l.touchLocked(); err != nil {
		return err
	}
	// Readers that reach the group before it is replaced read its files,
	// about to be removed or renamed over, through descriptors kept open.
	for _, g := range group {
		if err := g.Hold(); err != nil {
			return fmt.Errorf("partlog: clean: swap %d: %w", base, err)
		}
	}
	return nil
}

// publishSwap puts s in the place of group in the segment list, under
// appendMu and syncMu. fileMu held, so the group is still there.
func (l *Log) publishSwap(group []*segment.Segment, s *segment.Segment, held func(since time.Time)) {
	l.appendMu.Lock()
	defer held(time.Now())
	defer l.appendMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	segs := l.segments()
	k := slices.Index(segs, group[0])
	l.setSegments(slices.Concat(segs[:k], []*segment.Segment{s}, segs[k+len(group):]))
}

// cleanerTag returns the cleaner's tag a file name ends with, or "".
func cleanerTag(name string) string {
	for _, tag := range []string{segment.CleanedTag, segment.SwapTag} {
		if strings.HasSuffix(name, tag) {
			return tag
		}
	}
	return ""
}

// tempFile is a cleaner's file load found.
type tempFile struct {
	name        string
	base        int64
	suffix, tag string
}

// finishCleans puts right what an interrupted clean left (see the top of
// this file): it removes .cleaned files (unless a Clean is running: a
// recovery in place may run during its rewrite) and .swap index files
// without their log, and finishes every swap whose log is there, updating
// bases (sorted) and others (index files by base) to what is left.
func (l *Log) finishCleans(temps []tempFile, bases *[]int64, others map[int64][]string, rep *Report) error {
	if l.cleanMu.TryLock() {
		defer l.cleanMu.Unlock()
		for _, t := range temps {
			if t.tag == segment.CleanedTag {
				if err := l.fs.Remove(l.path(t.name)); err != nil && !errors.Is(err, errNotExist) {
					return fmt.Errorf("partlog: %w", err)
				}
			}
		}
		l.cleanTemps.Store(false)
	}
	var swaps []int64
	for _, t := range temps {
		if t.tag == segment.SwapTag && t.suffix == segment.LogSuffix {
			swaps = append(swaps, t.base)
		}
	}
	slices.Sort(swaps)
	for _, t := range temps {
		if t.tag == segment.SwapTag && t.suffix != segment.LogSuffix && !slices.Contains(swaps, t.base) {
			if err := l.fs.Remove(l.path(t.name)); err != nil && !errors.Is(err, errNotExist) {
				return fmt.Errorf("partlog: %w", err)
			}
		}
	}
	for _, b := range swaps {
		if err := l.finishSwap(b, bases, others, rep); err != nil {
			return err
		}
	}
	return nil
}

// finishSwap finishes the swap of the cleaned segment at base b.
func (l *Log) finishSwap(b int64, bases *[]int64, others map[int64][]string, rep *Report) error {
	opts := segment.Options{Files: l.cfg.Files, IndexIntervalBytes: l.cfg.IndexIntervalBytes, Tag: segment.SwapTag}
	s, rec, err := segment.Open(l.fs, l.dir, b, opts, segment.Recover, -1)
	if err != nil {
		return fmt.Errorf("partlog: finish cleaner swap %d: %w", b, err)
	}
	end := s.NextOffset()
	if err := s.Close(); err != nil { // seals: its rebuilt indexes are written and fsynced
		return fmt.Errorf("partlog: finish cleaner swap %d: %w", b, err)
	}
	if rec.Truncated > 0 {
		rep.Truncated += rec.Truncated
		rep.Causes = append(rep.Causes, fmt.Errorf("cleaned segment %d: %w", b, rec.Cause))
	}
	var kept []int64
	for _, base := range *bases {
		if base > b && base < end {
			if err := l.removeSegmentFiles(base); err != nil {
				return err
			}
			continue
		}
		kept = append(kept, base)
	}
	for base := range others {
		if base > b && base < end {
			if err := l.removeSegmentFiles(base); err != nil {
				return err
			}
			delete(others, base)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("partlog: %w", err)
	}
	for _, suf := range []string{segment.IndexSuffix, segment.TimeIndexSuffix} {
		if err := l.fs.Rename(l.cleanFile(b, suf, segment.SwapTag), l.cleanFile(b, suf, "")); err != nil {
			return fmt.Errorf("partlog: %w", err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("partlog: %w", err)
	}
	if err := l.fs.Rename(l.cleanFile(b, segment.LogSuffix, segment.SwapTag), l.cleanFile(b, segment.LogSuffix, "")); err != nil {
		return fmt.Errorf("partlog: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("partlog: %w", err)
	}
	if !slices.Contains(kept, b) {
		kept = append(kept, b)
		slices.Sort(kept)
	}
	*bases = kept
	rep.CleanSwaps++
	return nil
}

// removeCleanTemps removes the .cleaned files an abandoned pass could not.
// cleanMu held.
func (l *Log) removeCleanTemps() {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if strings.HasSuffix(n, segment.CleanedTag) {
			if err := l.fs.Remove(l.path(n)); err != nil && !errors.Is(err, errNotExist) {
				l.cfg.Logger.Warn("partition log: cleaner could not remove a temporary file", "dir", l.dir, "err", err)
				return
			}
		}
	}
	l.cleanTemps.Store(false)
}
