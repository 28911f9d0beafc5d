package groups

import (
	"slices"
	"testing"
	"time"
)

// harness drives one group state machine with explicit time and waiter
// tokens, collecting every reply (and failing on a waiter answered twice).
type harness struct {
	t       *testing.T
	g       *group
	now     time.Time
	w       uint64
	replies map[uint64]reply
}

const (
	session   = 10 * time.Second
	rebalance = 20 * time.Second
	delay     = 3 * time.Second
)

// newHarness starts with an initial rebalance delay of 3s; mod may change
// the options.
func newHarness(t *testing.T, mod func(*Options)) *harness {
	o := testOptions()
	o.InitialRebalanceDelay = delay
	if mod != nil {
		mod(o)
	}
	return &harness{t: t, g: newGroup("g", o), now: t0, replies: map[uint64]reply{}}
}

func (h *harness) collect() {
	h.t.Helper()
	for _, r := range h.g.take() {
		if _, dup := h.replies[r.waiter]; dup {
			h.t.Fatalf("waiter %d answered twice", r.waiter)
		}
		h.replies[r.waiter] = r
	}
	h.check()
}

// check asserts the state machine's invariants.
func (h *harness) check() {
	h.t.Helper()
	g := h.g
	if len(g.order) != len(g.byID) {
		h.t.Fatalf("order has %d members, byID %d", len(g.order), len(g.byID))
	}
	for _, m := range g.order {
		if g.byID[m.id] != m {
			h.t.Fatalf("member %q not indexed", m.id)
		}
		if m.instanceID != nil && g.static[*m.instanceID] != m.id {
			h.t.Fatalf("instance %q maps to %q, not %q", *m.instanceID, g.static[*m.instanceID], m.id)
		}
		if g.state != stateCompletingRebalance && m.syncWaiter != 0 {
			h.t.Fatalf("member %q awaits sync in state %v", m.id, g.state)
		}
		if g.state != statePreparingRebalance && m.joinWaiter != 0 {
			h.t.Fatalf("member %q awaits join in state %v", m.id, g.state)
		}
	}
	if len(g.static) > len(g.order) {
		h.t.Fatalf("%d static members for %d members", len(g.static), len(g.order))
	}
	for id := range g.pendingSync {
		if g.byID[id] == nil {
			h.t.Fatalf("pending sync of non-member %q", id)
		}
	}
	switch {
	case len(g.order) == 0 && g.leader != "":
		h.t.Fatalf("leader %q of no members", g.leader)
	case len(g.order) > 0 && g.byID[g.leader] == nil:
		h.t.Fatalf("leader %q is not a member", g.leader)
	case g.state == stateEmpty && len(g.order) > 0:
		h.t.Fatalf("Empty with %d members", len(g.order))
	}
	if d := g.nextDeadline(); !d.IsZero() && !d.After(h.now) {
		h.t.Fatalf("deadline %v not after now %v: advance left work undone", d.Sub(t0), h.now.Sub(t0))
	}
}

func (h *harness) join(r JoinRequest) uint64 {
	h.t.Helper()
	h.w++
	h.g.join(h.now, h.w, r)
	h.collect()
	return h.w
}

func (h *harness) sync(r SyncRequest) uint64 {
	h.t.Helper()
	h.w++
	h.g.sync(h.now, h.w, r)
	h.collect()
	return h.w
}

func (h *harness) heartbeat(id string, gen int32) error {
	h.t.Helper()
	err := h.g.heartbeat(h.now, id, nil, gen)
	h.collect()
	return err
}

func (h *harness) leave(ids ...string) []error {
	h.t.Helper()
	ms := make([]LeaveMember, len(ids))
	for i, id := range ids {
		ms[i] = LeaveMember{MemberID: id}
	}
	errs := h.g.leave(h.now, ms)
	h.collect()
	return errs
}

func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.now = h.now.Add(d)
	h.g.tick(h.now)
	h.collect()
}

func (h *harness) answered(w uint64) bool { _, ok := h.replies[w]; return ok }

// joined returns the successful join answer to w.
func (h *harness) joined(w uint64) JoinResult {
	h.t.Helper()
	r, ok := h.replies[w]
	if !ok {
		h.t.Fatalf("join %d not answered", w)
	}
	if r.err != nil {
		h.t.Fatalf("join %d: %v", w, r.err)
	}
	return r.join
}

// synced returns the successful sync answer to w.
func (h *harness) synced(w uint64) SyncResult {
	h.t.Helper()
	r, ok := h.replies[w]
	if !ok {
		h.t.Fatalf("sync %d not answered", w)
	}
	if r.err != nil {
		h.t.Fatalf("sync %d: %v", w, r.err)
	}
	return r.sync
}

func (h *harness) failed(w uint64, want error) {
	h.t.Helper()
	r, ok := h.replies[w]
	if !ok {
		h.t.Fatalf("request %d not answered, want %v", w, want)
	}
	wantErr(h.t, "reply", r.err, want)
}

func req(id string, protocols ...string) JoinRequest {
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	return JoinRequest{Group: "g", MemberID: id, ProtocolType: "consumer", Protocols: protos(protocols...),
		SessionTimeout: session, RebalanceTimeout: rebalance, RequireKnownMemberID: true, ClientID: "c"}
}

// newMember joins a new member in two steps (member id required) and
// returns its id and the waiter of its second JoinGroup.
func (h *harness) newMember(r JoinRequest) (string, uint64) {
	h.t.Helper()
	w := h.join(r)
	h.failed(w, ErrMemberIDRequired)
	id := h.replies[w].join.MemberID
	if id == "" {
		h.t.Fatal("no member id with ErrMemberIDRequired")
	}
	r.MemberID = id
	return id, h.join(r)
}

// until advances the time in steps of 1s until every waiter is answered.
func (h *harness) until(ws ...uint64) {
	h.t.Helper()
	for range 600 {
		if !slices.ContainsFunc(ws, func(w uint64) bool { return !h.answered(w) }) {
			return
		}
		h.advance(time.Second)
	}
	h.t.Fatalf("waiters %v not answered after 600s", ws)
}

// stable brings n new members to a Stable generation 1, the leader
// assigning "a-<id>" to each; ids[0] is the leader.
func (h *harness) stable(n int) []string {
	h.t.Helper()
	var ids []string
	var ws []uint64
	for range n {
		id, w := h.newMember(req(""))
		ids, ws = append(ids, id), append(ws, w)
	}
	h.until(ws...)
	for i, w := range ws {
		r := h.joined(w)
		if r.Generation != 1 || r.LeaderID != ids[0] || r.MemberID != ids[i] || r.Protocol != "range" {
			h.t.Fatalf("member %d joined %+v", i, r)
		}
	}
	h.syncAll(1, ids)
	return ids
}

// syncAll syncs every member of generation gen, the leader (ids[0]) last,
// and checks each gets "a-<id>".
func (h *harness) syncAll(gen int32, ids []string) {
	h.t.Helper()
	assign := map[string][]byte{}
	for _, id := range ids {
		assign[id] = []byte("a-" + id)
	}
	ws := make([]uint64, len(ids))
	for i := len(ids) - 1; i >= 0; i-- {
		r := SyncRequest{Group: "g", MemberID: ids[i], Generation: gen}
		if i == 0 {
			r.Assignments = assign
		}
		ws[i] = h.sync(r)
		if i > 0 && h.answered(ws[i]) {
			h.t.Fatalf("follower %q answered before the leader synced", ids[i])
		}
	}
	for i, w := range ws {
		if got := h.synced(w); string(got.Assignment) != "a-"+ids[i] || got.Protocol != "range" {
			h.t.Fatalf("member %q synced %+v", ids[i], got)
		}
	}
	if h.g.state != stateStable {
		h.t.Fatalf("state %v after sync, want Stable", h.g.state)
	}
}

func (h *harness) wantState(s state, gen int32) {
	h.t.Helper()
	if h.g.state != s || h.g.generation != gen {
		h.t.Fatalf("state %v generation %d, want %v %d", h.g.state, h.g.generation, s, gen)
	}
}

// memberIDs lists the members in join order.
func (g *group) memberIDs() []string {
	ids := make([]string, len(g.order))
	for i, m := range g.order {
		ids[i] = m.id
	}
	return ids
}
