package groups

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/vfs"
)

// byName maps groups "p0-..." to partition 0 and everything else to 1.
func byName(g string) int32 {
	if len(g) >= 2 && g[:2] == "p0" {
		return 0
	}
	return 1
}

// blockingLog is a Log whose first Read waits until release is closed.
type blockingLog struct {
	testLog
	reading chan struct{}
	release chan struct{}
}

func (l *blockingLog) Read(offset, maxBytes, maxOffset int64) (partlog.Slice, error) {
	if l.reading != nil {
		close(l.reading)
		l.reading = nil
		<-l.release
	}
	return l.testLog.Read(offset, maxBytes, maxOffset)
}

// Groups are served only from loaded partitions: NOT_COORDINATOR for one
// not loaded here, COORDINATOR_LOAD_IN_PROGRESS while one loads; unloading
// answers the parked requests of its groups and forgets them, and loading it
// again (the partition came back) brings their offsets back.
func TestLoadUnload(t *testing.T) {
	mem := vfs.NewMem()
	clk := newClock()
	c, err := New(Options{Clock: clk, Logger: quietLogger(), newMemberID: counterIDs(), PartitionFor: byName})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l0, l1 := openTestLog(t, mem, "/p0"), openTestLog(t, mem, "/p1")
	if err := c.Load(bg, 0, l0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch("p1-g", nil); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("fetch of a group of an unloaded partition: %v", err)
	}
	r := joinReq("")
	r.Group = "p1-g"
	if _, err := c.Join(bg, r); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("join of a group of an unloaded partition: %v", err)
	}
	simpleCommit(t, c, "p0-g", oc("a", 0, 5, nil))

	// Partition 1 with a commit of its own, loaded slowly.
	pre, err := New(Options{Clock: clk, Logger: quietLogger(), PartitionFor: byName})
	if err != nil {
		t.Fatal(err)
	}
	if err := pre.Load(bg, 1, l1); err != nil {
		t.Fatal(err)
	}
	simpleCommit(t, pre, "p1-g", oc("b", 0, 7, nil))
	pre.Close()
	bl := &blockingLog{testLog: l1, reading: make(chan struct{}), release: make(chan struct{})}
	reading := bl.reading
	loaded := make(chan error, 1)
	go func() { loaded <- c.Load(bg, 1, bl) }()
	<-reading
	if _, err := c.Fetch("p1-g", nil); !errors.Is(err, ErrCoordinatorLoadInProgress) {
		t.Fatalf("fetch while loading: %v", err)
	}
	if c.Loaded(1) {
		t.Fatal("Loaded(1) while it loads")
	}
	close(bl.release)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	if got, err := c.Fetch("p1-g", nil); err != nil || got[tp("b", 0)].Offset != 7 {
		t.Fatalf("p1-g after load: %+v %v", got, err)
	}

	// A second member of p0-m waits in Join for the first to rejoin;
	// unloading partition 0 answers it and forgets the group, not p1-g.
	r = joinReq("")
	r.Group, r.RequireKnownMemberID = "p0-m", false
	// The first join of an empty group completes at once (no initial
	// delay); a second member's join then waits for the first to rejoin.
	if _, err := c.Join(bg, r); err != nil {
		t.Fatalf("first join: %v", err)
	}
	joined := make(chan error, 1)
	go func() {
		_, err := c.Join(bg, r)
		joined <- err
	}()
	waitFor(t, c, "a parked join", func() bool { return len(c.waiters) == 1 })
	c.Unload(0)
	if err := <-joined; !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("parked join after unload: %v", err)
	}
	if _, err := c.Fetch("p0-g", nil); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("fetch after unload: %v", err)
	}
	for _, g := range c.List() {
		if byName(g.Group) == 0 {
			t.Fatalf("group %q of an unloaded partition listed", g.Group)
		}
	}
	if err := c.Load(bg, 0, l0); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Fetch("p0-g", nil); err != nil || got[tp("a", 0)].Offset != 5 {
		t.Fatalf("p0-g after reload: %+v %v", got, err)
	}
	// Loading the same log again is a no-op; an unload during a load
	// abandons it.
	if err := c.Load(bg, 0, l0); err != nil {
		t.Fatal(err)
	}
	c.Unload(1)
	bl = &blockingLog{testLog: l1, reading: make(chan struct{}), release: make(chan struct{})}
	reading = bl.reading
	go func() { loaded <- c.Load(bg, 1, bl) }()
	<-reading
	c.Unload(1)
	close(bl.release)
	if err := <-loaded; !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("load abandoned by an unload: %v", err)
	}
	if _, err := c.Fetch("p1-g", nil); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("fetch after an abandoned load: %v", err)
	}
	// A canceled load leaves the partition unloaded.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := c.Load(ctx, 1, l1); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled load: %v", err)
	}
}

// writeLegacy writes an old-layout offsets store in dir: CURRENT naming
// offsets-000003, a log of commits there, and a leftover offsets-000002.
func writeLegacy(t *testing.T, fsys vfs.FS, dir string, commits map[string][]OffsetCommit) {
	t.Helper()
	for _, d := range []string{"offsets-000002", "offsets-000003"} {
		l := openTestLog(t, fsys, path.Join(dir, d))
		if d == "offsets-000003" {
			s := newStore(l)
			for g, ocs := range commits {
				if err := s.commit(g, ocs, newClock().Now()); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	f, err := fsys.Create(path.Join(dir, legacyCurrent))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("offsets-000003\n"))
	f.Close()
}

// Offsets of the old per-broker store move into the partitions loaded here;
// groups of other partitions wait for a later Import; an offset committed
// since is not overwritten.
func TestImportLegacy(t *testing.T) {
	mem := vfs.NewMem()
	writeLegacy(t, mem, "/old", map[string][]OffsetCommit{
		"p0-a": {oc("t", 0, 10, str("m")), oc("t", 1, 11, nil)},
		"p0-b": {oc("t", 0, 20, nil)},
		"p1-c": {oc("t", 0, 30, nil)},
	})
	lg, err := ReadLegacy(mem, "/old", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if g, o := lg.Groups(); g != 3 || o != 4 {
		t.Fatalf("legacy store holds %d groups, %d offsets", g, o)
	}
	c, err := New(Options{Clock: newClock(), Logger: quietLogger(), PartitionFor: byName})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l0, l1 := openTestLog(t, mem, "/p0"), openTestLog(t, mem, "/p1")
	if err := c.Load(bg, 0, l0); err != nil {
		t.Fatal(err)
	}
	simpleCommit(t, c, "p0-b", oc("t", 0, 25, nil)) // newer than the legacy 20
	imported, err := c.Import(lg)
	if err != nil || imported != 2 || c.LegacyLeft() != 1 {
		t.Fatalf("import: %d imported, %d left, %v", imported, c.LegacyLeft(), err)
	}
	// p1-c is imported when its partition loads, before it serves.
	if err := c.Load(bg, 1, l1); err != nil {
		t.Fatal(err)
	}
	if c.LegacyLeft() != 0 {
		t.Fatalf("%d groups left after loading every partition", c.LegacyLeft())
	}
	want := map[string]map[TopicPartition]Committed{
		"p0-a": {tp("t", 0): {Offset: 10, LeaderEpoch: 3, Metadata: "m"}, tp("t", 1): {Offset: 11, LeaderEpoch: 4}},
		"p0-b": {tp("t", 0): {Offset: 25, LeaderEpoch: 4}},
		"p1-c": {tp("t", 0): {Offset: 30, LeaderEpoch: 2}},
	}
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after import:\n got %+v\nwant %+v", got, want)
	}
	// In the logs, so a restart keeps them.
	c2, err := New(Options{Clock: newClock(), Logger: quietLogger(), PartitionFor: byName})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := errors.Join(c2.Load(bg, 0, l0), c2.Load(bg, 1, l1)); err != nil {
		t.Fatal(err)
	}
	if got := allOffsets(t, c2); !sameOffsets(got, want) {
		t.Fatalf("reloaded after import:\n got %+v\nwant %+v", got, want)
	}
}

// A garbled old-layout store is an error naming the path, never an empty
// store; a directory without one is fs.ErrNotExist.
func TestReadLegacyCorrupt(t *testing.T) {
	for _, bad := range []string{"", "offsets-000003", "offsets-3\n", "offsets-000000\n", "../x\n", "garbage"} {
		mem := vfs.NewMem()
		writeLegacy(t, mem, "/old", map[string][]OffsetCommit{"g": {oc("t", 0, 1, nil)}})
		f, _ := mem.Create("/old/CURRENT")
		f.Write([]byte(bad))
		f.Close()
		if _, err := ReadLegacy(mem, "/old", quietLogger()); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "/old/CURRENT") {
			t.Fatalf("CURRENT %q: %v", bad, err)
		}
	}
	mem := vfs.NewMem()
	writeLegacy(t, mem, "/old", nil)
	if err := mem.Remove("/old/CURRENT"); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLegacy(mem, "/old", quietLogger()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("logs without CURRENT: %v", err)
	}
	if err := mem.MkdirAll("/empty", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLegacy(mem, "/empty", quietLogger()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty directory: %v", err)
	}
}
