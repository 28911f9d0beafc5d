package logs

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/weir-broker/weir/core/vfs"
)

// Producer-state snapshot files; see "Idempotent producers" in the package
// doc. Each is <offset>.snapshot (20 digits, as segments are named) in the
// partition directory, holding a producers.Table snapshot as of that offset.

const (
	snapshotSuffix = ".snapshot"
	// keepSnapshots is how many snapshots a partition keeps: the latest
	// for the next open, the one before in case the latest is damaged.
	keepSnapshots = 2
)

func snapshotName(dir string, off int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", off, snapshotSuffix))
}

// parseSnapshotName returns the offset a snapshot file is named by, and
// whether name is a snapshot's temporary file.
func parseSnapshotName(name string) (off int64, tmp, ok bool) {
	if rest, found := strings.CutSuffix(name, ".tmp"); found {
		name, tmp = rest, true
	}
	digits, found := strings.CutSuffix(name, snapshotSuffix)
	if !found || len(digits) != 20 {
		return 0, false, false
	}
	off, err := strconv.ParseInt(digits, 10, 64)
	return off, tmp, err == nil && off >= 0
}

// snapshots are one partition's snapshot files. mu serialises their
// writes and removals: a snapshot being written and the removal of those a
// cut made stale (AfterCut) exclude each other. Lock order: the partition's
// prodMu before mu; mu is never held while reading the log (a read may wait
// for a recovery, which calls AfterCut).
type snapshots struct {
	fs     vfs.FS
	dir    string
	logger *slog.Logger
	mu     sync.Mutex
	// offs caches the offsets of the snapshot files, ascending, once
	// listed (known): only this value adds or removes them, under mu, so
	// the directory is listed once per Open rather than at every look.
	offs  []int64
	known bool
}

// forget drops off from the cache. mu held.
func (s *snapshots) forget(off int64) {
	if i, ok := slices.BinarySearch(s.offs, off); ok {
		s.offs = slices.Delete(s.offs, i, i+1)
	}
}

// AfterCut removes the snapshots past end (all of them for -1) and
// temporary files a crash left: the log's records past end are gone, so the
// state those snapshots hold is not the log's any more. partlog calls it
// after every cut and at the end of Open and recoveries
// (partlog.CutHook), before anything is appended at the cut offsets.
func (s *snapshots) AfterCut(end int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	names, err := s.fs.List(s.dir)
	if err != nil {
		return fmt.Errorf("logs: producer snapshots: %w", err)
	}
	removed := false
	s.known = false
	var kept []int64
	for _, n := range names {
		off, tmp, ok := parseSnapshotName(n)
		if !ok {
			continue
		}
		if !tmp && off <= end {
			kept = append(kept, off)
			continue
		}
		if err := s.fs.Remove(filepath.Join(s.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("logs: producer snapshots: %w", err)
		}
		removed = true
	}
	slices.Sort(kept)
	s.offs, s.known = kept, true
	if removed {
		if err := s.fs.SyncDir(s.dir); err != nil {
			return fmt.Errorf("logs: producer snapshots: %w", err)
		}
	}
	return nil
}

// list returns the offsets of the snapshot files, ascending.
func (s *snapshots) list() ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked()
}

func (s *snapshots) listLocked() ([]int64, error) {
	if s.known {
		return slices.Clone(s.offs), nil
	}
	names, err := s.fs.List(s.dir)
	if err != nil {
		return nil, fmt.Errorf("logs: producer snapshots: %w", err)
	}
	var offs []int64
	for _, n := range names {
		if off, tmp, ok := parseSnapshotName(n); ok && !tmp {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	s.offs, s.known = slices.Clone(offs), true
	return offs, nil
}

// read returns the bytes of the snapshot at off.
func (s *snapshots) read(off int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return vfs.ReadFile(s.fs, snapshotName(s.dir, off))
}

// remove removes the snapshot at off (one that does not restore).
func (s *snapshots) remove(off int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fs.Remove(snapshotName(s.dir, off)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	s.forget(off)
	return s.fs.SyncDir(s.dir)
}

// write makes b the snapshot at off, durably (a temporary file, fsync,
// rename, fsync of the directory), unless still, asked once the file is in
// place, says a cut came since the state was taken: then it removes it
// again (AfterCut, run after the cut, may have missed it). Then it removes
// all but the latest keepSnapshots snapshots.
func (s *snapshots) write(off int64, b []byte, still func() bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := snapshotName(s.dir, off)
	if err := vfs.WriteFileSynced(s.fs, name+".tmp", b); err != nil {
		_ = s.fs.Remove(name + ".tmp") // best effort: AfterCut removes leftovers
		return fmt.Errorf("logs: producer snapshot: %w", err)
	}
	if err := s.fs.Rename(name+".tmp", name); err != nil {
		s.known = false // it may be there after all: list again
		return fmt.Errorf("logs: producer snapshot: %w", err)
	}
	if s.known {
		if i, found := slices.BinarySearch(s.offs, off); !found {
			s.offs = slices.Insert(s.offs, i, off)
		}
	}
	if !still() {
		if err := s.fs.Remove(name); err != nil {
			s.known = false
			return fmt.Errorf("logs: producer snapshot: %w", err)
		}
		s.forget(off)
	}
	offs, err := s.listLocked()
	if err != nil {
		return err
	}
	for _, o := range offs[:max(0, len(offs)-keepSnapshots)] {
		if err := s.fs.Remove(snapshotName(s.dir, o)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.known = false
			return fmt.Errorf("logs: producer snapshots: %w", err)
		}
		s.forget(o)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("logs: producer snapshot: %w", err)
	}
	return nil
}
