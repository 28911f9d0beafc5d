package filestore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/internal/tree"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

const dir = "/d"

// step is one request of the workload; want is the error it must return
// when no fault strikes it.
type step struct {
	name string
	run  func(ctx context.Context, s *Store) error
	want error
}

func create(path, data string, mode coord.CreateMode) step {
	return step{"create " + path, func(ctx context.Context, s *Store) error {
		return s.Create(ctx, path, []byte(data), mode)
	}, nil}
}

var workload = []step{
	create("/brokers", "", coord.Persistent),
	create("/brokers/ids", "", coord.Persistent),
	create("/brokers/ids/1", `{"host":"localhost","port":9092}`, coord.Ephemeral),
	{"set binary", func(ctx context.Context, s *Store) error {
		_, err := s.Set(ctx, "/brokers", []byte{0, 0xff, 'x'}, 0)
		return err
	}, nil},
	{"multi", func(ctx context.Context, s *Store) error {
		_, err := s.Multi(ctx, &coord.CreateOp{Path: "/topics"}, &coord.CreateOp{Path: "/topics/a", Data: []byte("x")},
			&coord.SetOp{Path: "/brokers", Data: []byte("b"), Version: 1})
		return err
	}, nil},
	{"fenced multi", func(ctx context.Context, s *Store) error {
		_, err := s.Multi(ctx, &coord.CheckOp{Path: "/brokers", Version: 0}, &coord.DeleteOp{Path: "/topics/a", Version: 0})
		return err
	}, coord.ErrBadVersion},
	{"delete ephemeral", func(ctx context.Context, s *Store) error {
		return s.Delete(ctx, "/brokers/ids/1", 0)
	}, nil},
	create("/controller_epoch", "1", coord.Persistent),
	create("/brokers/ids/1", "again", coord.Ephemeral),
	{"delete", func(ctx context.Context, s *Store) error { return s.Delete(ctx, "/topics/a", 0) }, nil},
	{"set", func(ctx context.Context, s *Store) error {
		_, err := s.Set(ctx, "/controller_epoch", []byte("2"), 0)
		return err
	}, nil},
}

// state is the store's persistent state, with its data copied.
type state struct {
	zxid  int64
	nodes []tree.Persisted
}

func snap(t *tree.Tree) state {
	zxid, nodes := t.Persistent()
	nodes = slices.Clone(nodes)
	for i := range nodes {
		nodes[i].Data = slices.Clone(nodes[i].Data)
		if len(nodes[i].Data) == 0 {
			nodes[i].Data = nil
		}
	}
	return state{zxid, nodes}
}

func (s *Store) snap() state {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snap(s.tree)
}

// onDisk reads the snapshot and the journal as Open would, without writing
// anything.
func onDisk(t *testing.T, fsys vfs.FS) state {
	t.Helper()
	j := files{fs: fsys, dir: dir, snap: dir + "/" + FileName, log: dir + "/" + JournalName}
	tr, _, _, err := j.load()
	if err != nil {
		t.Fatalf("read the files: %v", err)
	}
	return snap(tr)
}

// model runs the workload without faults and returns the state after Open
// and after each step.
func model(t *testing.T) []state {
	s, err := Open(Options{FS: vfs.NewMem(), Dir: dir})
	defer s.Close()
	if err != nil {
		t.Fatal(err)
	}
	states := []state{s.snap()}
	for _, st := range workload {
		if err := st.run(t.Context(), s); !errors.Is(err, st.want) && !(err == nil && st.want == nil) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.want)
		}
		states = append(states, s.snap())
	}
	return states
}

// variants are the options the crash and fault loops run with: the journal
// alone (the workload never reaches the default bound), and a bound so low
// that writes compact every few steps.
var variants = []struct {
	name string
	opts Options
}{
	{"journal", Options{}},
	{"compacting", Options{CompactBytes: 1}},
}

func (o Options) on(fsys vfs.FS) Options {
	o.FS, o.Dir = fsys, dir
	return o
}

// TestCrash cuts the power before every file operation of Open, the
// workload and Close (plain and torn crash clones) and after every
// acknowledged step, reopens each clone, and checks that it holds exactly the
// state after the steps acknowledged when it was taken, or after the one in
// flight; that the new session's id is larger than every zxid acknowledged
// before; and that no temporary file is left.
func TestCrash(t *testing.T) {
	states := model(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) { testCrash(t, v.opts, states) })
	}
}

func testCrash(t *testing.T, opts Options, states []state) {
	type clone struct {
		fs    *vfs.MemFS
		acked int // steps acknowledged when it was taken; -1 during Open
		label string
	}
	mem := vfs.NewMem()
	rng := rand.New(rand.NewPCG(1, 2))
	var clones []clone
	acked := -1
	label := "open"
	struck := map[string]bool{} // the renames crashed before
	inj := errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		switch op {
		case errorfs.OpCreate, errorfs.OpWrite, errorfs.OpSync, errorfs.OpClose, errorfs.OpRename,
			errorfs.OpRemove, errorfs.OpSyncDir, errorfs.OpTruncate:
			what := fmt.Sprintf("%s: before %v %s", label, op, path)
			clones = append(clones, clone{mem.CrashClone(), acked, what}, clone{mem.CrashCloneTorn(rng), acked, what + " (torn)"})
			if op == errorfs.OpRename && acked >= 0 {
				struck[filepath.Base(path)] = true
			}
		}
		return nil
	})
	s, err := Open(opts.on(errorfs.Wrap(mem, inj)))
	if err != nil {
		t.Fatal(err)
	}
	acked = 0
	for i, st := range workload {
		label = st.name
		_ = st.run(t.Context(), s)
		acked = i + 1
		clones = append(clones, clone{mem.CrashClone(), acked, st.name + ": after"})
	}
	label = "close"
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(clones) < 4*len(workload) {
		t.Fatalf("only %d crash points", len(clones))
	}
	if !struck[tmpFileName] || !struck[journalTmpName] {
		t.Fatalf("no crash while compacting: renames crashed before %v", struck)
	}
	for _, c := range clones {
		r, err := Open(Options{FS: c.fs, Dir: dir})
		if err != nil {
			t.Fatalf("%s: reopen: %v", c.label, err)
		}
		got := r.snap()
		lo := max(c.acked, 0)
		hi := min(c.acked+1, len(states)-1)
		if !reflect.DeepEqual(got.nodes, states[lo].nodes) && !reflect.DeepEqual(got.nodes, states[hi].nodes) {
			t.Fatalf("%s: reopened to\n%+v\nwant the state after step %d\n%+v\nor %d\n%+v", c.label, got.nodes, lo, states[lo].nodes, hi, states[hi].nodes)
		}
		var ackedZxid int64 // the open in flight has acknowledged nothing
		if c.acked >= 0 {
			ackedZxid = states[c.acked].zxid
		}
		if id := r.Session().ID; id <= ackedZxid {
			t.Fatalf("%s: new session id %d, want > %d, the last acknowledged zxid", c.label, id, ackedZxid)
		}
		for _, n := range got.nodes {
			if n.Path == "/brokers/ids/1" {
				t.Fatalf("%s: an ephemeral node survived a restart", c.label)
			}
		}
		if names, _ := c.fs.List(dir); slices.Contains(names, tmpFileName) || slices.Contains(names, journalTmpName) {
			t.Fatalf("%s: a temporary file left after Open: %q", c.label, names)
		}
		r.Close()
	}
}

// TestFailEachOperation fails each file operation of Open and the workload
// in turn (once; once with a short write; from then on, a disk that stays
// broken) and checks that the error is reported, that memory and disk agree
// (the write applied nothing, or its outcome is unknown and both hold it),
// and that the store recovers once the disk does.
func TestFailEachOperation(t *testing.T) {
	states := model(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) { testFailEachOperation(t, v.opts, states) })
	}
}

func testFailEachOperation(t *testing.T, opts Options, states []state) {
	probe := &errorfs.FailAt{K: -1}
	runFaulted(t, vfs.NewMem(), probe, opts, states)
	n := probe.Count()
	if n < 3*len(workload) {
		t.Fatalf("only %d operations", n)
	}
	faults := []struct {
		name string
		inj  func(k int) *errorfs.FailAt
	}{
		{"once", func(k int) *errorfs.FailAt { return &errorfs.FailAt{K: k} }},
		{"short write", func(k int) *errorfs.FailAt { return &errorfs.FailAt{K: k, PartialWrite: true} }},
		{"sticky", func(k int) *errorfs.FailAt { return &errorfs.FailAt{K: k, Sticky: true} }},
	}
	for _, v := range faults {
		for k := range n {
			t.Run(fmt.Sprintf("%s/%d", v.name, k), func(t *testing.T) {
				mem := vfs.NewMem()
				inj := v.inj(k)
				runFaulted(t, mem, inj, opts, states)
				if !inj.Fired() {
					t.Fatal("the fault never struck")
				}
				inj.Clear()
				// Whatever happened, a restart finds a readable file.
				r, err := Open(Options{FS: mem.CrashClone(), Dir: dir})
				if err != nil {
					t.Fatalf("reopen after the run: %v", err)
				}
				r.Close()
			})
		}
	}
}

// runFaulted runs Open and the workload on mem through inj until the fault
// strikes, checks the aftermath, and returns. A probe (inj.K < 0) runs
// everything and checks that nothing failed.
func runFaulted(t *testing.T, mem *vfs.MemFS, inj *errorfs.FailAt, opts Options, states []state) {
	t.Helper()
	fsys := errorfs.Wrap(mem, inj)
	probe := inj.K < 0
	ctx := t.Context()
	s, err := Open(opts.on(fsys))
	if err != nil {
		if probe || !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("open: %v, want an injected error", err)
		}
		return
	}
	defer s.Close()
	if inj.Fired() { // Open's compaction failed, losing nothing
		if got := s.snap(); !reflect.DeepEqual(got.nodes, states[0].nodes) || s.Session().State != coord.Connected {
			t.Fatalf("open with a failed compaction: %v, %+v", s.Session().State, got.nodes)
		}
		inj.Clear()
	}
	for i, st := range workload {
		fired := inj.Fired()
		err := st.run(ctx, s)
		if fired || !inj.Fired() {
			if !errors.Is(err, st.want) && !(err == nil && st.want == nil) {
				t.Fatalf("%s: %v, want %v", st.name, err, st.want)
			}
			continue
		}
		// The fault struck this step.
		compacting := err == nil // the step's record was durable; its compaction failed, losing nothing
		if !compacting && !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("%s: %v, want an error wrapping the injected one", st.name, err)
		}
		unknown := errors.Is(err, coord.ErrConnectionLoss)
		want := states[i]
		if unknown || compacting {
			want = states[i+1]
		}
		if ss := s.Session(); unknown && ss.State != coord.Connecting {
			t.Fatalf("%s: outcome unknown, session %v, want connecting", st.name, ss.State)
		} else if !unknown && ss.State != coord.Connected {
			t.Fatalf("%s: failed cleanly or compacting, session %v, want connected", st.name, ss.State)
		}
		got := s.snap()
		if !reflect.DeepEqual(got.nodes, want.nodes) {
			t.Fatalf("%s: memory after the failure (unknown outcome %v, compacting %v):\n%+v\nwant\n%+v", st.name, unknown, compacting, got.nodes, want.nodes)
		}
		// What the files hold now (without a crash): what memory holds, or
		// what it held before if the outcome is unknown.
		disk := onDisk(t, mem)
		if !reflect.DeepEqual(disk.nodes, got.nodes) && !(unknown && reflect.DeepEqual(disk.nodes, states[i].nodes)) {
			t.Fatalf("%s: disk and memory disagree (unknown outcome %v):\ndisk   %+v\nmemory %+v", st.name, unknown, disk.nodes, got.nodes)
		}
		if inj.Sticky {
			_, _, err := s.Get(ctx, "/")
			if unknown != (err != nil) {
				t.Fatalf("get while the disk is still broken: %v (unknown outcome %v)", err, unknown)
			}
			if unknown && !errors.Is(err, coord.ErrConnectionLoss) {
				t.Fatalf("get while the disk is still broken: %v, want ErrConnectionLoss", err)
			}
			inj.Clear()
		}
		if _, _, err := s.Get(ctx, "/"); err != nil {
			t.Fatalf("get once the disk is back: %v", err)
		}
		if ss := s.Session(); ss.State != coord.Connected {
			t.Fatalf("session %v once the disk is back, want connected", ss.State)
		}
		if disk := onDisk(t, mem.CrashClone()); !reflect.DeepEqual(disk.nodes, got.nodes) {
			t.Fatalf("%s: disk after recovery:\n%+v\nwant\n%+v", st.name, disk.nodes, got.nodes)
		}
		// Writing goes on, and lands.
		must(t, s.Create(ctx, "/after", nil, coord.Persistent))
		if disk := onDisk(t, mem.CrashClone()); len(disk.nodes) != len(got.nodes)+1 {
			t.Fatalf("%s: a write after recovery is not durable: %+v", st.name, disk.nodes)
		}
		return
	}
}

// TestUnknownOutcome: an append whose fsync fails and that cannot be cut off
// again has an unknown outcome: ErrConnectionLoss, memory keeps the change,
// and the session is Connecting, every request failing, until one has
// written a snapshot of memory; then it is Connected and reads cost no I/O.
func TestUnknownOutcome(t *testing.T) {
	mem := vfs.NewMem()
	inj := &errorfs.FailAt{K: -1, Ops: []errorfs.Op{errorfs.OpSync, errorfs.OpTruncate}}
	s, err := Open(Options{FS: errorfs.Wrap(mem, inj), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	inj.K, inj.Sticky = inj.Count(), true // the next append's fsync, then its cut
	ctx := t.Context()
	ss := s.Session()
	err = s.Create(ctx, "/a", []byte("x"), coord.Persistent)
	if !errors.Is(err, coord.ErrConnectionLoss) || !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("create: %v, want ErrConnectionLoss wrapping the injected error", err)
	}
	now := s.Session()
	select {
	case <-ss.Changed:
	default:
		t.Fatal("Changed not closed when the session became unsure of the disk")
	}
	if now.State != coord.Connecting || now.ID != ss.ID {
		t.Fatalf("session %+v, want connecting with the same id", now)
	}
	if _, _, err := s.Get(ctx, "/a"); !errors.Is(err, coord.ErrConnectionLoss) {
		t.Fatalf("a read while the disk is broken: %v, want ErrConnectionLoss", err)
	}
	if err := s.Create(ctx, "/b", nil, coord.Persistent); !errors.Is(err, coord.ErrConnectionLoss) {
		t.Fatalf("a write while the disk is broken: %v, want ErrConnectionLoss", err)
	}
	inj.Clear()
	data, _, err := s.Get(ctx, "/a")
	if err != nil || string(data) != "x" {
		t.Fatalf("read back: %q, %v; want x", data, err)
	}
	if st := s.Session().State; st != coord.Connected {
		t.Fatalf("session %v after the snapshot was written, want connected", st)
	}
	ops := inj.Count()
	if _, _, err := s.Get(ctx, "/a"); err != nil || inj.Count() != ops {
		t.Fatalf("a read once the store is durable again: %v, %d syncs (want none)", err, inj.Count()-ops)
	}
	if got := onDisk(t, mem.CrashClone()); len(got.nodes) != 2 || got.nodes[1].Path != "/a" {
		t.Fatalf("durable state %+v, want / and /a", got.nodes)
	}
	must(t, s.Create(ctx, "/c", nil, coord.Persistent))
	if got := onDisk(t, mem.CrashClone()); len(got.nodes) != 3 {
		t.Fatalf("durable state %+v, want /, /a and /c", got.nodes)
	}
}
