package mirror

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

var (
	t0      = time.Unix(1_700_000_000, 0)
	errTest = errors.New("refused")
)

func TestTrackerAckAdvancesAndSyncs(t *testing.T) {
	tr := newTracker("s", "t", 0, 10, 3, time.Second, 8*time.Second)
	for off := int64(10); off < 17; off++ {
		if !tr.send(off, -1, t0) {
			t.Fatalf("send(%d) refused", off)
		}
	}
	for off := int64(10); off < 17; off++ {
		tr.ack(off, off+100, 5, t0)
		if tr.next != off+1 {
			t.Fatalf("after ack(%d): next %d, want %d", off, tr.next, off+1)
		}
	}
	var ups []int64
	for _, s := range tr.takeSyncs() {
		if s.Downstream != s.Upstream+100 {
			t.Errorf("sync %+v: downstream is not the acked target offset", s)
		}
		ups = append(ups, s.Upstream)
	}
	if want := []int64{10, 13, 16}; !equal(ups, want) {
		t.Errorf("syncs at upstream %v, want %v (first ack, then every 3)", ups, want)
	}
	if tr.records != 7 || tr.bytes != 35 {
		t.Errorf("records %d bytes %d, want 7 and 35", tr.records, tr.bytes)
	}
}

func TestTrackerFailureFreezesAndRewinds(t *testing.T) {
	tr := newTracker("s", "t", 0, 0, 100, time.Second, 3*time.Second)
	for off := int64(0); off < 5; off++ {
		tr.send(off, -1, t0)
	}
	tr.ack(0, 0, 1, t0)
	tr.ack(1, 1, 1, t0)
	if !tr.fail(2, errTest, t0) {
		t.Fatal("the first failure of a run did not say so")
	}
	tr.ack(3, 2, 1, t0) // written after the failure: must not move next
	if tr.send(5, -1, t0) {
		t.Error("a failed partition accepted a record")
	}
	if _, due := tr.rewindDue(t0.Add(time.Hour)); due {
		t.Error("rewind due with a record still in flight")
	}
	if tr.fail(4, errTest, t0) {
		t.Error("a second failure of the run claimed to be the first")
	}
	if tr.next != 2 {
		t.Fatalf("next %d after failing at 2, want 2", tr.next)
	}
	if _, due := tr.rewindDue(t0.Add(999 * time.Millisecond)); due {
		t.Error("rewind due before the backoff")
	}
	at, due := tr.rewindDue(t0.Add(time.Second))
	if !due || at != 2 {
		t.Fatalf("rewindDue = %d, %v; want 2, true", at, due)
	}
	tr.rewound()
	if tr.send(1, -1, t0) {
		t.Error("accepted a record from before the rewind point")
	}
	if !tr.send(2, -1, t0) {
		t.Fatal("refused the rewind point")
	}
	// Fails again: the backoff doubles, then stops at the maximum.
	tr.fail(2, errTest, t0)
	if got := tr.retryAt.Sub(t0); got != 2*time.Second {
		t.Errorf("second backoff %v, want 2s", got)
	}
	for range 3 {
		tr.rewound()
		tr.send(2, -1, t0)
		tr.fail(2, errTest, t0)
	}
	if got := tr.retryAt.Sub(t0); got != 3*time.Second {
		t.Errorf("backoff %v after many failures, want the 3s maximum", got)
	}
	tr.rewound()
	tr.send(2, -1, t0)
	tr.ack(2, 7, 1, t0)
	if tr.next != 3 || tr.retries != 0 {
		t.Errorf("after a success: next %d retries %d, want 3 and 0", tr.next, tr.retries)
	}
	if s := tr.takeSyncs(); len(s) == 0 || s[len(s)-1] != (OffsetSync{"s", 0, 2, 7}) {
		t.Errorf("the first ack after a rewind wrote no sync: %v", s)
	}
}

func TestTrackerOutOfOrderAckFailsSafe(t *testing.T) {
	tr := newTracker("s", "t", 0, 0, 100, time.Second, time.Second)
	tr.send(0, -1, t0)
	tr.send(1, -1, t0)
	tr.ack(1, 1, 1, t0)
	if !tr.failed || tr.next != 0 {
		t.Errorf("ack out of order: failed %v next %d, want a failure and next 0", tr.failed, tr.next)
	}
}

func TestTranslate(t *testing.T) {
	var st SyncStore
	for _, s := range []OffsetSync{{"a", 0, 5, 10}, {"a", 0, 100, 110}, {"a", 0, 200, 215}, {"a", 0, 120, 300}, {"a", 1, 0, 0}} {
		st.Add(s)
	}
	for _, tc := range []struct {
		g    int64
		want int64
		ok   bool
	}{
		{3, 0, false}, // below every sync: untranslatable
		{5, 10, true}, // on a sync: exact
		{6, 11, true}, // past it: +1, never more
		{100, 110, true},
		{119, 111, true},
		{150, 301, true}, // a later run (120→300) is the closest sync below
		{200, 215, true},
		{10_000, 216, true},
	} {
		got, ok := st.Translate("a", 0, tc.g)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Translate(a/0, %d) = %d, %v; want %d, %v", tc.g, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := st.Translate("b", 0, 10); ok {
		t.Error("translated a partition without syncs")
	}
}

// TestModelNoSkipAndBoundedReread drives trackers the way the mirror does,
// against a model of the producer (records of a partition resolve in order,
// any may fail, a failure leaves later ones free to succeed) and of crashes
// (trackers lost, restarted from the last committed position; in half the
// seeds), and checks
// the two promises: the target holds every source record, never one before
// all that precede it have appeared; and a group translated at any source
// offset skips nothing and re-reads fewer than the sync interval.
func TestModelNoSkipAndBoundedReread(t *testing.T) {
	const n, every = 2000, 50
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 1))
		crashes := seed%2 == 1
		var target []int64 // source offset of each target record
		var st SyncStore
		committed := int64(0)
		now := t0
		tr := newTracker("s", "t", 0, committed, every, time.Millisecond, time.Millisecond)
		fetched := committed // the consumer's position
		for steps := 0; tr.next < n; steps++ {
			if steps > 100_000 {
				t.Fatalf("seed %d: no progress: next %d", seed, tr.next)
			}
			now = now.Add(time.Millisecond)
			switch r := rng.IntN(100); {
			case r < 2 && crashes: // crash: trackers lost, restart from the commit
				tr = newTracker("s", "t", 0, committed, every, time.Millisecond, time.Millisecond)
				fetched = committed
			case r < 10:
				committed = tr.next
			case r < 50 && fetched < n: // fetch and send a few
				for k := rng.IntN(20); k > 0 && fetched < n; k-- {
					if tr.send(fetched, -1, now) {
						fetched++
					} else {
						break
					}
				}
			default: // resolve a few in order
				for k := rng.IntN(20); k > 0 && tr.inFlight() > 0; k-- {
					off := tr.queue[tr.head].offset
					if r := rng.IntN(100); r < 3 {
						err := errTest
						if r == 0 { // whole batches refused: careful mode
							err = kerr.MessageTooLarge
						}
						tr.fail(off, err, now)
					} else {
						target = append(target, off)
						tr.ack(off, int64(len(target)-1), 1, now)
					}
				}
				for _, s := range tr.takeSyncs() {
					st.Add(s)
				}
				if at, due := tr.rewindDue(now); due {
					tr.rewound()
					fetched = at
				} else if at, due := tr.refetchDue(); due {
					fetched = at
				}
			}
		}
		// Order: the source is a subsequence of the target (re-sent runs
		// aside), so every record is there, after those before it.
		i := int64(0)
		for _, s := range target {
			if s == i {
				i++
			}
		}
		if i != n {
			t.Fatalf("seed %d: source records 0..%d appear in order in the target, then not %d", seed, i-1, i)
		}
		// suffixMin[g] is the smallest over s >= g of the last target
		// position of source s: a start at or before it misses nothing.
		last := make([]int, n)
		positions := make([][]int, n)
		for pos, s := range target {
			last[s] = pos
			positions[s] = append(positions[s], pos)
		}
		suffixMin := make([]int, n+1)
		suffixMin[n] = len(target)
		for g := n - 1; g >= 0; g-- {
			suffixMin[g] = min(suffixMin[g+1], last[g])
		}
		for g := int64(0); g < n; g++ {
			at, ok := st.Translate("s", 0, g)
			if !ok {
				continue
			}
			if int(at) > suffixMin[g] {
				t.Fatalf("seed %d: group at %d translated to %d misses a record at or after %d", seed, g, at, g)
			}
			// After a crash the target holds the crashed run's tail and
			// then the records again from the last commit: a group may
			// read that tail twice (at least once), so the bound holds
			// for a mirror that did not crash, whatever else failed.
			if crashes {
				continue
			}
			first := -1
			for _, pos := range positions[g] {
				if pos >= int(at) {
					first = pos
					break
				}
			}
			reread := 0
			for _, s := range target[at:first] {
				if s < g {
					reread++
				}
			}
			if reread >= every {
				t.Fatalf("seed %d: group at %d translated to %d re-reads %d records, want < %d", seed, g, at, reread, every)
			}
		}
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTrackerBatchesAndSkips: forwarding sends whole batches (one entry
// per batch, its last offset); a skipped marker moves the position only
// once nothing is in flight before it; a duplicate ack writes no sync.
func TestTrackerBatchesAndSkips(t *testing.T) {
	tr := newTracker("s", "t", 0, 0, 1, time.Second, 8*time.Second)
	if !tr.sendBatch(0, 4, -1, t0) || !tr.sendBatch(5, 9, -1, t0) {
		t.Fatal("sendBatch refused")
	}
	if tr.sendBatch(3, 7, -1, t0) {
		t.Error("a batch wholly below the expected offset was accepted")
	}
	tr.skipped(10, 10) // a marker after the batches in flight
	if tr.next != 0 {
		t.Fatalf("a marker moved next to %d with batches in flight", tr.next)
	}
	tr.ack(4, 104, 50, t0)
	if tr.next != 5 {
		t.Fatalf("after the first batch: next %d, want 5", tr.next)
	}
	tr.ackNoSync(9, 50, t0) // the target answered "duplicate"
	if tr.next != 11 {
		t.Fatalf("after the last batch, past the marker: next %d, want 11", tr.next)
	}
	for _, s := range tr.takeSyncs() {
		if s.Downstream < 0 {
			t.Errorf("a sync without a target offset: %+v", s)
		}
	}
	tr.skipped(11, 12) // nothing in flight: at once
	if tr.next != 13 || tr.expect != 13 {
		t.Errorf("after a marker with nothing in flight: next %d expect %d, want 13 and 13", tr.next, tr.expect)
	}
}

// TestTrackerAbortTo: an aborted transaction (exactly once) drops what was
// in flight and acknowledged since, and goes back to the committed position.
func TestTrackerAbortTo(t *testing.T) {
	tr := newTracker("s", "t", 0, 10, 100, time.Second, 8*time.Second)
	for off := int64(10); off < 15; off++ {
		tr.send(off, -1, t0)
	}
	tr.ack(10, 0, 1, t0)
	tr.ack(11, 1, 1, t0)
	tr.fail(12, errTest, t0)
	tr.abortTo(10, t0)
	if tr.next != 10 || tr.expect != 10 || tr.base != 10 || tr.inFlight() != 0 || tr.failed {
		t.Fatalf("after abortTo(10): next %d expect %d base %d in flight %d failed %v", tr.next, tr.expect, tr.base, tr.inFlight(), tr.failed)
	}
	if !tr.send(10, -1, t0) {
		t.Error("the committed position's record is refused after the abort")
	}
}

// TestTrackerTruncateAndReset: the consumer coming back below the records
// accepted (the source's log truncated) stops the sends; the reset is due
// only once what is in flight is settled, with the position and the leader
// epoch of the record before it; resetTo moves both back.
func TestTrackerTruncateAndReset(t *testing.T) {
	tr := newTracker("s", "t", 0, 0, 100, time.Second, time.Second)
	for off := int64(0); off < 5; off++ {
		epoch := int32(3)
		if off >= 3 {
			epoch = 4
		}
		if !tr.send(off, epoch, t0) {
			t.Fatalf("send(%d) refused", off)
		}
	}
	for off := int64(0); off < 3; off++ {
		tr.ack(off, off, 1, t0)
	}
	if tr.next != 3 || tr.epoch != 3 {
		t.Fatalf("after acks up to 2: position %d epoch %d, want 3 and 3", tr.next, tr.epoch)
	}
	if tr.truncate(5) {
		t.Fatal("a move to the offset expected next counted as a truncation")
	}
	if !tr.truncate(2) {
		t.Fatal("a move below the records accepted was not news")
	}
	if tr.truncate(0) {
		t.Fatal("a second sign of the same truncation was news")
	}
	if tr.send(5, 4, t0) || tr.send(0, 5, t0) {
		t.Fatal("a truncated partition accepted a record")
	}
	if _, _, due := tr.resetDue(); due {
		t.Fatal("reset due with records in flight")
	}
	tr.ack(3, 3, 1, t0)
	tr.ack(4, 4, 1, t0)
	at, epoch, due := tr.resetDue()
	if !due || at != 5 || epoch != 4 {
		t.Fatalf("settled: resetDue = %d, %d, %v; want 5, 4, true", at, epoch, due)
	}
	tr.resetTo(2)
	if tr.next != 2 || tr.expect != 2 || tr.epoch != -1 || tr.truncated {
		t.Fatalf("after resetTo(2): position %d, expecting %d, epoch %d, truncated %v; want 2, 2, -1, false",
			tr.next, tr.expect, tr.epoch, tr.truncated)
	}
	if tr.send(1, 5, t0) || !tr.send(2, 5, t0) {
		t.Fatal("after the reset: want 1 refused, 2 accepted")
	}
	tr.ack(2, 5, 1, t0)
	if tr.next != 3 || tr.epoch != 5 {
		t.Fatalf("after the re-copy: position %d epoch %d, want 3 and 5", tr.next, tr.epoch)
	}

	// A failure's rewind comes first; the truncation stays pending
	// through it (the source may have grown past the position since),
	// and is due right after.
	tr.send(3, 5, t0)
	tr.fail(3, errTest, t0)
	tr.truncate(0)
	if _, _, due := tr.resetDue(); due {
		t.Fatal("reset due on a failed partition")
	}
	if at, due := tr.rewindDue(t0.Add(time.Hour)); !due || at != 3 {
		t.Fatalf("rewindDue = %d, %v; want 3, true", at, due)
	}
	tr.rewound()
	if !tr.truncated || tr.send(3, 5, t0) {
		t.Fatalf("after the rewind: truncated %v, want true and 3 refused", tr.truncated)
	}
	if at, epoch, due := tr.resetDue(); !due || at != 3 || epoch != 5 {
		t.Fatalf("after the rewind: resetDue = %d, %d, %v; want 3, 5, true", at, epoch, due)
	}
}

// TestTrackerSyncsFirstBatchStart: forwarding syncs a batch by its last
// record, so a group inside the first batch forwarded would have no sync
// at or below it; the first batch's first record is synced too, and the
// group translates (re-reading, never skipping).
func TestTrackerSyncsFirstBatchStart(t *testing.T) {
	t0 := time.Unix(0, 0)
	tr := newTracker("s", "s", 0, 0, 1000, time.Millisecond, time.Millisecond)
	if !tr.sendBatch(0, 39, 3, t0) || !tr.sendBatch(40, 79, 3, t0) {
		t.Fatal("sendBatch refused")
	}
	tr.syncStart(0, 100)
	tr.ack(39, 139, 1, t0)
	tr.syncStart(40, 140) // not the first: its last record's sync is enough
	tr.ack(79, 179, 1, t0)
	st := &SyncStore{}
	for _, s := range tr.takeSyncs() {
		st.Add(s)
	}
	for _, c := range []struct{ group, want int64 }{{0, 100}, {30, 101}, {39, 139}, {40, 140}, {60, 140}} {
		if got, ok := st.Translate("s", 0, c.group); !ok || got != c.want {
			t.Errorf("group at %d: translated to %d (%v), want %d", c.group, got, ok, c.want)
		}
	}
	if tr.epoch != 3 || tr.next != 80 {
		t.Errorf("position %d at epoch %d, want 80 at 3", tr.next, tr.epoch)
	}
}
