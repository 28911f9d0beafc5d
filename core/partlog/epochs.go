package partlog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/core/record"
)

// The leader-epoch cache (Kafka's LeaderEpochFileCache) and its
// leader-epoch-checkpoint file; see "Leader epochs" in the package doc.

// EpochEntry is one entry of the leader-epoch cache: a leader epoch and the
// offset of its first record. The latest epoch's entry may have no records
// yet: a new leader assigns its epoch the log end before it appends
// (AssignEpoch).
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// UndefinedEpoch and UndefinedOffset make EndOffsetForEpoch's answer for an
// epoch the log cannot place (Kafka's UNDEFINED_EPOCH and
// UNDEFINED_EPOCH_OFFSET).
const (
	UndefinedEpoch  int32 = -1
	UndefinedOffset int64 = -1
)

// ErrStaleEpoch: an append's leader epoch (or AssignEpoch's) is below the
// latest epoch of the log: the log already holds (or was assigned) a later
// leader's epoch, which an older one's records must not follow. Nothing is
// appended.
var ErrStaleEpoch = errors.New("partlog: leader epoch below the log's latest")

// Fence refuses, from now on, every Append (not AppendReplicated) stamped
// with a leader epoch below epoch, ErrStaleEpoch, nothing appended. It
// orders itself with appends (it takes the append lock): an append it does
// not refuse was in the log before it returned. The log's user calls it
// when its appends at an older epoch must stop for good, before it does
// anything that relies on that (a replica that stops leading fences at the
// epoch after the one it follows, then truncates: an append of its old
// term that was still on its way must not land after the truncation, nor
// one stamped with the epoch it follows, which is another broker's).
// The floor is never lowered, and lives in memory only: after a restart no
// append of an old term is on its way.
func (l *Log) Fence(epoch int32) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if epoch > l.appendFloor.Load() {
		l.appendFloor.Store(epoch)
	}
}

// epochCheckpointFile is Kafka's leader-epoch-checkpoint.
const epochCheckpointFile = "leader-epoch-checkpoint"

// maxEpochFile bounds what readEpochCheckpoint reads: far more than any
// real cache (about 20 bytes an epoch), so a larger file is damage.
const maxEpochFile = 4 << 20

// Epochs returns the leader-epoch cache, oldest epoch first: a copy.
func (l *Log) Epochs() []EpochEntry { return slices.Clone(l.epochList()) }

// LatestEpoch returns the latest epoch of the cache, false when it is empty
// (an empty log, or one whose batches carry no epoch).
func (l *Log) LatestEpoch() (int32, bool) {
	es := l.epochList()
	if len(es) == 0 {
		return UndefinedEpoch, false
	}
	return es[len(es)-1].Epoch, true
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch for epoch as Kafka 3.8's
// LeaderEpochFileCache.endOffsetFor does, with the log end at EndOffset:
//
//	the latest epoch                  (epoch, log end)
//	an older epoch                    (largest cached epoch <= epoch, start offset of the next cached epoch)
//	below every cached epoch          (epoch, start offset of the first cached epoch)
//	above the latest, negative        (UndefinedEpoch, UndefinedOffset)
//	(UNDEFINED_EPOCH), or empty cache
//
// It takes no lock. The log end is read before the cache, so that an append
// of a new epoch racing with the call never makes an older epoch seem to
// end past that epoch's records; a truncation racing with it may give the
// answer of the log before the cut.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	end := l.EndOffset()
	return endOffsetFor(l.epochList(), epoch, end)
}

func (l *Log) epochList() []EpochEntry {
	if p := l.epochs.Load(); p != nil {
		return *p
	}
	return nil
}

// AssignEpoch records that leader epoch epoch starts at startOffset, what a
// new leader does before appending any record of its epoch (Kafka's
// makeLeader, which passes the log end). An epoch above the latest is added
// (replacing the latest entry if that starts at startOffset too: it has no
// records); startOffset must lie between the latest entry's start (and the
// log start) and the log end, else ErrOffsetOutOfRange; a start below the
// log end claims records of older epochs for this one, which the batches
// then contradict (the next Open rebuilds the cache from them). The latest
// epoch is a no-op; an older one is ErrStaleEpoch; a negative one an error. The
// checkpoint is durable before it returns; a failure to write it fails the
// log (ErrFailed), leaving the cache as it was. A closed log is ErrClosed, a
// failed one returns its error.
func (l *Log) AssignEpoch(epoch int32, startOffset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.Err(); err != nil {
		return err
	}
	if epoch < 0 {
		return fmt.Errorf("partlog: assign negative leader epoch %d", epoch)
	}
	es := l.epochList()
	low := l.StartOffset()
	if n := len(es); n > 0 {
		latest := es[n-1]
		switch {
		case epoch == latest.Epoch:
			return nil
		case epoch < latest.Epoch:
			return fmt.Errorf("%w: assign epoch %d, latest is %d", ErrStaleEpoch, epoch, latest.Epoch)
		}
		low = max(low, latest.StartOffset)
	}
	if end := l.end.Load(); startOffset < low || startOffset > end {
		return fmt.Errorf("%w: epoch %d cannot start at %d: not in [%d, %d]", ErrOffsetOutOfRange, epoch, startOffset, low, end)
	}
	next := withEpoch(es, epoch, startOffset)
	if err := l.writeEpochCheckpoint(next); err != nil {
		return l.fail(err)
	}
	l.epochs.Store(&next)
	return nil
}

// endOffsetFor is EndOffsetForEpoch on the cache es and log end logEnd.
func endOffsetFor(es []EpochEntry, epoch int32, logEnd int64) (int32, int64) {
	if epoch < 0 || len(es) == 0 {
		return UndefinedEpoch, UndefinedOffset
	}
	if es[len(es)-1].Epoch == epoch {
		return epoch, logEnd
	}
	higher := sort.Search(len(es), func(i int) bool { return es[i].Epoch > epoch })
	switch higher {
	case len(es):
		return UndefinedEpoch, UndefinedOffset
	case 0:
		return epoch, es[0].StartOffset
	}
	return es[higher-1].Epoch, es[higher].StartOffset
}

// withEpoch returns es with epoch starting at start; epoch is above every
// epoch of es and start at or above its latest start. A latest entry that
// starts at start too is replaced: it has no records (Kafka's assign drops
// it the same way).
func withEpoch(es []EpochEntry, epoch int32, start int64) []EpochEntry {
	n := len(es)
	if n > 0 && es[n-1].StartOffset >= start {
		n--
	}
	out := make([]EpochEntry, n, n+1)
	copy(out, es[:n])
	return append(out, EpochEntry{Epoch: epoch, StartOffset: start})
}

// epochsBelow returns es without the entries that start at or past end
// (Kafka's truncateFromEnd): their records are gone, the first of them too
// when it starts exactly at end.
func epochsBelow(es []EpochEntry, end int64) ([]EpochEntry, bool) {
	n := len(es)
	for n > 0 && es[n-1].StartOffset >= end {
		n--
	}
	return es[:n:n], n != len(es)
}

// epochsFrom returns es for a log starting at start (Kafka's
// truncateFromStart): the entries starting at or below start go, and the
// last of them, which covers start, comes back starting there.
func epochsFrom(es []EpochEntry, start int64) ([]EpochEntry, bool) {
	i := sort.Search(len(es), func(i int) bool { return es[i].StartOffset > start })
	if i == 0 || i == 1 && es[0].StartOffset == start {
		return es, false
	}
	out := make([]EpochEntry, 0, len(es)-i+1)
	out = append(out, EpochEntry{Epoch: es[i-1].Epoch, StartOffset: start})
	return append(out, es[i:]...), true
}

// nextEpochs returns the cache once batches hs (in log order) are appended
// after what es describes, and whether they change it: a batch whose epoch
// is above the latest starts that epoch at its base offset. A batch whose
// epoch is below the latest (or below an earlier batch's) is ErrStaleEpoch.
// Batches with a negative epoch (none from a leader; -1 is what producers
// send) carry no epoch and change nothing.
func nextEpochs(es []EpochEntry, hs []record.Header) ([]EpochEntry, bool, error) {
	changed := false
	for i, h := range hs {
		e := h.PartitionLeaderEpoch
		if e < 0 {
			continue
		}
		if n := len(es); n > 0 {
			if latest := es[n-1].Epoch; e < latest {
				return nil, false, fmt.Errorf("%w: batch %d at offset %d has epoch %d, latest is %d", ErrStaleEpoch, i, h.BaseOffset, e, latest)
			} else if e == latest {
				continue
			}
		}
		es, changed = withEpoch(es, e, h.BaseOffset), true
	}
	return es, changed, nil
}

// The leader-epoch-checkpoint file is Kafka's (LeaderEpochCheckpointFile):
//
//	0                  the format version
//	<n>                the number of entries
//	<epoch> <start>    n lines, oldest epoch first
//
// It is replaced atomically (a temporary file, fsync, rename, fsync of the
// directory) whenever the cache changes.

func encodeEpochs(es []EpochEntry) []byte {
	b := fmt.Appendf(nil, "0\n%d\n", len(es))
	for _, e := range es {
		b = fmt.Appendf(b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b
}

// parseEpochs parses a checkpoint, refusing what the log never writes:
// another version, a count that disagrees with the lines, negative values,
// epochs or start offsets that do not increase.
func parseEpochs(b []byte) ([]EpochEntry, error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "0" {
		return nil, errors.New("not a version 0 leader-epoch checkpoint")
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("count %q with %d entry lines", lines[1], len(lines)-2)
	}
	es := make([]EpochEntry, 0, n)
	for i, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("entry %d: %q", i, line)
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 32)
		start, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return nil, fmt.Errorf("entry %d: %q", i, line)
		}
		if k := len(es); k > 0 && (int32(epoch) <= es[k-1].Epoch || start <= es[k-1].StartOffset) {
			return nil, fmt.Errorf("entry %d (%q) does not follow %d %d", i, line, es[k-1].Epoch, es[k-1].StartOffset)
		}
		es = append(es, EpochEntry{Epoch: int32(epoch), StartOffset: start})
	}
	return es, nil
}

// readEpochCheckpoint reads the checkpoint: present is false when there is
// none; damage says why a file that is there cannot be used (it does not
// parse, or cannot be read: the log rebuilds the cache either way, so an
// I/O error here never keeps the log from opening).
func (l *Log) readEpochCheckpoint() (es []EpochEntry, present bool, damage error) {
	es, present, _, damage = l.readEpochCheckpointSum()
	return es, present, damage
}

// readEpochCheckpointSum is readEpochCheckpoint, with the CRC-32C of the
// file's bytes.
func (l *Log) readEpochCheckpointSum() (es []EpochEntry, present bool, sum uint32, damage error) {
	f, err := l.fs.Open(l.path(epochCheckpointFile))
	if errors.Is(err, errNotExist) {
		return nil, false, 0, nil
	}
	if err != nil {
		return nil, true, 0, err
	}
	defer f.Close()
	b := make([]byte, 256) // a few lines; grown as needed
	var n int
	for {
		m, err := f.ReadAt(b[n:], int64(n))
		n += m
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, true, 0, err
		}
		if n == len(b) {
			if len(b) >= maxEpochFile {
				return nil, true, 0, fmt.Errorf("over %d bytes", maxEpochFile)
			}
			b = append(b, make([]byte, len(b))...)
		}
	}
	es, err = parseEpochs(b[:n])
	return es, true, crc32.Checksum(b[:n], castagnoli), err
}

// castagnoli is the CRC-32C table of the epoch checkpoint's checksum in the
// clean-shutdown marker.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// epochsSum is the CRC-32C of the checkpoint es would be written as.
func epochsSum(es []EpochEntry) uint32 { return crc32.Checksum(encodeEpochs(es), castagnoli) }

// writeEpochCheckpoint replaces the checkpoint with es, durably.
func (l *Log) writeEpochCheckpoint(es []EpochEntry) error {
	tmp := l.path(epochCheckpointFile + ".tmp")
	f, err := l.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("partlog: leader-epoch checkpoint: %w", err)
	}
	_, err = f.Write(encodeEpochs(es))
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err == nil {
		err = l.fs.Rename(tmp, l.path(epochCheckpointFile))
	}
	if err != nil {
		_ = l.fs.Remove(tmp) // best effort: the next write replaces it anyway
		return fmt.Errorf("partlog: leader-epoch checkpoint: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("partlog: leader-epoch checkpoint: %w", err)
	}
	return nil
}
