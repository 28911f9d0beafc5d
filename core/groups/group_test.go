package groups

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestJoinSyncOneMember(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.InitialRebalanceDelay = 0 })
	h.wantState(stateEmpty, 0)
	id, w := h.newMember(req(""))
	// No delay: the join phase ends at once.
	r := h.joined(w)
	if r.Generation != 1 || r.LeaderID != id || r.MemberID != id || len(r.Members) != 1 ||
		string(r.Members[0].Metadata) != "meta-range" || r.ProtocolType != "consumer" {
		t.Fatalf("join result %+v", r)
	}
	h.wantState(stateCompletingRebalance, 1)
	s := h.synced(h.sync(SyncRequest{Group: "g", MemberID: id, Generation: 1,
		Assignments: map[string][]byte{id: []byte("all"), "stranger": []byte("x")}}))
	if string(s.Assignment) != "all" || s.Protocol != "range" || s.ProtocolType != "consumer" {
		t.Fatalf("sync result %+v", s)
	}
	h.wantState(stateStable, 1)
	wantErr(t, "heartbeat", h.heartbeat(id, 1), nil)
}

func TestJoinSyncThreeMembers(t *testing.T) {
	h := newHarness(t, nil)
	var ids []string
	var ws []uint64
	for i := range 3 {
		id, w := h.newMember(req(""))
		ids, ws = append(ids, id), append(ws, w)
		h.advance(time.Second) // they arrive 1s apart, within the delay
		if h.answered(w) || h.g.state != statePreparingRebalance {
			t.Fatalf("member %d answered during the initial delay", i)
		}
	}
	// t=3s: the first delay ends, but members arrived meanwhile: it is
	// extended by another 3s.
	h.advance(2 * time.Second) // t=5s
	if h.answered(ws[0]) {
		t.Fatal("join phase ended although members kept arriving")
	}
	h.advance(time.Second) // t=6s
	for i, w := range ws {
		r := h.joined(w)
		if r.Generation != 1 || r.LeaderID != ids[0] || r.MemberID != ids[i] {
			t.Fatalf("member %d: %+v", i, r)
		}
		if i == 0 {
			var got []string
			for _, m := range r.Members {
				got = append(got, m.MemberID)
			}
			if !slices.Equal(got, ids) {
				t.Fatalf("leader got members %v, want %v in join order", got, ids)
			}
		} else if r.Members != nil {
			t.Fatalf("follower %d got the member list", i)
		}
	}
	h.syncAll(1, ids)
	// Once Stable, a late SyncGroup gets the member's assignment at once.
	if got := h.synced(h.sync(SyncRequest{Group: "g", MemberID: ids[2], Generation: 1})); string(got.Assignment) != "a-"+ids[2] {
		t.Fatalf("late sync got %q", got.Assignment)
	}
}

func TestInitialDelayBoundedByRebalanceTimeout(t *testing.T) {
	h := newHarness(t, nil)
	_, first := h.newMember(req(""))
	// A new member every 2s keeps extending the delay, but the whole join
	// phase lasts at most the rebalance timeout (20s).
	for sec := 1; sec <= 30; sec++ {
		h.advance(time.Second)
		if h.answered(first) {
			break
		}
		if sec%2 == 0 {
			h.newMember(req(""))
		}
	}
	r := h.joined(first)
	if got := h.now.Sub(t0); got != rebalance {
		t.Fatalf("join phase took %v, want %v", got, rebalance)
	}
	if len(r.Members) != 10 {
		t.Fatalf("%d members, want 10 (one per 2s for 20s)", len(r.Members))
	}
}

func TestMemberLeaves(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(3)
	if errs := h.leave(ids[1]); errs[0] != nil {
		t.Fatalf("leave: %v", errs[0])
	}
	h.wantState(statePreparingRebalance, 1)
	wantErr(t, "heartbeat of the one that left", h.heartbeat(ids[1], 1), ErrUnknownMemberID)
	wantErr(t, "heartbeat during rebalance", h.heartbeat(ids[0], 1), ErrRebalanceInProgress)
	w0 := h.join(req(ids[0]))
	if h.answered(w0) {
		t.Fatal("join phase ended before every member rejoined")
	}
	w2 := h.join(req(ids[2]))
	for _, w := range []uint64{w0, w2} {
		if r := h.joined(w); r.Generation != 2 || r.LeaderID != ids[0] {
			t.Fatalf("rejoin: %+v", r)
		}
	}
	if n := len(h.joined(w0).Members); n != 2 {
		t.Fatalf("leader sees %d members, want 2", n)
	}
	h.syncAll(2, []string{ids[0], ids[2]})
	if errs := h.leave(ids[1], "nobody"); !slices.EqualFunc(errs, []error{ErrUnknownMemberID, ErrUnknownMemberID},
		func(a, b error) bool { return a != nil && errors.Is(a, b) }) {
		t.Fatalf("leave of unknown members: %v", errs)
	}
}

func TestLeaderLeavesAndAllLeave(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(3)
	h.leave(ids[0])
	w1, w2 := h.join(req(ids[1])), h.join(req(ids[2]))
	if r := h.joined(w1); r.LeaderID != ids[1] || len(r.Members) != 2 || r.Generation != 2 {
		t.Fatalf("after the leader left: %+v", r)
	}
	if r := h.joined(w2); r.LeaderID != ids[1] || r.Members != nil {
		t.Fatalf("follower after the leader left: %+v", r)
	}
	h.syncAll(2, ids[1:])
	h.leave(ids[1], ids[2])
	// The last members gone, the group is Empty, one generation on.
	h.wantState(stateEmpty, 3)
	if !h.g.empty() || h.g.leader != "" || h.g.protocol != "" {
		t.Fatalf("empty group keeps leader %q protocol %q", h.g.leader, h.g.protocol)
	}
	if h.g.protocolType != "consumer" {
		t.Fatalf("empty group lost its protocol type: %q", h.g.protocolType)
	}
}

func TestRejoinInStable(t *testing.T) {
	tests := []struct {
		name      string
		who       int // 0 leader, 1 follower
		protocols []string
		rebalance bool
	}{
		{"follower, same metadata: current generation again", 1, []string{"range"}, false},
		{"follower, new metadata: rebalance", 1, []string{"range", "roundrobin"}, true},
		{"leader: rebalance (its topics may have changed)", 0, []string{"range"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			ids := h.stable(2)
			w := h.join(req(ids[tt.who], tt.protocols...))
			if !tt.rebalance {
				r := h.joined(w)
				if r.Generation != 1 || r.LeaderID != ids[0] || r.Members != nil {
					t.Fatalf("rejoin: %+v", r)
				}
				h.wantState(stateStable, 1)
				return
			}
			h.wantState(statePreparingRebalance, 1)
			other := h.join(req(ids[1-tt.who]))
			if r := h.joined(w); r.Generation != 2 {
				t.Fatalf("rejoin: %+v", r)
			}
			h.joined(other)
		})
	}
}

func TestRejoinInCompletingRebalance(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(2)
	h.join(req(ids[0]))
	h.join(req(ids[1]))
	h.wantState(stateCompletingRebalance, 2)
	// The follower lost its join response and asks again: same answer.
	if r := h.joined(h.join(req(ids[1]))); r.Generation != 2 || r.Members != nil {
		t.Fatalf("repeated join: %+v", r)
	}
	if r := h.joined(h.join(req(ids[0]))); r.Generation != 2 || len(r.Members) != 2 {
		t.Fatalf("leader's repeated join: %+v", r)
	}
	// A follower waiting for its assignment is told to rejoin when another
	// member's metadata changes.
	ws := h.sync(SyncRequest{Group: "g", MemberID: ids[1], Generation: 2})
	h.join(req(ids[0], "roundrobin", "range"))
	h.failed(ws, ErrRebalanceInProgress)
	h.wantState(statePreparingRebalance, 2)
}

func TestSessionTimeout(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(2)
	// ids[0] heartbeats every 4s, ids[1] never again.
	for range 2 {
		h.advance(4 * time.Second)
		wantErr(t, "heartbeat", h.heartbeat(ids[0], 1), nil)
	}
	h.wantState(stateStable, 1)
	h.advance(2 * time.Second) // 10s after ids[1]'s sync: its session is over
	h.wantState(statePreparingRebalance, 1)
	wantErr(t, "expired member's heartbeat", h.heartbeat(ids[1], 1), ErrUnknownMemberID)
	wantErr(t, "survivor's heartbeat", h.heartbeat(ids[0], 1), ErrRebalanceInProgress)
	r := h.joined(h.join(req(ids[0])))
	if r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("after timeout: %+v", r)
	}
	// A lone member that stops heartbeating empties the group.
	h.syncAll(2, ids[:1])
	h.advance(session)
	h.wantState(stateEmpty, 3)
}

func TestRebalanceTimeoutRemovesMembersThatDoNotRejoin(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(3)
	w0 := h.join(req(ids[0]))
	// ids[1] keeps heartbeating but never rejoins; ids[2] says nothing.
	for range 4 {
		h.advance(4 * time.Second)
		wantErr(t, "heartbeat", h.heartbeat(ids[1], 1), ErrRebalanceInProgress)
	}
	if h.answered(w0) {
		t.Fatal("join phase ended before the rebalance timeout")
	}
	h.advance(4 * time.Second) // 20s
	r := h.joined(w0)
	if r.Generation != 2 || len(r.Members) != 1 || r.LeaderID != ids[0] {
		t.Fatalf("after the rebalance timeout: %+v", r)
	}
	wantErr(t, "removed member's heartbeat", h.heartbeat(ids[1], 1), ErrUnknownMemberID)
}

func TestNewMemberJoinsStableGroup(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(2)
	id, w := h.newMember(req(""))
	h.wantState(statePreparingRebalance, 1)
	for _, old := range ids {
		wantErr(t, "heartbeat", h.heartbeat(old, 1), ErrRebalanceInProgress)
	}
	if h.answered(w) {
		t.Fatal("new member answered before the others rejoined")
	}
	w0, w1 := h.join(req(ids[0])), h.join(req(ids[1]))
	for _, x := range []uint64{w, w0, w1} {
		if r := h.joined(x); r.Generation != 2 || r.LeaderID != ids[0] {
			t.Fatalf("join: %+v", r)
		}
	}
	h.syncAll(2, append(ids, id))
}

func TestHeartbeatByState(t *testing.T) {
	h := newHarness(t, nil)
	wantErr(t, "unknown member", h.heartbeat("nobody", 0), ErrUnknownMemberID)
	id, w := h.newMember(req(""))
	wantErr(t, "PreparingRebalance", h.heartbeat(id, 0), ErrRebalanceInProgress)
	h.until(w)
	wantErr(t, "CompletingRebalance", h.heartbeat(id, 1), nil)
	wantErr(t, "stale generation", h.heartbeat(id, 0), ErrIllegalGeneration)
	wantErr(t, "future generation", h.heartbeat(id, 2), ErrIllegalGeneration)
	h.synced(h.sync(SyncRequest{Group: "g", MemberID: id, Generation: 1, Assignments: map[string][]byte{}}))
	wantErr(t, "Stable", h.heartbeat(id, 1), nil)
	wantErr(t, "instance id of a dynamic member", h.g.heartbeat(h.now, id, str("i"), 1), ErrUnknownMemberID)
	h.g.state = stateDead
	wantErr(t, "Dead", h.heartbeat(id, 1), ErrCoordinatorNotAvailable)
}

func TestSyncErrors(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(2)
	for _, tt := range []struct {
		name string
		r    SyncRequest
		want error
	}{
		{"unknown member", SyncRequest{MemberID: "nobody", Generation: 1}, ErrUnknownMemberID},
		{"stale generation", SyncRequest{MemberID: ids[1], Generation: 0}, ErrIllegalGeneration},
		{"other protocol type", SyncRequest{MemberID: ids[1], Generation: 1, ProtocolType: str("connect")}, ErrInconsistentProtocol},
		{"other protocol", SyncRequest{MemberID: ids[1], Generation: 1, Protocol: str("roundrobin")}, ErrInconsistentProtocol},
		{"same protocol", SyncRequest{MemberID: ids[1], Generation: 1, ProtocolType: str("consumer"), Protocol: str("range")}, nil},
	} {
		tt.r.Group = "g"
		h.failed(h.sync(tt.r), tt.want)
	}
	h.join(req(ids[0]))
	h.failed(h.sync(SyncRequest{Group: "g", MemberID: ids[1], Generation: 1}), ErrRebalanceInProgress)
}

func TestLeaderMustSyncInTime(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(2)
	w0, w1 := h.join(req(ids[0])), h.join(req(ids[1]))
	h.joined(w0)
	h.joined(w1)
	ws := h.sync(SyncRequest{Group: "g", MemberID: ids[1], Generation: 2})
	// The leader heartbeats but never sends its assignments: after the
	// rebalance timeout it is removed and the follower told to rejoin.
	for range 3 {
		h.advance(5 * time.Second)
		wantErr(t, "leader's heartbeat", h.heartbeat(ids[0], 2), nil)
	}
	h.advance(4 * time.Second)
	if h.answered(ws) {
		t.Fatal("follower answered before the sync timeout")
	}
	h.advance(time.Second)
	h.failed(ws, ErrRebalanceInProgress)
	wantErr(t, "removed leader", h.heartbeat(ids[0], 2), ErrUnknownMemberID)
	if r := h.joined(h.join(req(ids[1]))); r.Generation != 3 || r.LeaderID != ids[1] {
		t.Fatalf("follower rejoined: %+v", r)
	}
}

func TestProtocolSelection(t *testing.T) {
	tests := []struct {
		name    string
		members [][]string
		want    string // "" with wantErr: the last member is rejected
		wantErr error
	}{
		{"one", [][]string{{"range"}}, "range", nil},
		{"common first choice", [][]string{{"sticky", "range"}, {"sticky", "range"}}, "sticky", nil},
		{"only common one", [][]string{{"sticky", "range"}, {"range"}}, "range", nil},
		{"majority of first choices", [][]string{{"a", "b"}, {"b", "a"}, {"b", "a"}}, "b", nil},
		{"tie: the earliest vote", [][]string{{"a", "b"}, {"b", "a"}}, "a", nil},
		{"not supported by all", [][]string{{"a", "b"}, {"b", "c"}, {"a", "c"}}, "", ErrInconsistentProtocol},
		{"nothing in common", [][]string{{"range"}, {"roundrobin"}}, "", ErrInconsistentProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			var ws []uint64
			for i, ps := range tt.members {
				w := h.join(req("", ps...))
				last := i == len(tt.members)-1
				if last && tt.wantErr != nil {
					h.failed(w, tt.wantErr)
					return
				}
				r := req(h.replies[w].join.MemberID, ps...)
				ws = append(ws, h.join(r))
			}
			h.until(ws...)
			for _, w := range ws {
				if got := h.joined(w).Protocol; got != tt.want {
					t.Fatalf("protocol %q, want %q", got, tt.want)
				}
			}
			if md := string(h.joined(ws[0]).Members[0].Metadata); md != "meta-"+tt.want {
				t.Fatalf("leader got metadata %q for %q", md, tt.want)
			}
		})
	}
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t, nil)
	for _, tt := range []struct {
		name string
		mod  func(*JoinRequest)
		want error
	}{
		{"session timeout too short", func(r *JoinRequest) { r.SessionTimeout = time.Second }, ErrInvalidSessionTimeout},
		{"session timeout too long", func(r *JoinRequest) { r.SessionTimeout = time.Hour }, ErrInvalidSessionTimeout},
		{"no protocol type", func(r *JoinRequest) { r.ProtocolType = "" }, ErrInconsistentProtocol},
		{"no protocols", func(r *JoinRequest) { r.Protocols = nil }, ErrInconsistentProtocol},
		{"unknown member id", func(r *JoinRequest) { r.MemberID = "nobody" }, ErrUnknownMemberID},
	} {
		r := req("")
		tt.mod(&r)
		w := h.join(r)
		h.failed(w, tt.want)
		if got := h.replies[w].join.Generation; got != -1 {
			t.Fatalf("%s: generation %d on error", tt.name, got)
		}
	}
	ids := h.stable(1)
	r := req("")
	r.ProtocolType = "connect"
	h.failed(h.join(r), ErrInconsistentProtocol)
	// The only member may change its protocol type.
	r.MemberID = ids[0]
	if got := h.joined(h.join(r)); got.ProtocolType != "connect" || got.Generation != 2 {
		t.Fatalf("sole member changed protocol type: %+v", got)
	}
}

func TestMemberIDRequired(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.InitialRebalanceDelay = 0 })
	ids := h.stable(1)
	// A member id handed out holds up the next join phase until it is
	// used...
	w := h.join(req(""))
	h.failed(w, ErrMemberIDRequired)
	pendingID := h.replies[w].join.MemberID
	h.wantState(stateStable, 1)
	w0 := h.join(req(ids[0]))
	if h.answered(w0) {
		t.Fatal("join phase ended with a member id outstanding")
	}
	wp := h.join(req(pendingID))
	if r := h.joined(wp); r.Generation != 2 || h.joined(w0).Generation != 2 {
		t.Fatalf("pending member joined: %+v", r)
	}
	// ... or its session timeout passes.
	h.syncAll(2, []string{ids[0], pendingID})
	h.failed(h.join(req("")), ErrMemberIDRequired)
	w0 = h.join(req(ids[0]))
	h.heartbeat(pendingID, 2)
	h.advance(session - time.Second)
	if h.answered(w0) {
		t.Fatal("join phase ended before the handed-out id expired")
	}
	h.heartbeat(pendingID, 2)
	h.advance(time.Second)
	h.join(req(pendingID))
	if r := h.joined(w0); r.Generation != 3 || len(r.Members) != 2 {
		t.Fatalf("after the handed-out id expired: %+v", r)
	}
	// A handed-out id may leave without ever joining.
	w = h.join(req(""))
	if errs := h.leave(h.replies[w].join.MemberID); errs[0] != nil {
		t.Fatalf("leave of a handed-out id: %v", errs[0])
	}
	if len(h.g.pending) != 0 {
		t.Fatal("handed-out id still pending after leaving")
	}
	// Without RequireKnownMemberID (JoinGroup v0-v3) the id comes with
	// the join.
	r := req("")
	r.RequireKnownMemberID = false
	wn := h.join(r)
	h.join(req(ids[0]))
	h.join(req(pendingID))
	if got := h.joined(wn); got.MemberID == "" || got.Generation != 4 {
		t.Fatalf("join without member id: %+v", got)
	}
}

func TestStaticMembership(t *testing.T) {
	h := newHarness(t, nil)
	static := func(instance, id string) JoinRequest {
		r := req(id)
		r.InstanceID = str(instance)
		return r
	}
	// Static members join without the member-id round trip.
	wa, wb := h.join(static("a", "")), h.join(static("b", ""))
	h.until(wa, wb)
	a, b := h.joined(wa).MemberID, h.joined(wb).MemberID
	h.syncAll(1, []string{a, b})

	// b restarts: it rejoins without its member id, gets a new one and
	// its assignment, without a rebalance.
	w := h.join(static("b", ""))
	r := h.joined(w)
	b2 := r.MemberID
	if b2 == b || r.Generation != 1 || r.LeaderID != a || r.Members != nil {
		t.Fatalf("static rejoin: %+v", r)
	}
	h.wantState(stateStable, 1)
	got := h.synced(h.sync(SyncRequest{Group: "g", MemberID: b2, InstanceID: str("b"), Generation: 1}))
	if string(got.Assignment) != "a-"+b {
		t.Fatalf("static member's assignment after restart: %q", got.Assignment)
	}
	// The old incarnation is fenced.
	wantErr(t, "old heartbeat", h.g.heartbeat(h.now, b, str("b"), 1), ErrFencedInstanceID)
	h.failed(h.join(static("b", b)), ErrFencedInstanceID)
	h.failed(h.sync(SyncRequest{Group: "g", MemberID: b, InstanceID: str("b"), Generation: 1}), ErrFencedInstanceID)
	wantErr(t, "old commit", h.g.commitCheck(h.now, b, str("b"), 1), ErrFencedInstanceID)
	if errs := h.g.leave(h.now, []LeaveMember{{MemberID: b, InstanceID: str("b")}}); !errors.Is(errs[0], ErrFencedInstanceID) {
		t.Fatalf("old leave: %v", errs[0])
	}

	// A leader that restarts is not told it leads: the old id is returned.
	r = h.joined(h.join(static("a", "")))
	if r.LeaderID != a || r.MemberID == a {
		t.Fatalf("static leader rejoin: %+v", r)
	}
	a2 := r.MemberID
	if h.g.leader != a2 {
		t.Fatalf("leader %q, want the new id %q", h.g.leader, a2)
	}

	// During a rebalance static members that do not rejoin stay (their
	// session decides); the one that rejoined leads.
	wl := h.join(static("a", a2)) // the leader rejoining starts a rebalance
	h.wantState(statePreparingRebalance, 1)
	for range 3 {
		h.advance(5 * time.Second)
		wantErr(t, "static member's heartbeat", h.g.heartbeat(h.now, b2, str("b"), 1), ErrRebalanceInProgress)
	}
	h.advance(5 * time.Second)
	if r := h.joined(wl); r.Generation != 2 || len(r.Members) != 2 {
		t.Fatalf("rebalance with a silent static member: %+v", r)
	}
	if h.g.byID[b2] == nil {
		t.Fatal("static member removed by the rebalance timeout")
	}
	// Admin removal by instance id.
	if errs := h.g.leave(h.now, []LeaveMember{{InstanceID: str("b")}}); errs[0] != nil {
		t.Fatalf("leave by instance id: %v", errs[0])
	}
	h.collect()
	if h.g.byID[b2] != nil || h.g.static["b"] != "" {
		t.Fatal("static member still there after leave by instance id")
	}
}

func TestSupersededWaiters(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(2)
	first := h.join(req(ids[0]))
	second := h.join(req(ids[0]))
	h.failed(first, ErrRebalanceInProgress)
	w1 := h.join(req(ids[1]))
	h.joined(second)
	h.joined(w1)
	s1 := h.sync(SyncRequest{Group: "g", MemberID: ids[1], Generation: 2})
	s2 := h.sync(SyncRequest{Group: "g", MemberID: ids[1], Generation: 2})
	h.failed(s1, ErrRebalanceInProgress)
	h.sync(SyncRequest{Group: "g", MemberID: ids[0], Generation: 2, Assignments: map[string][]byte{ids[1]: []byte("x")}})
	if got := h.synced(s2); string(got.Assignment) != "x" {
		t.Fatalf("second sync got %q", got.Assignment)
	}
}

func TestNewMemberJoinTimeout(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(1)
	// A new member whose client vanished while the old member ignores the
	// rebalance: the join phase ends at the rebalance timeout with the new
	// member alone.
	id, w := h.newMember(req(""))
	h.advance(rebalance)
	if r := h.joined(w); r.MemberID != id || r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("new member alone: %+v", r)
	}
	wantErr(t, "old member", h.heartbeat(ids[0], 1), ErrUnknownMemberID)
}

func TestCommitCheck(t *testing.T) {
	h := newHarness(t, nil)
	wantErr(t, "simple commit to an empty group", h.g.commitCheck(h.now, "", nil, -1), nil)
	ids := h.stable(2)
	for _, tt := range []struct {
		name   string
		member string
		gen    int32
		want   error
	}{
		{"simple commit to a group with members", "", -1, ErrUnknownMemberID},
		{"unknown member", "nobody", 1, ErrUnknownMemberID},
		{"stale generation", ids[1], 0, ErrIllegalGeneration},
		{"Stable", ids[1], 1, nil},
	} {
		wantErr(t, tt.name, h.g.commitCheck(h.now, tt.member, nil, tt.gen), tt.want)
	}
	h.join(req(ids[0]))
	wantErr(t, "PreparingRebalance", h.g.commitCheck(h.now, ids[1], nil, 1), nil)
	h.join(req(ids[1]))
	h.wantState(stateCompletingRebalance, 2)
	wantErr(t, "CompletingRebalance", h.g.commitCheck(h.now, ids[1], nil, 2), ErrRebalanceInProgress)
	h.g.state = stateDead
	wantErr(t, "Dead", h.g.commitCheck(h.now, ids[1], nil, 2), ErrCoordinatorNotAvailable)
}

func TestDescribe(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(2)
	d := h.g.describe()
	if d.State != "Stable" || d.Protocol != "range" || d.ProtocolType != "consumer" || len(d.Members) != 2 ||
		string(d.Members[1].Assignment) != "a-"+ids[1] || string(d.Members[1].Metadata) != "meta-range" ||
		d.Members[1].ClientID != "c" {
		t.Fatalf("describe: %+v", d)
	}
	h.join(req(ids[0]))
	d = h.g.describe()
	if d.State != "PreparingRebalance" || d.Protocol != "" || d.Members[0].Metadata != nil || d.Members[0].Assignment != nil {
		t.Fatalf("describe while rebalancing: %+v", d)
	}
	if got := h.g.memberIDs(); !slices.Equal(got, ids) {
		t.Fatalf("member ids %v, want %v", got, ids)
	}
}
