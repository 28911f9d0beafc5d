package mirror

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// OffsetSync says that the source record at Upstream in Topic/Partition was
// written to the target partition at Downstream. In the offset-syncs topic
// a sync is a record keyed "topic/partition" whose value is the JSON of
// this struct, so `weir consume` shows them readably.
type OffsetSync struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Upstream   int64  `json:"upstream"`
	Downstream int64  `json:"downstream"`
}

func (s OffsetSync) key() []byte {
	return []byte(s.Topic + "/" + strconv.FormatInt(int64(s.Partition), 10))
}

func (s OffsetSync) value() []byte {
	b, _ := json.Marshal(s) // cannot fail: strings and integers
	return b
}

// parseSync decodes a record of the offset-syncs topic.
func parseSync(key, value []byte) (OffsetSync, error) {
	var s OffsetSync
	if err := json.Unmarshal(value, &s); err != nil {
		return s, fmt.Errorf("offset sync %q: %w", key, err)
	}
	if s.Topic == "" || s.Partition < 0 || s.Upstream < 0 || s.Downstream < 0 || !strings.HasPrefix(string(key), s.Topic+"/") {
		return s, fmt.Errorf("offset sync %q: bad value %s", key, value)
	}
	return s, nil
}

// SyncStore holds the offset syncs read from the target and translates
// source offsets with them. The zero value is empty and ready.
type SyncStore struct {
	syncs map[topicPartition][]OffsetSync
}

type topicPartition struct {
	topic     string
	partition int32
}

// Add adds a sync (in the order they were written, though Translate does
// not depend on it).
func (st *SyncStore) Add(s OffsetSync) {
	if st.syncs == nil {
		st.syncs = make(map[topicPartition][]OffsetSync)
	}
	tp := topicPartition{s.Topic, s.Partition}
	st.syncs[tp] = append(st.syncs[tp], s)
}

// Len is the number of syncs held.
func (st *SyncStore) Len() int {
	n := 0
	for _, ss := range st.syncs {
		n += len(ss)
	}
	return n
}

// Translate returns the target offset a consumer that committed source
// offset g in topic/partition (the next record it would read) may start
// at without skipping a record: the downstream offset of the sync with the
// largest upstream offset u <= g (the largest downstream among equals,
// the later run), plus one when u < g (MirrorMaker 2's rule). It reports
// false when no sync is at or below g; a consumer then has to start from
// the target's beginning.
func (st *SyncStore) Translate(topic string, partition int32, g int64) (int64, bool) {
	var best OffsetSync
	found := false
	for _, s := range st.syncs[topicPartition{topic, partition}] {
		if s.Upstream > g {
			continue
		}
		if !found || s.Upstream > best.Upstream || (s.Upstream == best.Upstream && s.Downstream > best.Downstream) {
			best, found = s, true
		}
	}
	if !found {
		return 0, false
	}
	if best.Upstream == g {
		return best.Downstream, true
	}
	return best.Downstream + 1, true
}

// Partitions lists the partitions with syncs, sorted.
func (st *SyncStore) Partitions() []OffsetSync {
	var out []OffsetSync
	for tp := range st.syncs {
		out = append(out, OffsetSync{Topic: tp.topic, Partition: tp.partition})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
