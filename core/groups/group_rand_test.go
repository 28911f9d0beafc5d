package groups

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// simClient is what a client of the randomized test knows.
type simClient struct {
	instance *string
	id       string
	gen      int32
	members  []string // from its last join answer as leader
	protos   []string
}

// TestRandomOperations drives the state machine with random requests from
// five clients (one static) and random time steps, checking the harness
// invariants after every step and, across steps: a generation has one
// leader and one protocol, a synced assignment is the one the leader sent
// for that member and generation, tick before the next deadline changes
// nothing, and once the clients fall silent every waiting request is
// answered.
func TestRandomOperations(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRun(t, uint64(seed)) })
	}
}

func randomRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	h := newHarness(t, func(o *Options) { o.InitialRebalanceDelay = time.Duration(rng.IntN(3)) * time.Second })
	clients := make([]*simClient, 5)
	for i := range clients {
		clients[i] = &simClient{protos: [][]string{{"range"}, {"range", "rr"}, {"rr", "range"}}[i%3]}
	}
	clients[4].instance = str("static")

	type pendingReq struct {
		c    *simClient
		sync bool
		gen  int32
		id   string
	}
	pending := map[uint64]pendingReq{}
	leaders := map[int32]string{}  // generation -> leader
	protocol := map[int32]string{} // generation -> protocol
	assigned := map[int32]map[string]string{}
	lastGen := int32(0)

	// absorb updates the clients from replies and checks them.
	absorb := func() {
		for w, p := range pending {
			r, ok := h.replies[w]
			if !ok {
				continue
			}
			delete(pending, w)
			c := p.c
			if p.sync {
				if r.err == nil && c.instance == nil { // a static member's id changes under it
					want := assigned[p.gen][p.id]
					if string(r.sync.Assignment) != want {
						t.Fatalf("seed %d: %s synced %q in generation %d, leader sent %q", seed, p.id, r.sync.Assignment, p.gen, want)
					}
				}
				continue
			}
			switch {
			case r.err == nil:
				j := r.join
				c.id, c.gen, c.members = j.MemberID, j.Generation, nil
				if p := protocol[j.Generation]; p != "" && p != j.Protocol {
					t.Fatalf("seed %d: generation %d has protocols %q and %q", seed, j.Generation, p, j.Protocol)
				}
				protocol[j.Generation] = j.Protocol
				if j.Members != nil {
					if l := leaders[j.Generation]; l != "" && l != j.MemberID {
						t.Fatalf("seed %d: generation %d has leaders %q and %q", seed, j.Generation, l, j.MemberID)
					}
					leaders[j.Generation] = j.MemberID
					for _, m := range j.Members {
						c.members = append(c.members, m.MemberID)
					}
				}
			case errors.Is(r.err, ErrMemberIDRequired):
				c.id = r.join.MemberID
			case errors.Is(r.err, ErrUnknownMemberID), errors.Is(r.err, ErrFencedInstanceID):
				c.id, c.gen = "", 0
			}
		}
	}

	for step := range 300 {
		c := clients[rng.IntN(len(clients))]
		switch op := rng.IntN(10); {
		case op < 3:
			r := req(c.id, c.protos...)
			r.InstanceID = c.instance
			r.RequireKnownMemberID = rng.IntN(4) != 0
			if rng.IntN(8) == 0 {
				r.MemberID = "" // a client that lost its id
			}
			pending[h.join(r)] = pendingReq{c: c, id: r.MemberID}
		case op < 5:
			r := SyncRequest{Group: "g", MemberID: c.id, InstanceID: c.instance, Generation: c.gen}
			if c.members != nil {
				r.Assignments = map[string][]byte{}
				if assigned[c.gen] == nil {
					assigned[c.gen] = map[string]string{}
				}
				for _, m := range c.members {
					a := fmt.Sprintf("%s@%d#%d", m, c.gen, step)
					if rng.IntN(5) != 0 { // sometimes the leader leaves a member out
						r.Assignments[m] = []byte(a)
					}
				}
			}
			w := h.sync(r)
			if c.members != nil && h.g.state == stateStable && h.g.generation == c.gen && h.g.leader == c.id {
				// This SyncGroup completed the generation: what it
				// sent is what everyone must get.
				if _, done := assigned[c.gen]["#done"]; !done {
					for _, m := range c.members {
						assigned[c.gen][m] = string(r.Assignments[m])
					}
					assigned[c.gen]["#done"] = "1"
				}
			}
			pending[w] = pendingReq{c: c, sync: true, gen: c.gen, id: c.id}
		case op < 7:
			err := h.g.heartbeat(h.now, c.id, c.instance, c.gen)
			h.collect()
			if errors.Is(err, ErrUnknownMemberID) || errors.Is(err, ErrFencedInstanceID) {
				c.id = ""
			}
		case op < 8:
			if rng.IntN(3) == 0 {
				h.g.leave(h.now, []LeaveMember{{MemberID: c.id, InstanceID: c.instance}})
				h.collect()
				c.id = ""
			} else {
				_ = h.g.commitCheck(h.now, c.id, c.instance, c.gen)
				h.collect()
			}
		default:
			d := time.Duration(rng.IntN(12000)) * time.Millisecond
			if next := h.g.nextDeadline(); !next.IsZero() && h.now.Add(d).Before(next) {
				// Nothing is due before the deadline: a tick must not
				// change anything.
				st, gen, n := h.g.state, h.g.generation, len(h.g.order)
				h.advance(d)
				if len(h.g.out) != 0 || h.g.state != st || h.g.generation != gen || len(h.g.order) != n {
					t.Fatalf("seed %d: tick before the deadline changed the group", seed)
				}
			} else {
				h.advance(d)
			}
		}
		if h.g.generation < lastGen {
			t.Fatalf("seed %d: generation went from %d to %d", seed, lastGen, h.g.generation)
		}
		lastGen = h.g.generation
		absorb()
	}
	// Silence: every parked request is answered within the longest
	// timeouts.
	for range 3 {
		h.advance(newMemberJoinTimeout)
	}
	absorb()
	for w, p := range pending {
		t.Fatalf("seed %d: request %d of %q (sync %v) never answered; group %v gen %d", seed, w, p.id, p.sync,
			h.g.state, h.g.generation)
	}
}
