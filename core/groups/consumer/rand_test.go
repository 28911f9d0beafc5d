package consumer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// simMember is what one client knows: its member id and epoch, the
// partitions it consumes (owned) and those it was told to give up but has
// not yet (it revokes slowly, as a client committing offsets does).
type simMember struct {
	name     string
	instance *string
	id       string
	epoch    int32
	in       bool
	owned    parts
	joins    int
	// regex: it subscribes with a regex rather than names.
	regex bool
	// assignment is the last assignment the coordinator sent.
	assignment parts
}

// TestRandomHeartbeats drives a group with five clients (one static) doing
// random joins, full and keepalive heartbeats, slow revocations, leaves,
// silences long enough to be fenced, wrong epochs, and topics gaining
// partitions, checking after every step that the state machine's invariants
// hold and that no two clients that are members consume the same partition
// at once, and that each consumes only what the coordinator knows it holds.
// Then the clients behave and the group must settle: Stable, every
// partition consumed by exactly one client, balanced.
func TestRandomHeartbeats(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomHeartbeats(t, uint64(seed)) })
	}
}

func randomHeartbeats(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	g := newTestGroup(t)
	topics := fakeTopics{}
	topics.set("a", int32(1+rng.IntN(8)))
	topics.set("b", int32(rng.IntN(4)))
	now := t0
	clients := make([]*simMember, 5)
	for i := range clients {
		clients[i] = &simMember{name: fmt.Sprintf("c%d", i), owned: parts{}}
	}
	inst := "static"
	clients[4].instance = &inst

	send := func(c *simMember, r HeartbeatRequest) {
		t.Helper()
		r.InstanceID = c.instance
		resp, err := g.Heartbeat(now, topics, r)
		switch {
		case err == nil:
		case errors.Is(err, ErrUnknownMemberID), errors.Is(err, ErrFencedInstanceID):
			c.in, c.owned = false, parts{}
			return
		case errors.Is(err, ErrFencedMemberEpoch):
			c.owned, c.epoch = parts{}, 0 // rejoins under the same id
			return
		case errors.Is(err, ErrUnreleasedInstanceID):
			c.in = false
			return
		default:
			t.Fatalf("seed %d: %s: %v", seed, c.name, err)
		}
		if r.MemberEpoch < 0 {
			c.in, c.owned = false, parts{}
			return
		}
		c.in, c.id, c.epoch = true, resp.MemberID, resp.MemberEpoch
		if resp.Assignment != nil {
			// Gains are consumed at once; losses are kept until revoked.
			partsOf(resp.Assignment).each(func(k tp) { c.owned.add(k.topic, k.p) })
			c.assignment = partsOf(resp.Assignment)
		}
	}
	full := func(c *simMember) HeartbeatRequest {
		r := HeartbeatRequest{MemberID: c.id, MemberEpoch: c.epoch, RebalanceTimeoutMillis: 5000,
			SubscribedTopicNames: []string{"a", "b"}, Owned: c.owned.list()}
		if c.regex {
			re := "a|b"
			r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, &re
		}
		return r
	}
	revoke := func(c *simMember) {
		if c.assignment == nil {
			return
		}
		for k, ps := range c.owned {
			for _, p := range ps {
				if !c.assignment.has(k, p) {
					c.owned = without(c.owned, tp{k, p})
				}
			}
		}
	}
	check := func(step int) {
		t.Helper()
		checkInvariants(t, g)
		seen := map[tp]string{}
		for _, c := range clients {
			m := g.members[c.id]
			if !c.in || m == nil {
				continue
			}
			c.owned.each(func(k tp) {
				if o, dup := seen[k]; dup {
					t.Fatalf("seed %d step %d: %x-%d consumed by %s and %s", seed, step, k.topic[:1], k.p, o, c.name)
				}
				seen[k] = c.name
				if !m.assigned.has(k.topic, k.p) && !m.revoking.has(k.topic, k.p) {
					t.Fatalf("seed %d step %d: %s consumes %x-%d, which the coordinator does not know it holds",
						seed, step, c.name, k.topic[:1], k.p)
				}
			})
		}
	}

	for step := range 300 {
		c := clients[rng.IntN(len(clients))]
		switch op := rng.IntN(20); {
		case !c.in || c.epoch == 0:
			if !c.in || c.id == "" || rng.IntN(3) == 0 {
				c.joins++
				c.id = fmt.Sprintf("%s-%d", c.name, c.joins)
			}
			c.owned, c.assignment, c.epoch, c.regex = parts{}, nil, 0, rng.IntN(4) == 0
			send(c, full(c))
		case op < 8:
			if rng.IntN(2) == 0 {
				revoke(c)
			}
			send(c, full(c))
		case op < 12:
			send(c, HeartbeatRequest{MemberID: c.id, MemberEpoch: c.epoch, RebalanceTimeoutMillis: -1})
		case op == 12:
			epoch := int32(LeaveEpoch)
			if c.instance != nil && rng.IntN(2) == 0 {
				epoch = StaticLeaveEpoch
			}
			send(c, HeartbeatRequest{MemberID: c.id, MemberEpoch: epoch, RebalanceTimeoutMillis: -1})
		case op == 13:
			r := full(c)
			r.MemberEpoch += int32(1 + rng.IntN(2))
			send(c, r)
		case op == 14 && rng.IntN(4) == 0:
			a, _ := topics.Topic("a")
			topics.set("a", a.Partitions+1)
		default:
			// silence
		}
		check(step)
		now = now.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)
		g.Tick(now)
		check(step)
	}

	// Settle: every client joins if out and heartbeats, revoking promptly.
	for round := range 12 {
		for _, c := range clients {
			if !c.in || c.epoch == 0 {
				c.joins++
				c.id = fmt.Sprintf("%s-%d", c.name, c.joins)
				c.owned, c.assignment, c.epoch = parts{}, nil, 0
				send(c, HeartbeatRequest{MemberID: c.id, RebalanceTimeoutMillis: 5000,
					SubscribedTopicNames: []string{"a", "b"}, Owned: []TopicPartitions{}})
				continue
			}
			revoke(c)
			send(c, full(c))
		}
		now = now.Add(time.Second)
		g.Tick(now)
		check(1000 + round)
	}
	if st := g.State(); st != "Stable" {
		t.Fatalf("seed %d: group %s after settling", seed, st)
	}
	total, lo, hi := 0, -1, 0
	for _, c := range clients {
		n := c.owned.count()
		total += n
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	a, _ := topics.Topic("a")
	b, _ := topics.Topic("b")
	if want := int(a.Partitions + b.Partitions); total != want || hi-lo > 1 {
		t.Fatalf("seed %d: settled with %d partitions consumed of %d, from %d to %d per client", seed, total, want, lo, hi)
	}
}

func without(a parts, k tp) parts {
	ps := a[k.topic]
	out := a.clone()
	for i, p := range ps {
		if p == k.p {
			out[k.topic] = append(ps[:i:i], ps[i+1:]...)
			break
		}
	}
	if len(out[k.topic]) == 0 {
		delete(out, k.topic)
	}
	return out
}
