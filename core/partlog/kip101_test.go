package partlog

import (
	"bytes"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
)

// The two scenarios of KIP-101 (which made Kafka truncate followers by
// leader epoch instead of by high watermark), played on two logs: the
// leader's answers from EndOffsetForEpoch drive the follower's truncation
// to the right offset. Replication itself (who leads, the high watermark)
// is core/replica's; here the test plays it.

// truncateFollower applies the follower's rule (Kafka's
// AbstractFetcherThread.getOffsetTruncationState, KIP-101 and KIP-279): ask
// the leader where the follower's latest epoch ends; if the leader answers
// with that epoch, truncate to min(leader's end, the follower's own end of
// the epoch, its log end); if it answers with an older epoch the follower
// may lack, truncate to the follower's end of that one and ask again. It
// returns where the follower was truncated to.
func truncateFollower(t *testing.T, follower, leader *Log) int64 {
	t.Helper()
	for {
		latest, ok := follower.LatestEpoch()
		if !ok {
			return follower.EndOffset()
		}
		le, leaderEnd := leader.EndOffsetForEpoch(latest)
		if le == UndefinedEpoch {
			t.Fatalf("the leader does not know epoch %d (the follower would fall back to its high watermark)", latest)
		}
		fe, localEnd := follower.EndOffsetForEpoch(le)
		to := min(localEnd, follower.EndOffset())
		done := fe == le
		if done {
			to = min(to, leaderEnd)
		}
		if err := follower.Truncate(to); err != nil {
			t.Fatal(err)
		}
		if done {
			return to
		}
	}
}

// replicate copies what leader holds past the follower's end.
func replicate(t *testing.T, follower, leader *Log) {
	t.Helper()
	copyLog(t, leader, follower, follower.EndOffset(), 1<<20)
}

func mustAppend(t *testing.T, l *Log, b []byte, epoch int32) AppendResult {
	t.Helper()
	res, err := l.Append(ctx, b, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func reopen(t *testing.T, l *Log, fsys vfs.FS) *Log {
	t.Helper()
	_ = l.Close()
	l2, _ := mustOpen(t, fsys, Config{})
	t.Cleanup(func() { _ = l2.Close() })
	return l2
}

// Scenario 1, "high watermark truncation followed by immediate leader
// election": follower A holds m2, but its high watermark (learnt one fetch
// late) is below it. A restarts; truncating to its high watermark would drop
// m2, which leader B counts as committed, and B then dies, leaving A the
// leader without it. By epoch, A asks B where its epoch 1 ends (B's log end,
// 2), keeps m2, and leads with it.
func TestKIP101HighWatermarkTruncation(t *testing.T) {
	memA, memB := memFS(t), memFS(t)
	a, _ := mustOpen(t, memA, Config{})
	b, _ := mustOpen(t, memB, Config{})
	defer func() { _ = b.Close() }()
	if err := b.AssignEpoch(1, 0); err != nil {
		t.Fatal(err)
	}
	m1, m2 := batch(1, 1, 50), batch(2, 1, 50)
	mustAppend(t, b, m1, 1)
	replicate(t, a, b)
	followerHW := a.EndOffset() // A's fetch at 1 tells it the HW B had then: 1
	mustAppend(t, b, m2, 1)
	replicate(t, a, b) // B's HW moves to 2 with this fetch; A learns it only with the next
	if a.EndOffset() != 2 || followerHW != 1 {
		t.Fatalf("setup: A ends at %d with HW %d", a.EndOffset(), followerHW)
	}
	if err := a.Flush(a.EndOffset()); err != nil {
		t.Fatal(err)
	}
	a = reopen(t, a, memA) // A restarts
	to := truncateFollower(t, a, b)
	if to != 2 || a.EndOffset() != 2 || to <= followerHW {
		t.Fatalf("A truncated to %d (high watermark %d): m2 lost", to, followerHW)
	}
	// B dies; A leads epoch 2 with m2.
	if err := a.AssignEpoch(2, a.EndOffset()); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, a, batch(3, 1, 50), 2)
	checkEpochs(t, a, []EpochEntry{{1, 0}, {2, 2}})
	got := rawBatches(t, a)
	if len(got) != 3 || !bytes.Equal(got[1][61:], m2[61:]) {
		t.Fatalf("A's log after the election: %d batches, m2 kept %v", len(got), len(got) > 1 && bytes.Equal(got[1][61:], m2[61:]))
	}
}

// Scenario 2, "replica divergence on restart after multiple hard
// failures": both replicas lose power; leader B had not flushed m2, follower
// A had. B comes back first, leads epoch 2 and writes m3 at m2's offset;
// then A comes back holding m2. High-watermark truncation cannot see that
// the logs differ at offset 1. By epoch, A asks where its epoch 1 ends: B's
// epoch 2 starts at 1, so epoch 1 ends there; A cuts m2 and copies m3.
func TestKIP101DivergenceAfterHardFailures(t *testing.T) {
	memA, memB := memFS(t), memFS(t)
	a, _ := mustOpen(t, memA, Config{})
	b, _ := mustOpen(t, memB, Config{})
	if err := b.AssignEpoch(1, 0); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, b, batch(1, 1, 50), 1)
	if err := b.Flush(b.EndOffset()); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, b, batch(2, 1, 50), 1) // m2: in B's page cache only
	replicate(t, a, b)
	if err := a.Flush(a.EndOffset()); err != nil { // A has m2 on disk
		t.Fatal(err)
	}
	// Power cut on both.
	cloneA, cloneB := memA.CrashClone(), memB.CrashClone()
	_ = a.Close()
	_ = b.Close()
	b, _ = mustOpen(t, cloneB, Config{})
	defer func() { _ = b.Close() }()
	if b.EndOffset() != 1 {
		t.Fatalf("B came back with end %d, want 1 (m2 lost)", b.EndOffset())
	}
	if err := b.AssignEpoch(2, b.EndOffset()); err != nil {
		t.Fatal(err)
	}
	m3 := batch(3, 1, 50)
	mustAppend(t, b, m3, 2) // at offset 1, where A holds m2
	a, _ = mustOpen(t, cloneA, Config{})
	defer func() { _ = a.Close() }()
	if a.EndOffset() != 2 || b.EndOffset() != 2 {
		t.Fatalf("setup: A ends at %d, B at %d", a.EndOffset(), b.EndOffset())
	}
	if e, end := b.EndOffsetForEpoch(1); e != 1 || end != 1 {
		t.Fatalf("B: epoch 1 ends at (%d, %d), want (1, 1)", e, end)
	}
	if to := truncateFollower(t, a, b); to != 1 {
		t.Fatalf("A truncated to %d, want 1 (where m2 diverges)", to)
	}
	replicate(t, a, b)
	sameLog(t, b, a)
}

// KIP-279: the leader answers with an epoch the follower lacks. Both hold
// epoch 1 at [0, 3); the leader then wrote epoch 2 at [3, 5), which the
// follower never got, and leads epoch 5 from 5; the follower wrote epoch 3
// at [3, 6) on its own. Asked for epoch 3, the leader answers (2, 5); the
// follower has no epoch 2, so it truncates to the end of its largest epoch
// below (1, ending at 3), asks again for epoch 1, and stays at 3, where the
// logs agree.
func TestKIP279EpochTheFollowerLacks(t *testing.T) {
	a, _ := mustOpen(t, memFS(t), Config{})
	defer func() { _ = a.Close() }()
	b, _ := mustOpen(t, memFS(t), Config{})
	defer func() { _ = b.Close() }()
	for i := range 3 {
		mustAppend(t, b, batch(i, 1, 40), 1)
	}
	replicate(t, a, b)
	for i := range 2 {
		mustAppend(t, b, batch(10+i, 1, 40), 2)
	}
	for i := range 3 {
		mustAppend(t, a, batch(20+i, 1, 40), 3)
	}
	if err := b.AssignEpoch(5, b.EndOffset()); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		mustAppend(t, b, batch(30+i, 1, 40), 5)
	}
	if e, end := b.EndOffsetForEpoch(3); e != 2 || end != 5 {
		t.Fatalf("the leader answers epoch 3 with (%d, %d), want (2, 5)", e, end)
	}
	if e, end := a.EndOffsetForEpoch(2); e != 1 || end != 3 {
		t.Fatalf("the follower's end of epoch 2: (%d, %d), want (1, 3)", e, end)
	}
	if to := truncateFollower(t, a, b); to != 3 {
		t.Fatalf("the follower truncated to %d, want 3", to)
	}
	checkEpochs(t, a, []EpochEntry{{1, 0}})
	replicate(t, a, b)
	sameLog(t, b, a)
}
