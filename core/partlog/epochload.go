package partlog

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/segment"
)

// Loading the leader-epoch cache at Open and in a recovery in place; see
// "Leader epochs" in the package doc for the rules.

// loadEpochs publishes the epoch cache of the log load just published
// (l.segs, l.end), from which on load re-read the segments batch by batch:
// the checkpoint's entries below from, checked against the log, then the
// epochs of the batches from there on. A checkpoint that is missing (on a
// log that is not empty), does not parse or disagrees with the log is
// rebuilt from the batches and the reason returned (logged, never an error:
// the log is the truth). The checkpoint is rewritten if it changed, before
// the caller moves the recovery point past anything. err is an I/O error
// reading the log or writing the checkpoint. appendMu held (or the log not
// yet published).
//
// With mark (a clean shutdown's marker, on whose word the segments were
// opened lazily), a checkpoint whose checksum is the one the clean Close
// recorded is what that Close left, consistent with its log then: it is
// believed without reading batches, so that no segment is read at Open.
func (l *Log) loadEpochs(from int64, mark *shutdownMark) (rebuilt, err error) {
	segs := l.segments()
	start, end := segs[0].Base(), l.end.Load()
	file, present, sum, damage := l.readEpochCheckpointSum()
	var es []EpochEntry
	switch {
	case damage != nil:
		damage = fmt.Errorf("leader-epoch checkpoint unreadable: %w", damage)
	case !present && end > start:
		damage = errors.New("no leader-epoch checkpoint")
	case mark != nil && present && sum == mark.epochsSum:
		es = file
	default:
		es, _ = epochsBelow(file, from)
		es, _ = epochsFrom(es, start)
		if es, err = l.epochsOfBatches(segs, es, from); err != nil {
			return nil, err
		}
		es, _ = epochsBelow(es, end)
		var bad error
		if bad, err = l.checkEpochs(segs, es); err != nil {
			return nil, err
		}
		if bad != nil {
			damage = fmt.Errorf("leader-epoch checkpoint disagrees with the log: %w", bad)
		}
	}
	if damage != nil {
		if es, err = l.rebuildEpochs(segs); err != nil {
			return nil, err
		}
		l.cfg.Logger.Warn("partition log: leader-epoch cache rebuilt from the log", "dir", l.dir, "cause", damage,
			"epochs", len(es))
	}
	if damage != nil || present && !slices.Equal(es, file) {
		if err := l.writeEpochCheckpoint(es); err != nil {
			return damage, err // nothing moved: the next load reads the old file again
		}
	}
	l.epochs.Store(&es)
	return damage, nil
}

// epochsOfBatches returns es followed by the epochs the batches of the
// segments from offset from on start (from is a segment's base, or the log
// end).
func (l *Log) epochsOfBatches(segs []*segment.Segment, es []EpochEntry, from int64) ([]EpochEntry, error) {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].Base() >= from })
	for _, s := range segs[i:] {
		err := s.Headers(func(_ int64, h record.Header) bool {
			if e := h.PartitionLeaderEpoch; e >= 0 && (len(es) == 0 || e > es[len(es)-1].Epoch) {
				es = withEpoch(es, e, h.BaseOffset)
			}
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("partlog: leader epochs: %w", err)
		}
	}
	return es, nil
}

// rebuildEpochs derives the cache from the batches alone. Epochs never go
// down along a log, so when its first and last batch carry the same epoch
// every batch does (all the logs weir wrote before it kept epochs carry 0),
// and two header reads do; otherwise every header is read.
func (l *Log) rebuildEpochs(segs []*segment.Segment) ([]EpochEntry, error) {
	start, end := segs[0].Base(), l.end.Load()
	if start == end {
		return nil, nil
	}
	first, err := headerAt(segs, start)
	if err != nil {
		return nil, err
	}
	last, err := headerAt(segs, end-1)
	if err != nil {
		return nil, err
	}
	if e := first.PartitionLeaderEpoch; e >= 0 && e == last.PartitionLeaderEpoch {
		return []EpochEntry{{Epoch: e, StartOffset: start}}, nil
	}
	return l.epochsOfBatches(segs, nil, start)
}

// checkEpochs reports (bad) where es disagrees with the batches at its
// entries' edges: the batch at each entry's start must begin there and carry
// its epoch, the batch before it the previous entry's epoch (none before the
// first entry), and the log's last batch the latest epoch; a batch with no
// epoch (negative) matches anything. It reads two headers per entry, not the
// log; what lies between the edges is the checkpoint's word, which every
// append kept (see the package doc). err is an I/O error.
func (l *Log) checkEpochs(segs []*segment.Segment, es []EpochEntry) (bad, err error) {
	start, end := segs[0].Base(), l.end.Load()
	if start == end {
		return nil, nil
	}
	prev := UndefinedEpoch // the epoch of the entry before, none before the first
	matches := func(h record.Header, e int32) bool { return h.PartitionLeaderEpoch < 0 || h.PartitionLeaderEpoch == e }
	for _, e := range es {
		h, err := headerAt(segs, e.StartOffset)
		if err != nil {
			return nil, err
		}
		if h.BaseOffset != e.StartOffset || h.PartitionLeaderEpoch != e.Epoch {
			return fmt.Errorf("epoch %d starts at %d, where the log has a batch of epoch %d at %d",
				e.Epoch, e.StartOffset, h.PartitionLeaderEpoch, h.BaseOffset), nil
		}
		if e.StartOffset > start {
			if h, err = headerAt(segs, e.StartOffset-1); err != nil {
				return nil, err
			}
			if !matches(h, prev) {
				return fmt.Errorf("the batch before epoch %d's start %d has epoch %d, the entry before says %d",
					e.Epoch, e.StartOffset, h.PartitionLeaderEpoch, prev), nil
			}
		}
		prev = e.Epoch
	}
	h, err := headerAt(segs, end-1)
	if err != nil {
		return nil, err
	}
	if !matches(h, prev) {
		return fmt.Errorf("the last batch has epoch %d, the latest entry says %d", h.PartitionLeaderEpoch, prev), nil
	}
	if len(es) == 0 {
		if h, err = headerAt(segs, start); err != nil {
			return nil, err
		}
		if !matches(h, prev) {
			return fmt.Errorf("the first batch has epoch %d, the cache none", h.PartitionLeaderEpoch), nil
		}
	}
	return nil, nil
}

// headerAt reads the header of the batch holding offset off, which lies
// inside the log segs make up.
func headerAt(segs []*segment.Segment, off int64) (record.Header, error) {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].Base() > off }) - 1
	if i < 0 {
		return record.Header{}, fmt.Errorf("partlog: offset %d below the log", off)
	}
	sl, err := segs[i].Read(off, 1, NoLimit)
	if err != nil {
		return record.Header{}, fmt.Errorf("partlog: read the batch at %d: %w", off, err)
	}
	defer sl.Release()
	var b [record.HeaderSize]byte
	if n, err := sl.File.ReadAt(b[:], sl.Pos); n != len(b) {
		return record.Header{}, fmt.Errorf("partlog: read the batch at %d: %w", off, errors.Join(err, errShortHeader))
	}
	return record.ParseHeader(b[:])
}

var errShortHeader = errors.New("short batch header")
