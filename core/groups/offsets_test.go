package groups

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/internal/logtest"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

const dir = "/data/groups"

func tp(topic string, p int32) TopicPartition { return TopicPartition{Topic: topic, Partition: p} }

func oc(topic string, p int32, offset int64, meta *string) OffsetCommit {
	return OffsetCommit{TopicPartition: tp(topic, p), Offset: offset, LeaderEpoch: int32(offset % 7), Metadata: meta}
}

// simpleCommit commits offsets as a consumer without group management.
func simpleCommit(t *testing.T, c *Coordinator, group string, offsets ...OffsetCommit) {
	t.Helper()
	errs, err := c.Commit(group, "", nil, -1, offsets)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("commit of %v: %v", offsets[i].TopicPartition, e)
		}
	}
}

// allOffsets returns every group's offsets.
func allOffsets(t *testing.T, c *Coordinator) map[string]map[TopicPartition]Committed {
	t.Helper()
	out := map[string]map[TopicPartition]Committed{}
	for _, l := range c.List() {
		m, err := c.Fetch(l.Group, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) > 0 {
			out[l.Group] = m
		}
	}
	return out
}

func sameOffsets(a, b map[string]map[TopicPartition]Committed) bool {
	return maps.EqualFunc(a, b, func(x, y map[TopicPartition]Committed) bool { return maps.Equal(x, y) })
}

func TestCommitFetch(t *testing.T) {
	c := openCoordinator(t, vfs.NewMem(), newClock(), nil)
	defer c.Close()
	simpleCommit(t, c, "g", oc("a", 0, 10, str("m0")), oc("a", 1, 11, nil), oc("b", 0, 5, str("")))
	got, err := c.Fetch("g", []TopicPartition{tp("a", 0), tp("a", 1), tp("a", 2)})
	want := map[TopicPartition]Committed{
		tp("a", 0): {Offset: 10, LeaderEpoch: 3, Metadata: "m0"},
		tp("a", 1): {Offset: 11, LeaderEpoch: 4},
	}
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("fetch: %+v %v", got, err)
	}
	if all, _ := c.Fetch("g", nil); len(all) != 3 || all[tp("b", 0)].Offset != 5 {
		t.Fatalf("fetch all: %+v", all)
	}
	if none, err := c.Fetch("other", nil); err != nil || len(none) != 0 {
		t.Fatalf("fetch of an unknown group: %+v %v", none, err)
	}
	if l := c.List(); len(l) != 1 || l[0] != (Listing{Group: "g", State: "Empty"}) {
		t.Fatalf("list: %+v", l)
	}

	// Metadata over the limit fails that partition only.
	long := strings.Repeat("x", DefaultMaxMetadataBytes+1)
	errs, err := c.Commit("g", "", nil, -1, []OffsetCommit{oc("a", 0, 20, &long), oc("a", 1, 21, nil)})
	if err != nil || !errors.Is(errs[0], ErrOffsetMetadataTooLarge) || errs[1] != nil {
		t.Fatalf("commit with long metadata: %v %v", errs, err)
	}
	if got, _ := c.Fetch("g", nil); got[tp("a", 0)].Offset != 10 || got[tp("a", 1)].Offset != 21 {
		t.Fatalf("after partial commit: %+v", got)
	}

	// A topic name too long for the store's format.
	errs, err = c.Commit("g", "", nil, -1, []OffsetCommit{oc(strings.Repeat("t", maxString+1), 0, 1, nil)})
	if err != nil || !errors.Is(errs[0], ErrInvalidCommitSize) {
		t.Fatalf("commit with a long topic: %v %v", errs, err)
	}

	// A group commit to a group that does not exist is from an old
	// generation; the empty group id is allowed, as Kafka does.
	errs, err = c.Commit("nope", "m", nil, 3, []OffsetCommit{oc("a", 0, 1, nil)})
	if !errors.Is(err, ErrIllegalGeneration) || len(errs) != 1 || !errors.Is(errs[0], ErrIllegalGeneration) {
		t.Fatalf("commit to an unknown group: %v %v", errs, err)
	}
	simpleCommit(t, c, "", oc("a", 0, 1, nil))
	if got, _ := c.Fetch("", nil); got[tp("a", 0)].Offset != 1 {
		t.Fatalf("empty group id: %+v", got)
	}
}

func TestCommitChecksMembership(t *testing.T) {
	clk := newClock()
	c := openCoordinator(t, vfs.NewMem(), clk, nil)
	defer c.Close()
	rs := joinAll(t, c, clk, joinReq(""))
	m := rs[0]
	commit := func(member string, gen int32) error {
		errs, err := c.Commit("g", member, nil, gen, []OffsetCommit{oc("t", 0, int64(gen), nil)})
		if err != nil && !slices.ContainsFunc(errs, func(e error) bool { return e == err }) {
			t.Fatalf("group error %v not in every partition: %v", err, errs)
		}
		return err
	}
	wantErr(t, "CompletingRebalance", commit(m.MemberID, 1), ErrRebalanceInProgress)
	syncAll(t, c, rs)
	wantErr(t, "member of the generation", commit(m.MemberID, 1), nil)
	wantErr(t, "stale generation", commit(m.MemberID, 0), ErrIllegalGeneration)
	wantErr(t, "unknown member", commit("nobody", 1), ErrUnknownMemberID)
	wantErr(t, "simple commit with members", commit("", -1), ErrUnknownMemberID)
	if _, err := c.Leave("g", []LeaveMember{{MemberID: m.MemberID}}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "simple commit once empty", commit("", -1), nil)
	if d, _ := c.Describe("g"); d.State != "Empty" {
		t.Fatalf("group with offsets after the last member left: %+v", d)
	}
	if err := c.Delete("g"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if got, _ := c.Fetch("g", nil); len(got) != 0 {
		t.Fatalf("offsets after delete: %+v", got)
	}
	rs = joinAll(t, c, clk, joinReq(""))
	if err := c.Delete("g"); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("delete of a group with members: %v", err)
	}
}

// workload commits, deletes a group and a topic's offsets, and returns what
// Fetch must then show.
func workload(t *testing.T, c *Coordinator) map[string]map[TopicPartition]Committed {
	t.Helper()
	for i := range 50 {
		simpleCommit(t, c, fmt.Sprintf("g%d", i%3), oc("a", int32(i%4), int64(i), str(fmt.Sprint("m", i))),
			oc("b", 0, int64(i), nil))
	}
	simpleCommit(t, c, "doomed", oc("a", 0, 1, nil))
	if err := c.Delete("doomed"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveTopic("b"); err != nil {
		t.Fatal(err)
	}
	want := allOffsets(t, c)
	if len(want) != 3 || len(want["g0"]) != 4 || want["g0"][tp("a", 0)].Offset != 48 {
		t.Fatalf("workload offsets: %+v", want)
	}
	return want
}

func TestOffsetsSurviveRestart(t *testing.T) {
	for _, tt := range []struct {
		name string
		fs   func(t *testing.T) (vfs.FS, string)
	}{
		{"MemFS", func(t *testing.T) (vfs.FS, string) { return vfs.NewMem(), dir }},
		{"OS", func(t *testing.T) (vfs.FS, string) { return vfs.Default, t.TempDir() + "/groups" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fsys, d := tt.fs(t)
			c := openCoordinatorAt(t, fsys, d, newClock(), nil)
			want := workload(t, c)
			closeCoordinator(t, c)
			c = openCoordinatorAt(t, fsys, d, newClock(), nil)
			if got := allOffsets(t, c); !sameOffsets(got, want) {
				t.Fatalf("after restart:\n got %+v\nwant %+v", got, want)
			}
			for _, l := range c.List() {
				if l.State != "Empty" || l.ProtocolType != "" {
					t.Fatalf("loaded group %+v", l)
				}
			}
			// Still writable, and again after a second restart.
			simpleCommit(t, c, "g0", oc("a", 0, 1000, nil))
			want["g0"][tp("a", 0)] = Committed{Offset: 1000, LeaderEpoch: 1000 % 7}
			closeCoordinator(t, c)
			c = openCoordinatorAt(t, fsys, d, newClock(), nil)
			defer c.Close()
			if got := allOffsets(t, c); !sameOffsets(got, want) {
				t.Fatalf("after second restart:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestOffsetsAfterPowerCut(t *testing.T) {
	mem := vfs.NewMem()
	c := openCoordinator(t, mem, newClock(), nil)
	want := workload(t, c)
	// Acknowledged commits are in the page cache only: a power cut may
	// lose them, but never corrupts the log.
	lost := mem.CrashClone()
	closeCoordinator(t, c)
	kept := mem.CrashClone()
	c = openCoordinator(t, lost, newClock(), nil)
	closeCoordinator(t, c)
	c = openCoordinator(t, kept, newClock(), nil)
	defer c.Close()
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after Close and a power cut:\n got %+v\nwant %+v", got, want)
	}
}

// The coordinator's records are Kafka's: read back from the partition log,
// the last record of each key is each live offset, and a tombstone ends one.
func TestOffsetsLogRecords(t *testing.T) {
	mem := vfs.NewMem()
	c := openCoordinator(t, mem, newClock(), nil)
	defer c.Close()
	want := workload(t, c)
	last := map[string][]byte{} // key bytes -> last value
	for _, b := range logtest.Batches(t, testLogs[c].Log) {
		recs, err := record.Records(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			last[string(r.Key)] = r.Value
		}
	}
	got := map[string]map[TopicPartition]Committed{}
	for kb, vb := range last {
		k, err := decodeKey([]byte(kb))
		if err != nil {
			t.Fatal(err)
		}
		if vb == nil {
			continue
		}
		v, err := decodeValue(vb)
		if err != nil {
			t.Fatal(err)
		}
		if got[k.group] == nil {
			got[k.group] = map[TopicPartition]Committed{}
		}
		got[k.group][k.TopicPartition] = v.Committed
	}
	if !sameOffsets(got, want) {
		t.Fatalf("offsets read from the log:\n got %+v\nwant %+v", got, want)
	}
}

// A record weir did not write fails the load, naming the offset, and the
// partition stays unloaded.
func TestLoadForeignRecord(t *testing.T) {
	mem := vfs.NewMem()
	l := openTestLog(t, mem, dir)
	b, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Key: []byte("not a key"), Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(bg, b); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Clock: newClock(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Load(bg, 0, l); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "at 0") {
		t.Fatalf("load of a foreign record: %v", err)
	}
	if _, err := c.Fetch("g", nil); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("fetch after a failed load: %v", err)
	}
}

func TestCommitStoreFailure(t *testing.T) {
	mem := vfs.NewMem()
	inj := &errorfs.FailAt{K: -1, Ops: []errorfs.Op{errorfs.OpWrite}}
	c := openCoordinator(t, errorfs.Wrap(mem, inj), newClock(), nil)
	defer c.Close()
	simpleCommit(t, c, "g", oc("a", 0, 1, nil))
	inj.K = inj.Count() // the next write fails
	errs, err := c.Commit("g", "", nil, -1, []OffsetCommit{oc("a", 0, 2, nil)})
	if err != nil || !errors.Is(errs[0], ErrCoordinatorNotAvailable) {
		t.Fatalf("commit with a failing write: %v %v", errs, err)
	}
	if got, _ := c.Fetch("g", nil); got[tp("a", 0)].Offset != 1 {
		t.Fatalf("failed commit changed the offset: %+v", got)
	}
}

func TestRecordCodec(t *testing.T) {
	k := offsetKey{group: "grp", TopicPartition: tp("topic", 7)}
	v := stored{Committed: Committed{Offset: 1 << 40, LeaderEpoch: -1, Metadata: "meta"}, commitTime: time.Now().UnixMilli()}
	kb, vb := appendKey(nil, k), appendValue(nil, v)
	// Kafka's byte layout: version, group, topic, partition.
	wantKey := "\x00\x01\x00\x03grp\x00\x05topic\x00\x00\x00\x07"
	if string(kb) != wantKey {
		t.Fatalf("key bytes %q, want %q", kb, wantKey)
	}
	if gk, err := decodeKey(kb); err != nil || gk != k {
		t.Fatalf("key round trip: %+v %v", gk, err)
	}
	if gv, err := decodeValue(vb); err != nil || gv != v {
		t.Fatalf("value round trip: %+v %v", gv, err)
	}
	for i := range kb {
		if _, err := decodeKey(kb[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("key cut at %d: %v", i, err)
		}
	}
	for i := range vb {
		if _, err := decodeValue(vb[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("value cut at %d: %v", i, err)
		}
	}
	if _, err := decodeKey(append(kb, 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("key with a trailing byte: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	k := appendKey(nil, offsetKey{group: "g", TopicPartition: tp("t", 1)})
	v := appendValue(nil, stored{Committed: Committed{Offset: 5, Metadata: "m"}})
	for _, seed := range [][]byte{nil, {}, {0, 0}, {0x7f, 0xff, 0x7f, 0xff}, k, v, append(k, 1, 2, 3), append(v, 0)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if k, err := decodeKey(b); err == nil {
			// Key versions 0 and 1 are the same format; weir writes 1.
			if got := appendKey(nil, k); string(got[2:]) != string(b[2:]) || (b[1] != 0 && b[1] != 1) || b[0] != 0 {
				t.Fatalf("key %q decodes to %+v, which encodes to %q", b, k, got)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("key error %v is not ErrCorrupt", err)
		}
		if v, err := decodeValue(b); err == nil {
			if got := appendValue(nil, v); string(got) != string(b) {
				t.Fatalf("value %q decodes to %+v, which encodes to %q", b, v, got)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("value error %v is not ErrCorrupt", err)
		}
	})
}

// gatedLog is a testLog whose appends count as committed only when the
// test opens their gate, in whatever order it opens them: a cluster's
// acks=all wait, controlled.
type gatedLog struct {
	testLog
	gates chan chan error // each Append's gate, in append order
}

func (l gatedLog) Append(ctx context.Context, b []byte) (func(context.Context) error, error) {
	if _, err := l.Log.Append(ctx, b, 0); err != nil {
		return nil, err
	}
	gate := make(chan error, 1)
	l.gates <- gate
	return func(context.Context) error { return <-gate }, nil
}

func (l gatedLog) AppendVerified(ctx context.Context, b []byte, _ producers.Guard) (func(context.Context) error, error) {
	return l.Append(ctx, b)
}

// A commit waiting for its records to be committed holds no lock: the
// coordinator answers other requests and loads and unloads partitions
// meanwhile. Commits are applied in log order, whatever order their waits
// end in, and one that fails changes nothing.
func TestCommitWaitsWithoutTheLock(t *testing.T) {
	c, err := New(Options{Clock: newClock(), Logger: quietLogger(), newMemberID: counterIDs()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := gatedLog{testLog: openTestLog(t, vfs.NewMem(), dir), gates: make(chan chan error, 4)}
	if err := c.Load(bg, 0, l); err != nil {
		t.Fatal(err)
	}
	commit := func(offset int64) chan error {
		done := make(chan error, 1)
		go func() {
			errs, err := c.Commit("g", "", nil, -1, []OffsetCommit{oc("t", 0, offset, nil)})
			if err == nil {
				err = errs[0]
			}
			done <- err
		}()
		return done
	}
	first := commit(10)
	gate1 := <-l.gates
	second := commit(20)
	gate2 := <-l.gates
	// Both wait; the coordinator still serves, and loads a partition.
	if got, err := c.Fetch("g", nil); err != nil || len(got) != 0 {
		t.Fatalf("offsets while both commits wait: %v %v, want none yet", got, err)
	}
	other := openTestLog(t, vfs.NewMem(), dir)
	if err := c.Load(bg, 1, other); err != nil {
		t.Fatalf("load while commits wait: %v", err)
	}
	c.Unload(1)
	// The later commit is confirmed first: not applied before the earlier.
	gate2 <- nil
	select {
	case err := <-second:
		t.Fatalf("the later commit returned (%v) before the earlier one was confirmed", err)
	default:
	}
	if got, _ := c.Fetch("g", nil); len(got) != 0 {
		t.Fatalf("offsets %v before the earlier commit was confirmed", got)
	}
	gate1 <- nil
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := c.Fetch("g", nil); got[tp("t", 0)].Offset != 20 {
		t.Fatalf("offsets %v, want the later commit's 20", got)
	}
	// A commit whose wait fails is not applied.
	failed := commit(30)
	(<-l.gates) <- errors.New("not enough replicas")
	if err := <-failed; !errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Fatalf("a commit whose wait failed: %v", err)
	}
	if got, _ := c.Fetch("g", nil); got[tp("t", 0)].Offset != 20 {
		t.Fatalf("offsets %v after a failed commit, want 20 still", got)
	}
}
