package partlog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"strconv"
	"strings"
)

var errNotExist = fs.ErrNotExist

// The recovery-point file holds one line:
//
//	v1 <recovery point> <active base> <active created, unix ms> <crc32 of the three numbers>
//
// Every segment that ends at or below the recovery point was fsynced and sealed,
// so recovery may trust it. The active segment's base and creation time let a
// restart keep counting the segment's age (SegmentAge) from when it was really
// created. The file is replaced atomically (write a temporary file, fsync,
// rename, fsync the directory); a missing or damaged file means "trust nothing,
// age unknown", which is slow but safe.
type checkpoint struct {
	recoveryPoint int64
	activeBase    int64
	activeBorn    int64 // unix ms
}

func (l *Log) readCheckpoint() (checkpoint, bool) {
	f, err := l.fs.Open(l.path(recoveryPointFile))
	if err != nil {
		return checkpoint{}, false
	}
	defer f.Close()
	b := make([]byte, 128)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return checkpoint{}, false
	}
	fields := strings.Fields(string(b[:n]))
	if len(fields) != 5 || fields[0] != "v1" || fields[4] != checksum(strings.Join(fields[1:4], " ")) {
		return checkpoint{}, false
	}
	var nums [3]int64
	for i := range nums {
		if nums[i], err = strconv.ParseInt(fields[i+1], 10, 64); err != nil || nums[i] < 0 {
			return checkpoint{}, false
		}
	}
	return checkpoint{recoveryPoint: nums[0], activeBase: nums[1], activeBorn: nums[2]}, true
}

func checksum(s string) string {
	return strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(s))), 16)
}

// writeCheckpoint records rp as the recovery point, with the active segment.
// Log.rp never claims more than the file may: it goes down before the
// write, up after it.
func (l *Log) writeCheckpoint(rp int64) error {
	return l.writeRecoveryPoint(rp, l.active().Base(), l.activeBorn.Load())
}

// writeRecoveryPoint writes the recovery-point file with an active segment
// at activeBase created at born (unix ms).
func (l *Log) writeRecoveryPoint(rp, activeBase, born int64) error {
	if rp < l.rp.Load() {
		l.rp.Store(rp)
	}
	tmp := l.path(recoveryPointFile + ".tmp")
	f, err := l.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("partlog: recovery point: %w", err)
	}
	nums := fmt.Sprintf("%d %d %d", rp, activeBase, max(0, born))
	_, err = f.Write([]byte("v1 " + nums + " " + checksum(nums) + "\n"))
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("partlog: recovery point: %w", err)
	}
	if err := l.fs.Rename(tmp, l.path(recoveryPointFile)); err != nil {
		return fmt.Errorf("partlog: recovery point: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("partlog: recovery point: %w", err)
	}
	l.rp.Store(rp)
	return nil
}
