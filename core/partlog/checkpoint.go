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

// The recovery-point file holds one line, "v1 <offset> <crc32 of the offset text>":
// every segment that ends at or below the offset was fsynced and sealed, so
// recovery may trust it. It is replaced atomically (write a temporary file,
// fsync, rename, fsync the directory); a missing or damaged file means "trust
// nothing", which is slow but safe.

func (l *Log) readRecoveryPoint() int64 {
	f, err := l.fs.Open(l.path(recoveryPointFile))
	if err != nil {
		return -1
	}
	defer f.Close()
	b := make([]byte, 64)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return -1
	}
	fields := strings.Fields(string(b[:n]))
	if len(fields) != 3 || fields[0] != "v1" {
		return -1
	}
	off, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil || off < 0 || fields[2] != checksum(fields[1]) {
		return -1
	}
	return off
}

func checksum(s string) string {
	return strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(s))), 16)
}

func (l *Log) writeRecoveryPoint(off int64) error {
	tmp := l.path(recoveryPointFile + ".tmp")
	f, err := l.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("partlog: recovery point: %w", err)
	}
	text := strconv.FormatInt(off, 10)
	_, err = f.Write([]byte("v1 " + text + " " + checksum(text) + "\n"))
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("partlog: recovery point: %w", err)
	}
	if err := l.fs.Rename(tmp, l.path(recoveryPointFile)); err != nil {
		return fmt.Errorf("partlog: recovery point: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("partlog: recovery point: %w", err)
	}
	return nil
}
