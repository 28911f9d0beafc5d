package logs

import (
	"encoding/binary"
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

// The aborted-transactions index: Kafka's .txnindex files, in its format
// (TransactionIndex.java): 34-byte entries, big-endian,
//
//	version i16 (0), producerId i64, firstOffset i64, lastOffset i64, lastStableOffset i64
//
// one per aborted transaction, lastOffset being its abort marker's offset,
// in files <base>.txnindex (20 digits) in the partition directory. Kafka
// keeps one per segment and deletes it with its segment; here package logs
// keeps them beside the log, as it keeps the producer snapshots, since they
// are state derived from the log by the same replay: a file is started at
// the active segment's base when the first abort marker of that segment
// comes, and a file goes when retention has removed every offset its
// entries end at. So a cleaner pass that merges segments leaves the files
// as they were (the aborted entries carry over), and a cut (Truncate, a
// recovery's, Reset) drops the entries ending at or past the new end.
//
// Durability: entries are written to the page cache as their markers are
// appended, and fsynced before each producer snapshot is written and at
// Close. A crash loses at most entries past the latest snapshot, whose
// markers the replay after it reads again (re-adding an entry already
// there changes nothing). A file's torn tail (not a multiple of 34 bytes)
// is ignored, and an entry whose version is not 0 ends its file. The entries
// are also kept in memory, ordered by lastOffset, for Fetch's
// read_committed answers.

const (
	txnIndexSuffix = ".txnindex"
	txnEntrySize   = 34
)

// txnEntry is one aborted transaction.
type txnEntry struct {
	ProducerID  int64
	First, Last int64 // its first offset, its abort marker's offset
	LSO         int64 // the first offset still undecided once it was aborted
	file        int64 // base of the file holding it
}

func txnIndexName(dir string, base int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, txnIndexSuffix))
}

func parseTxnIndexName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, txnIndexSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	return base, err == nil && base >= 0
}

// txnIndex is one partition's aborted-transactions index. mu is a leaf
// lock: nothing else is taken under it, and the log is never called under
// it (AfterCut runs under the log's locks).
type txnIndex struct {
	fs     vfs.FS
	dir    string
	logger *slog.Logger

	mu      sync.Mutex
	entries []txnEntry // ascending Last, unique Last
	files   []int64    // bases of the files, ascending
	cur     vfs.File   // the last file, open for appending (nil until written)
	curBase int64
	dirty   bool // cur has writes not fsynced
	// failed: an entry could not be written (it is in memory all the
	// same). sync fails from then on, so that no producer snapshot is
	// written past its marker: the next open replays the marker again.
	failed error
}

// loadTxnIndex reads the index files of dir.
func loadTxnIndex(fsys vfs.FS, dir string, logger *slog.Logger) (*txnIndex, error) {
	x := &txnIndex{fs: fsys, dir: dir, logger: logger, curBase: -1}
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("logs: transaction index: %w", err)
	}
	for _, n := range names {
		if rest, tmp := strings.CutSuffix(n, ".tmp"); tmp {
			if _, ok := parseTxnIndexName(rest); ok { // a rewrite a crash interrupted: the file it replaces stands
				if err := fsys.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("logs: transaction index: %w", err)
				}
			}
			continue
		}
		base, ok := parseTxnIndexName(n)
		if !ok {
			continue
		}
		b, err := vfs.ReadFile(fsys, filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("logs: transaction index: %w", err)
		}
		x.files = append(x.files, base)
		for ; len(b) >= txnEntrySize; b = b[txnEntrySize:] {
			be := binary.BigEndian
			e := txnEntry{ProducerID: int64(be.Uint64(b[2:])), First: int64(be.Uint64(b[10:])),
				Last: int64(be.Uint64(b[18:])), LSO: int64(be.Uint64(b[26:])), file: base}
			if be.Uint16(b) != 0 || e.ProducerID < 0 || e.First < 0 || e.Last < e.First {
				logger.Warn("transaction index entry ignored, and the rest of its file", "file", n, "entry", e)
				break
			}
			x.entries = append(x.entries, e)
		}
	}
	slices.Sort(x.files)
	slices.SortStableFunc(x.entries, func(a, b txnEntry) int { return cmpInt64(a.Last, b.Last) })
	x.entries = slices.CompactFunc(x.entries, func(a, b txnEntry) bool { return a.Last == b.Last })
	return x, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func encodeTxnEntry(dst []byte, e txnEntry) []byte {
	be := binary.BigEndian
	dst = be.AppendUint16(dst, 0)
	dst = be.AppendUint64(dst, uint64(e.ProducerID))
	dst = be.AppendUint64(dst, uint64(e.First))
	dst = be.AppendUint64(dst, uint64(e.Last))
	return be.AppendUint64(dst, uint64(e.LSO))
}

// add records an aborted transaction, unless an entry ends at the same
// offset already (a replay of a marker the index has). activeBase names a
// new file when the last one is older than the active segment.
func (x *txnIndex) add(e txnEntry, activeBase int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	i, found := slices.BinarySearchFunc(x.entries, e.Last, func(a txnEntry, last int64) int { return cmpInt64(a.Last, last) })
	if found {
		return nil
	}
	last := int64(-1)
	if len(x.files) > 0 {
		last = x.files[len(x.files)-1]
	}
	base := last
	if base < 0 || (activeBase > last && activeBase <= e.Last) {
		base = min(activeBase, e.Last)
		if base <= last {
			base = last
		}
	}
	e.file = base
	x.entries = slices.Insert(x.entries, i, e) // served from memory whatever the file says
	if base != x.curBase || x.cur == nil {
		if err := x.openLocked(base); err != nil {
			x.failed = err
			return err
		}
	}
	if _, err := x.cur.Write(encodeTxnEntry(nil, e)); err != nil {
		x.failed = fmt.Errorf("logs: transaction index %s: %w", x.cur.Name(), err)
		return x.failed
	}
	x.dirty = true
	return nil
}

// openLocked makes the file at base the one written, creating it (and
// syncing the one before, so that a later file never outlives an earlier
// one's entries) when it is new.
func (x *txnIndex) openLocked(base int64) error {
	if err := x.closeLocked(); err != nil {
		return err
	}
	name := txnIndexName(x.dir, base)
	if _, found := slices.BinarySearch(x.files, base); found {
		f, err := x.fs.OpenReadWrite(name)
		if err != nil {
			return fmt.Errorf("logs: transaction index: %w", err)
		}
		// Drop a torn tail, so that appends stay aligned.
		if size, err := f.Size(); err == nil && size%txnEntrySize != 0 {
			if err := f.Truncate(size - size%txnEntrySize); err != nil {
				_ = f.Close()
				return fmt.Errorf("logs: transaction index %s: %w", name, err)
			}
		}
		x.cur, x.curBase = f, base
		return nil
	}
	f, err := x.fs.Create(name)
	if err != nil {
		return fmt.Errorf("logs: transaction index: %w", err)
	}
	if err := x.fs.SyncDir(x.dir); err != nil {
		_ = f.Close()
		return fmt.Errorf("logs: transaction index: %w", err)
	}
	i, _ := slices.BinarySearch(x.files, base)
	x.files = slices.Insert(x.files, i, base)
	x.cur, x.curBase = f, base
	return nil
}

// closeLocked syncs (if written) and closes the file being written.
func (x *txnIndex) closeLocked() error {
	if x.cur == nil {
		return nil
	}
	err := x.syncLocked()
	if cerr := x.cur.Close(); err == nil {
		err = cerr
	}
	x.cur, x.curBase = nil, -1
	return err
}

func (x *txnIndex) syncLocked() error {
	if x.failed != nil {
		return fmt.Errorf("an entry was not written: %w", x.failed)
	}
	if x.cur == nil || !x.dirty {
		return nil
	}
	if err := x.cur.Sync(); err != nil {
		return fmt.Errorf("logs: transaction index %s: %w", x.cur.Name(), err)
	}
	x.dirty = false
	return nil
}

// sync makes the entries written durable (before a producer snapshot).
func (x *txnIndex) sync() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.syncLocked()
}

// close syncs and closes the file being written.
func (x *txnIndex) close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.closeLocked()
}

// discard closes the file being written without syncing it: the
// partition is about to be removed.
func (x *txnIndex) discard() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cur == nil {
		return nil
	}
	err := x.cur.Close()
	x.cur, x.curBase = nil, -1
	return err
}

// AfterCut drops the entries ending at or past end (every one for -1): the
// log no longer holds their markers. Files that lose entries are rewritten
// (a temporary file renamed over them), emptied ones removed.
func (x *txnIndex) AfterCut(end int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if end < 0 {
		end = 0
	}
	i, _ := slices.BinarySearchFunc(x.entries, end, func(a txnEntry, last int64) int { return cmpInt64(a.Last, last) })
	if i == len(x.entries) && (end > 0 || len(x.files) == 0) {
		return nil
	}
	cut := x.entries[i:]
	x.entries = slices.Clone(x.entries[:i])
	touched := map[int64]bool{}
	for _, e := range cut {
		touched[e.file] = true
	}
	if end == 0 {
		for _, b := range x.files {
			touched[b] = true
		}
	}
	return x.rewriteLocked(touched)
}

// trimBefore drops the entries ending below start (retention removed their
// records) and the files left holding none.
func (x *txnIndex) trimBefore(start int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	i, _ := slices.BinarySearchFunc(x.entries, start, func(a txnEntry, last int64) int { return cmpInt64(a.Last, last) })
	if i == 0 {
		return nil
	}
	dropped := x.entries[:i]
	x.entries = slices.Clone(x.entries[i:])
	touched := map[int64]bool{}
	for _, e := range dropped {
		touched[e.file] = true
	}
	for _, e := range x.entries {
		delete(touched, e.file) // a file still holding entries stays as it is
	}
	return x.rewriteLocked(touched)
}

// rewriteLocked writes again each touched file with the entries it still
// holds, removing those left empty.
func (x *txnIndex) rewriteLocked(touched map[int64]bool) error {
	if len(touched) == 0 {
		return nil
	}
	if err := x.closeLocked(); err != nil {
		return err
	}
	var kept []int64
	for _, base := range x.files {
		if !touched[base] {
			kept = append(kept, base)
			continue
		}
		var b []byte
		for _, e := range x.entries {
			if e.file == base {
				b = encodeTxnEntry(b, e)
			}
		}
		name := txnIndexName(x.dir, base)
		if len(b) == 0 {
			if err := x.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("logs: transaction index: %w", err)
			}
			continue
		}
		kept = append(kept, base)
		if err := vfs.WriteFileSynced(x.fs, name+".tmp", b); err != nil {
			return fmt.Errorf("logs: transaction index: %w", err)
		}
		if err := x.fs.Rename(name+".tmp", name); err != nil {
			return fmt.Errorf("logs: transaction index: %w", err)
		}
	}
	x.files = kept
	if err := x.fs.SyncDir(x.dir); err != nil {
		return fmt.Errorf("logs: transaction index: %w", err)
	}
	return nil
}

// aborted returns the aborted transactions overlapping [from, upTo): their
// marker at or past from, their first offset below upTo.
func (x *txnIndex) aborted(from, upTo int64) []AbortedTxn {
	x.mu.Lock()
	defer x.mu.Unlock()
	i, _ := slices.BinarySearchFunc(x.entries, from, func(a txnEntry, last int64) int { return cmpInt64(a.Last, last) })
	var out []AbortedTxn
	for _, e := range x.entries[i:] {
		if e.First < upTo {
			out = append(out, AbortedTxn{ProducerID: e.ProducerID, FirstOffset: e.First})
		}
	}
	return out
}

// count is the number of entries, for tests and metrics.
func (x *txnIndex) count() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.entries)
}
