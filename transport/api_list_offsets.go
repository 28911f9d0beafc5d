package transport

// ListOffsets: v0-v6.
//
// librdkafka sends up to v2. v0 answers with a list of offsets
// (OldStyleOffsets); v1+ with one offset and its timestamp; v2 added the
// isolation level (one node has no open transactions, so both levels read
// the same); v4 the leader epoch (always 0); v6 made it flexible. v7 (the
// max-timestamp query) is not served.
//
// Timestamps: -2 is the log start, -1 the log end, anything else the first
// batch holding a record at or after it (offset -1 and timestamp -1 when there
// is none, as in Kafka). The timestamp answered is the batch's first timestamp
// when that qualifies, else its largest: weir indexes batches, not records.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
)

const (
	listEarliest = -2
	listLatest   = -1
)

func handleListOffsets(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset = -1, -1
			p, err := s.topics.Partition(rt.Topic, rp.Partition)
			if err != nil {
				sp.ErrorCode = s.code(err)
				continue
			}
			off, ts, err := listOffset(p.Log, rp.Timestamp)
			if err != nil {
				sp.ErrorCode = s.code(err)
				continue
			}
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, ts, 0
			if req.Version == 0 {
				sp.OldStyleOffsets = []int64{}
				if off >= 0 {
					sp.OldStyleOffsets = append(sp.OldStyleOffsets, off)
				}
			}
		}
	}
	return resp, nil
}

// listOffset answers one partition's query: the offset and its timestamp.
func listOffset(l *partlog.Log, ts int64) (int64, int64, error) {
	switch ts {
	case listEarliest:
		return l.StartOffset(), -1, nil
	case listLatest:
		return l.EndOffset(), -1, nil
	}
	off, ok, err := l.OffsetForTimestamp(ts)
	if err != nil || !ok {
		return -1, -1, err
	}
	// Read the batch's header for the timestamp to answer with.
	sl, err := l.Read(off, record.HeaderSize, partlog.NoLimit)
	if err != nil {
		return off, ts, nil
	}
	defer sl.Release()
	var hdr [record.HeaderSize]byte
	if sl.Size < record.HeaderSize {
		return off, ts, nil
	}
	if _, err := sl.File.ReadAt(hdr[:], sl.Pos); err != nil {
		return off, ts, nil
	}
	h, err := record.ParseHeader(hdr[:])
	switch {
	case err != nil:
		return off, ts, nil
	case h.BaseTimestamp >= ts:
		return off, h.BaseTimestamp, nil
	default:
		return off, h.MaxTimestamp, nil
	}
}
