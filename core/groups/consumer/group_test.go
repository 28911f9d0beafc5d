package consumer

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/groups/assignor"
)

type step struct {
	g      *Group
	topics fakeTopics
	now    time.Time
	t      *testing.T
}

func newStep(t *testing.T) *step {
	s := &step{g: newTestGroup(t), topics: fakeTopics{}, now: t0, t: t}
	s.topics.set("a", 4)
	return s
}

func (s *step) hb(r HeartbeatRequest) HeartbeatResponse {
	s.t.Helper()
	resp, err := s.g.Heartbeat(s.now, s.topics, r)
	if err != nil {
		s.t.Fatalf("heartbeat %s epoch %d: %v", r.MemberID, r.MemberEpoch, err)
	}
	checkInvariants(s.t, s.g)
	return resp
}

func (s *step) hbErr(r HeartbeatRequest, want error) {
	s.t.Helper()
	_, err := s.g.Heartbeat(s.now, s.topics, r)
	if !errors.Is(err, want) {
		s.t.Fatalf("heartbeat %s epoch %d: got %v, want %v", r.MemberID, r.MemberEpoch, err, want)
	}
	checkInvariants(s.t, s.g)
}

func assertAssigned(t *testing.T, r HeartbeatResponse, epoch int32, want []TopicPartitions) {
	t.Helper()
	if r.MemberEpoch != epoch {
		t.Fatalf("member %s: epoch %d, want %d", r.MemberID, r.MemberEpoch, epoch)
	}
	if want == nil {
		if r.Assignment != nil {
			t.Fatalf("member %s: assignment %v, want none", r.MemberID, r.Assignment)
		}
		return
	}
	if !reflect.DeepEqual(r.Assignment, want) {
		t.Fatalf("member %s: assignment %v, want %v", r.MemberID, r.Assignment, want)
	}
}

// TestJoinAndReconcile: a second member gets partitions only after the
// first has revoked them, through the states Kafka names.
func TestJoinAndReconcile(t *testing.T) {
	s := newStep(t)
	r := s.hb(join("A", "a"))
	assertAssigned(t, r, 1, tps("a", 0, 1, 2, 3))
	if r.HeartbeatInterval != hbEvery {
		t.Fatalf("heartbeat interval %v", r.HeartbeatInterval)
	}
	if st := s.g.State(); st != "Stable" {
		t.Fatalf("state %s", st)
	}

	r = s.hb(join("B", "a"))
	assertAssigned(t, r, 2, tps("a")) // A still holds everything
	if st := s.g.State(); st != "Reconciling" {
		t.Fatalf("state %s", st)
	}

	// A is told to keep 0,1: it stays at epoch 1 until it revokes 2,3.
	r = s.hb(beat("A", 1, tps("a", 0, 1, 2, 3)))
	assertAssigned(t, r, 1, tps("a", 0, 1))
	r = s.hb(beat("B", 2, nil))
	assertAssigned(t, r, 2, nil)                 // nothing changed, and not a full request
	r = s.hb(beat("A", 1, tps("a", 0, 1, 2, 3))) // not yet revoked
	assertAssigned(t, r, 1, nil)
	r = s.hb(beat("A", 1, tps("a", 0, 1)))
	assertAssigned(t, r, 2, nil) // the epoch moves, the partitions do not
	r = s.hb(beat("B", 2, nil))
	assertAssigned(t, r, 2, tps("a", 2, 3))
	if st := s.g.State(); st != "Stable" {
		t.Fatalf("state %s", st)
	}
	// A keepalive (nothing sent) gets no assignment back.
	r = s.hb(HeartbeatRequest{MemberID: "B", MemberEpoch: 2, RebalanceTimeoutMillis: -1})
	assertAssigned(t, r, 2, nil)
}

// TestLeave: epoch -1 removes the member; the other gets its partitions.
func TestLeave(t *testing.T) {
	s := newStep(t)
	s.hb(join("A", "a"))
	s.hb(join("B", "a"))
	s.hb(beat("A", 1, tps("a", 0, 1)))
	s.hb(beat("B", 2, nil))
	r := s.hb(HeartbeatRequest{MemberID: "A", MemberEpoch: LeaveEpoch, RebalanceTimeoutMillis: -1})
	if r.MemberEpoch != LeaveEpoch || r.MemberID != "A" {
		t.Fatalf("leave answered %+v", r)
	}
	r = s.hb(beat("B", 2, tps("a", 2, 3)))
	assertAssigned(t, r, 3, tps("a", 0, 1, 2, 3))
	s.hbErr(beat("A", 2, nil), ErrUnknownMemberID)
}

// TestSessionTimeoutFences: a silent member is removed at its session
// timeout, not before; its next heartbeat gets ErrUnknownMemberID, and it
// rejoins.
func TestSessionTimeoutFences(t *testing.T) {
	s := newStep(t)
	s.hb(join("A", "a"))
	if d := s.g.NextDeadline(); !d.Equal(t0.Add(session)) {
		t.Fatalf("next deadline %v", d)
	}
	if gone := s.g.Tick(t0.Add(session - time.Millisecond)); len(gone) != 0 {
		t.Fatalf("fenced early: %v", gone)
	}
	s.now = t0.Add(session)
	if gone := s.g.Tick(s.now); len(gone) != 1 {
		t.Fatalf("fenced %v", gone)
	}
	if !s.g.Empty() || s.g.State() != "Empty" {
		t.Fatalf("group %s after the timeout", s.g.State())
	}
	s.hbErr(beat("A", 1, tps("a", 0, 1, 2, 3)), ErrUnknownMemberID)
	r := s.hb(join("A2", "a"))
	assertAssigned(t, r, 3, tps("a", 0, 1, 2, 3))
}

// TestRebalanceTimeoutFences: a member that does not revoke within its
// rebalance timeout is removed, and the partitions go to the others.
func TestRebalanceTimeoutFences(t *testing.T) {
	s := newStep(t)
	s.hb(join("A", "a"))
	r := join("B", "a")
	r.RebalanceTimeoutMillis = 3000
	s.hb(r)
	s.hb(beat("A", 1, tps("a", 0, 1, 2, 3))) // A told to revoke 2,3 (timeout 30s from its join)
	for i := 1; i <= 29; i++ {               // A and B heartbeat; A never revokes
		s.now = t0.Add(time.Duration(i) * time.Second)
		if gone := s.g.Tick(s.now); len(gone) != 0 {
			t.Fatalf("at %v fenced %v", s.now.Sub(t0), gone)
		}
		s.hb(beat("A", 1, tps("a", 0, 1, 2, 3)))
		s.hb(beat("B", 2, nil))
	}
	s.now = t0.Add(30 * time.Second)
	if gone := s.g.Tick(s.now); len(gone) != 1 {
		t.Fatalf("fenced %v", gone)
	}
	s.hbErr(beat("A", 1, tps("a", 0, 1, 2, 3)), ErrUnknownMemberID)
	resp := s.hb(beat("B", 2, nil))
	assertAssigned(t, resp, 3, tps("a", 0, 1, 2, 3))
}

// TestEpochFencing: a heartbeat ahead of the member's epoch, or behind it,
// is fenced, except the previous epoch with a subset of the assignment (the
// answer that bumped it was lost).
func TestEpochFencing(t *testing.T) {
	s := newStep(t)
	s.hb(join("A", "a"))
	s.hbErr(beat("A", 2, tps("a", 0, 1, 2, 3)), ErrFencedMemberEpoch)
	s.topics.set("a", 6)
	r := s.hb(beat("A", 1, tps("a", 0, 1, 2, 3))) // epoch 2: partitions added
	assertAssigned(t, r, 2, tps("a", 0, 1, 2, 3, 4, 5))
	s.hb(beat("A", 1, tps("a", 0, 1, 2, 3)))                    // lost answer: previous epoch, subset
	s.hbErr(beat("A", 1, tps("a", 0, 9)), ErrFencedMemberEpoch) // not a subset
	s.hbErr(HeartbeatRequest{MemberID: "A", MemberEpoch: 1, RebalanceTimeoutMillis: -1}, ErrFencedMemberEpoch)
	s.hbErr(beat("A", 0+7, nil), ErrFencedMemberEpoch)
	// A fenced client rejoins under its id with epoch 0 and starts afresh.
	r = s.hb(join("A", "a"))
	assertAssigned(t, r, 4, tps("a", 0, 1, 2, 3, 4, 5))
}

// TestStaticMember: -2 keeps the partitions while the instance is away; it
// comes back under a new member id to the same partitions without a
// rebalance; a second live claim to the instance is refused.
func TestStaticMember(t *testing.T) {
	s := newStep(t)
	inst := "i1"
	j := join("S1", "a")
	j.InstanceID = &inst
	s.hb(j)
	s.hb(join("B", "a"))
	s.hb(HeartbeatRequest{MemberID: "S1", MemberEpoch: 1, InstanceID: &inst, RebalanceTimeoutMillis: -1, Owned: tps("a", 0, 1)})
	s.hb(beat("B", 2, nil))

	j2 := join("S2", "a")
	j2.InstanceID = &inst
	s.hbErr(j2, ErrUnreleasedInstanceID)
	s.hbErr(HeartbeatRequest{MemberID: "S9", MemberEpoch: 2, InstanceID: &inst, RebalanceTimeoutMillis: -1}, ErrFencedInstanceID)

	epoch := s.g.Epoch()
	s.hb(HeartbeatRequest{MemberID: "S1", MemberEpoch: StaticLeaveEpoch, InstanceID: &inst, RebalanceTimeoutMillis: -1})
	if s.g.Epoch() != epoch {
		t.Fatalf("a static leave bumped the group epoch %d -> %d", epoch, s.g.Epoch())
	}
	// B gets nothing more while the instance is away.
	r := s.hb(beat("B", 2, tps("a", 2, 3)))
	assertAssigned(t, r, 2, nil)
	r = s.hb(j2)
	assertAssigned(t, r, 2, tps("a", 0, 1))
	if s.g.Epoch() != epoch {
		t.Fatalf("a static rejoin bumped the group epoch %d -> %d", epoch, s.g.Epoch())
	}
	// -2 from a dynamic member is refused; from a static one it needs no
	// instance id (franz-go sends none).
	s.hbErr(HeartbeatRequest{MemberID: "B", MemberEpoch: StaticLeaveEpoch, RebalanceTimeoutMillis: -1}, ErrInvalidRequest)
	// Away longer than the session: removed, B takes all.
	s.hb(HeartbeatRequest{MemberID: "S2", MemberEpoch: StaticLeaveEpoch, RebalanceTimeoutMillis: -1})
	if m := s.g.members["S2"]; m == nil || m.epoch != StaticLeaveEpoch {
		t.Fatalf("static member after -2 without instance id: %+v", m)
	}
	s.now = s.now.Add(session)
	s.hb(beat("B", 2, tps("a", 2, 3))) // B's session is renewed
	if gone := s.g.Tick(s.now); len(gone) != 1 {
		t.Fatalf("fenced %v", gone)
	}
	r = s.hb(beat("B", 2, tps("a", 2, 3)))
	assertAssigned(t, r, 3, tps("a", 0, 1, 2, 3))
}

// TestTopicChanges: partitions added, a topic created that a member
// subscribed to before it existed, a topic deleted, and a regex
// subscription all change the assignment at the next heartbeat.
func TestTopicChanges(t *testing.T) {
	s := newStep(t)
	r := s.hb(join("A", "a", "later"))
	assertAssigned(t, r, 1, tps("a", 0, 1, 2, 3))
	s.topics.set("later", 2)
	r = s.hb(beat("A", 1, tps("a", 0, 1, 2, 3)))
	want := append(tps("a", 0, 1, 2, 3), tps("later", 0, 1)...)
	assertAssigned(t, r, 2, want)
	delete(s.topics, "a")
	r = s.hb(beat("A", 2, want)) // must revoke a-0..3 first
	assertAssigned(t, r, 2, tps("later", 0, 1))
	r = s.hb(beat("A", 2, tps("later", 0, 1)))
	assertAssigned(t, r, 3, nil)

	if !s.g.Subscribes("later") || s.g.Subscribes("re-x") {
		t.Fatalf("subscribes: later %v, re-x %v", s.g.Subscribes("later"), s.g.Subscribes("re-x"))
	}
	rx := "re-.*"
	j := join("R", "later")
	j.SubscribedTopicNames, j.SubscribedTopicRegex = nil, &rx
	s.topics.set("re-x", 3)
	s.topics.set("nore-x", 3)
	r = s.hb(j)
	assertAssigned(t, r, 4, tps("re-x", 0, 1, 2))
	if !s.g.Subscribes("re-x") || s.g.Subscribes("nore-x") {
		t.Fatalf("subscribes after a regex member: re-x %v, nore-x %v", s.g.Subscribes("re-x"), s.g.Subscribes("nore-x"))
	}
}

// TestAssignorChoice: the assignor most members ask for is used; an unknown
// one is refused.
func TestAssignorChoice(t *testing.T) {
	s := newStep(t)
	s.topics.set("b", 4)
	rng := "range"
	for _, id := range []string{"m1", "m2"} {
		j := join(id, "a", "b")
		j.ServerAssignor = &rng
		s.hb(j)
	}
	if d := s.g.Describe(); d.Assignor != "range" {
		t.Fatalf("assignor %q", d.Assignor)
	}
	bad := "sticky"
	j := join("m3", "a")
	j.ServerAssignor = &bad
	s.hbErr(j, ErrUnsupportedAssignor)
	// Range co-partitions: m1's target is the same numbers of a and b.
	tg := s.g.target["m1"]
	if !reflect.DeepEqual(tg[topicID("a")], tg[topicID("b")]) {
		t.Fatalf("range target of m1: %v", tg)
	}
}

// TestInvalidHeartbeats: the requests Kafka refuses as INVALID_REQUEST or
// INVALID_REGULAR_EXPRESSION.
func TestInvalidHeartbeats(t *testing.T) {
	empty := ""
	badRe := "a(("
	cases := map[string]struct {
		mod  func(*HeartbeatRequest)
		want error
	}{
		"no member id":     {func(r *HeartbeatRequest) { r.MemberID = "" }, ErrInvalidRequest},
		"empty instance":   {func(r *HeartbeatRequest) { r.InstanceID = &empty }, ErrInvalidRequest},
		"empty rack":       {func(r *HeartbeatRequest) { r.RackID = &empty }, ErrInvalidRequest},
		"epoch -3":         {func(r *HeartbeatRequest) { r.MemberEpoch = -3 }, ErrInvalidRequest},
		"no timeout":       {func(r *HeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, ErrInvalidRequest},
		"owned on join":    {func(r *HeartbeatRequest) { r.Owned = tps("a", 1) }, ErrInvalidRequest},
		"nil owned":        {func(r *HeartbeatRequest) { r.Owned = nil }, ErrInvalidRequest},
		"no subscription":  {func(r *HeartbeatRequest) { r.SubscribedTopicNames = nil }, ErrInvalidRequest},
		"bad regex":        {func(r *HeartbeatRequest) { r.SubscribedTopicRegex = &badRe }, ErrInvalidRegex},
		"unknown assignor": {func(r *HeartbeatRequest) { r.ServerAssignor = &badRe }, ErrUnsupportedAssignor},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStep(t)
			r := join("A", "a")
			c.mod(&r)
			s.hbErr(r, c.want)
			if !s.g.Empty() {
				t.Fatal("a refused join added a member")
			}
		})
	}
}

// TestMaxSize: a full group refuses new members.
func TestMaxSize(t *testing.T) {
	cfg, _ := Config{MaxSize: 1}.Validate()
	g := New("g", cfg)
	top := fakeTopics{}
	if _, err := g.Heartbeat(t0, top, join("A", "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Heartbeat(t0, top, join("B", "a")); !errors.Is(err, ErrGroupFull) {
		t.Fatalf("second member: %v", err)
	}
}

// TestCommitAndFetchChecks: OffsetCommit and OffsetFetch member and epoch
// checks, including KIP-1251's acceptance of an older epoch for partitions
// held since then.
func TestCommitAndFetchChecks(t *testing.T) {
	s := newStep(t)
	if err := s.g.CheckCommit("", -1, nil); err != nil {
		t.Fatalf("simple commit to an empty group: %v", err)
	}
	s.hb(join("A", "a"))
	p := func(ps ...int32) []Partition {
		var out []Partition
		for _, x := range ps {
			out = append(out, Partition{Topic: "a", Partition: x})
		}
		return out
	}
	for _, c := range []struct {
		member string
		epoch  int32
		parts  []Partition
		want   error
	}{
		{"", -1, p(0), ErrUnknownMemberID},
		{"X", 1, p(0), ErrUnknownMemberID},
		{"A", 1, p(0, 3), nil},
		{"A", 2, p(0), ErrStaleMemberEpoch},
	} {
		if err := s.g.CheckCommit(c.member, c.epoch, c.parts); !errors.Is(err, c.want) && (err != nil || c.want != nil) {
			t.Errorf("commit %s epoch %d: %v, want %v", c.member, c.epoch, err, c.want)
		}
	}
	// B joins: A moves to epoch 2 keeping 0,1; a commit of 0 with epoch 1
	// is fine (A has held it since 1), of 2 (revoked) is stale.
	s.hb(join("B", "a"))
	s.hb(beat("A", 1, tps("a", 0, 1, 2, 3)))
	s.hb(beat("A", 1, tps("a", 0, 1)))
	if err := s.g.CheckCommit("A", 1, p(0, 1)); err != nil {
		t.Errorf("commit of held partitions with the previous epoch: %v", err)
	}
	if err := s.g.CheckCommit("A", 1, p(2)); !errors.Is(err, ErrStaleMemberEpoch) {
		t.Errorf("commit of a revoked partition with the previous epoch: %v", err)
	}
	a := "A"
	if err := s.g.CheckFetch(&a, 2); err != nil {
		t.Errorf("fetch at the member's epoch: %v", err)
	}
	if err := s.g.CheckFetch(&a, 1); !errors.Is(err, ErrStaleMemberEpoch) {
		t.Errorf("fetch at an old epoch: %v", err)
	}
	if err := s.g.CheckFetch(nil, -1); err != nil {
		t.Errorf("admin fetch: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	s := newStep(t)
	s.hb(join("A", "a"))
	s.hb(join("B", "a"))
	d := s.g.Describe()
	if d.State != "Reconciling" || d.Epoch != 2 || d.AssignmentEpoch != 2 || d.Assignor != assignor.Uniform.Name() || len(d.Members) != 2 {
		t.Fatalf("described %+v", d)
	}
	if m := d.Members[0]; m.MemberID != "A" || len(m.Assigned[0].Partitions) != 4 || len(m.Target[0].Partitions) != 2 {
		t.Fatalf("member A described %+v", m)
	}
	if n := s.g.TopicNames()[topicID("a")]; n != "a" {
		t.Fatalf("topic name %q", n)
	}
}
