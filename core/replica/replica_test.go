package replica

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/meta"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func state(leader, epoch int32, version int32, isr ...int32) *meta.PartitionState {
	return &meta.PartitionState{Leader: leader, LeaderEpoch: epoch, ISR: isr, Version: version}
}

// leaderOf returns broker 1 leading [1 2 3] in epoch 5, ISR all three, with a
// log ending at end and a checkpointed high watermark hw.
func leaderOf(t *testing.T, end, hw int64) *Replica {
	t.Helper()
	r := New(Config{Self: 1}, end, hw)
	r.SetState(t0, []int32{1, 2, 3}, state(1, 5, 10, 1, 2, 3), end)
	rd := r.Ready()
	if r.Role() != Leader || rd.StartEpoch == nil || *rd.StartEpoch != (EpochStart{Epoch: 5, StartOffset: end}) {
		t.Fatalf("becoming leader: role %v, ready %+v", r.Role(), rd)
	}
	return r
}

func wantHW(t *testing.T, r *Replica, want int64) {
	t.Helper()
	if got := r.HighWatermark(); got != want {
		t.Fatalf("high watermark %d, want %d", got, want)
	}
}

// The high watermark is the smallest log end over the ISR: it waits for
// every member to fetch, moves with the slowest, never goes down.
func TestLeaderHighWatermark(t *testing.T) {
	r := leaderOf(t, 100, 40)
	wantHW(t, r, 40)
	r.Appended(120)
	wantHW(t, r, 40) // followers unheard of
	must(t, r.FollowerFetch(t0, 2, 120))
	wantHW(t, r, 40)
	must(t, r.FollowerFetch(t0, 3, 90))
	wantHW(t, r, 90)
	if rd := r.Ready(); !rd.HWChanged || rd.HighWatermark != 90 {
		t.Fatalf("ready %+v, want the high watermark 90", rd)
	}
	must(t, r.FollowerFetch(t0, 3, 120))
	wantHW(t, r, 120)
	// A follower fetching an older offset again (a retry) does not move
	// the high watermark back.
	must(t, r.FollowerFetch(t0, 3, 100))
	wantHW(t, r, 120)
	if err := r.FollowerFetch(t0, 3, 121); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("fetch past the log end: %v", err)
	}
	if err := r.FollowerFetch(t0, 9, 0); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("fetch by a broker that is not a replica: %v", err)
	}
}

// A single replica: the high watermark is the log end.
func TestSingleReplica(t *testing.T) {
	r := New(Config{Self: 0}, 7, 0)
	r.SetState(t0, []int32{0}, state(0, 0, 0, 0), 7)
	wantHW(t, r, 7)
	r.Appended(9)
	wantHW(t, r, 9)
	if done, err := r.AcksAll(9, 1); !done || err != nil {
		t.Fatalf("acks=all at the log end: %v %v", done, err)
	}
	if err := r.CheckAppend(2); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("min.insync.replicas 2 of one replica: %v", err)
	}
}

// A follower that does not catch up for LagTimeMax is proposed out; the
// proposal takes effect when read back; back in when it reaches the high
// watermark and the epoch start.
func TestISRShrinkAndExpand(t *testing.T) {
	r := leaderOf(t, 100, 100)
	must(t, r.FollowerFetch(t0, 2, 100))
	must(t, r.FollowerFetch(t0, 3, 100))
	r.Ready()
	r.Appended(150)
	// Broker 2 keeps fetching at the end; broker 3 stops.
	for s := 1; s <= 31; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		must(t, r.FollowerFetch(now, 2, 150))
		r.Tick(now)
		rd := r.Ready()
		if s <= 30 && rd.Propose != nil {
			t.Fatalf("at %ds: proposal %+v before the lag time", s, rd.Propose)
		}
		if s == 31 {
			if rd.Propose == nil || !slices.Equal(rd.Propose.State.ISR, []int32{1, 2}) || rd.Propose.Version != 10 ||
				rd.Propose.State.LeaderEpoch != 5 {
				t.Fatalf("at 31s: proposal %+v, want ISR [1 2] over version 10", rd.Propose)
			}
		}
	}
	// Pending: the removal still counts for the high watermark.
	wantHW(t, r, 100)
	r.Tick(t0.Add(40 * time.Second))
	if rd := r.Ready(); rd.Propose != nil {
		t.Fatalf("a second proposal while one is pending: %+v", rd.Propose)
	}
	// Written: now only 1 and 2 count.
	r.SetState(t0.Add(41*time.Second), []int32{1, 2, 3}, state(1, 5, 11, 1, 2), 150)
	wantHW(t, r, 150)
	if isr := r.ISR(); !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("ISR %v", isr)
	}
	if err := r.CheckAppend(3); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with min.insync 3 of 2: %v", err)
	}
	// Broker 3 comes back below the high watermark: not yet.
	must(t, r.FollowerFetch(t0.Add(42*time.Second), 3, 120))
	if rd := r.Ready(); rd.Propose != nil {
		t.Fatalf("expand below the high watermark: %+v", rd.Propose)
	}
	must(t, r.FollowerFetch(t0.Add(43*time.Second), 3, 150))
	rd := r.Ready()
	if rd.Propose == nil || !slices.Equal(rd.Propose.State.ISR, []int32{1, 2, 3}) || rd.Propose.Version != 11 {
		t.Fatalf("expand: %+v, want ISR [1 2 3] over version 11", rd.Propose)
	}
	// Pending expansion counts at once: 3 holds the high watermark.
	r.Appended(160)
	must(t, r.FollowerFetch(t0.Add(44*time.Second), 2, 160))
	wantHW(t, r, 150)
	must(t, r.FollowerFetch(t0.Add(44*time.Second), 3, 160))
	wantHW(t, r, 160)
	// A conflict drops the proposal; the next fetch makes it again.
	r.ProposalFailed()
	if _, ok := r.Pending(); ok {
		t.Fatal("proposal still pending after it failed")
	}
	must(t, r.FollowerFetch(t0.Add(45*time.Second), 3, 160))
	if rd := r.Ready(); rd.Propose == nil {
		t.Fatal("no new proposal after a failed one")
	}
}

// A barred broker (not registered, or shutting down) fetches, and its log
// end counts for the high watermark while it is in the ISR, but it is not
// proposed into the ISR however caught up, until it is no longer barred.
func TestBarredFromISR(t *testing.T) {
	r := leaderOf(t, 100, 100)
	r.SetState(t0, []int32{1, 2, 3}, state(1, 5, 11, 1, 2), 100)
	r.SetBarred([]int32{3})
	must(t, r.FollowerFetch(t0, 3, 100))
	if rd := r.Ready(); rd.Propose != nil {
		t.Fatalf("a barred broker proposed into the ISR: %+v", rd.Propose)
	}
	r.SetBarred(nil)
	must(t, r.FollowerFetch(t0, 3, 100))
	if rd := r.Ready(); rd.Propose == nil || !slices.Equal(rd.Propose.State.ISR, []int32{1, 2, 3}) {
		t.Fatalf("no longer barred: %+v, want ISR [1 2 3]", rd.Propose)
	}
}

// The caught-up time: a follower that is always one fetch behind a busy
// leader counts as caught up as of its previous fetch, and stays in.
func TestCaughtUpAsOfPreviousFetch(t *testing.T) {
	r := leaderOf(t, 0, 0)
	end := int64(0)
	for s := 1; s <= 100; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		must(t, r.FollowerFetch(now, 2, end)) // everything before this fetch
		must(t, r.FollowerFetch(now, 3, end))
		end += 10
		r.Appended(end) // more came meanwhile
		r.Tick(now)
		if rd := r.Ready(); rd.Propose != nil {
			t.Fatalf("at %ds: %+v for followers that keep up", s, rd.Propose)
		}
	}
}

// acks=all completes once the high watermark passes the records, and
// fails after the append if the maximal ISR went below min.insync.
func TestAcksAll(t *testing.T) {
	r := leaderOf(t, 10, 10)
	must(t, r.CheckAppend(2))
	r.Appended(15)
	if done, _ := r.AcksAll(15, 2); done {
		t.Fatal("done before any follower fetched")
	}
	must(t, r.FollowerFetch(t0, 2, 15))
	must(t, r.FollowerFetch(t0, 3, 15))
	if done, err := r.AcksAll(15, 2); !done || err != nil {
		t.Fatalf("after both fetched: %v %v", done, err)
	}
	// ISR shrunk to the leader while a produce waited.
	r.Appended(20)
	r.SetState(t0, []int32{1, 2, 3}, state(1, 5, 11, 1), 20)
	if done, err := r.AcksAll(20, 2); !done || !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("after the ISR shrank: %v %v", done, err)
	}
	// Leadership gone while waiting.
	r.SetState(t0, []int32{1, 2, 3}, state(2, 6, 12, 2, 3), 20)
	if done, err := r.AcksAll(25, 1); !done || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("after losing leadership: %v %v", done, err)
	}
}

// A follower asks where its epoch ends before fetching, and truncates to
// the smallest of the leader's answer, its own end of that epoch and its log
// end; an unknown epoch falls back to the high watermark.
func TestFollowerTruncation(t *testing.T) {
	for _, tc := range []struct {
		name          string
		leo, hw       int64
		leader, local EpochEnd
		want          int64
	}{
		{"same epoch, leader shorter", 100, 50, EpochEnd{3, 80}, EpochEnd{3, 100}, 80},
		{"same epoch, follower shorter", 100, 50, EpochEnd{3, 120}, EpochEnd{3, 100}, 100},
		{"leader lacks our epoch (KIP-279)", 100, 50, EpochEnd{2, 90}, EpochEnd{2, 70}, 70},
		{"unknown epoch", 100, 50, Undefined, Undefined, 50},
		{"empty log", 0, 0, Undefined, Undefined, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(Config{Self: 2}, tc.leo, tc.hw)
			r.SetState(t0, []int32{1, 2}, state(1, 4, 3, 1, 2), tc.leo)
			rd := r.Ready()
			if r.Role() != Follower || rd.QueryEpoch == nil || *rd.QueryEpoch != (EpochQuery{Leader: 1, LeaderEpoch: 4}) || rd.Fetch != nil {
				t.Fatalf("becoming follower: %v %+v", r.Role(), rd)
			}
			r.EpochEnd(tc.leader, tc.local)
			rd = r.Ready()
			if rd.Truncate == nil || *rd.Truncate != tc.want || rd.Fetch != nil {
				t.Fatalf("truncation %+v, want to %d and no fetch yet", rd, tc.want)
			}
			r.Truncated(tc.want)
			rd = r.Ready()
			if rd.Fetch == nil || *rd.Fetch != (FetchTarget{Leader: 1, LeaderEpoch: 4, Offset: tc.want}) || rd.StopFetch {
				t.Fatalf("after truncating: %+v", rd)
			}
			if hw := r.HighWatermark(); hw > tc.want {
				t.Fatalf("high watermark %d above the log end %d", hw, tc.want)
			}
		})
	}
}

// A truncation that fails (the log failed) is asked for again through a
// new epoch query, never followed by a fetch onto the uncut log.
func TestFollowerTruncateFailed(t *testing.T) {
	r := New(Config{Self: 2}, 100, 50)
	r.SetState(t0, []int32{1, 2}, state(1, 4, 3, 1, 2), 100)
	r.Ready()
	r.EpochEnd(EpochEnd{4, 80}, EpochEnd{4, 100})
	if rd := r.Ready(); rd.Truncate == nil || *rd.Truncate != 80 {
		t.Fatalf("truncation %+v, want to 80", rd)
	}
	r.TruncateFailed()
	rd := r.Ready()
	if rd.Fetch != nil || !rd.StopFetch || rd.QueryEpoch == nil || *rd.QueryEpoch != (EpochQuery{Leader: 1, LeaderEpoch: 4}) {
		t.Fatalf("after a failed truncation: %+v, want a new epoch query and no fetch", rd)
	}
	r.Truncated(100) // a late report of the failed cut changes nothing
	if rd := r.Ready(); rd.Fetch != nil {
		t.Fatalf("fetching after a failed truncation: %+v", rd)
	}
	r.EpochEnd(EpochEnd{4, 80}, EpochEnd{4, 100})
	r.Ready()
	r.Truncated(80)
	if rd := r.Ready(); rd.Fetch == nil || rd.Fetch.Offset != 80 {
		t.Fatalf("after the truncation worked: %+v", rd)
	}
}

// A follower's high watermark is min(the leader's, its log end).
func TestFollowerHighWatermark(t *testing.T) {
	r := New(Config{Self: 2}, 0, 0)
	r.SetState(t0, []int32{1, 2}, state(1, 0, 0, 1, 2), 0)
	r.EpochEnd(Undefined, Undefined)
	r.Truncated(0)
	r.Ready()
	r.Appended(30)
	wantHW(t, r, 0)
	r.LeaderHighWatermark(20)
	wantHW(t, r, 20)
	r.LeaderHighWatermark(50)
	wantHW(t, r, 30)
	r.Appended(60)
	wantHW(t, r, 50)
}

// Out of range: a follower ahead of an (uncleanly elected) leader asks
// again where its epoch ends, which truncates it; one behind the leader's
// log start starts over there.
func TestFollowerOutOfRange(t *testing.T) {
	follow := func(leo int64) *Replica {
		r := New(Config{Self: 2}, leo, 0)
		r.SetState(t0, []int32{1, 2}, state(1, 0, 0, 1, 2), leo)
		r.EpochEnd(EpochEnd{0, leo}, EpochEnd{0, leo})
		r.Truncated(leo)
		r.Ready()
		return r
	}
	r := follow(100)
	r.OutOfRange(0)
	if rd := r.Ready(); rd.QueryEpoch == nil || rd.Truncate != nil || !rd.StopFetch {
		t.Fatalf("ahead of the leader: %+v", rd)
	}
	r.EpochEnd(EpochEnd{0, 60}, EpochEnd{0, 100})
	if rd := r.Ready(); rd.Truncate == nil || *rd.Truncate != 60 {
		t.Fatalf("ahead of the leader, after the answer: %+v", rd)
	}
	r = follow(10)
	r.OutOfRange(500)
	rd := r.Ready()
	if rd.Reset == nil || *rd.Reset != 500 {
		t.Fatalf("behind the leader's start: %+v", rd)
	}
	r.Truncated(500)
	if rd := r.Ready(); rd.Fetch == nil || rd.Fetch.Offset != 500 {
		t.Fatalf("after the reset: %+v", rd)
	}
}

// Roles follow the record: leader to follower stops nothing it did not
// start; follower to leader stops the fetcher and starts an epoch; no
// leader stops the fetcher; a stale read is ignored.
func TestRoleChanges(t *testing.T) {
	r := New(Config{Self: 2}, 50, 50)
	r.SetState(t0, []int32{1, 2}, state(1, 3, 7, 1, 2), 50)
	r.Ready()
	r.SetState(t0, []int32{1, 2}, state(2, 4, 8, 2), 50)
	rd := r.Ready()
	if r.Role() != Leader || !rd.StopFetch || rd.StartEpoch == nil || *rd.StartEpoch != (EpochStart{4, 50}) {
		t.Fatalf("follower to leader: %v %+v", r.Role(), rd)
	}
	r.SetState(t0, []int32{1, 2}, state(1, 3, 7, 1, 2), 50) // stale
	if r.Role() != Leader || r.Epoch() != 4 {
		t.Fatalf("a stale read changed the role: %v epoch %d", r.Role(), r.Epoch())
	}
	r.SetState(t0, []int32{1, 2}, state(meta.NoLeader, 5, 9, 2), 50)
	if r.Role() != None {
		t.Fatalf("no leader: role %v", r.Role())
	}
	r.SetState(t0, []int32{1, 2}, state(1, 6, 10, 1, 2), 50)
	r.Ready()
	r.SetState(t0, []int32{1, 3}, state(1, 6, 11, 1, 3), 50) // moved away
	if rd := r.Ready(); r.Role() != None || !rd.StopFetch {
		t.Fatalf("not a replica any more: %v %+v", r.Role(), rd)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A leader with other replicas whose log fails resigns: it asks for the
// leadership to move, serves no follower, proposes no ISR change, answers
// acks=all waits and new appends with ErrLogFailed, and holds its log's
// automatic recovery; the log may recover only under a record that takes
// it out of the ISR (here: a follower of broker 2), or makes it lead alone
// in an epoch its log has not started, and the next term clears the
// resignation and lowers the high watermark to the log the recovery left.
func TestLeaderLogFailedResigns(t *testing.T) {
	r := leaderOf(t, 100, 100)
	if !r.HoldRecovery() {
		t.Fatal("a leader of three replicas must hold its log's recovery")
	}
	r.Appended(120)
	must(t, r.FollowerFetch(t0, 2, 110))
	must(t, r.FollowerFetch(t0, 3, 110))
	wantHW(t, r, 110)
	r.Ready()

	r.LogFailed()
	rd := r.Ready()
	if rd.Resign == nil || *rd.Resign != 5 || !r.Resigned() {
		t.Fatalf("after LogFailed: ready %+v, resigned %v; want Resign in epoch 5", rd, r.Resigned())
	}
	r.LogFailed()
	if rd := r.Ready(); rd.Resign != nil {
		t.Fatalf("a second LogFailed in the term resigns again: %+v", rd)
	}
	if err := r.FollowerFetch(t0, 2, 120); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("a follower's fetch from a resigned leader: %v, want ErrLogFailed", err)
	}
	wantHW(t, r, 110)
	r.Tick(t0.Add(time.Hour)) // followers long "behind": still no ISR change
	if rd := r.Ready(); rd.Propose != nil {
		t.Fatalf("a resigned leader proposes %+v", rd.Propose)
	}
	if done, err := r.AcksAll(120, 2); !done || !errors.Is(err, ErrLogFailed) {
		t.Fatalf("acks=all wait on a resigned leader: %v %v, want done with ErrLogFailed", done, err)
	}
	if done, err := r.AcksAll(110, 2); !done || err != nil {
		t.Fatalf("acks=all wait below the high watermark: %v %v, want done", done, err)
	}
	if err := r.CheckAppend(1); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append check on a resigned leader: %v", err)
	}

	replicas := []int32{1, 2, 3}
	for _, c := range []struct {
		name string
		st   *meta.PartitionState
		may  bool
	}{
		{"the same term, an ISR change", state(1, 5, 11, 1, 2), false},
		{"a new epoch, still in sync with others", state(1, 6, 11, 1, 2, 3), false},
		{"another leader, still in the ISR", state(2, 6, 11, 2, 1), false},
		{"out of the ISR", state(2, 6, 11, 2, 3), true},
		{"alone in the ISR in a new epoch", state(1, 6, 11, 1), true},
		{"alone in the ISR in an epoch the log has", state(1, 5, 11, 1), false},
	} {
		if got := r.MayRecover(replicas, c.st, 5); got != c.may {
			t.Errorf("MayRecover, %s: %v, want %v", c.name, got, c.may)
		}
	}

	// The controller moved the leadership to broker 2; the recovery cut the
	// log back to 105, below the high watermark.
	r.SetState(t0, replicas, state(2, 6, 12, 2, 3), 105)
	rd = r.Ready()
	if r.Role() != Follower || r.Resigned() || r.HoldRecovery() {
		t.Fatalf("after the leadership moved: role %v resigned %v hold %v", r.Role(), r.Resigned(), r.HoldRecovery())
	}
	if !rd.HWChanged || rd.HighWatermark != 105 || rd.QueryEpoch == nil {
		t.Fatalf("ready %+v, want the high watermark lowered to 105 and an epoch query", rd)
	}

	// A leader resigned with no other ISR member is elected again in a new
	// epoch: it leads with its (recovered) log, not resigned.
	r2 := leaderOf(t, 100, 100)
	r2.LogFailed()
	r2.Ready()
	r2.SetState(t0, replicas, state(1, 6, 11, 1), 90)
	rd = r2.Ready()
	if r2.Role() != Leader || r2.Resigned() || r2.Epoch() != 6 {
		t.Fatalf("re-elected: role %v resigned %v epoch %d", r2.Role(), r2.Resigned(), r2.Epoch())
	}
	if rd.StartEpoch == nil || *rd.StartEpoch != (EpochStart{Epoch: 6, StartOffset: 90}) || r2.HighWatermark() != 90 {
		t.Fatalf("re-elected: ready %+v, high watermark %d; want epoch 6 from 90 and the high watermark at 90", rd, r2.HighWatermark())
	}
}

// An in-sync follower whose log fails resigns too (it could otherwise be
// elected without records the high watermark counted); a replica out of
// the ISR, or a partition's only replica, may recover in place.
func TestFollowerLogFailed(t *testing.T) {
	f := New(Config{Self: 2}, 10, 10)
	f.SetState(t0, []int32{1, 2}, state(1, 3, 4, 1, 2), 10)
	f.Ready()
	if !f.HoldRecovery() {
		t.Fatal("an in-sync follower does not hold its recovery")
	}
	f.LogFailed()
	if rd := f.Ready(); rd.Resign == nil || *rd.Resign != 3 || !f.Resigned() {
		t.Fatalf("an in-sync follower's failed log: %+v, want Resign in epoch 3", rd)
	}
	f.SetState(t0, []int32{1, 2}, state(1, 4, 5, 1), 10)
	f.Ready()
	if f.HoldRecovery() || f.Resigned() {
		t.Fatalf("out of the ISR: hold %v resigned %v", f.HoldRecovery(), f.Resigned())
	}
	f.LogFailed()
	if rd := f.Ready(); rd.Resign != nil {
		t.Fatalf("a follower out of the ISR resigned: %+v", rd)
	}

	single := New(Config{Self: 1}, 10, 10)
	single.SetState(t0, []int32{1}, state(1, 0, 0, 1), 10)
	single.Ready()
	if single.HoldRecovery() {
		t.Fatal("a single replica holds its recovery")
	}
	single.LogFailed()
	if rd := single.Ready(); rd.Resign != nil || single.Resigned() {
		t.Fatalf("a single replica resigned: %+v", rd)
	}
}

// resigns returns the epoch Ready asks to resign in, -1 for none.
func resigns(r *Replica) int32 {
	if rd := r.Ready(); rd.Resign != nil {
		return *rd.Resign
	}
	return -1
}

// A leader back from an unclean shutdown finds the record still naming it
// leader in the epoch it led before (no controller reacted): it resigns,
// serves no follower (which would truncate to its shortened log), takes no
// produce, and leads again only alone in a new epoch; an ISR change in the
// same term changes nothing.
func TestUncleanLeaderResigns(t *testing.T) {
	r := New(Config{Self: 1}, 0, 0) // the power cut took the whole log
	r.Unclean()
	r.SetState(t0, []int32{1, 2, 3}, state(1, 5, 10, 1, 2, 3), 0)
	if got := resigns(r); got != 5 || !r.Resigned() || !r.IsUnclean() || r.Role() != Leader {
		t.Fatalf("back uncleanly as the recorded leader: resign %d, resigned %v, unclean %v, role %v; want a resignation in epoch 5",
			got, r.Resigned(), r.IsUnclean(), r.Role())
	}
	if err := r.FollowerFetch(t0, 2, 300); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("a follower's fetch: %v, want ErrLogFailed", err)
	}
	if err := r.CheckAppend(1); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("a produce: %v, want ErrLogFailed", err)
	}
	r.SetState(t0, []int32{1, 2, 3}, state(1, 5, 11, 1, 2), 0) // the same term, an ISR change
	if got := resigns(r); got != -1 || !r.Resigned() {
		t.Fatalf("same term: resign %d, resigned %v; want still resigned, once", got, r.Resigned())
	}
	// The controller hands the leadership to broker 2: out of the ISR.
	r.SetState(t0, []int32{1, 2, 3}, state(2, 6, 12, 2, 3), 0)
	if got := resigns(r); got != -1 || r.Resigned() || r.IsUnclean() || r.Role() != Follower {
		t.Fatalf("out of the ISR: resign %d, resigned %v, unclean %v, role %v", got, r.Resigned(), r.IsUnclean(), r.Role())
	}
}

// The sole in-sync replica back from an unclean shutdown: it resigns in
// the epoch it led, and the controller, with no one better, gives it the
// leadership alone in a new epoch, which it takes.
func TestUncleanSoleLeader(t *testing.T) {
	r := New(Config{Self: 1}, 40, 40)
	r.Unclean()
	r.SetState(t0, []int32{1, 2, 3}, state(1, 5, 10, 1), 40)
	if got := resigns(r); got != 5 {
		t.Fatalf("alone in the ISR, same epoch: resign %d, want 5 (its followers must see a new epoch)", got)
	}
	r.SetState(t0, []int32{1, 2, 3}, state(1, 6, 11, 1), 40)
	if got := resigns(r); got != -1 || r.Resigned() || r.IsUnclean() || r.Role() != Leader {
		t.Fatalf("alone in a new epoch: resign %d, resigned %v, unclean %v, role %v", got, r.Resigned(), r.IsUnclean(), r.Role())
	}
	if err := r.CheckAppend(1); err != nil {
		t.Fatalf("a produce once led alone in a new epoch: %v", err)
	}
}

// A record in a new epoch that still names others in the ISR (a controller
// that had not heard of the restart) is resigned again; so is a follower's
// ISR membership. A partition with no leader waits (nothing to resign in),
// and the first term with one resigns.
func TestUncleanResignsEveryTermInTheISR(t *testing.T) {
	r := New(Config{Self: 1}, 0, 0)
	r.Unclean()
	r.SetState(t0, []int32{1, 2, 3}, state(meta.NoLeader, 5, 10, 1, 2), 0)
	if got := resigns(r); got != -1 || !r.IsUnclean() {
		t.Fatalf("no leader: resign %d, unclean %v", got, r.IsUnclean())
	}
	r.SetState(t0, []int32{1, 2, 3}, state(1, 6, 11, 1, 2), 0)
	if got := resigns(r); got != 6 {
		t.Fatalf("leader in a new epoch with broker 2 in the ISR: resign %d, want 6", got)
	}
	r.SetState(t0, []int32{1, 2, 3}, state(2, 7, 12, 2, 1), 0)
	if got := resigns(r); got != 7 || r.Role() != Follower {
		t.Fatalf("follower still in the ISR: resign %d, role %v; want a resignation in epoch 7", got, r.Role())
	}
	r.SetState(t0, []int32{1, 2, 3}, state(2, 8, 13, 2), 0)
	if r.IsUnclean() || resigns(r) != -1 {
		t.Fatalf("out of the ISR: still unclean")
	}
	// Once out, rejoining the ISR later is ordinary.
	r.SetState(t0, []int32{1, 2, 3}, state(2, 8, 14, 2, 1), 0)
	if got := resigns(r); got != -1 || r.Resigned() {
		t.Fatalf("rejoined: resign %d, resigned %v", got, r.Resigned())
	}
}

// A single replica, or a record without this broker in the ISR: nothing
// to resign; a replica never told Unclean never resigns.
func TestUncleanNothingToResign(t *testing.T) {
	r := New(Config{Self: 1}, 0, 0)
	r.Unclean()
	r.SetState(t0, []int32{1}, state(1, 5, 10, 1), 0)
	if got := resigns(r); got != -1 || r.IsUnclean() || r.Role() != Leader {
		t.Fatalf("single replica: resign %d, unclean %v, role %v", got, r.IsUnclean(), r.Role())
	}
	r = New(Config{Self: 1}, 0, 0)
	r.Unclean()
	r.SetState(t0, []int32{1, 2, 3}, state(2, 5, 10, 2, 3), 0)
	if got := resigns(r); got != -1 || r.IsUnclean() {
		t.Fatalf("out of the ISR: resign %d, unclean %v", got, r.IsUnclean())
	}
	r = New(Config{Self: 1}, 0, 0)
	r.SetState(t0, []int32{1, 2, 3}, state(1, 5, 10, 1, 2, 3), 0)
	if got := resigns(r); got != -1 || r.Resigned() {
		t.Fatalf("clean: resign %d", got)
	}
}
