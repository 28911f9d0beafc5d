package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weir-broker/weir/core/vfs"
)

// hwCheckpointFile is Kafka's replication-offset-checkpoint: the high
// watermark of every partition in the data directory, so that a restarted
// broker does not serve consumers past what was committed, nor start its
// high watermark from zero.
//
//	0
//	<count>
//	<topic> <partition> <high watermark>
//	...
//
// It is written every hwCheckpointInterval while some high watermark moved
// (and at Close), to a temporary file, fsynced, renamed, the directory
// fsynced: Kafka's CheckpointFile.
const (
	hwCheckpointFile     = "replication-offset-checkpoint"
	hwCheckpointInterval = 5 * time.Second // replica.high.watermark.checkpoint.interval.ms
)

// hwCheckpoint tracks whether a high watermark moved since the last write.
type hwCheckpoint struct{ changed atomic.Bool }

func (c *hwCheckpoint) dirty() { c.changed.Store(true) }

// readHWCheckpoint reads the checkpoint: high watermarks by partition
// directory name. A missing file is an empty map; a malformed one is an
// error naming the file and line (the caller logs it and starts from the
// logs: a high watermark then grows back from what the replicas report).
func readHWCheckpoint(fsys vfs.FS, dir string) (map[string]int64, error) {
	name := filepath.Join(dir, hwCheckpointFile)
	b, err := vfs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node: read %s: %w", name, err)
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	line, count := 0, -1
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		bad := func(why string) error { return fmt.Errorf("node: %s line %d (%q): %s", name, line, text, why) }
		switch line {
		case 1:
			if text != "0" {
				return nil, bad("version must be 0")
			}
			continue
		case 2:
			n, err := strconv.Atoi(text)
			if err != nil || n < 0 {
				return nil, bad("want the entry count")
			}
			count = n
			continue
		}
		f := strings.Fields(text)
		if len(f) != 3 {
			return nil, bad("want <topic> <partition> <offset>")
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		hw, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 || hw < 0 {
			return nil, bad("want <topic> <partition> <offset>")
		}
		out[f[0]+"-"+f[1]] = hw
	}
	if count != len(out) {
		return nil, fmt.Errorf("node: %s: %d entries, the header says %d", name, len(out), count)
	}
	return out, nil
}

// writeHWCheckpoint writes the high watermark of every local partition.
func (n *Node) writeHWCheckpoint() error {
	if !n.hwCheckpoint.changed.Swap(false) {
		return nil
	}
	parts := n.localPartitions()
	var b strings.Builder
	fmt.Fprintf(&b, "0\n%d\n", len(parts))
	for _, rp := range parts {
		fmt.Fprintf(&b, "%s %d %d\n", rp.Topic, rp.Index, rp.highWatermark())
	}
	name := filepath.Join(n.cfg.DataDir, hwCheckpointFile)
	tmp := name + ".tmp"
	err := vfs.WriteFileSynced(n.cfg.FS, tmp, []byte(b.String()))
	if err == nil {
		err = n.cfg.FS.Rename(tmp, name)
	}
	if err == nil {
		err = n.cfg.FS.SyncDir(n.cfg.DataDir)
	}
	if err != nil {
		n.hwCheckpoint.dirty() // again next time
		return fmt.Errorf("node: write %s: %w", name, err)
	}
	return nil
}
