package txn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestRandomized drives a machine with random requests, ticks, and log and
// marker outcomes (successes, failures, in random order across ids) and
// checks its invariants after every step; at the end it settles everything
// and checks that every parked request was answered and that replaying the
// log gives the machine's state.
func TestRandomized(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandom(t, seed, 400) })
	}
}

func runRandom(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	h := newHarness(t)
	h.m.cfg = &config{maxTimeout: DefaultMaxTimeout, expiration: time.Hour, markerBackoff: time.Second,
		completionWait: 2 * time.Second}
	ids := []string{"a", "b", "c"}
	parts := []TopicPartition{tp("t", 0), tp("t", 1), tp("u", 0)}
	// What each id's producers know: the latest answer of InitProducerId.
	type producer struct {
		pid   int64
		epoch int16
	}
	known := map[string]producer{}
	parked := map[uint64]bool{}
	ends := map[uint64]string{} // the parked EndTxn requests: their ids
	prev := map[string]meta{}   // the committed state after the last step
	// marked are the partitions whose marker landed for the current
	// Prepare state of each id.
	marked := map[string]map[TopicPartition]bool{}
	check := func(step int, what string) {
		t.Helper()
		for id, e := range h.m.txns {
			old, had := prev[id]
			if had && e.meta.State != old.State && !allowed(old.State, e.meta.State) {
				t.Fatalf("step %d (%s): %q went %v -> %v", step, what, id, old.State, e.meta.State)
			}
			if had && e.ProducerID == old.ProducerID && e.Epoch < old.Epoch {
				t.Fatalf("step %d (%s): %q's epoch went back %d -> %d", step, what, id, old.Epoch, e.Epoch)
			}
			if had && e.ProducerID != old.ProducerID && (e.Epoch != 0 || old.Epoch < maxEpoch) {
				t.Fatalf("step %d (%s): %q's producer id changed at epoch %d", step, what, id, old.Epoch)
			}
			if (e.State == CompleteCommit || e.State == CompleteAbort) && had &&
				(old.State == PrepareCommit || old.State == PrepareAbort) {
				for tp := range old.Partitions {
					if !marked[id][tp] {
						t.Fatalf("step %d (%s): %q completed without the marker of %v", step, what, id, tp)
					}
				}
			}
			if e.State == Ongoing && e.pending == nil && !h.now.Before(e.Start.Add(e.Timeout)) && what == "tick" &&
				!h.now.Before(e.retryAt) { // a failed abort waits out its backoff
				t.Fatalf("step %d: %q open past its timeout after a tick", step, id)
			}
			if (e.State == PrepareCommit || e.State == PrepareAbort) && e.unmarked == nil {
				t.Fatalf("step %d: %q is %v with no markers to write", step, id, e.State)
			}
		}
		pending := map[string]int{}
		for _, w := range h.writes {
			if e := h.m.txns[w.ID]; e != nil && e.pending != nil &&
				w.ApplyOnAppend != (e.pending.State == CompleteCommit || e.pending.State == CompleteAbort) {
				t.Fatalf("step %d (%s): a write of %q to %v applied once appended: %v", step, what, w.ID, e.pending.State, w.ApplyOnAppend)
			}
			pending[w.ID]++
			if pending[w.ID] > 1 {
				t.Fatalf("step %d (%s): two writes of %q outstanding", step, what, w.ID)
			}
			if e := h.m.txns[w.ID]; e == nil || e.pending == nil {
				t.Fatalf("step %d (%s): a write of %q that is not pending", step, what, w.ID)
			}
		}
		for _, mw := range h.markers {
			e := h.m.txns[mw.ID]
			if e == nil || (e.State != PrepareCommit && e.State != PrepareAbort) ||
				mw.Marker.Commit != (e.State == PrepareCommit) || mw.Marker.ProducerEpoch != e.Epoch ||
				mw.Marker.ProducerID != e.ProducerID {
				t.Fatalf("step %d (%s): marker write %+v for %q in %+v", step, what, mw, mw.ID, e)
			}
			for _, p := range mw.Partitions {
				if _, in := e.Partitions[p]; !in {
					t.Fatalf("step %d: marker for %v, not in %q's transaction", step, p, mw.ID)
				}
			}
		}
		for w := range parked {
			r, ok := h.replies[w]
			if !ok {
				continue
			}
			delete(parked, w)
			id, end := ends[w]
			delete(ends, w)
			if !end || r.Err != nil {
				continue
			}
			// A parked EndTxn succeeds once its transaction completes,
			// or at a tick past the completion wait.
			e := h.m.txns[id]
			switch {
			case e == nil:
				t.Fatalf("step %d (%s): EndTxn of %q answered, the id forgotten", step, what, id)
			case e.State == CompleteCommit || e.State == CompleteAbort:
			case (e.State == PrepareCommit || e.State == PrepareAbort) && (what == "tick" || what == "settle"):
				// (Settling ticks too.)
			default:
				t.Fatalf("step %d (%s): EndTxn of %q answered in %v", step, what, id, e.State)
			}
		}
		clear(prev)
		for id, e := range h.m.txns {
			prev[id] = e.meta.clone()
			if e.State != PrepareCommit && e.State != PrepareAbort {
				delete(marked, id)
			}
		}
	}
	for step := range steps {
		id := ids[rng.IntN(len(ids))]
		p := known[id]
		if rng.IntN(5) == 0 { // a zombie: an older epoch
			p.epoch--
		}
		var what string
		switch op := rng.IntN(10); op {
		case 0:
			what = "init"
			w := h.waiter()
			r := InitRequest{ID: id, Timeout: time.Duration(1+rng.IntN(30)) * time.Second, ProducerID: -1, Epoch: -1}
			if rng.IntN(3) == 0 {
				r.ProducerID, r.Epoch = p.pid, p.epoch
			}
			if ok, _ := h.m.initProducerID(h.now, r, w, h.newPID); ok {
				parked[w] = true
			}
		case 1, 2, 3:
			what = "add"
			w := h.waiter()
			r := AddRequest{ID: id, ProducerID: p.pid, Epoch: p.epoch, Partitions: []TopicPartition{parts[rng.IntN(len(parts))]}}
			if ok, _ := h.m.addPartitions(h.now, r, w); ok {
				parked[w] = true
			}
		case 4:
			what = "end"
			w := h.waiter()
			if ok, _ := h.m.endTxn(h.now, EndRequest{ID: id, ProducerID: p.pid, Epoch: p.epoch, Commit: rng.IntN(2) == 0}, w); ok {
				parked[w] = true
				ends[w] = id
			}
		case 5:
			what = "tick"
			h.now = h.now.Add(time.Duration(rng.IntN(20_000)) * time.Millisecond)
			h.m.tick(h.now)
		case 6, 7:
			what = "write"
			if len(h.writes) > 0 {
				i := rng.IntN(len(h.writes))
				w := h.writes[i]
				h.writes = slices.Delete(h.writes, i, i+1)
				var err error
				if rng.IntN(6) == 0 {
					err = errors.New("write failed")
				} else {
					h.log = append(h.log, w)
				}
				h.m.written(h.now, w.ID, err)
			}
		case 8, 9:
			what = "markers"
			if len(h.markers) > 0 {
				i := rng.IntN(len(h.markers))
				mw := h.markers[i]
				h.markers = slices.Delete(h.markers, i, i+1)
				var done []TopicPartition
				for _, p := range mw.Partitions {
					if rng.IntN(4) != 0 {
						done = append(done, p)
						if marked[mw.ID] == nil {
							marked[mw.ID] = map[TopicPartition]bool{}
						}
						marked[mw.ID][p] = true
					}
				}
				h.m.marked(h.now, mw.ID, done)
			}
		}
		h.collect()
		for w, r := range h.replies {
			if r.Err == nil && r.Epoch >= 0 {
				// An InitProducerId answer: the producer's new identity.
				for id2, e := range h.m.txns {
					if e.ProducerID == r.ProducerID && e.Epoch == r.Epoch {
						known[id2] = producer{r.ProducerID, r.Epoch}
					}
				}
				h.replies[w] = Reply{Waiter: w, Epoch: -1}
			}
		}
		check(step, what)
	}
	// Settle: every write and marker succeeds, time passes past every
	// timeout.
	for range 100 {
		for len(h.writes) > 0 || len(h.markers) > 0 {
			for len(h.writes) > 0 {
				h.commit(nil)
			}
			for len(h.markers) > 0 {
				mw := h.markers[0]
				for _, p := range mw.Partitions {
					if marked[mw.ID] == nil {
						marked[mw.ID] = map[TopicPartition]bool{}
					}
					marked[mw.ID][p] = true
				}
				h.mark(all)
			}
			check(steps, "settle")
		}
		h.now = h.now.Add(time.Minute)
		h.m.tick(h.now)
		h.collect()
		if len(h.writes) == 0 && len(h.markers) == 0 {
			break
		}
	}
	if len(parked) > 0 {
		t.Fatalf("%d parked requests never answered", len(parked))
	}
	for id, e := range h.m.txns {
		if e.State != Empty && e.State != CompleteCommit && e.State != CompleteAbort {
			t.Fatalf("%q is %v after settling", id, e.State)
		}
	}
	counts := map[Status]int{}
	for _, w := range h.log {
		if w.Value != nil {
			m, _ := decodeValue(w.Value)
			counts[m.State]++
		}
	}
	t.Logf("records by state: %v", counts)
	// The log replays to the machine's state.
	states := replayWrites(t, h.log)
	if len(states) != len(h.m.txns) {
		t.Fatalf("replay has %d ids, the machine %d", len(states), len(h.m.txns))
	}
	for id, s := range states {
		e := h.m.txns[id]
		if e == nil || s.ProducerID != e.ProducerID || s.Epoch != e.Epoch || s.State != e.State ||
			s.Timeout != e.Timeout || len(s.Partitions) != len(e.Partitions) || !s.Start.Equal(e.Start) {
			t.Fatalf("replay of %q: %+v; machine %+v", id, s, e)
		}
	}
}

// allowed reports whether a committed state may follow another.
func allowed(from, to Status) bool {
	switch from {
	case Empty, CompleteCommit, CompleteAbort:
		return to == Empty || to == Ongoing || to == Dead
	case Ongoing:
		return to == PrepareCommit || to == PrepareAbort
	case PrepareCommit:
		return to == CompleteCommit
	case PrepareAbort:
		return to == CompleteAbort
	}
	return false
}
