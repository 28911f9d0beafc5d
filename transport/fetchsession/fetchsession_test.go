package fetchsession

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func newCache(t testing.TB, cfg Config) *Cache {
	t.Helper()
	if cfg.Rand == nil {
		cfg.Rand = rand.NewPCG(1, 2)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tp(topic string, p int32) TopicPartition { return TopicPartition{topic, p} }

func part(topic string, p int32, offset int64) Partition {
	return Partition{tp(topic, p), PartitionData{FetchOffset: offset, LogStartOffset: -1, MaxBytes: 1 << 20, CurrentLeaderEpoch: -1}}
}

// quiet is a result with nothing new: high watermark hw, no records.
func quiet(hw int64) Result {
	return Result{HighWatermark: hw, LastStableOffset: hw, LogStartOffset: 0}
}

// newSessionFor runs a full fetch creating a session of parts, all at high
// watermark 0, and returns its ID.
func newSessionFor(t *testing.T, c *Cache, now time.Time, follower bool, parts ...Partition) int32 {
	t.Helper()
	ctx := c.NewContext(now, &Request{SessionID: 0, Epoch: InitialEpoch, Follower: follower, Partitions: parts})
	if ctx.Kind != Full {
		t.Fatalf("kind %v, want full", ctx.Kind)
	}
	res := make([]Result, len(parts))
	for i := range res {
		res[i] = quiet(0)
	}
	id, include, err := c.Respond(now, ctx, res)
	if err != nil || len(include) != len(parts) {
		t.Fatalf("full fetch: id %d, include %v, err %v", id, include, err)
	}
	return id
}

// incremental runs one incremental fetch in session id at epoch and
// returns the partitions read (topic/partition) and those answered.
func incremental(t *testing.T, c *Cache, now time.Time, id, epoch int32, req []Partition, forgotten []TopicPartition,
	result func(Partition) Result) (read, answered []TopicPartition, err error) {
	t.Helper()
	ctx := c.NewContext(now, &Request{SessionID: id, Epoch: epoch, Partitions: req, Forgotten: forgotten})
	if ctx.Kind == Failed {
		return nil, nil, ctx.Err
	}
	res := make([]Result, len(ctx.Partitions))
	for i, p := range ctx.Partitions {
		read = append(read, p.TopicPartition)
		res[i] = result(p)
	}
	got, include, err := c.Respond(now, ctx, res)
	if err != nil {
		return read, nil, err
	}
	if ctx.Kind == Incremental && got != id {
		t.Fatalf("incremental response says session %d, want %d", got, id)
	}
	for _, i := range include {
		answered = append(answered, ctx.Partitions[i].TopicPartition)
	}
	return read, answered, nil
}

func TestRequestKinds(t *testing.T) {
	c := newCache(t, Config{})
	parts := []Partition{part("a", 0, 5), part("a", 1, 7)}

	// Sessionless: the request's partitions, all answered, ID 0, no session.
	ctx := c.NewContext(t0, &Request{SessionID: 0, Epoch: FinalEpoch, Partitions: parts})
	if ctx.Kind != Sessionless || !slices.Equal(ctx.Partitions, parts) {
		t.Fatalf("sessionless: %+v", ctx)
	}
	if id, inc, err := c.Respond(t0, ctx, []Result{quiet(0), quiet(0)}); id != 0 || len(inc) != 2 || err != nil {
		t.Fatalf("sessionless answer: %d %v %v", id, inc, err)
	}
	if st := c.Stats(); st.Sessions != 0 {
		t.Fatalf("sessionless fetch left %d sessions", st.Sessions)
	}

	// Create: a new ID, every partition answered, the session's next
	// epoch 1.
	id := newSessionFor(t, c, t0, false, parts...)
	if id <= 0 {
		t.Fatalf("session ID %d", id)
	}
	if st := c.Stats(); st.Sessions != 1 || st.Partitions != 2 {
		t.Fatalf("stats %+v", st)
	}
	for _, tc := range []struct {
		name    string
		id, ep  int32
		wantErr error
	}{
		{"unknown id", id + 1, 1, ErrSessionNotFound},
		{"id 0 with an epoch", 0, 1, ErrSessionNotFound},
		{"epoch too high", id, 2, ErrInvalidEpoch},
		{"epoch below -1", id, -2, ErrInvalidEpoch},
	} {
		ctx := c.NewContext(t0, &Request{SessionID: tc.id, Epoch: tc.ep, Partitions: parts})
		if ctx.Kind != Failed || !errors.Is(ctx.Err, tc.wantErr) || len(ctx.Partitions) != 0 {
			t.Fatalf("%s: kind %v err %v", tc.name, ctx.Kind, ctx.Err)
		}
		if gid, inc, err := c.Respond(t0, ctx, nil); gid != 0 || inc != nil || !errors.Is(err, tc.wantErr) {
			t.Fatalf("%s: answer %d %v %v", tc.name, gid, inc, err)
		}
	}
	// The errors left the session alone: epoch 1 works, then 2.
	for ep := int32(1); ep <= 2; ep++ {
		if _, _, err := incremental(t, c, t0, id, ep, nil, nil, func(Partition) Result { return quiet(0) }); err != nil {
			t.Fatalf("epoch %d: %v", ep, err)
		}
	}
	// A replayed epoch fails.
	if _, _, err := incremental(t, c, t0, id, 2, nil, nil, func(Partition) Result { return quiet(0) }); !errors.Is(err, ErrInvalidEpoch) {
		t.Fatalf("replayed epoch: %v", err)
	}

	// Epoch 0 with the ID: the old session closes and a new one opens.
	ctx = c.NewContext(t0, &Request{SessionID: id, Epoch: InitialEpoch, Partitions: parts[:1]})
	if ctx.Kind != Full || ctx.Closed != id {
		t.Fatalf("re-create: %+v", ctx)
	}
	id2, _, _ := c.Respond(t0, ctx, []Result{quiet(0)})
	if id2 == id || id2 == 0 || c.Stats().Sessions != 1 || c.Stats().Partitions != 1 {
		t.Fatalf("re-created session %d (was %d), stats %+v", id2, id, c.Stats())
	}
	// Epoch -1 with the ID closes it: a sessionless answer.
	ctx = c.NewContext(t0, &Request{SessionID: id2, Epoch: FinalEpoch, Partitions: parts})
	if ctx.Kind != Sessionless || ctx.Closed != id2 || c.Stats().Sessions != 0 || c.Stats().Partitions != 0 {
		t.Fatalf("close: %+v, stats %+v", ctx, c.Stats())
	}
	if _, _, err := incremental(t, c, t0, id2, 1, nil, nil, nil); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("closed session: %v", err)
	}
}

// What an incremental fetch reads and answers.
func TestIncremental(t *testing.T) {
	c := newCache(t, Config{})
	id := newSessionFor(t, c, t0, false, part("a", 0, 0), part("a", 1, 0), part("b", 0, 0))
	epoch := int32(1)
	step := func(req []Partition, forgotten []TopicPartition, result func(Partition) Result) (read, answered []TopicPartition) {
		t.Helper()
		read, answered, err := incremental(t, c, t0, id, epoch, req, forgotten, result)
		if err != nil {
			t.Fatal(err)
		}
		epoch++
		return read, answered
	}
	same := func(Partition) Result { return quiet(0) }

	// Nothing changed: every partition read, none answered.
	read, answered := step(nil, nil, same)
	if want := []TopicPartition{tp("a", 0), tp("a", 1), tp("b", 0)}; !slices.Equal(read, want) || len(answered) != 0 {
		t.Fatalf("idle: read %v answered %v", read, answered)
	}

	// Each reason to answer, alone.
	for _, tc := range []struct {
		name string
		res  Result
	}{
		{"records", Result{Records: true}},
		{"high watermark", Result{HighWatermark: 3, LastStableOffset: 0}},
		{"last stable offset", Result{LastStableOffset: 2}},
		{"log start", Result{LogStartOffset: 1}},
	} {
		_, answered = step(nil, nil, func(p Partition) Result {
			if p.TopicPartition == tp("a", 1) {
				return tc.res
			}
			return quiet(0)
		})
		if !slices.Equal(answered, []TopicPartition{tp("a", 1)}) {
			t.Fatalf("%s: answered %v", tc.name, answered)
		}
		// Answered at most once for one change: the next round answers
		// it only if it moved back (it does, to quiet(0), except records).
		_, answered = step(nil, nil, same)
		if tc.res.Records && len(answered) != 0 || !tc.res.Records && !slices.Equal(answered, []TopicPartition{tp("a", 1)}) {
			t.Fatalf("%s, then quiet: answered %v", tc.name, answered)
		}
	}

	// An error is answered every time, and once it goes away the partition
	// is answered again although its high watermark is the one before.
	failing := func(p Partition) Result {
		if p.TopicPartition == tp("b", 0) {
			return Result{HighWatermark: 0, Failed: true}
		}
		return quiet(0)
	}
	for range 2 {
		if _, answered = step(nil, nil, failing); !slices.Equal(answered, []TopicPartition{tp("b", 0)}) {
			t.Fatalf("failing: answered %v", answered)
		}
	}
	if _, answered = step(nil, nil, same); !slices.Equal(answered, []TopicPartition{tp("b", 0)}) {
		t.Fatalf("recovered: answered %v", answered)
	}

	// Updates: the request's fetch offset replaces the session's; a new
	// partition joins at the end (and is answered: nothing answered yet);
	// forgotten ones leave.
	read, answered = step([]Partition{part("a", 0, 42), part("c", 0, 9)}, []TopicPartition{tp("a", 1), tp("zz", 0)},
		func(p Partition) Result {
			if p.TopicPartition == tp("a", 0) && p.FetchOffset != 42 {
				t.Errorf("a-0 read at %d, want 42", p.FetchOffset)
			}
			return quiet(0)
		})
	if want := []TopicPartition{tp("a", 0), tp("b", 0), tp("c", 0)}; !slices.Equal(read, want) || !slices.Equal(answered, []TopicPartition{tp("c", 0)}) {
		t.Fatalf("update: read %v answered %v", read, answered)
	}
	if st := c.Stats(); st.Partitions != 3 {
		t.Fatalf("stats %+v", st)
	}

	// Answered partitions move to the end of the order, in the order
	// answered.
	step(nil, nil, func(p Partition) Result { return Result{Records: p.Topic != "b"} })
	if read, _ = step(nil, nil, same); !slices.Equal(read, []TopicPartition{tp("b", 0), tp("a", 0), tp("c", 0)}) {
		t.Fatalf("after answering a-0 and c-0: read %v", read)
	}

	// Forgetting every partition closes the session: answered sessionless.
	ctx := c.NewContext(t0, &Request{SessionID: id, Epoch: epoch, Forgotten: []TopicPartition{tp("a", 0), tp("b", 0), tp("c", 0)}})
	if ctx.Kind != Sessionless || ctx.Closed != id || len(ctx.Partitions) != 0 || c.Stats().Sessions != 0 {
		t.Fatalf("emptied: %+v, stats %+v", ctx, c.Stats())
	}
}

// Two requests in one session at once: the second to be checked moved the
// session on, so the first to answer gets ErrInvalidEpoch.
func TestConcurrentRequestsInOneSession(t *testing.T) {
	c := newCache(t, Config{})
	id := newSessionFor(t, c, t0, false, part("a", 0, 0))
	first := c.NewContext(t0, &Request{SessionID: id, Epoch: 1})
	second := c.NewContext(t0, &Request{SessionID: id, Epoch: 2})
	if first.Kind != Incremental || second.Kind != Incremental {
		t.Fatalf("kinds %v %v", first.Kind, second.Kind)
	}
	if _, inc, err := c.Respond(t0, first, []Result{{Records: true}}); !errors.Is(err, ErrInvalidEpoch) || inc != nil {
		t.Fatalf("stale context answered: %v %v", inc, err)
	}
	if gid, inc, err := c.Respond(t0, second, []Result{{Records: true}}); err != nil || gid != id || len(inc) != 1 {
		t.Fatalf("current context: %d %v %v", gid, inc, err)
	}
}

func TestNextEpoch(t *testing.T) {
	for _, tc := range [][2]int32{{-1, -1}, {-5, -1}, {0, 1}, {1, 2}, {1<<31 - 1, 1}} {
		if got := nextEpoch(tc[0]); got != tc[1] {
			t.Errorf("nextEpoch(%d) = %d, want %d", tc[0], got, tc[1])
		}
	}
}

func TestEviction(t *testing.T) {
	age := 2 * time.Minute
	parts := func(n int) []Partition {
		var ps []Partition
		for i := range n {
			ps = append(ps, part("t", int32(i), 0))
		}
		return ps
	}
	type create struct {
		at       time.Duration // after t0
		follower bool
		size     int
		touch    []int  // before creating: use these sessions (by creation index) at this time
		want     bool   // a session is created
		evicts   int    // the creation index evicted, or -1
		note     string // why
	}
	for _, tc := range []struct {
		name    string
		slots   int
		creates []create
	}{
		{"room", 2, []create{{0, false, 1, nil, true, -1, ""}, {0, false, 1, nil, true, -1, ""}}},
		{"full of fresh sessions", 1, []create{{0, false, 1, nil, true, -1, ""}, {time.Second, false, 5, nil, false, -1, "young: not evictable by a consumer"}}},
		{"stale least recently used", 2, []create{
			{0, false, 1, nil, true, -1, ""},
			{time.Second, false, 9, nil, true, -1, ""},
			{age + 500*time.Millisecond, false, 1, nil, true, 0, "unused for more than the age"},
		}},
		{"used recently: not stale", 1, []create{
			{0, false, 1, nil, true, -1, ""},
			{age + time.Second, false, 1, []int{0}, false, -1, "used just now, same size"},
		}},
		{"bigger evicts an old smaller one", 1, []create{
			{0, false, 1, nil, true, -1, ""},
			{age + time.Second, false, 2, []int{0}, true, 0, "old as of its last use, smaller"},
		}},
		{"old but never used since it was young", 2, []create{
			{0, false, 1, nil, true, -1, ""},
			{time.Second, false, 1, nil, true, -1, ""},
			{time.Second + age/2, false, 3, []int{0, 1}, false, -1, "young when last used"},
		}},
		{"follower evicts a young consumer", 1, []create{
			{0, false, 5, nil, true, -1, ""},
			{time.Second, true, 1, nil, true, 0, "privileged beats unprivileged at any age"},
		}},
		{"consumer cannot evict a follower", 1, []create{
			{0, true, 1, nil, true, -1, ""},
			{age + time.Second, false, 50, []int{0}, false, -1, "unprivileged never beats privileged"},
		}},
		{"follower evicts an old smaller follower", 1, []create{
			{0, true, 1, nil, true, -1, ""},
			{age + time.Second, true, 2, []int{0}, true, 0, ""},
		}},
		{"follower cannot evict a young follower", 1, []create{
			{0, true, 1, nil, true, -1, ""},
			{time.Second, true, 2, []int{0}, false, -1, ""},
		}},
		{"least valuable goes", 3, []create{
			{0, false, 3, nil, true, -1, ""},
			{0, false, 1, nil, true, -1, ""},
			{0, false, 2, nil, true, -1, ""},
			{age + time.Second, false, 4, []int{0, 1, 2}, true, 1, "the smallest"},
		}},
		{"no slots", -1, []create{{0, true, 1, nil, false, -1, "sessions off"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(t, Config{Slots: tc.slots, EvictionAge: age})
			var ids []int32
			epochs := map[int32]int32{}
			for i, cr := range tc.creates {
				now := t0.Add(cr.at)
				for _, j := range cr.touch {
					if _, _, err := incremental(t, c, now, ids[j], epochs[ids[j]], nil, nil, func(Partition) Result { return quiet(0) }); err != nil {
						t.Fatalf("create %d: using session %d: %v", i, j, err)
					}
					epochs[ids[j]]++
				}
				before := c.Stats()
				ctx := c.NewContext(now, &Request{Epoch: InitialEpoch, Follower: cr.follower, Partitions: parts(cr.size)})
				res := make([]Result, cr.size)
				id, _, _ := c.Respond(now, ctx, res)
				ids = append(ids, id)
				epochs[id] = 1
				if (id != 0) != cr.want {
					t.Fatalf("create %d (%s): id %d, want created %v", i, cr.note, id, cr.want)
				}
				evicted := c.Stats().Evictions - before.Evictions
				if cr.evicts < 0 && evicted != 0 || cr.evicts >= 0 && evicted != 1 {
					t.Fatalf("create %d (%s): %d evictions", i, cr.note, evicted)
				}
				if cr.evicts >= 0 {
					if _, _, err := incremental(t, c, now, ids[cr.evicts], epochs[ids[cr.evicts]], nil, nil, nil); !errors.Is(err, ErrSessionNotFound) {
						t.Fatalf("create %d (%s): session %d still there: %v", i, cr.note, cr.evicts, err)
					}
				}
			}
			st := c.Stats()
			if tc.slots > 0 && st.Sessions > tc.slots || tc.slots < 0 && st.Sessions != 0 {
				t.Fatalf("%d sessions in %d slots", st.Sessions, tc.slots)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	if _, err := New(Config{EvictionAge: -time.Second}); err == nil {
		t.Fatal("negative EvictionAge accepted")
	}
	c, err := New(Config{})
	if err != nil || c.cfg.Slots != DefaultSlots || c.cfg.EvictionAge != DefaultEvictionAge || c.cfg.Rand == nil {
		t.Fatalf("defaults: %+v %v", c.cfg, err)
	}
}
