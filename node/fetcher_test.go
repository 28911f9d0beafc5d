package node

import (
	"context"
	"testing"
	"time"
)

// A partition handed to a fetcher whose Fetch is in flight without it cuts
// that Fetch short (the partition would otherwise wait for the long poll);
// one the Fetch carries, as it wants to be fetched, does not.
func TestFetcherInterruptsForNewPartitions(t *testing.T) {
	a, b := &replicated{}, &replicated{}
	fs := &fetchers{by: map[int32]*fetcher{}, of: map[*replicated]*fetcher{}}
	f := &fetcher{fs: fs, source: 1, parts: map[*replicated]*fetchPart{}, wake: make(chan struct{}, 1)}
	fs.by[1] = f
	fs.fetch(a, 1, 5, 0)

	cuts := 0
	inFlight := func(qs ...queued) {
		_, cancel := context.WithCancel(context.Background())
		f.mu.Lock()
		f.inFlight, f.interrupted = qs, false
		f.interrupt = func() { cuts++; cancel() }
		f.mu.Unlock()
	}
	inFlight(queued{a, 5})
	fs.fetch(a, 1, 5, 0) // carried as it is: no cut
	if cuts != 0 {
		t.Fatalf("a partition the Fetch carries cut it short")
	}
	fs.fetch(b, 1, 5, 0) // new: cut
	fs.fetch(b, 1, 5, 0) // already cut: once is enough
	if cuts != 1 {
		t.Fatalf("%d cuts for a new partition, want 1", cuts)
	}

	inFlight(queued{a, 5}, queued{b, 5})
	fs.fetch(a, 1, 6, 0) // a new epoch
	if cuts != 2 {
		t.Fatalf("a new epoch did not cut the Fetch short")
	}
	inFlight(queued{a, 6}, queued{b, 5})
	fs.query(b, 1, 5) // an epoch query
	if cuts != 3 {
		t.Fatalf("an epoch query did not cut the Fetch short")
	}

	f.mu.Lock()
	f.inFlight, f.interrupt = nil, nil
	f.mu.Unlock()
	f.snapshot()
	fs.fetch(b, 1, 7, 0) // no Fetch in flight: the next one, if prepared already, waits
	if cuts != 3 {
		t.Fatalf("a cut with no Fetch in flight")
	}
	if f.mu.Lock(); !f.changed {
		t.Errorf("a partition arriving while a Fetch is prepared is not noted")
	}
	f.mu.Unlock()
	if _, fetches, _ := f.snapshot(); len(fetches) != 2 || f.changed {
		t.Errorf("snapshot: %d partitions to fetch, changed %v", len(fetches), f.changed)
	}
}

// An epoch query in flight is cut short like a Fetch (on a connection that
// died without a word it would otherwise hold its partitions for the
// request timeout), and the request in flight is cut when the fetcher has
// nothing left to do: its source may be gone.
func TestFetcherInterruptsQueriesAndWhenEmpty(t *testing.T) {
	a, b := &replicated{}, &replicated{}
	fs := &fetchers{by: map[int32]*fetcher{}, of: map[*replicated]*fetcher{}}
	f := &fetcher{fs: fs, source: 1, parts: map[*replicated]*fetchPart{}, wake: make(chan struct{}, 1)}
	fs.by[1] = f
	fs.query(a, 1, 5)

	cuts := 0
	inFlight := func(query bool, qs ...queued) {
		f.mu.Lock()
		f.inFlight, f.inQuery, f.interrupted = qs, query, false
		f.interrupt = func() { cuts++ }
		f.mu.Unlock()
	}
	inFlight(true, queued{a, 5})
	fs.query(a, 1, 5) // the query carries it: no cut
	if cuts != 0 {
		t.Fatalf("a partition the query carries cut it short")
	}
	fs.fetch(a, 1, 5, 0) // the same partition, to fetch now: not what is asked
	if cuts != 1 {
		t.Fatalf("%d cuts of a query for a partition to fetch, want 1", cuts)
	}
	inFlight(true, queued{a, 5})
	fs.query(b, 1, 5) // new
	if cuts != 2 {
		t.Fatalf("a new partition did not cut the query short")
	}

	inFlight(false, queued{a, 5}, queued{b, 5})
	fs.remove(a)
	if cuts != 2 {
		t.Fatalf("dropping one of two partitions cut the Fetch short")
	}
	fs.remove(b)
	if cuts != 3 {
		t.Fatalf("the fetcher has nothing left to do, and its Fetch was not cut short")
	}
	if f.end(); f.interrupt != nil || len(f.inFlight) != 0 {
		t.Fatalf("end left a request in flight")
	}
}

// A Fetch's long poll ends when a partition held back after an error may go
// again, so that it is not held back longer.
func TestLongPollEndsWithBackoff(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		backedOff time.Time
		want      time.Duration
	}{
		{time.Time{}, replicaFetchWait},
		{now.Add(time.Second), replicaFetchWait},
		{now.Add(20 * time.Millisecond), 20 * time.Millisecond},
		{now.Add(-time.Second), time.Millisecond},
	} {
		if got := longPoll(c.backedOff, now); got != c.want {
			t.Errorf("backed off until %v: long poll %v, want %v", c.backedOff.Sub(now), got, c.want)
		}
	}
}
