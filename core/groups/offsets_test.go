package groups

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/partlog"
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
			mod := func(o *Options) { o.Dir = d }
			c := openCoordinator(t, fsys, newClock(), mod)
			want := workload(t, c)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c = openCoordinator(t, fsys, newClock(), mod)
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
			c.Close()
			c = openCoordinator(t, fsys, newClock(), mod)
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
	// lose them, but never corrupts the store.
	lost := mem.CrashClone()
	c.Close()
	kept := mem.CrashClone()
	c = openCoordinator(t, lost, newClock(), nil)
	c.Close()
	c = openCoordinator(t, kept, newClock(), nil)
	defer c.Close()
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after Close and a power cut:\n got %+v\nwant %+v", got, want)
	}
}

func logDirs(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestCompaction(t *testing.T) {
	mem := vfs.NewMem()
	compact := func(o *Options) { o.CompactMinSuperseded = 20 }
	// The default threshold: the workload does not compact while running.
	c := openCoordinator(t, mem, newClock(), nil)
	want := workload(t, c)
	records := c.store.records
	c.Close()
	if got := logDirs(t, mem); !slices.Equal(got, []string{"CURRENT", "offsets-000001"}) {
		t.Fatalf("before compaction: %v", got)
	}
	c = openCoordinator(t, mem, newClock(), compact)
	if got := logDirs(t, mem); !slices.Equal(got, []string{"CURRENT", "offsets-000002"}) {
		t.Fatalf("after compaction: %v", got)
	}
	if c.store.records != int64(c.store.live) || c.store.records >= records {
		t.Fatalf("compacted log holds %d records for %d offsets (was %d)", c.store.records, c.store.live, records)
	}
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after compaction:\n got %+v\nwant %+v", got, want)
	}
	simpleCommit(t, c, "g1", oc("a", 9, 9, nil))
	want["g1"][tp("a", 9)] = Committed{Offset: 9, LeaderEpoch: 2}
	c.Close()
	// Nothing superseded: no compaction.
	c = openCoordinator(t, mem, newClock(), compact)
	defer c.Close()
	if got := logDirs(t, mem); !slices.Equal(got, []string{"CURRENT", "offsets-000002"}) {
		t.Fatalf("after a reopen without compaction: %v", got)
	}
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after reopen:\n got %+v\nwant %+v", got, want)
	}
}

// compactionBase returns a cleanly closed store due for compaction and its
// offsets.
func compactionBase(t *testing.T) (*vfs.MemFS, map[string]map[TopicPartition]Committed) {
	mem := vfs.NewMem()
	c := openCoordinator(t, mem, newClock(), nil)
	want := workload(t, c)
	c.Close()
	return mem, want
}

func openCompacting(fsys vfs.FS) (*Coordinator, error) {
	return Open(Options{FS: fsys, Dir: dir, Clock: newClock(), Logger: quietLogger(), CompactMinSuperseded: 20})
}

// TestCompactionPowerCut cuts the power at every file operation of a
// compacting Open: the store reopened from what survives has every offset.
func TestCompactionPowerCut(t *testing.T) {
	base, want := compactionBase(t)
	probe := &errorfs.FailAt{K: -1}
	c, err := openCompacting(errorfs.Wrap(base.CrashClone(), probe))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	n := probe.Count()
	if n < 20 {
		t.Fatalf("a compacting open did only %d operations", n)
	}
	for k := range n {
		mem := base.CrashClone()
		var cut *vfs.MemFS
		op := 0
		inj := errorfs.InjectorFunc(func(errorfs.Op, string) error {
			if op == k {
				cut = mem.CrashClone()
			}
			op++
			return nil
		})
		c, err := openCompacting(errorfs.Wrap(mem, inj))
		if err != nil {
			t.Fatalf("cut at op %d: open: %v", k, err)
		}
		c.Close()
		if cut == nil {
			t.Fatalf("op %d never came", k)
		}
		c, err = openCompacting(cut)
		if err != nil {
			t.Fatalf("cut at op %d: reopen: %v", k, err)
		}
		got := allOffsets(t, c)
		c.Close()
		if !sameOffsets(got, want) {
			t.Fatalf("cut at op %d:\n got %+v\nwant %+v", k, got, want)
		}
		if dirs := logDirs(t, cut); len(dirs) != 2 {
			t.Fatalf("cut at op %d: leftovers after reopen: %v", k, dirs)
		}
	}
}

// TestCompactionFailures fails each file operation of a compacting Open in
// turn: Open reports the error or succeeds (a failed compaction is
// abandoned), and the store opens intact afterwards.
func TestCompactionFailures(t *testing.T) {
	base, want := compactionBase(t)
	probe := &errorfs.FailAt{K: -1}
	c, err := openCompacting(errorfs.Wrap(base.CrashClone(), probe))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	failed := 0
	for k := range probe.Count() {
		mem := base.CrashClone()
		inj := &errorfs.FailAt{K: k}
		c, err := openCompacting(errorfs.Wrap(mem, inj))
		switch {
		case err != nil && !errors.Is(err, errorfs.ErrInjected):
			t.Fatalf("fail op %d: open: %v, want an injected error", k, err)
		case err != nil:
			failed++
		default:
			c.Close()
		}
		c, err = openCompacting(mem)
		if err != nil {
			t.Fatalf("fail op %d: reopen: %v", k, err)
		}
		got := allOffsets(t, c)
		c.Close()
		if !sameOffsets(got, want) {
			t.Fatalf("fail op %d:\n got %+v\nwant %+v", k, got, want)
		}
	}
	if failed == 0 {
		t.Fatal("no injected failure reached Open")
	}
}

func TestCorruptStore(t *testing.T) {
	open := func(fsys vfs.FS) error {
		c, err := Open(Options{FS: fsys, Dir: dir, Clock: newClock(), Logger: quietLogger()})
		if err == nil {
			c.Close()
		}
		return err
	}
	write := func(fsys vfs.FS, name, content string) {
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(content))
		f.Close()
	}
	for _, bad := range []string{"", "offsets-000001", "offsets-1\n", "offsets-000000\n", "../x\n", "garbage"} {
		mem, _ := compactionBase(t)
		write(mem, dir+"/CURRENT", bad)
		if err := open(mem); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("CURRENT %q: %v", bad, err)
		}
	}
	mem, _ := compactionBase(t)
	if err := mem.Remove(dir + "/CURRENT"); err != nil {
		t.Fatal(err)
	}
	if err := open(mem); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("log without CURRENT: %v", err)
	}

	// A record weir did not write.
	mem = vfs.NewMem()
	if err := open(mem); err != nil {
		t.Fatal(err)
	}
	l, _, err := partlog.Open(mem, dir+"/offsets-000001", partlog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Key: []byte("not a key"), Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(bg, b, 0); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := open(mem); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("foreign record: %v", err)
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
			if got := appendKey(nil, k); string(got) != string(b) {
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
