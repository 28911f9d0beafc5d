// Package fetchsession is Kafka's incremental fetch sessions (KIP-227,
// Fetch v7+) as a deterministic value: a bounded cache of sessions, driven
// by requests and explicit times, with no goroutines, clocks or locks (the
// caller serialises calls). The transport reads the partitions it is told
// to and hands back what it read; the cache says which partitions the
// response must carry and with which session ID.
//
// # Why
//
// A consumer of thousands of partitions sends them all in every Fetch, and
// gets them all back, most with nothing new: O(partitions) bytes each way
// per round trip. With a session the broker remembers the partitions (and
// each one's fetch offset, max bytes, leader epoch and log start): the
// client sends only what changed and the broker answers only partitions
// with something to report.
//
// # Rules (Kafka's FetchSession.scala)
//
// The request's session ID and epoch decide:
//
//	ID 0, epoch -1 (FinalEpoch)     sessionless full fetch (Fetch v4-v6 always)
//	any ID, epoch 0 (InitialEpoch)  full fetch creating a session: a session
//	                                named by a non-zero ID is closed first;
//	                                the response carries the new ID (0 when
//	                                the cache has no room) and every partition
//	ID != 0, epoch -1               close the session; a sessionless full fetch
//	ID != 0, other epoch            incremental: the session must exist
//	                                (ErrSessionNotFound) and expect this epoch
//	                                (ErrInvalidEpoch); its next epoch is one more
//	ID 0, other epoch               ErrSessionNotFound
//
// An incremental request's partitions are added to the session, or update
// the session's (fetch offset, max bytes, log start offset, current leader
// epoch); then its forgotten partitions are removed. A session left empty
// is closed and the request answered as sessionless. Otherwise every
// partition of the session is read, in the session's order, and the
// response carries those with something to report: records, an error, or
// a high watermark, last stable offset or log start offset other than the
// last one answered. A partition with an error forgets its high watermark,
// so it is answered again once the error is gone. The partitions answered
// move to the end of the session's order, so that under the response's
// byte limit the others get their turn next time (as in Kafka).
//
// A session error (unknown ID, wrong epoch) answers with the error, no
// partitions and session ID 0, and leaves the session as it was.
//
// # The cache
//
// At most Config.Slots sessions (Kafka's
// max.incremental.fetch.session.cache.slots, 1000). A new session takes a
// free slot, or evicts, as Kafka's FetchSessionCache.tryEvict does:
//
//  1. the least recently used session, if it has been unused for longer
//     than Config.EvictionAge (min.incremental.fetch.session.eviction.ms,
//     2 min); else
//  2. the least valuable evictable session, if the new one is worth more:
//     a follower's (privileged) session is worth more than a consumer's,
//     then more partitions are worth more (a tie keeps the old session).
//     A session is evictable once it is older than EvictionAge; a
//     consumer's session may be evicted by a follower's at any age. Both
//     are judged as of the session's last use, and its size as of then.
//
// Otherwise no session is created (the response says ID 0 and the client
// goes on with full requests). Eviction scans the sessions (at most Slots);
// everything else costs O(1) per partition named.
package fetchsession

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Session IDs and epochs with a protocol meaning.
const (
	// InvalidID is "no session".
	InvalidID int32 = 0
	// InitialEpoch asks for a new session (a full fetch).
	InitialEpoch int32 = 0
	// FinalEpoch closes the session, or asks for none.
	FinalEpoch int32 = -1
)

var (
	// ErrSessionNotFound: an incremental fetch names a session the cache
	// does not hold (Kafka FETCH_SESSION_ID_NOT_FOUND).
	ErrSessionNotFound = errors.New("fetchsession: fetch session ID not found")
	// ErrInvalidEpoch: an incremental fetch's epoch is not the one its
	// session expects (Kafka INVALID_FETCH_SESSION_EPOCH).
	ErrInvalidEpoch = errors.New("fetchsession: invalid fetch session epoch")
)

// Defaults of Config.
const (
	DefaultSlots       = 1000            // max.incremental.fetch.session.cache.slots
	DefaultEvictionAge = 2 * time.Minute // min.incremental.fetch.session.eviction.ms
)

// Config configures a Cache. The zero value is valid.
type Config struct {
	// Slots is the most sessions held. Default DefaultSlots (1000);
	// negative: none (every full fetch is answered with session ID 0,
	// which tells clients to send full requests).
	Slots int
	// EvictionAge: a session unused this long may be evicted by a new one,
	// and one created this long ago may be evicted by a more valuable one.
	// Default DefaultEvictionAge (2 min).
	EvictionAge time.Duration
	// Rand draws session IDs. Default: a generator seeded from
	// crypto/rand, so that a restarted broker does not hand out the IDs
	// its clients still remember.
	Rand rand.Source
}

func (c *Config) validate() error {
	switch {
	case c.Slots == 0:
		c.Slots = DefaultSlots
	case c.Slots < 0:
		c.Slots = 0
	}
	switch {
	case c.EvictionAge == 0:
		c.EvictionAge = DefaultEvictionAge
	case c.EvictionAge < 0:
		return fmt.Errorf("fetchsession: EvictionAge %v is negative", c.EvictionAge)
	}
	if c.Rand == nil {
		var seed [16]byte
		_, _ = crand.Read(seed[:]) // never fails (Go 1.24+)
		c.Rand = rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:]))
	}
	return nil
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// PartitionData is what a fetch asks of one partition.
type PartitionData struct {
	FetchOffset        int64
	LogStartOffset     int64 // the follower's log start; -1 from consumers
	MaxBytes           int32
	CurrentLeaderEpoch int32 // -1: not checked
}

// Partition is one partition of a request, or of a session.
type Partition struct {
	TopicPartition
	PartitionData
}

// Request is the session part of a Fetch request.
type Request struct {
	SessionID int32
	Epoch     int32
	// Follower: a broker's fetch (ReplicaID >= 0); its session is
	// privileged.
	Follower   bool
	Partitions []Partition // in request order
	Forgotten  []TopicPartition
}

// Kind says what a request is, once the cache has seen it.
type Kind uint8

const (
	// Sessionless: a full fetch with no session (answered with ID 0).
	Sessionless Kind = iota
	// Full: a full fetch that asks for a session, created when answered.
	Full
	// Incremental: a fetch in an existing session.
	Incremental
	// Failed: a session error (Context.Err), answered with no partitions.
	Failed
)

func (k Kind) String() string {
	switch k {
	case Sessionless:
		return "sessionless"
	case Full:
		return "full"
	case Incremental:
		return "incremental"
	case Failed:
		return "error"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Context is one request's view of its session, from NewContext to Respond.
type Context struct {
	Kind Kind
	// Err is ErrSessionNotFound or ErrInvalidEpoch when Kind is Failed.
	Err error
	// Partitions are what to read, in this order: the request's for a full
	// or sessionless fetch (the request's slice itself), every partition of
	// the session for an incremental one (a copy). Empty when Failed.
	Partitions []Partition
	// Closed is the ID of a session the request closed, or InvalidID.
	Closed int32

	req   *Request
	sess  *session
	epoch int32 // an incremental request's epoch
}

// Result is what was read of one partition, for Respond.
type Result struct {
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	Records          bool // the response carries records for it
	Failed           bool // the response carries an error code for it
}

// Stats is the cache's state, for metrics.
type Stats struct {
	Sessions   int   // sessions held
	Partitions int   // partitions of those sessions, as of each one's last use
	Evictions  int64 // sessions evicted to make room, ever
}

// Cache holds the sessions. It is a value driven by its callers: not safe
// for concurrent use.
type Cache struct {
	cfg      Config
	sessions map[int32]*session
	lru      session // sentinel of the ring of sessions, least recently used first
	parts    int     // sum of the sessions' size
	evicted  int64
}

// New returns an empty cache.
func New(cfg Config) (*Cache, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Cache{cfg: cfg, sessions: make(map[int32]*session)}
	c.lru.lruPrev, c.lru.lruNext = &c.lru, &c.lru
	return c, nil
}

// Stats returns the cache's counts.
func (c *Cache) Stats() Stats {
	return Stats{Sessions: len(c.sessions), Partitions: c.parts, Evictions: c.evicted}
}

// NewContext applies a request to the cache at time now (Kafka's
// FetchManager.newContext): it closes the session a full request names,
// or checks and updates the incremental request's session, moving it to
// its next epoch and marking it used. The request must stay unchanged
// until Respond.
func (c *Cache) NewContext(now time.Time, req *Request) *Context {
	ctx := &Context{req: req}
	if req.Epoch == InitialEpoch || req.Epoch == FinalEpoch {
		if req.SessionID != InvalidID {
			if s := c.sessions[req.SessionID]; s != nil {
				c.remove(s)
				ctx.Closed = s.id
			}
		}
		ctx.Kind, ctx.Partitions = Full, req.Partitions
		if req.Epoch == FinalEpoch {
			ctx.Kind = Sessionless
		}
		return ctx
	}
	s := c.sessions[req.SessionID]
	switch {
	case s == nil:
		ctx.Kind, ctx.Err = Failed, fmt.Errorf("%w: %d", ErrSessionNotFound, req.SessionID)
		return ctx
	case s.epoch != req.Epoch:
		ctx.Kind, ctx.Err = Failed, fmt.Errorf("%w: session %d expects epoch %d, the request says %d",
			ErrInvalidEpoch, s.id, s.epoch, req.Epoch)
		return ctx
	}
	s.update(req.Partitions, req.Forgotten)
	if s.len() == 0 {
		c.remove(s)
		ctx.Kind, ctx.Partitions, ctx.Closed = Sessionless, req.Partitions, s.id
		return ctx
	}
	c.touch(s, now)
	s.epoch = nextEpoch(s.epoch)
	ctx.Kind, ctx.sess, ctx.epoch = Incremental, s, req.Epoch
	ctx.Partitions = s.partitions(make([]Partition, 0, s.len()))
	return ctx
}

// Respond takes what was read of ctx.Partitions (results[i] for
// Partitions[i]) at time now, and returns the session ID to answer with
// and the indexes, in order, of the partitions the response carries: all
// of them unless the fetch is incremental. A full fetch creates its
// session here, if the cache has room or can evict (ID 0 otherwise). An
// incremental fetch whose session moved on meanwhile (a concurrent request
// in the same session, or an eviction) gets ErrInvalidEpoch (answer no
// partitions).
func (c *Cache) Respond(now time.Time, ctx *Context, results []Result) (int32, []int, error) {
	if len(results) != len(ctx.Partitions) {
		panic(fmt.Sprintf("fetchsession: %d results for %d partitions", len(results), len(ctx.Partitions)))
	}
	switch ctx.Kind {
	case Failed:
		return InvalidID, nil, ctx.Err
	case Sessionless:
		return InvalidID, all(len(results)), nil
	case Full:
		return c.create(now, ctx, results), all(len(results)), nil
	}
	// A session evicted meanwhile is still answered from (as in Kafka):
	// its next request finds it gone.
	s := ctx.sess
	if s.epoch != nextEpoch(ctx.epoch) {
		return InvalidID, nil, fmt.Errorf("%w: session %d moved on to epoch %d while epoch %d was served",
			ErrInvalidEpoch, s.id, s.epoch, ctx.epoch)
	}
	var include []int
	var answered []*cached
	for i := range results {
		cp := s.parts[ctx.Partitions[i].TopicPartition]
		if cp == nil {
			continue // cannot happen: the session changes only under its next epoch
		}
		if cp.mustRespond(&results[i]) {
			include = append(include, i)
			answered = append(answered, cp)
		}
	}
	for _, cp := range answered {
		s.moveToBack(cp)
	}
	return s.id, include, nil
}

func all(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// create makes a full fetch's session, if there is room (Kafka's
// maybeCreateSession), and returns its ID, or InvalidID.
func (c *Cache) create(now time.Time, ctx *Context, results []Result) int32 {
	req := ctx.req
	size := len(req.Partitions)
	if len(c.sessions) >= c.cfg.Slots && !c.evict(now, req.Follower, size) {
		return InvalidID
	}
	s := newSession(c.newID(), req.Follower, now)
	for i := range req.Partitions {
		p := &req.Partitions[i]
		cp := s.add(p.TopicPartition, p.PartitionData)
		cp.set(&results[i])
	}
	c.sessions[s.id] = s
	c.touch(s, now)
	return s.id
}

// newID draws an unused positive ID.
func (c *Cache) newID() int32 {
	for {
		id := int32(c.cfg.Rand.Uint64() & 0x7fffffff)
		if id != InvalidID && c.sessions[id] == nil {
			return id
		}
	}
}

// evict makes room for a new session of size partitions, privileged when a
// follower's, and reports whether it did (see the package doc).
func (c *Cache) evict(now time.Time, privileged bool, size int) bool {
	if lru := c.lru.lruNext; lru != &c.lru && now.Sub(lru.lastUsed) > c.cfg.EvictionAge {
		c.remove(lru)
		c.evicted++
		return true
	}
	var victim *session
	for s := c.lru.lruNext; s != &c.lru; s = s.lruNext {
		if !s.evictableByAll && (!privileged || !s.evictableByPrivileged) {
			continue // not evictable by this session
		}
		if victim == nil || s.less(victim) {
			victim = s
		}
	}
	// Kafka compares (privileged, size, id) with the new key's id 0: a
	// session of equal privilege and size is never evicted.
	if victim == nil || !victimWorthLess(victim, privileged, size) {
		return false
	}
	c.remove(victim)
	c.evicted++
	return true
}

func victimWorthLess(v *session, privileged bool, size int) bool {
	if v.privileged != privileged {
		return privileged
	}
	return v.size < size
}

// remove forgets a session.
func (c *Cache) remove(s *session) {
	delete(c.sessions, s.id)
	s.lruPrev.lruNext, s.lruNext.lruPrev = s.lruNext, s.lruPrev
	s.lruPrev, s.lruNext = nil, nil
	c.parts -= s.size
}

// touch marks s used at now: most recently used, its size recounted.
func (c *Cache) touch(s *session, now time.Time) {
	if s.lruNext != nil {
		s.lruPrev.lruNext, s.lruNext.lruPrev = s.lruNext, s.lruPrev
	}
	s.lruPrev, s.lruNext = c.lru.lruPrev, &c.lru
	c.lru.lruPrev.lruNext = s
	c.lru.lruPrev = s
	s.lastUsed = now
	c.parts += s.len() - s.size
	s.size = s.len()
	// As in Kafka, what may evict a session is decided when it is used.
	old := now.Sub(s.created) > c.cfg.EvictionAge
	s.evictableByAll = old
	s.evictableByPrivileged = old || !s.privileged
}

// nextEpoch is Kafka's FetchMetadata.nextEpoch.
func nextEpoch(e int32) int32 {
	switch {
	case e < 0:
		return FinalEpoch
	case e == 1<<31-1:
		return 1
	}
	return e + 1
}
