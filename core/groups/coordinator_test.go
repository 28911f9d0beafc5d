package groups

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/vfs"
)

var bg = context.Background()

// openCoordinator opens a Coordinator with the fake clock and loads its
// partition 0 from a partition log on fsys in /data/groups (every group maps
// there unless mod sets PartitionFor); mod may change the options. The log
// is closed by closeCoordinator, or at the end of the test.
func openCoordinator(t *testing.T, fsys vfs.FS, clk *fakeClock, mod func(*Options)) *Coordinator {
	t.Helper()
	return openCoordinatorAt(t, fsys, dir, clk, mod)
}

// openCoordinatorAt is openCoordinator with the log in logDir.
func openCoordinatorAt(t *testing.T, fsys vfs.FS, logDir string, clk *fakeClock, mod func(*Options)) *Coordinator {
	t.Helper()
	o := Options{Clock: clk, Logger: quietLogger(), newMemberID: counterIDs()}
	if mod != nil {
		mod(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	l := openTestLog(t, fsys, logDir)
	if err := c.Load(bg, 0, l); err != nil {
		t.Fatalf("load: %v", err)
	}
	testLogs[c] = l
	return c
}

// testLogs are the logs openCoordinator loaded, by coordinator.
var testLogs = map[*Coordinator]testLog{}

// closeCoordinator closes c and then its log, cleanly: a restart.
func closeCoordinator(t *testing.T, c *Coordinator) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if l, ok := testLogs[c]; ok {
		delete(testLogs, c)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// testLog is a partition log as the coordinator's Log.
type testLog struct{ *partlog.Log }

func (l testLog) Append(ctx context.Context, b []byte) (func(context.Context) error, error) {
	if _, err := l.Log.Append(ctx, b, 0); err != nil {
		return nil, err
	}
	return func(context.Context) error { return nil }, nil
}

// AppendVerified is Append: a bare partition log keeps no producer state,
// so a guard cannot be checked (partitionLog checks them).
func (l testLog) AppendVerified(ctx context.Context, b []byte, _ producers.Guard) (func(context.Context) error, error) {
	return l.Append(ctx, b)
}

// openTestLog opens the partition log in dir on fsys, closed at the end of
// the test unless closed before.
func openTestLog(t *testing.T, fsys vfs.FS, dir string) testLog {
	t.Helper()
	l, _, err := partlog.Open(fsys, dir, partlog.Config{RetentionAge: -1, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return testLog{l}
}

// waitFor spins until cond holds (checked under the coordinator's mutex),
// failing after 10s of wall time.
func waitFor(t *testing.T, c *Coordinator, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// parked counts the members of group waiting in Join (join) or Sync.
func parked(c *Coordinator, group string, join bool) int {
	g := c.groups[group]
	if g == nil {
		return 0
	}
	n := 0
	for _, m := range g.order {
		if join && m.joinWaiter != 0 || !join && m.syncWaiter != 0 {
			n++
		}
	}
	return n
}

type joined struct {
	i   int
	r   JoinResult
	err error
}

// joinAll runs the JoinGroups concurrently, each as a client does it (a
// second JoinGroup with the id ErrMemberIDRequired hands out), and moves
// the clock on, once every one of them is parked (with the joins parked
// before), until all are answered.
func joinAll(t *testing.T, c *Coordinator, clk *fakeClock, reqs ...JoinRequest) []JoinResult {
	t.Helper()
	c.mu.Lock()
	base := parked(c, reqs[0].Group, true) // joins parked already
	c.mu.Unlock()
	ch := make(chan joined, len(reqs))
	for i, r := range reqs {
		go func() {
			res, err := c.Join(bg, r)
			if errors.Is(err, ErrMemberIDRequired) {
				r.MemberID = res.MemberID
				res, err = c.Join(bg, r)
			}
			ch <- joined{i, res, err}
		}()
	}
	out := make([]JoinResult, len(reqs))
	deadline := time.Now().Add(10 * time.Second)
	for got := 0; got < len(reqs); {
		select {
		case j := <-ch:
			if j.err != nil {
				t.Fatalf("join %d: %v", j.i, j.err)
			}
			out[j.i] = j.r
			got++
			continue
		default:
		}
		c.mu.Lock()
		all := parked(c, reqs[0].Group, true) == base+len(reqs)-got
		c.mu.Unlock()
		if all {
			clk.Advance(time.Second)
		} else {
			runtime.Gosched()
		}
		if time.Now().After(deadline) {
			t.Fatalf("joins not answered after 10s (%d of %d)", got, len(reqs))
		}
	}
	return out
}

// syncAll syncs every member of a join: the followers concurrently, parked
// before the leader sends "a-<id>" for each; it checks every assignment.
func syncAll(t *testing.T, c *Coordinator, rs []JoinResult) {
	t.Helper()
	var leader JoinResult
	assign := map[string][]byte{}
	for _, r := range rs {
		assign[r.MemberID] = []byte("a-" + r.MemberID)
		if r.MemberID == r.LeaderID {
			leader = r
		}
	}
	group := "g"
	var wg sync.WaitGroup
	errs := make(chan error, len(rs))
	for _, r := range rs {
		if r.MemberID == leader.MemberID {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.Sync(bg, SyncRequest{Group: group, MemberID: r.MemberID, Generation: r.Generation})
			if err == nil && string(s.Assignment) != "a-"+r.MemberID {
				err = fmt.Errorf("%s got %q", r.MemberID, s.Assignment)
			}
			errs <- err
		}()
	}
	waitFor(t, c, "followers parked in Sync", func() bool { return parked(c, group, false) == len(rs)-1 })
	s, err := c.Sync(bg, SyncRequest{Group: group, MemberID: leader.MemberID, Generation: leader.Generation, Assignments: assign})
	if err != nil || string(s.Assignment) != "a-"+leader.MemberID {
		t.Fatalf("leader sync: %q, %v", s.Assignment, err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("follower sync: %v", err)
		}
	}
}

func joinReq(id string) JoinRequest {
	r := req(id)
	r.ClientHost = "/127.0.0.1"
	return r
}

func TestCoordinatorThreeMembers(t *testing.T) {
	clk := newClock()
	c := openCoordinator(t, vfs.NewMem(), clk, func(o *Options) { o.InitialRebalanceDelay = 3 * time.Second })
	defer c.Close()

	rs := joinAll(t, c, clk, joinReq(""), joinReq(""), joinReq(""))
	leader := rs[0].LeaderID
	leaders := 0
	for _, r := range rs {
		if r.Generation != 1 || r.LeaderID != leader || r.Protocol != "range" {
			t.Fatalf("join results disagree: %+v", rs)
		}
		if r.MemberID == leader {
			leaders++
			if len(r.Members) != 3 {
				t.Fatalf("leader got %d members", len(r.Members))
			}
		}
	}
	if leaders != 1 {
		t.Fatalf("%d members lead", leaders)
	}
	syncAll(t, c, rs)
	for _, r := range rs {
		wantErr(t, "heartbeat", c.Heartbeat("g", r.MemberID, nil, 1), nil)
	}
	d, err := c.Describe("g")
	if err != nil || d.State != "Stable" || len(d.Members) != 3 || d.Members[0].ClientHost != "/127.0.0.1" {
		t.Fatalf("describe: %+v, %v", d, err)
	}
	if l := c.List(); len(l) != 1 || l[0] != (Listing{Group: "g", ProtocolType: "consumer", State: "Stable"}) {
		t.Fatalf("list: %+v", l)
	}

	// One leaves; the other two rejoin concurrently.
	var follower, other JoinResult
	for _, r := range rs {
		switch {
		case r.MemberID == leader:
		case follower.MemberID == "":
			follower = r
		default:
			other = r
		}
	}
	if errs, err := c.Leave("g", []LeaveMember{{MemberID: follower.MemberID}}); err != nil || errs[0] != nil {
		t.Fatalf("leave: %v %v", errs, err)
	}
	wantErr(t, "heartbeat after a leave", c.Heartbeat("g", leader, nil, 1), ErrRebalanceInProgress)
	rs2 := joinAll(t, c, clk, joinReq(leader), joinReq(other.MemberID))
	for _, r := range rs2 {
		if r.Generation != 2 || r.LeaderID != leader {
			t.Fatalf("after leave: %+v", r)
		}
	}
	syncAll(t, c, rs2)

	// It comes back as a new member, which starts a rebalance; the others
	// rejoin, and all get generation 3.
	back := make(chan JoinResult, 1)
	go func() {
		r := joinReq("")
		res, _ := c.Join(bg, r)
		r.MemberID = res.MemberID
		res, err := c.Join(bg, r)
		if err != nil {
			res.Generation = -1
		}
		back <- res
	}()
	waitFor(t, c, "new member parked", func() bool { return parked(c, "g", true) == 1 })
	rs3 := joinAll(t, c, clk, joinReq(leader), joinReq(other.MemberID))
	rs3 = append(rs3, <-back)
	for _, r := range rs3 {
		if r.Generation != 3 || r.LeaderID != leader {
			t.Fatalf("after rejoin: %+v", r)
		}
	}
	syncAll(t, c, rs3)
}

func TestCoordinatorSessionTimeout(t *testing.T) {
	clk := newClock()
	c := openCoordinator(t, vfs.NewMem(), clk, func(o *Options) { o.InitialRebalanceDelay = 3 * time.Second })
	defer c.Close()
	rs := joinAll(t, c, clk, joinReq(""), joinReq(""))
	syncAll(t, c, rs)
	// Only the timer can notice that a session ran out: nobody calls in.
	clk.Advance(session - time.Second)
	wantErr(t, "heartbeat", c.Heartbeat("g", rs[0].MemberID, nil, rs[0].Generation), nil)
	clk.Advance(time.Second)
	d, _ := c.Describe("g")
	if d.State != "PreparingRebalance" || len(d.Members) != 1 || d.Members[0].MemberID != rs[0].MemberID {
		t.Fatalf("after one session expired: %+v", d)
	}
	wantErr(t, "expired member", c.Heartbeat("g", rs[1].MemberID, nil, rs[1].Generation), ErrUnknownMemberID)
	// The survivor ignores the rebalance too: at the rebalance timeout it
	// is removed and the group, with no offsets, forgotten.
	clk.Advance(rebalance)
	if d, _ := c.Describe("g"); d.State != "Dead" {
		t.Fatalf("after all expired: %+v", d)
	}
	if l := c.List(); len(l) != 0 {
		t.Fatalf("list: %+v", l)
	}
}

func TestCoordinatorJoinContextCanceled(t *testing.T) {
	clk := newClock()
	c := openCoordinator(t, vfs.NewMem(), clk, func(o *Options) { o.InitialRebalanceDelay = 3 * time.Second })
	defer c.Close()
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		r := joinReq("")
		r.RequireKnownMemberID = false
		_, err := c.Join(ctx, r)
		done <- err
	}()
	waitFor(t, c, "join parked", func() bool { return parked(c, "g", true) == 1 })
	cancel()
	wantErr(t, "canceled join", <-done, context.Canceled)
	c.mu.Lock()
	n := len(c.waiters)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d waiters left", n)
	}
	// The group goes on; the answer to the gone request is dropped.
	clk.Advance(3 * time.Second)
	if d, _ := c.Describe("g"); d.State != "CompletingRebalance" {
		t.Fatalf("state %q", d.State)
	}
}

func TestCoordinatorCloseAnswersWaiters(t *testing.T) {
	clk := newClock()
	c := openCoordinator(t, vfs.NewMem(), clk, func(o *Options) { o.InitialRebalanceDelay = 3 * time.Second })
	done := make(chan error, 2)
	go func() {
		r := joinReq("")
		r.RequireKnownMemberID = false
		_, err := c.Join(bg, r)
		done <- err
	}()
	waitFor(t, c, "join parked", func() bool { return parked(c, "g", true) == 1 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "parked join", <-done, ErrCoordinatorNotAvailable)
	_, err := c.Join(bg, joinReq(""))
	wantErr(t, "join after close", err, ErrCoordinatorNotAvailable)
	wantErr(t, "heartbeat after close", c.Heartbeat("g", "x", nil, 1), ErrCoordinatorNotAvailable)
	_, err = c.Commit("g", "", nil, -1, nil)
	wantErr(t, "commit after close", err, ErrCoordinatorNotAvailable)
	_, err = c.Fetch("g", nil)
	wantErr(t, "fetch after close", err, ErrCoordinatorNotAvailable)
	wantErr(t, "second close", c.Close(), nil)
}

func TestCoordinatorRequestValidation(t *testing.T) {
	clk := newClock()
	c := openCoordinator(t, vfs.NewMem(), clk, nil)
	defer c.Close()
	r := joinReq("")
	r.Group = ""
	_, err := c.Join(bg, r)
	wantErr(t, "join without group", err, ErrInvalidGroupID)
	_, err = c.Sync(bg, SyncRequest{MemberID: "m"})
	wantErr(t, "sync without group", err, ErrInvalidGroupID)
	wantErr(t, "heartbeat without group", c.Heartbeat("", "m", nil, 1), ErrInvalidGroupID)
	_, err = c.Leave("", nil)
	wantErr(t, "leave without group", err, ErrInvalidGroupID)

	res, err := c.Join(bg, joinReq("someone"))
	wantErr(t, "join unknown group with a member id", err, ErrUnknownMemberID)
	if res.Generation != -1 {
		t.Fatalf("generation %d on error", res.Generation)
	}
	_, err = c.Sync(bg, SyncRequest{Group: "nope", MemberID: "m"})
	wantErr(t, "sync unknown group", err, ErrUnknownMemberID)
	wantErr(t, "heartbeat unknown group", c.Heartbeat("nope", "m", nil, 1), ErrUnknownMemberID)
	errs, err := c.Leave("nope", []LeaveMember{{MemberID: "m"}})
	if err != nil || len(errs) != 1 || !errors.Is(errs[0], ErrUnknownMemberID) {
		t.Fatalf("leave unknown group: %v %v", errs, err)
	}
	bad := joinReq("")
	bad.SessionTimeout = time.Second
	_, err = c.Join(bg, bad)
	wantErr(t, "short session", err, ErrInvalidSessionTimeout)
	if l := c.List(); len(l) != 0 {
		t.Fatalf("failed joins left groups behind: %+v", l)
	}
	if d, err := c.Describe("nope"); err != nil || d.Group != "nope" || d.State != "Dead" || d.Members != nil || d.ProtocolType != "" {
		t.Fatalf("describe unknown: %+v %v", d, err)
	}
	if err := c.Delete("nope"); !errors.Is(err, ErrGroupIDNotFound) {
		t.Fatalf("delete unknown: %v", err)
	}
}

// TestCoordinatorConcurrentGroups runs several groups of members through
// join, sync, heartbeats and leaves at once, for the race detector.
func TestCoordinatorConcurrentGroups(t *testing.T) {
	clk := newClock()
	c := openCoordinator(t, vfs.NewMem(), clk, nil)
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for gi := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := fmt.Sprintf("g%d", gi)
			for round := range 20 {
				r := joinReq("")
				r.Group = group
				res, err := c.Join(bg, r)
				if errors.Is(err, ErrMemberIDRequired) {
					r.MemberID = res.MemberID
					res, err = c.Join(bg, r)
				}
				if err != nil {
					errs <- err
					return
				}
				s, err := c.Sync(bg, SyncRequest{Group: group, MemberID: res.MemberID, Generation: res.Generation,
					Assignments: map[string][]byte{res.MemberID: []byte(group)}})
				if err != nil || string(s.Assignment) != group {
					errs <- fmt.Errorf("%s sync: %q %v", group, s.Assignment, err)
					return
				}
				off := []OffsetCommit{{TopicPartition: TopicPartition{"t", int32(gi)}, Offset: int64(round)}}
				if pe, err := c.Commit(group, res.MemberID, nil, res.Generation, off); err != nil || pe[0] != nil {
					errs <- fmt.Errorf("%s commit: %v %v", group, pe, err)
					return
				}
				if err := c.Heartbeat(group, res.MemberID, nil, res.Generation); err != nil {
					errs <- err
					return
				}
				if _, err := c.Leave(group, []LeaveMember{{MemberID: res.MemberID}}); err != nil {
					errs <- err
					return
				}
				c.List()
				c.Describe(group)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for gi := range 4 {
		got, err := c.Fetch(fmt.Sprintf("g%d", gi), nil)
		if want := (Committed{Offset: 19}); err != nil || got[TopicPartition{"t", int32(gi)}] != want {
			t.Fatalf("g%d offsets %+v %v", gi, got, err)
		}
	}
}

// ExpireOffsets drops the offsets of groups empty for longer than the
// retention, counted from the newest commit or from when the last member
// left, whichever is later; a group with members keeps its offsets.
func TestExpireOffsets(t *testing.T) {
	clk := newClock()
	const day = 24 * time.Hour
	c := openCoordinator(t, vfs.NewMem(), clk, func(o *Options) { o.MaxSessionTimeout = 30 * day })
	defer c.Close()
	tp := TopicPartition{Topic: "t", Partition: 0}
	commit := func(group, member string, gen int32) {
		t.Helper()
		if _, err := c.Commit(group, member, nil, gen, []OffsetCommit{{TopicPartition: tp, Offset: 5, LeaderEpoch: -1}}); err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	commit("standalone", "", -1) // a simple commit at day 0

	// "member": one member with a 20-day session, committing at day 0.
	r := joinReq("")
	r.Group, r.SessionTimeout, r.RebalanceTimeout = "member", 20*day, time.Minute
	res := joinAll(t, c, clk, r)[0]
	if _, err := c.Sync(bg, SyncRequest{Group: "member", MemberID: res.MemberID, Generation: res.Generation,
		Assignments: map[string][]byte{res.MemberID: nil}}); err != nil {
		t.Fatal(err)
	}
	commit("member", res.MemberID, res.Generation)

	clk.Advance(5 * day)
	if exp, err := c.ExpireOffsets(7 * day); err != nil || len(exp) != 0 {
		t.Fatalf("day 5: expired %v, %v", exp, err)
	}
	if _, err := c.Leave("member", []LeaveMember{{MemberID: res.MemberID}}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * day) // day 8: the standalone commit is 8 days old; "member" has been empty 3 days
	exp, err := c.ExpireOffsets(7 * day)
	if err != nil || len(exp) != 1 || exp[0] != "standalone" {
		t.Fatalf("day 8: expired %v, %v; want [standalone]", exp, err)
	}
	if got, _ := c.Fetch("standalone", []TopicPartition{tp}); got[tp].Offset == 5 {
		t.Fatal("expired group still has its offset")
	}
	if got, _ := c.Fetch("member", []TopicPartition{tp}); got[tp].Offset != 5 {
		t.Fatalf("member's offsets lost 3 days after it emptied: %+v", got)
	}
	clk.Advance(5 * day) // "member" empty for 8 days
	if exp, err := c.ExpireOffsets(7 * day); err != nil || len(exp) != 1 || exp[0] != "member" {
		t.Fatalf("day 13: expired %v, %v; want [member]", exp, err)
	}
}
