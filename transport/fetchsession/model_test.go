package fetchsession

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// model is the cache written the plainest way: a slice of sessions, each
// partitions in a slice, eviction by sorting. The randomized test drives it
// and the Cache with the same requests and compares every answer.
type model struct {
	slots     int
	age       time.Duration
	ids       *rand.PCG
	sessions  []*mSession
	evictions int64
	uses      int // a counter: the order sessions were last used in
}

type mSession struct {
	id                int32
	privileged        bool
	created, lastUsed time.Time
	used              int
	epoch             int32
	parts             []mPart
	size              int
	byAll, byPriv     bool
}

type mPart struct {
	tp           TopicPartition
	req          PartitionData
	hw, lso, lst int64
}

type mContext struct {
	kind   Kind
	err    error
	parts  []Partition
	closed int32
	req    *Request
	s      *mSession
	epoch  int32
}

func (m *model) find(id int32) *mSession {
	for _, s := range m.sessions {
		if s.id == id {
			return s
		}
	}
	return nil
}

func (m *model) remove(s *mSession) {
	m.sessions = slices.DeleteFunc(m.sessions, func(o *mSession) bool { return o == s })
}

func (m *model) touch(s *mSession, now time.Time) {
	m.uses++
	s.lastUsed, s.used, s.size = now, m.uses, len(s.parts)
	old := now.Sub(s.created) > m.age
	s.byAll, s.byPriv = old, old || !s.privileged
}

func (m *model) newContext(now time.Time, req *Request) *mContext {
	ctx := &mContext{req: req}
	if req.Epoch == 0 || req.Epoch == -1 {
		if s := m.find(req.SessionID); req.SessionID != 0 && s != nil {
			m.remove(s)
			ctx.closed = s.id
		}
		ctx.kind, ctx.parts = Full, req.Partitions
		if req.Epoch == -1 {
			ctx.kind = Sessionless
		}
		return ctx
	}
	s := m.find(req.SessionID)
	if s == nil {
		ctx.kind, ctx.err = Failed, ErrSessionNotFound
		return ctx
	}
	if s.epoch != req.Epoch {
		ctx.kind, ctx.err = Failed, ErrInvalidEpoch
		return ctx
	}
	for _, p := range req.Partitions {
		i := slices.IndexFunc(s.parts, func(mp mPart) bool { return mp.tp == p.TopicPartition })
		if i >= 0 {
			s.parts[i].req = p.PartitionData
		} else {
			s.parts = append(s.parts, mPart{tp: p.TopicPartition, req: p.PartitionData, hw: -1, lso: -1, lst: -1})
		}
	}
	for _, f := range req.Forgotten {
		s.parts = slices.DeleteFunc(s.parts, func(mp mPart) bool { return mp.tp == f })
	}
	if len(s.parts) == 0 {
		m.remove(s)
		ctx.kind, ctx.parts, ctx.closed = Sessionless, req.Partitions, s.id
		return ctx
	}
	m.touch(s, now)
	s.epoch = nextEpoch(s.epoch)
	ctx.kind, ctx.s, ctx.epoch = Incremental, s, req.Epoch
	for _, mp := range s.parts {
		ctx.parts = append(ctx.parts, Partition{mp.tp, mp.req})
	}
	return ctx
}

func (m *model) respond(now time.Time, ctx *mContext, res []Result) (int32, []int, error) {
	switch ctx.kind {
	case Failed:
		return 0, nil, ctx.err
	case Sessionless:
		return 0, all(len(res)), nil
	case Full:
		if len(m.sessions) >= m.slots && !m.evict(now, ctx.req.Follower, len(ctx.req.Partitions)) {
			return 0, all(len(res)), nil
		}
		var id int32
		for id == 0 || m.find(id) != nil {
			id = int32(m.ids.Uint64() & 0x7fffffff)
		}
		s := &mSession{id: id, privileged: ctx.req.Follower, created: now, epoch: 1}
		for i, p := range ctx.req.Partitions {
			if j := slices.IndexFunc(s.parts, func(mp mPart) bool { return mp.tp == p.TopicPartition }); j >= 0 {
				s.parts = slices.Delete(s.parts, j, j+1) // a repeat: the last one counts, at the end
			}
			mp := mPart{tp: p.TopicPartition, req: p.PartitionData, hw: res[i].HighWatermark, lso: res[i].LastStableOffset, lst: res[i].LogStartOffset}
			if res[i].Failed {
				mp.hw = -1
			}
			s.parts = append(s.parts, mp)
		}
		m.sessions = append(m.sessions, s)
		m.touch(s, now)
		return id, all(len(res)), nil
	}
	s := ctx.s
	if s.epoch != nextEpoch(ctx.epoch) {
		return 0, nil, ErrInvalidEpoch
	}
	var include []int
	var moved []mPart
	for i, r := range res {
		j := slices.IndexFunc(s.parts, func(mp mPart) bool { return mp.tp == ctx.parts[i].TopicPartition })
		mp := &s.parts[j]
		must := r.Records || r.Failed || mp.hw != r.HighWatermark || mp.lso != r.LastStableOffset || mp.lst != r.LogStartOffset
		mp.hw, mp.lso, mp.lst = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
		if r.Failed {
			mp.hw = -1
		}
		if must {
			include = append(include, i)
			moved = append(moved, *mp)
		}
	}
	for _, mp := range moved {
		s.parts = slices.DeleteFunc(s.parts, func(o mPart) bool { return o.tp == mp.tp })
		s.parts = append(s.parts, mp)
	}
	return s.id, include, nil
}

func (m *model) evict(now time.Time, privileged bool, size int) bool {
	if len(m.sessions) == 0 {
		return false
	}
	lru := slices.MinFunc(m.sessions, func(a, b *mSession) int { return a.used - b.used })
	if now.Sub(lru.lastUsed) > m.age {
		m.remove(lru)
		m.evictions++
		return true
	}
	var cands []*mSession
	for _, s := range m.sessions {
		if s.byAll || privileged && s.byPriv {
			cands = append(cands, s)
		}
	}
	if len(cands) == 0 {
		return false
	}
	key := func(s *mSession) []int64 { return []int64{b2i(s.privileged), int64(s.size), int64(s.id)} }
	v := slices.MinFunc(cands, func(a, b *mSession) int { return slices.Compare(key(a), key(b)) })
	if slices.Compare([]int64{b2i(privileged), int64(size), 0}, key(v)) < 0 {
		return false
	}
	m.remove(v)
	m.evictions++
	return true
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (m *model) stats() Stats {
	st := Stats{Sessions: len(m.sessions), Evictions: m.evictions}
	for _, s := range m.sessions {
		st.Partitions += s.size
	}
	return st
}

func errKind(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, ErrSessionNotFound):
		return "not found"
	case errors.Is(err, ErrInvalidEpoch):
		return "invalid epoch"
	}
	return err.Error()
}

// TestAgainstModel drives the Cache and the model with random requests,
// clients that mostly follow the protocol and sometimes do not (stale
// epochs, forgotten sessions, made-up IDs, two requests in flight in one
// session), random results and a clock that jumps, and compares every
// answer and the counts.
func TestAgainstModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	age := time.Minute
	slots := 1 + r.IntN(4)
	c := newCache(t, Config{Slots: slots, EvictionAge: age, Rand: rand.NewPCG(seed, 5)})
	m := &model{slots: slots, age: age, ids: rand.NewPCG(seed, 5)}
	now := t0
	type client struct{ id, epoch int32 }
	var clients []client // sessions as their clients know them
	randParts := func(n int) []Partition {
		var ps []Partition
		for range n {
			ps = append(ps, part(fmt.Sprint("t", r.IntN(3)), int32(r.IntN(4)), r.Int64N(100)))
		}
		return ps
	}
	randResults := func(n int) []Result {
		res := make([]Result, n)
		for i := range res {
			hw := r.Int64N(3)
			res[i] = Result{HighWatermark: hw, LastStableOffset: hw, LogStartOffset: r.Int64N(2), Records: r.IntN(5) == 0, Failed: r.IntN(8) == 0}
		}
		return res
	}
	for step := range 400 {
		now = now.Add(time.Duration(r.Int64N(int64(age / 3))))
		req := &Request{Follower: r.IntN(4) == 0}
		var ci = -1
		switch op := r.IntN(10); {
		case op < 3 || len(clients) == 0: // full, maybe closing one
			req.Epoch = []int32{InitialEpoch, InitialEpoch, FinalEpoch}[r.IntN(3)]
			req.Partitions = randParts(r.IntN(6))
			if len(clients) > 0 && r.IntN(3) == 0 {
				req.SessionID = clients[r.IntN(len(clients))].id
			}
		case op < 9: // incremental, mostly right
			ci = r.IntN(len(clients))
			req.SessionID, req.Epoch = clients[ci].id, clients[ci].epoch
			switch r.IntN(12) {
			case 0:
				req.Epoch++
			case 1:
				req.SessionID = int32(r.IntN(1000)) // made up (or 0)
			}
			req.Partitions = randParts(r.IntN(3))
			for range r.IntN(3) {
				req.Forgotten = append(req.Forgotten, tp(fmt.Sprint("t", r.IntN(3)), int32(r.IntN(4))))
			}
		default: // two requests in one session at once
			ci = r.IntN(len(clients))
			a := &Request{SessionID: clients[ci].id, Epoch: clients[ci].epoch}
			b := &Request{SessionID: clients[ci].id, Epoch: nextEpoch(clients[ci].epoch)}
			ca, ma := c.NewContext(now, a), m.newContext(now, a)
			cb, mb := c.NewContext(now, b), m.newContext(now, b)
			compareContexts(t, step, ca, ma)
			compareContexts(t, step, cb, mb)
			for _, pair := range []struct {
				c *Context
				m *mContext
			}{{ca, ma}, {cb, mb}} {
				res := randResults(len(pair.c.Partitions))
				compareResponses(t, step, c, m, now, pair.c, pair.m, res)
			}
			if cb.Kind == Incremental {
				clients[ci].epoch = nextEpoch(b.Epoch)
			}
			continue
		}
		cctx, mctx := c.NewContext(now, req), m.newContext(now, req)
		compareContexts(t, step, cctx, mctx)
		id := compareResponses(t, step, c, m, now, cctx, mctx, randResults(len(cctx.Partitions)))
		switch {
		case cctx.Kind == Full && id != 0:
			clients = append(clients, client{id, 1})
		case cctx.Kind == Incremental && ci >= 0:
			clients[ci].epoch = nextEpoch(req.Epoch)
		}
		// Clients forget sessions now and then (and keep dead ones).
		if len(clients) > 6 {
			clients = clients[1:]
		}
	}
}

func compareContexts(t *testing.T, step int, c *Context, m *mContext) {
	t.Helper()
	if c.Kind != m.kind || errKind(c.Err) != errKind(m.err) || c.Closed != m.closed || !slices.Equal(c.Partitions, m.parts) {
		t.Fatalf("step %d: context kind %v err %v closed %d parts %v; model %v %v %d %v", step,
			c.Kind, c.Err, c.Closed, c.Partitions, m.kind, m.err, m.closed, m.parts)
	}
}

func compareResponses(t *testing.T, step int, c *Cache, m *model, now time.Time, cc *Context, mc *mContext, res []Result) int32 {
	t.Helper()
	cid, cinc, cerr := c.Respond(now, cc, res)
	mid, minc, merr := m.respond(now, mc, res)
	if cid != mid || !slices.Equal(cinc, minc) || errKind(cerr) != errKind(merr) {
		t.Fatalf("step %d (%v): respond %d %v %v; model %d %v %v", step, cc.Kind, cid, cinc, cerr, mid, minc, merr)
	}
	if cs, ms := c.Stats(), m.stats(); cs != ms {
		t.Fatalf("step %d: stats %+v, model %+v", step, cs, ms)
	}
	return cid
}
