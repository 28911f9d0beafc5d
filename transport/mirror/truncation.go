package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The record path after the source's log was truncated below the mirror's
// position P (an unclean leader election on the source).
//
// kgo moves its consumer back on its own, and below P: after an
// OFFSET_OUT_OF_RANGE it resets per ConsumeResetOffset (the log start,
// reported as an ErrDataLoss if it had consumed the partition, silently if
// not, as after a restart at a committed P), and its KIP-320 validation
// after a leader change resets to the end of the last consumed record's
// epoch with an ErrDataLoss. The tracker would pass over every record
// below what it accepted, so the records the source writes at [new log
// end, P) after the truncation would never be copied. Instead, kgo's move
// is only the sign (an ErrDataLoss resetting below the records accepted,
// or a record below them, which kgo returns for no other reason: its
// fetches never go below where it was set): the partition stops accepting
// (tracker.truncate) and fetching, and once what it sent is settled, the
// mirror moves it back as the --forward path does (resetOffsets): to
// min(D, P), where D is the source's end offset of the leader epoch of the
// last record copied (OffsetForLeaderEpoch), or to the source's log start
// when that epoch is unknown (nothing copied since the mirror started or
// moved the partition back) or the source does not know it; re-copied records are
// at-least-once's duplicates, never a loss. With D at least P (kgo moved
// for no loss) the partition resumes at P.

// sourceTruncated handles a sign that kgo moved tr's consumer to source
// offset to, below the records tr accepted (cause: kgo's ErrDataLoss; nil
// for a record returned below them, after kgo's silent reset): it counts
// and logs it as a fetch error, once per truncation, and pauses the
// partition. It reports false when to is not below them (no truncation to
// handle). Loop only.
func (m *Mirror) sourceTruncated(tr *tracker, to int64, cause error) bool {
	tr.mu.Lock()
	pos := tr.expect
	if !tr.truncate(to) {
		tr.mu.Unlock()
		return false
	}
	if cause == nil {
		cause = belowPosition(to)
	}
	tr.fetchErrors++
	tr.lastErr = fmt.Errorf("%s/%d: fetch at %d: %w", tr.topic, tr.partition, pos, cause)
	tr.lastErrAt = time.Now()
	tr.mu.Unlock()
	m.log.Warn("mirror: the source consumer moved back below the mirror's position (the source's log truncated, "+
		"e.g. by an unclean leader election?); moving back to where the source's log diverged",
		"topic", tr.topic, "partition", tr.partition, "offset", pos, "client_moved_to", to, "err", cause)
	if !m.paused[tr] {
		m.paused[tr] = true
		m.src.PauseFetchPartitions(map[string][]int32{tr.topic: {tr.partition}})
	}
	return true
}

// belowPosition is the cause of a record returned below the records
// accepted, with no ErrDataLoss before it: kgo's silent reset after an
// OFFSET_OUT_OF_RANGE with nothing consumed.
func belowPosition(to int64) error {
	return fmt.Errorf("%w (the client moved back to %d: the source's log ends below the position)", kerr.OffsetOutOfRange, to)
}

// resetTruncated moves the truncated partitions (sourceTruncated) whose
// records sent are settled back to where the source's log diverged from
// what was copied, their positions with them, and resumes their fetching.
// A listing that fails leaves them paused, asked again next time. Loop
// only.
func (m *Mirror) resetTruncated(ctx context.Context) {
	type due struct {
		tr    *tracker
		pos   int64
		epoch int32
	}
	var dues []due
	var topics []string
	var epochs kadm.OffsetForLeaderEpochRequest
	for _, tr := range m.trackers() {
		tr.mu.Lock()
		pos, epoch, ok := tr.resetDue()
		tr.mu.Unlock()
		if !ok {
			continue
		}
		dues = append(dues, due{tr, pos, epoch})
		if !slices.Contains(topics, tr.topic) {
			topics = append(topics, tr.topic)
		}
		if epoch >= 0 {
			epochs.Add(tr.topic, tr.partition, epoch)
		}
	}
	if len(dues) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	starts, err := m.srcAdm.ListStartOffsets(rctx, topics...)
	var ends kadm.OffsetsForLeaderEpochs
	if len(epochs) > 0 {
		var eerr error
		ends, eerr = m.srcAdm.OffsetForLeaderEpoch(rctx, epochs)
		if eerr != nil {
			err = errors.Join(err, fmt.Errorf("OffsetForLeaderEpoch: %w", eerr))
		}
	}
	rewind := map[string]map[int32]kgo.EpochOffset{}
	resume := map[string][]int32{}
	for _, d := range dues {
		tr := d.tr
		o, ok := starts.Lookup(tr.topic, tr.partition)
		if !ok || o.Err != nil || o.Offset < 0 {
			if err == nil && o.Err != nil {
				err = fmt.Errorf("%s/%d: %w", tr.topic, tr.partition, o.Err)
			}
			continue
		}
		epochEnd := int64(-1)
		if d.epoch >= 0 {
			e, ok := ends[tr.topic][tr.partition]
			if !ok {
				continue // not answered: asked again next time
			}
			if e.Err == nil {
				epochEnd = e.EndOffset
			}
		}
		at, from := resumeOffset(d.pos, o.Offset, epochEnd)
		tr.mu.Lock()
		if pos, _, ok := tr.resetDue(); !ok || pos != d.pos { // cannot change while truncated and settled; checked all the same
			tr.mu.Unlock()
			continue
		}
		tr.resetTo(at)
		if from == "divergence" {
			// The record before the resume offset is in the asked
			// epoch or an earlier one: asking for it again finds the
			// same divergence.
			tr.epoch = d.epoch
		}
		tr.mu.Unlock()
		m.log.Warn("mirror: source log truncated below the mirror's position; resuming where it diverged",
			"topic", tr.topic, "partition", tr.partition, "position", d.pos, "resume_offset", at,
			"leader_epoch", d.epoch, "from", from)
		if rewind[tr.topic] == nil {
			rewind[tr.topic] = map[int32]kgo.EpochOffset{}
		}
		rewind[tr.topic][tr.partition] = kgo.EpochOffset{Epoch: -1, Offset: at}
		if m.paused[tr] {
			resume[tr.topic] = append(resume[tr.topic], tr.partition)
			delete(m.paused, tr)
		}
	}
	if len(rewind) > 0 {
		m.src.SetOffsets(rewind)
	}
	if len(resume) > 0 {
		m.src.ResumeFetchPartitions(resume)
	}
	switch {
	case err == nil:
		m.truncErr = ""
	case ctx.Err() == nil && err.Error() != m.truncErr:
		m.truncErr = err.Error()
		m.log.Warn("mirror: locating where a truncated source's log diverged failed, retrying", "err", err)
	}
}

// resumeOffset is where a partition truncated below its position pos
// resumes: min(D, pos), where D is epochEnd, the source's end offset of
// the leader epoch of the record before pos (-1 if unknown, or the
// source did not know the epoch), never below the source's log start; the
// log start when D is unknown. from says which.
func resumeOffset(pos, logStart, epochEnd int64) (at int64, from string) {
	if epochEnd < 0 {
		return logStart, "log_start"
	}
	return max(min(epochEnd, pos), logStart), "divergence"
}
