package wakeup

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ready reports whether w's channel holds a token (and takes it).
func ready(w *Waiter) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

func TestFireReportsKeys(t *testing.T) {
	type step struct {
		fire  []int // sources to fire, by index
		close bool  // close the waiter first
		want  []int // then Fired reports these keys
		woke  bool  // and C held a token
	}
	for _, tc := range []struct {
		name  string
		watch [][2]int // (source, key)
		steps []step
	}{
		{"nothing fired", [][2]int{{0, 0}}, []step{{want: nil}}},
		{"one source", [][2]int{{0, 7}}, []step{{fire: []int{0}, want: []int{7}, woke: true}, {want: nil}}},
		{"fires coalesce until taken", [][2]int{{0, 1}, {1, 2}},
			[]step{{fire: []int{0, 0, 1, 0}, want: []int{1, 2}, woke: true}, {fire: []int{0}, want: []int{1}, woke: true}}},
		{"firing order", [][2]int{{0, 0}, {1, 1}, {2, 2}},
			[]step{{fire: []int{2, 0, 1}, want: []int{2, 0, 1}, woke: true}}},
		{"unwatched source", [][2]int{{0, 0}}, []step{{fire: []int{1}, want: nil}}},
		{"a key on two sources", [][2]int{{0, 5}, {1, 5}},
			[]step{{fire: []int{0, 1}, want: []int{5, 5}, woke: true}, {fire: []int{1}, want: []int{5}, woke: true}}},
		{"two keys on one source", [][2]int{{0, 1}, {0, 2}}, []step{{fire: []int{0}, want: []int{1, 2}, woke: true}}},
		{"closed", [][2]int{{0, 0}, {1, 1}}, []step{{close: true, fire: []int{0, 1}, want: nil}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcs := make([]Source, 3)
			w := NewWaiter(1) // small: Watch must grow it
			for _, sk := range tc.watch {
				w.Watch(&srcs[sk[0]], sk[1])
			}
			for i, st := range tc.steps {
				if st.close {
					w.Close()
				}
				for _, s := range st.fire {
					srcs[s].Fire()
				}
				if woke := ready(w); woke != st.woke {
					t.Fatalf("step %d: woke %v, want %v", i, woke, st.woke)
				}
				if got := w.Fired(nil); !slices.Equal(got, st.want) {
					t.Fatalf("step %d: fired %v, want %v", i, got, st.want)
				}
			}
			w.Close()
			w.Close() // twice is harmless
			for i := range srcs {
				if n := srcs[i].Waiters(); n != 0 {
					t.Fatalf("source %d keeps %d registrations after Close", i, n)
				}
			}
		})
	}
}

// Many waiters on one source each get their key; closing some leaves the
// others registered, in any order.
func TestManyWaitersOneSource(t *testing.T) {
	var s Source
	ws := make([]*Waiter, 50)
	for i := range ws {
		ws[i] = NewWaiter(1)
		ws[i].Watch(&s, i)
	}
	for i := 0; i < len(ws); i += 3 {
		ws[i].Close()
	}
	s.Fire()
	open := 0
	for i, w := range ws {
		got := w.Fired(nil)
		switch {
		case i%3 == 0 && len(got) != 0:
			t.Fatalf("closed waiter %d fired %v", i, got)
		case i%3 != 0 && !slices.Equal(got, []int{i}):
			t.Fatalf("waiter %d fired %v", i, got)
		case i%3 != 0:
			open++
		}
	}
	if s.Waiters() != open {
		t.Fatalf("%d registrations, want %d", s.Waiters(), open)
	}
}

// No fire is lost: a waiter that registers, then reads the published
// values, and from then on re-reads whatever fired, sees every source's
// last value, whatever the interleaving of firers. A lost wake-up leaves it
// waiting: the test fails at its deadline.
func TestNoLostWakeup(t *testing.T) {
	const sources, firers, perFirer = 16, 4, 2000
	srcs := make([]Source, sources)
	vals := make([]atomic.Int64, sources)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w := NewWaiter(sources)
		defer w.Close()
		seen := make([]int64, sources)
		for i := range srcs {
			w.Watch(&srcs[i], i)
		}
		for i := range vals {
			seen[i] = vals[i].Load()
		}
		want := int64(firers * perFirer / sources)
		var buf []int
		for {
			complete := true
			for i := range seen {
				complete = complete && seen[i] == want
			}
			if complete {
				return
			}
			select {
			case <-w.C():
			case <-time.After(20 * time.Second):
				t.Errorf("lost wake-up: saw %v, want %d each", seen, want)
				return
			}
			buf = w.Fired(buf[:0])
			for _, k := range buf {
				seen[k] = vals[k].Load()
			}
		}
	}()
	var wg sync.WaitGroup
	for f := range firers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perFirer {
				s := (f*perFirer + i) % sources
				vals[s].Add(1)
				srcs[s].Fire()
			}
		}()
	}
	wg.Wait()
	<-done
}

// Randomized: waiters come and go (registering with random sources,
// closing) while others fire; -race checks the locking, and at the end every
// source is empty and every key a live waiter took was one it registered
// with a source that fired.
func TestConcurrentRegisterFireClose(t *testing.T) {
	const sources = 8
	srcs := make([]Source, sources)
	var fires atomic.Int64
	stop := make(chan struct{})
	var firers sync.WaitGroup
	for range 2 {
		firers.Add(1)
		go func() {
			defer firers.Done()
			r := rand.New(rand.NewPCG(1, 2))
			for {
				select {
				case <-stop:
					return
				default:
				}
				srcs[r.IntN(sources)].Fire()
				fires.Add(1)
			}
		}()
	}
	var waiters sync.WaitGroup
	for g := range 4 {
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			var buf []int
			for range 300 {
				w := NewWaiter(4)
				keys := map[int]bool{}
				for range 1 + r.IntN(6) {
					k := 100*g + r.IntN(50)
					keys[k] = true
					w.Watch(&srcs[r.IntN(sources)], k)
				}
				for range r.IntN(3) {
					ready(w)
					buf = w.Fired(buf[:0])
					for _, k := range buf {
						if !keys[k] {
							t.Errorf("waiter %d: fired key %d it never registered", g, k)
						}
					}
				}
				w.Close()
			}
		}()
	}
	waiters.Wait()
	close(stop)
	firers.Wait()
	for i := range srcs {
		if n := srcs[i].Waiters(); n != 0 {
			t.Fatalf("source %d keeps %d registrations", i, n)
		}
	}
	if fires.Load() == 0 {
		t.Fatal("nothing fired")
	}
}

// BenchmarkFireParked: a waiter registered with 10,000 sources; one of them
// fires and the waiter takes what fired. The cost is independent of the
// other 9,999.
func BenchmarkFireParked(b *testing.B) {
	srcs := make([]Source, 10_000)
	w := NewWaiter(len(srcs))
	defer w.Close()
	for i := range srcs {
		w.Watch(&srcs[i], i)
	}
	var buf []int
	b.ReportAllocs()
	for b.Loop() {
		srcs[0].Fire()
		<-w.C()
		buf = w.Fired(buf[:0])
	}
}

// BenchmarkFireNobody: a fire with nobody waiting (every append of a
// partition no fetch is parked on).
func BenchmarkFireNobody(b *testing.B) {
	var s Source
	for b.Loop() {
		s.Fire()
	}
}

// BenchmarkWatch10k: registering with, and closing on, 10,000 sources (once
// per parked Fetch of 10,000 partitions).
func BenchmarkWatch10k(b *testing.B) {
	srcs := make([]Source, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		w := NewWaiter(len(srcs))
		for i := range srcs {
			w.Watch(&srcs[i], i)
		}
		w.Close()
	}
}
