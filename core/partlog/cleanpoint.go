package partlog

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The cleaner-point file records which offsets Clean has cleaned, and when
// each was cleaned for the first time (the tombstone rule counts
// DeleteRetention from then). It holds one line:
//
//	v1 <n> <end 1> <at 1> ... <end n> <at n> <crc32 of the fields between v1 and it>
//
// Each mark (end i, at i) says that the offsets from end i-1 (the log start
// for the first) up to end i were first cleaned by a pass that finished at
// at i (unix ms, Config.Clock); the last end is the cleaner point, below which
// the log has been cleaned. Ends increase, times never decrease. A log never
// cleaned has no file (and no marks: cleaner point 0).
//
// The file is replaced atomically (a temporary file, fsync, rename, fsync of
// the directory). A file that does not parse is not an error: it is logged
// and replaced by an empty one, and the log counts as never cleaned, which
// costs a pass over everything and keeps every tombstone another
// DeleteRetention, and loses nothing.
//
// The marks in memory are never below the file's (written to memory first
// when they rise, to the file first when they fall), so a clamp (below)
// always reaches the file when it must.
const cleanerPointFile = "cleaner-point"

// maxCleanMarks bounds the marks kept: past it, the two neighbours closest in
// time merge into the later one, which only ever makes offsets count as
// cleaned later than they were (tombstones stay longer), never earlier.
const maxCleanMarks = 64

type cleanMark struct{ end, at int64 }

// cleanHistory is the marks, immutable once published (Log.cleaned).
type cleanHistory struct{ marks []cleanMark }

// point is the cleaner point: offsets below it have been cleaned.
func (h *cleanHistory) point() int64 {
	if len(h.marks) == 0 {
		return 0
	}
	return h.marks[len(h.marks)-1].end
}

// firstCleaned returns when off was first cleaned, false if it never was.
func (h *cleanHistory) firstCleaned(off int64) (int64, bool) {
	i, _ := slices.BinarySearchFunc(h.marks, off, func(m cleanMark, off int64) int {
		if m.end <= off {
			return -1
		}
		return 1
	})
	if i == len(h.marks) {
		return 0, false
	}
	return h.marks[i].at, true
}

// add returns the history with the offsets from the cleaner point up to end
// first cleaned at at, forgetting marks wholly below start (offsets that
// retention deleted).
func (h *cleanHistory) add(end, at, start int64) *cleanHistory {
	var ms []cleanMark
	for _, m := range h.marks {
		if m.end > start {
			ms = append(ms, m)
		}
	}
	if end > h.point() {
		if n := len(ms); n > 0 {
			at = max(at, ms[n-1].at)
		}
		ms = append(ms, cleanMark{end, at})
	}
	for len(ms) > maxCleanMarks {
		k := 0
		for i := 1; i+1 < len(ms); i++ {
			if ms[i+1].at-ms[i].at < ms[k+1].at-ms[k].at {
				k = i
			}
		}
		ms = slices.Delete(ms, k, k+1) // ms[k+1] now covers ms[k]'s offsets too, with its later time
	}
	return &cleanHistory{marks: ms}
}

// clampTo returns the history cut back so that the cleaner point is at most
// end (the log was cut there: what is appended from end on is new), and
// whether that changed anything.
func (h *cleanHistory) clampTo(end int64) (*cleanHistory, bool) {
	if h.point() <= end {
		return h, false
	}
	var ms []cleanMark
	for _, m := range h.marks {
		if m.end >= end {
			if end > 0 {
				ms = append(ms, cleanMark{end, m.at})
			}
			break
		}
		ms = append(ms, m)
	}
	return &cleanHistory{marks: ms}, true
}

func (h *cleanHistory) encode() []byte {
	f := []string{strconv.Itoa(len(h.marks))}
	for _, m := range h.marks {
		f = append(f, strconv.FormatInt(m.end, 10), strconv.FormatInt(m.at, 10))
	}
	nums := strings.Join(f, " ")
	return []byte("v1 " + nums + " " + checksum(nums) + "\n")
}

func parseCleanHistory(b []byte) (*cleanHistory, error) {
	f := strings.Fields(string(b))
	if len(f) < 3 || f[0] != "v1" {
		return nil, errors.New("not a v1 cleaner point")
	}
	if f[len(f)-1] != checksum(strings.Join(f[1:len(f)-1], " ")) {
		return nil, errors.New("checksum mismatch")
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 0 || len(f) != 3+2*n {
		return nil, fmt.Errorf("%q marks in %d fields", f[1], len(f))
	}
	h := &cleanHistory{marks: make([]cleanMark, n)}
	for i := range h.marks {
		end, err1 := strconv.ParseInt(f[2+2*i], 10, 64)
		at, err2 := strconv.ParseInt(f[3+2*i], 10, 64)
		if err1 != nil || err2 != nil || end <= 0 || i > 0 && (end <= h.marks[i-1].end || at < h.marks[i-1].at) {
			return nil, fmt.Errorf("mark %d (%s %s) out of order", i, f[2+2*i], f[3+2*i])
		}
		h.marks[i] = cleanMark{end, at}
	}
	return h, nil
}

// readCleanHistory reads the cleaner-point file: no file is a log never
// cleaned. A file that does not parse comes back as damaged (and h empty);
// err is an I/O error, which fails the load like any other.
func (l *Log) readCleanHistory() (h *cleanHistory, damaged, err error) {
	f, err := l.fs.Open(l.path(cleanerPointFile))
	if errors.Is(err, errNotExist) {
		return &cleanHistory{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("partlog: cleaner point: %w", err)
	}
	defer f.Close()
	b := make([]byte, 64+maxCleanMarks*42)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("partlog: cleaner point: %w", err)
	}
	if n == len(b) {
		return &cleanHistory{}, errors.New("file too long"), nil
	}
	if h, err = parseCleanHistory(b[:n]); err != nil {
		return &cleanHistory{}, err, nil
	}
	return h, nil, nil
}

// writeCleanHistory replaces the cleaner-point file with h, durably.
func (l *Log) writeCleanHistory(h *cleanHistory) error {
	tmp := l.path(cleanerPointFile + ".tmp")
	f, err := l.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("partlog: cleaner point: %w", err)
	}
	_, err = f.Write(h.encode())
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err == nil {
		err = l.fs.Rename(tmp, l.path(cleanerPointFile))
	}
	if err != nil {
		_ = l.fs.Remove(tmp) // best effort: the next write replaces it anyway
		return fmt.Errorf("partlog: cleaner point: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("partlog: cleaner point: %w", err)
	}
	return nil
}

// clampCleanPoint moves the cleaner point back to end if it lies past it,
// file first: the log was cut at end, and the offsets from end on will hold
// records no pass has seen. Truncate, Open and recoveries call it before any
// append can reuse those offsets. appendMu and cpMu held (or the log not
// yet published).
func (l *Log) clampCleanPoint(end int64) error {
	h, changed := l.cleaned.Load().clampTo(end)
	if !changed {
		return nil
	}
	if err := l.writeCleanHistory(h); err != nil {
		return err
	}
	l.cleaned.Store(h)
	l.cleanUnsaved.Store(false)
	return nil
}

// loadCleanHistory publishes what load read, and clamps it to the log end.
// A damaged file is logged and replaced by an empty one, so that the file
// never claims more than memory. appendMu and cpMu held (or the log not
// yet published).
func (l *Log) loadCleanHistory(h *cleanHistory, damaged error) error {
	if damaged != nil {
		l.cfg.Logger.Warn("partition log: cleaner point damaged; the log counts as never cleaned",
			"path", l.path(cleanerPointFile), "err", damaged)
		if err := l.writeCleanHistory(h); err != nil {
			return err
		}
	}
	l.cleaned.Store(h)
	l.cleanUnsaved.Store(false)
	return l.clampCleanPoint(l.end.Load())
}
