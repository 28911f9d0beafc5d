package fetchsession

import "time"

// session is one fetch session: its partitions in order (a map for lookup,
// a ring for the order), and its place in the cache.
type session struct {
	id         int32
	privileged bool // a follower's
	created    time.Time
	lastUsed   time.Time
	epoch      int32 // the epoch its next incremental request must carry

	parts map[TopicPartition]*cached
	ring  cached // sentinel: ring.next is the first partition

	// As of the last use (Cache.touch), as Kafka's cachedSize and evictable
	// sets have them.
	size                  int
	evictableByAll        bool
	evictableByPrivileged bool

	lruPrev, lruNext *session // in Cache.lru; nil once removed
}

func newSession(id int32, privileged bool, now time.Time) *session {
	s := &session{id: id, privileged: privileged, created: now, lastUsed: now, epoch: nextEpoch(InitialEpoch),
		parts: make(map[TopicPartition]*cached)}
	s.ring.prev, s.ring.next = &s.ring, &s.ring
	return s
}

func (s *session) len() int { return len(s.parts) }

// cached is a session's partition: what its fetch asks (as of the last
// request naming it) and what was last answered.
type cached struct {
	tp       TopicPartition
	req      PartitionData
	hw       int64 // -1: answer whatever comes next (new, or after an error)
	lso      int64
	logStart int64

	prev, next *cached
}

// add appends a partition at the end of the session's order, as new (one
// already there is replaced: a full request naming it twice).
func (s *session) add(tp TopicPartition, req PartitionData) *cached {
	if old := s.parts[tp]; old != nil {
		s.unlink(old)
	}
	cp := &cached{tp: tp, req: req, hw: -1, lso: -1, logStart: -1}
	s.parts[tp] = cp
	s.pushBack(cp)
	return cp
}

func (s *session) pushBack(cp *cached) {
	cp.prev, cp.next = s.ring.prev, &s.ring
	s.ring.prev.next = cp
	s.ring.prev = cp
}

func (s *session) unlink(cp *cached) {
	cp.prev.next, cp.next.prev = cp.next, cp.prev
	cp.prev, cp.next = nil, nil
}

func (s *session) moveToBack(cp *cached) {
	if s.ring.prev == cp {
		return
	}
	s.unlink(cp)
	s.pushBack(cp)
}

// update applies an incremental request: its partitions are added or
// updated (in request order), then the forgotten ones removed (Kafka's
// FetchSession.update).
func (s *session) update(parts []Partition, forgotten []TopicPartition) {
	for i := range parts {
		p := &parts[i]
		if cp := s.parts[p.TopicPartition]; cp != nil {
			cp.req = p.PartitionData
			continue
		}
		s.add(p.TopicPartition, p.PartitionData)
	}
	for _, tp := range forgotten {
		if cp := s.parts[tp]; cp != nil {
			s.unlink(cp)
			delete(s.parts, tp)
		}
	}
}

// partitions appends the session's partitions, in order, to dst.
func (s *session) partitions(dst []Partition) []Partition {
	for cp := s.ring.next; cp != &s.ring; cp = cp.next {
		dst = append(dst, Partition{TopicPartition: cp.tp, PartitionData: cp.req})
	}
	return dst
}

// less orders sessions by value, least first: consumers' before followers',
// then fewer partitions, then lower ID (Kafka's EvictableKey).
func (s *session) less(o *session) bool {
	switch {
	case s.privileged != o.privileged:
		return !s.privileged
	case s.size != o.size:
		return s.size < o.size
	}
	return s.id < o.id
}

// set records what a full fetch answered.
func (cp *cached) set(r *Result) {
	cp.hw, cp.lso, cp.logStart = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
	if r.Failed {
		cp.hw = -1
	}
}

// mustRespond reports whether an incremental response carries the
// partition, and records what it answers (Kafka's
// CachedPartition.maybeUpdateResponseData).
func (cp *cached) mustRespond(r *Result) bool {
	must := r.Records || r.Failed
	if cp.hw != r.HighWatermark || cp.lso != r.LastStableOffset || cp.logStart != r.LogStartOffset {
		must = true
	}
	cp.hw, cp.lso, cp.logStart = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
	if r.Failed {
		cp.hw = -1 // answered again once the error is gone
	}
	return must
}
