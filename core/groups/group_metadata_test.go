package groups

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

// A record is due when the leader's SyncGroup makes the group Stable and
// when a join phase ends with no members, not on other events; it carries
// what Kafka's GroupMetadataValue v3 holds.
func TestMetadataRecordDue(t *testing.T) {
	h := newHarness(t, nil)
	id, w := h.newMember(req(""))
	if h.g.takePersist() {
		t.Fatal("record due while the first member joins")
	}
	h.until(w)
	if h.g.takePersist() {
		t.Fatal("record due at the end of the join phase (CompletingRebalance)")
	}
	h.syncAll(1, []string{id})
	if !h.g.takePersist() {
		t.Fatal("no record due once Stable")
	}
	if h.heartbeat(id, 1) != nil || h.g.takePersist() {
		t.Fatal("record due after a heartbeat")
	}
	v := h.g.metadataValue(h.now)
	m := v.Members
	if v.Version != 3 || v.ProtocolType != "consumer" || v.Generation != 1 || *v.Protocol != "range" || *v.Leader != id ||
		v.CurrentStateTimestamp != h.now.UnixMilli() || len(m) != 1 || m[0].MemberID != id || m[0].ClientID != "c" ||
		m[0].SessionTimeoutMillis != int32(session.Milliseconds()) || m[0].RebalanceTimeoutMillis != int32(rebalance.Milliseconds()) ||
		string(m[0].Subscription) != "meta-range" || string(m[0].Assignment) != "a-"+id {
		t.Fatalf("Stable record: %+v", v)
	}

	h.leave(id)
	h.wantState(stateEmpty, 2)
	if !h.g.takePersist() {
		t.Fatal("no record due once Empty")
	}
	v = h.g.metadataValue(h.now.Add(time.Hour))
	if v.ProtocolType != "consumer" || v.Generation != 2 || v.Protocol != nil || v.Leader != nil || len(v.Members) != 0 ||
		v.CurrentStateTimestamp != h.now.UnixMilli() {
		t.Fatalf("Empty record: %+v", v)
	}
}

// roundTrip encodes v as the log holds it and decodes it back.
func roundTrip(t *testing.T, v kmsg.GroupMetadataValue) *kmsg.GroupMetadataValue {
	t.Helper()
	back, err := decodeGroupValue(v.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// A group restored from its record is what it was: Stable, same
// generation, protocol, leader, members and assignments (DescribeGroups
// alike); each member carries on by heartbeating with its id and
// generation; a member that does not is removed when its session expires,
// counted from the load, and the rest rebalance.
func TestRestoreStableGroup(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(3)
	before := h.g.describe()
	v := roundTrip(t, h.g.metadataValue(h.now))

	loadAt := h.now.Add(time.Hour)
	r := &harness{t: t, g: restoreGroup("g", h.g.cfg, v, loadAt), now: loadAt, w: 100, replies: map[uint64]reply{}}
	r.check()
	if got := r.g.describe(); !reflect.DeepEqual(got, before) {
		t.Fatalf("restored group describes as\n%+v\nwant\n%+v", got, before)
	}
	r.wantState(stateStable, 1)
	if r.g.leader != ids[0] {
		t.Fatalf("leader %q, want %q", r.g.leader, ids[0])
	}
	if d := r.g.nextDeadline(); !d.Equal(loadAt.Add(session)) {
		t.Fatalf("next deadline %v after the load, want the session timeout %v", d.Sub(loadAt), session)
	}
	// Members 0 and 1 heartbeat; member 2 is gone with the old broker.
	for range 3 {
		r.advance(session / 2)
		if r.g.state != stateStable {
			break
		}
		for _, id := range ids[:2] {
			if err := r.heartbeat(id, 1); err != nil {
				t.Fatalf("heartbeat of restored member %q: %v", id, err)
			}
		}
	}
	r.wantState(statePreparingRebalance, 1)
	if got := r.g.memberIDs(); !slices.Equal(got, ids[:2]) {
		t.Fatalf("members after the silent one expired: %v, want %v", got, ids[:2])
	}
	// They rejoin (the restored member's only protocol is the group's) and
	// the group goes on at generation 2.
	var ws []uint64
	for _, id := range ids[:2] {
		ws = append(ws, r.join(req(id)))
	}
	r.until(ws...)
	r.syncAll(2, ids[:2])
}

// An Empty group's record restores an Empty group of its protocol type,
// empty since the record's time, which a new member joins as usual.
func TestRestoreEmptyGroup(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stable(1)
	h.advance(time.Second)
	emptied := h.now
	h.leave(ids[0])
	v := roundTrip(t, h.g.metadataValue(h.now.Add(time.Minute)))
	g := restoreGroup("g", h.g.cfg, v, h.now.Add(time.Hour))
	if g.state != stateEmpty || g.protocolType != "consumer" || g.generation != 2 || !g.emptySince.Equal(emptied) || !g.empty() {
		t.Fatalf("restored Empty group: state %v type %q gen %d empty since %v", g.state, g.protocolType, g.generation, g.emptySince)
	}
	r := &harness{t: t, g: g, now: h.now.Add(time.Hour), w: 100, replies: map[uint64]reply{}}
	r.stableFrom(3)
}

// stableFrom is stable(1) for a group at generation gen-1.
func (h *harness) stableFrom(gen int32) {
	h.t.Helper()
	id, w := h.newMember(req(""))
	h.until(w)
	if r := h.joined(w); r.Generation != gen {
		h.t.Fatalf("joined %+v, want generation %d", r, gen)
	}
	h.syncAll(gen, []string{id})
}

// A static member's record keeps its instance id, so after a restart the
// instance rejoining without a member id takes its place without a
// rebalance, as before the restart.
func TestRestoreStaticMember(t *testing.T) {
	h := newHarness(t, nil)
	r := req("")
	r.InstanceID = str("i1")
	w := h.join(r)
	h.until(w)
	id := h.joined(w).MemberID
	h.syncAll(1, []string{id})
	v := roundTrip(t, h.g.metadataValue(h.now))
	if *v.Members[0].InstanceID != "i1" {
		t.Fatalf("record lost the instance id: %+v", v.Members[0])
	}
	g := restoreGroup("g", h.g.cfg, v, h.now)
	rh := &harness{t: t, g: g, now: h.now, w: 100, replies: map[uint64]reply{}}
	rw := rh.join(r)
	got := rh.joined(rw)
	if got.Generation != 1 || got.MemberID == id || rh.g.state != stateStable || !rh.g.takePersist() {
		t.Fatalf("static rejoin after restore: %+v, state %v", got, rh.g.state)
	}
}

// logRecords reads every record of l.
func logRecords(t *testing.T, l testLog) []record.Record {
	t.Helper()
	var out []record.Record
	for off := l.StartOffset(); off < l.EndOffset(); {
		sl, err := l.Read(off, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		b, err := sl.Bytes()
		next := sl.NextOffset
		sl.Release()
		if err != nil || next <= off {
			t.Fatalf("read at %d: next %d, %v", off, next, err)
		}
		for len(b) > 0 {
			_, n, err := record.Next(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := record.Records(b[:n], nil)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, recs...)
			b = b[n:]
		}
		off = next
	}
	return out
}

// groupRecords decodes the group metadata records of l with kmsg, as a
// tool reading __consumer_offsets does; a nil value is a tombstone.
func groupRecords(t *testing.T, l testLog) (groups []string, values []*kmsg.GroupMetadataValue) {
	t.Helper()
	for _, r := range logRecords(t, l) {
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			t.Fatal(err)
		}
		if k.Version != 2 {
			continue
		}
		var v *kmsg.GroupMetadataValue
		if r.Value != nil {
			v = new(kmsg.GroupMetadataValue)
			if err := v.ReadFrom(r.Value); err != nil || v.Version != 3 {
				t.Fatalf("group metadata value v%d: %v", v.Version, err)
			}
		}
		groups, values = append(groups, k.Group), append(values, v)
	}
	return groups, values
}

// A group reads back after a restart as what it was: a Stable consumer
// group with its protocol, leader and members (DescribeGroups, ListGroups),
// whose members carry on with their ids and generation; once every member
// left, an Empty consumer group; deleted, gone. The records are Kafka's
// (decoded with kmsg).
func TestGroupMetadataSurvivesRestart(t *testing.T) {
	mem := vfs.NewMem()
	clk := newClock()
	c := openCoordinator(t, mem, clk, func(o *Options) { o.InitialRebalanceDelay = 3 * time.Second })
	rs := joinAll(t, c, clk, joinReq(""), joinReq(""))
	syncAll(t, c, rs)
	before, err := c.Describe("g")
	if err != nil {
		t.Fatal(err)
	}
	groups, values := groupRecords(t, testLogs[c])
	if len(values) != 1 || groups[0] != "g" || values[0] == nil || len(values[0].Members) != 2 ||
		values[0].ProtocolType != "consumer" || *values[0].Protocol != "range" || values[0].Generation != 1 {
		t.Fatalf("group records after the rebalance: %v %+v", groups, values)
	}
	closeCoordinator(t, c)

	c = openCoordinator(t, mem, clk, nil)
	after, err := c.Describe("g")
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Fatalf("after a restart the group describes as\n%+v (%v)\nwant\n%+v", after, err, before)
	}
	if l := c.List(); len(l) != 1 || l[0] != (Listing{Group: "g", ProtocolType: "consumer", State: "Stable"}) {
		t.Fatalf("list after a restart: %+v", l)
	}
	for _, r := range rs {
		if err := c.Heartbeat("g", r.MemberID, nil, r.Generation); err != nil {
			t.Fatalf("heartbeat of %q after a restart: %v", r.MemberID, err)
		}
		if _, err := c.Commit("g", r.MemberID, nil, r.Generation, []OffsetCommit{oc("t", 0, 9, nil)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rs {
		if _, err := c.Leave("g", []LeaveMember{{MemberID: r.MemberID}}); err != nil {
			t.Fatal(err)
		}
	}
	closeCoordinator(t, c)

	c = openCoordinator(t, mem, clk, nil)
	if l := c.List(); len(l) != 1 || l[0] != (Listing{Group: "g", ProtocolType: "consumer", State: "Empty"}) {
		t.Fatalf("list after the members left and a restart: %+v", l)
	}
	if err := c.Delete("g"); err != nil {
		t.Fatal(err)
	}
	groups, values = groupRecords(t, testLogs[c])
	if n := len(values); n < 3 || values[n-1] != nil || values[n-2] == nil || len(values[n-2].Members) != 0 {
		t.Fatalf("group records: %v %+v; want ..., the Empty group, a tombstone", groups, values)
	}
	closeCoordinator(t, c)

	c = openCoordinator(t, mem, clk, nil)
	defer closeCoordinator(t, c)
	if l := c.List(); len(l) != 0 {
		t.Fatalf("list after the group was deleted and a restart: %+v", l)
	}
}

// A group that empties with no committed offsets is forgotten, and its
// record gets a tombstone, so it does not come back after a restart.
func TestGroupWithoutOffsetsForgotten(t *testing.T) {
	mem := vfs.NewMem()
	clk := newClock()
	c := openCoordinator(t, mem, clk, nil)
	rs := joinAll(t, c, clk, joinReq(""))
	syncAll(t, c, rs)
	if _, err := c.Leave("g", []LeaveMember{{MemberID: rs[0].MemberID}}); err != nil {
		t.Fatal(err)
	}
	if l := c.List(); len(l) != 0 {
		t.Fatalf("list: %+v", l)
	}
	_, values := groupRecords(t, testLogs[c])
	if n := len(values); n != 2 || values[0] == nil || values[1] != nil {
		t.Fatalf("group records %+v, want the Stable group and a tombstone", values)
	}
	closeCoordinator(t, c)
	c = openCoordinator(t, mem, clk, nil)
	defer closeCoordinator(t, c)
	if l := c.List(); len(l) != 0 {
		t.Fatalf("list after a restart: %+v", l)
	}
}

// A member whose client id is longer than the record format's int16 length
// (flexible JoinGroup versions can carry one) does not get a record no one
// could read back: the group is not persisted, and the partition still
// loads.
func TestGroupMetadataTooLong(t *testing.T) {
	mem := vfs.NewMem()
	clk := newClock()
	c := openCoordinator(t, mem, clk, nil)
	r := joinReq("")
	r.ClientID = strings.Repeat("c", maxString+1)
	rs := joinAll(t, c, clk, r)
	syncAll(t, c, rs)
	if _, values := groupRecords(t, testLogs[c]); len(values) != 0 {
		t.Fatalf("group records %+v, want none", values)
	}
	closeCoordinator(t, c)
	c = openCoordinator(t, mem, clk, nil)
	defer closeCoordinator(t, c)
}
