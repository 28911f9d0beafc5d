package groups

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// queue holds the compactions a coordinator starts until the test runs
// them.
type queue struct{ runs []func() }

func (q *queue) start(run func()) { q.runs = append(q.runs, run) }

// runAll runs the queued compactions and returns how many there were.
func (q *queue) runAll() int {
	n := 0
	for len(q.runs) > 0 {
		run := q.runs[0]
		q.runs = q.runs[1:]
		run()
		n++
	}
	return n
}

// queued sets the compaction threshold and queues compactions on q.
func queued(q *queue, threshold int) func(*Options) {
	return func(o *Options) {
		o.CompactMinSuperseded = threshold
		o.startCompaction = q.start
	}
}

// dirBytes is the size of every file under name.
func dirBytes(t *testing.T, fsys vfs.FS, name string) int64 {
	t.Helper()
	names, err := fsys.List(name)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range names {
		p := path.Join(name, e)
		fi, err := fsys.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.IsDir() {
			n += dirBytes(t, fsys, p)
		} else {
			n += fi.Size()
		}
	}
	return n
}

// round commits offset i for partitions 0..parts-1 of topic "t" in group g
// and records them in want.
func round(t *testing.T, c *Coordinator, g string, parts, i int, want map[string]map[TopicPartition]Committed) {
	t.Helper()
	ocs := make([]OffsetCommit, parts)
	for p := range ocs {
		ocs[p] = oc("t", int32(p), int64(i), nil)
		if want[g] == nil {
			want[g] = map[TopicPartition]Committed{}
		}
		want[g][ocs[p].TopicPartition] = Committed{Offset: int64(i), LeaderEpoch: int32(i % 7)}
	}
	simpleCommit(t, c, g, ocs...)
}

// TestCompactionBoundsTheLog commits the same partitions over and over
// while running: compactions keep the log directory's bytes at what it
// holds when the first one is due, instead of growing with every commit.
func TestCompactionBoundsTheLog(t *testing.T) {
	mem := vfs.NewMem()
	q := &queue{}
	const parts, rounds, threshold = 8, 1500, 100
	c := openCoordinator(t, mem, newClock(), queued(q, threshold))
	// After round i the log holds parts*i superseded records.
	const dueAt = (threshold + parts - 1) / parts
	want := map[string]map[TopicPartition]Committed{}
	var due, peak int64
	compactions := 0
	for i := range rounds {
		round(t, c, "g", parts, i, want)
		size := dirBytes(t, mem, dir)
		if i == dueAt {
			due = size
		}
		peak = max(peak, size)
		compactions += q.runAll()
	}
	if peak > due*3/2 {
		t.Fatalf("log directory reached %d bytes; %d when the first compaction was due", peak, due)
	}
	if compactions < rounds/(dueAt+1) {
		t.Fatalf("%d compactions in %d commits", compactions, rounds)
	}
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after compactions:\n got %+v\nwant %+v", got, want)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got, wantDirs := logDirs(t, mem), []string{"CURRENT", logDir(compactions + 1)}; !slices.Equal(got, wantDirs) {
		t.Fatalf("directories %v, want %v", got, wantDirs)
	}
	c = openCoordinator(t, mem, newClock(), nil)
	defer c.Close()
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after reopen:\n got %+v\nwant %+v", got, want)
	}
}

// TestCompactionKeepsCommitsMadeDuringIt commits, deletes a group and a
// topic's offsets between a compaction's start (its copy of the live
// offsets) and its run: the new log has them too.
func TestCompactionKeepsCommitsMadeDuringIt(t *testing.T) {
	mem := vfs.NewMem()
	q := &queue{}
	c := openCoordinator(t, mem, newClock(), queued(q, 20))
	want := workload(t, c) // starts a compaction a third of the way in
	if len(q.runs) != 1 || c.store.compacting == nil {
		t.Fatalf("%d compactions queued", len(q.runs))
	}
	// What the compaction copied is not what the store holds now.
	snapshot := map[string]map[TopicPartition]Committed{}
	for _, e := range c.store.compacting.live {
		if snapshot[e.k.group] == nil {
			snapshot[e.k.group] = map[TopicPartition]Committed{}
		}
		snapshot[e.k.group][e.k.TopicPartition] = e.v.Committed
	}
	if sameOffsets(snapshot, want) {
		t.Fatal("no commit since the compaction started")
	}
	copied, since, records := len(c.store.compacting.live), len(c.store.delta), c.store.records
	if n := q.runAll(); n != 1 {
		t.Fatalf("ran %d compactions", n)
	}
	if got := logDirs(t, mem); !slices.Equal(got, []string{"CURRENT", "offsets-000002"}) {
		t.Fatalf("after the compaction: %v", got)
	}
	if c.store.records != int64(copied+since) || c.store.records >= records {
		t.Fatalf("compacted log holds %d records, want %d+%d (was %d)", c.store.records, copied, since, records)
	}
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after the compaction:\n got %+v\nwant %+v", got, want)
	}
	simpleCommit(t, c, "g1", oc("a", 9, 9, nil))
	want["g1"][tp("a", 9)] = Committed{Offset: 9, LeaderEpoch: 2}
	c.Close()
	c = openCoordinator(t, mem, newClock(), nil)
	defer c.Close()
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after reopen:\n got %+v\nwant %+v", got, want)
	}
}

// TestCloseAbandonsQueuedCompaction closes the coordinator with a
// compaction queued: Close abandons it, running it later does nothing, and
// the store reopens intact.
func TestCloseAbandonsQueuedCompaction(t *testing.T) {
	mem := vfs.NewMem()
	q := &queue{}
	c := openCoordinator(t, mem, newClock(), queued(q, 20))
	want := workload(t, c)
	if len(q.runs) != 1 {
		t.Fatalf("%d compactions queued", len(q.runs))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	q.runAll()
	if got := logDirs(t, mem); !slices.Equal(got, []string{"CURRENT", "offsets-000001"}) {
		t.Fatalf("after Close and the abandoned compaction: %v", got)
	}
	c = openCoordinator(t, mem, newClock(), nil)
	defer c.Close()
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after reopen:\n got %+v\nwant %+v", got, want)
	}
}

// TestCloseStopsRunningCompaction closes the coordinator while a
// compaction's rewrite is blocked in a file operation: Close stops it,
// waits for it, and leaves only the old log.
func TestCloseStopsRunningCompaction(t *testing.T) {
	mem := vfs.NewMem()
	var once sync.Once
	entered, release := make(chan struct{}), make(chan struct{})
	inj := errorfs.InjectorFunc(func(_ errorfs.Op, p string) error {
		if strings.Contains(p, "offsets-000002") {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
		return nil
	})
	q := &queue{}
	c := openCoordinator(t, errorfs.Wrap(mem, inj), newClock(), queued(q, 20))
	want := workload(t, c)
	if len(q.runs) != 1 {
		t.Fatalf("%d compactions queued", len(q.runs))
	}
	ran := make(chan struct{})
	go func() {
		q.runAll()
		close(ran)
	}()
	<-entered
	j := c.compaction
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	waitFor(t, c, "Close to stop the compaction", func() bool { return j.stop.Load() })
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	<-ran
	if got := logDirs(t, mem); !slices.Equal(got, []string{"CURRENT", "offsets-000001"}) {
		t.Fatalf("after Close: %v", got)
	}
	c = openCoordinator(t, mem, newClock(), nil)
	defer c.Close()
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after reopen:\n got %+v\nwant %+v", got, want)
	}
}

// runningBase returns a cleanly closed, compacted store of a few offsets,
// not due for compaction, and its offsets.
func runningBase(t *testing.T) (*vfs.MemFS, map[string]map[TopicPartition]Committed) {
	t.Helper()
	base, want := compactionBase(t)
	c, err := openCompacting(base)
	if err != nil {
		t.Fatal(err)
	}
	if c.store.seq != 2 || c.store.compactDue() {
		t.Fatalf("base: log %d, due %v", c.store.seq, c.store.compactDue())
	}
	c.Close()
	return base, want
}

// startCompaction opens the store in fsys with a threshold of 20 and
// commits until a compaction is queued, then commits and removes more; it
// returns the coordinator, the queue and the offsets.
func startCompaction(t *testing.T, fsys vfs.FS, want map[string]map[TopicPartition]Committed) (*Coordinator, *queue) {
	t.Helper()
	q := &queue{}
	c := openCoordinator(t, fsys, newClock(), queued(q, 20))
	for i := 0; len(q.runs) == 0; i++ {
		if i == 100 {
			t.Fatal("no compaction after 100 commits")
		}
		round(t, c, "g0", 4, 100+i, want)
	}
	round(t, c, "g1", 4, 200, want)
	round(t, c, "new", 2, 300, want)
	if err := c.RemoveTopic("a"); err != nil {
		t.Fatal(err)
	}
	for g, m := range want {
		for tp := range m {
			if tp.Topic == "a" {
				delete(m, tp)
			}
		}
		if len(m) == 0 {
			delete(want, g)
		}
	}
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("before the compaction:\n got %+v\nwant %+v", got, want)
	}
	return c, q
}

func cloneOffsets(m map[string]map[TopicPartition]Committed) map[string]map[TopicPartition]Committed {
	out := map[string]map[TopicPartition]Committed{}
	for g, o := range m {
		out[g] = maps.Clone(o)
	}
	return out
}

// TestRunningCompactionPowerCut cuts the power at every file operation of a
// compaction that runs while commits go on: the store reopened from what
// survives holds either what a power cut just before the compaction would
// have left (the durable base: acknowledged commits are in the page cache
// only), or, from the switch on, every offset acknowledged before it, with
// its latest value. Never a mix, never going back after the switch.
func TestRunningCompactionPowerCut(t *testing.T) {
	base, baseWant := runningBase(t)

	// A first run counts the compaction's operations and tells what a
	// power cut just before it leaves.
	probe := &errorfs.FailAt{K: -1}
	mem := base.CrashClone()
	probeWant := cloneOffsets(baseWant)
	c, q := startCompaction(t, errorfs.Wrap(mem, probe), probeWant)
	before := probe.Count()
	q.runAll()
	n := probe.Count() - before
	after := mem.CrashClone() // the compaction done, nothing else
	c.Close()
	c = openCoordinator(t, after, newClock(), nil)
	if got := allOffsets(t, c); !sameOffsets(got, probeWant) {
		t.Fatalf("power cut after the compaction:\n got %+v\nwant %+v", got, probeWant)
	}
	c.Close()
	if n < 20 {
		t.Fatalf("a compaction did only %d operations", n)
	}

	switchedAt := -1
	for k := range n {
		mem := base.CrashClone()
		armed, op := false, 0
		var cut, preCut *vfs.MemFS
		inj := errorfs.InjectorFunc(func(errorfs.Op, string) error {
			if armed {
				if op == k {
					cut = mem.CrashClone()
				}
				op++
			}
			return nil
		})
		want := cloneOffsets(baseWant)
		c, q := startCompaction(t, errorfs.Wrap(mem, inj), want)
		preCut = mem.CrashClone()
		armed = true
		q.runAll()
		armed = false
		if c.store.seq != 3 {
			t.Fatalf("cut at op %d: no compaction (log %d)", k, c.store.seq)
		}
		c.Close()
		if cut == nil {
			t.Fatalf("op %d never came", k)
		}

		c = openCoordinator(t, preCut, newClock(), nil)
		old := allOffsets(t, c)
		c.Close()
		if !sameOffsets(old, baseWant) || sameOffsets(old, want) {
			t.Fatalf("a power cut before the compaction leaves %+v", old)
		}
		c = openCoordinator(t, cut, newClock(), nil)
		got := allOffsets(t, c)
		c.Close()
		switch {
		case sameOffsets(got, want):
			if switchedAt < 0 {
				switchedAt = k
			}
		case sameOffsets(got, old) && switchedAt >= 0:
			t.Fatalf("cut at op %d: back to the old log after the switch at op %d", k, switchedAt)
		case !sameOffsets(got, old):
			t.Fatalf("cut at op %d:\n got %+v\nwant %+v\n  or %+v", k, got, want, old)
		}
		if dirs := logDirs(t, cut); len(dirs) != 2 {
			t.Fatalf("cut at op %d: leftovers after reopen: %v", k, dirs)
		}
	}
	if switchedAt <= 0 {
		t.Fatalf("the switch came at op %d of %d", switchedAt, n)
	}
}

// TestRunningCompactionFailures fails each file operation of a compaction
// that runs while commits go on, in turn: the compaction finishes or is
// abandoned, the store keeps committing and fetching the right offsets, a
// later compaction succeeds and removes what the failed one left, and the
// store reopens intact.
func TestRunningCompactionFailures(t *testing.T) {
	base, baseWant := runningBase(t)
	probe := &errorfs.FailAt{K: -1}
	c, q := startCompaction(t, errorfs.Wrap(base.CrashClone(), probe), cloneOffsets(baseWant))
	before := probe.Count()
	q.runAll()
	n := probe.Count() - before
	c.Close()

	abandoned := 0
	for k := range n {
		mem := base.CrashClone()
		inj := &errorfs.FailAt{K: -1}
		want := cloneOffsets(baseWant)
		c, q := startCompaction(t, errorfs.Wrap(mem, inj), want)
		inj.K = inj.Count() + k
		q.runAll()
		if !inj.Fired() {
			t.Fatalf("fail op %d: no operation failed", k)
		}
		if c.store.seq == 2 {
			abandoned++
		} else if c.store.seq != 3 {
			t.Fatalf("fail op %d: log %d", k, c.store.seq)
		}
		if got := allOffsets(t, c); !sameOffsets(got, want) {
			t.Fatalf("fail op %d:\n got %+v\nwant %+v", k, got, want)
		}
		seq := c.store.seq
		for i := 0; len(q.runs) == 0; i++ {
			if i == 100 {
				t.Fatalf("fail op %d: no compaction after 100 commits", k)
			}
			round(t, c, "g2", 3, 1000+i, want)
		}
		q.runAll()
		if got, wantDirs := logDirs(t, mem), []string{"CURRENT", logDir(seq + 1)}; !slices.Equal(got, wantDirs) {
			t.Fatalf("fail op %d: after a later compaction: %v, want %v", k, got, wantDirs)
		}
		if got := allOffsets(t, c); !sameOffsets(got, want) {
			t.Fatalf("fail op %d: after a later compaction:\n got %+v\nwant %+v", k, got, want)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("fail op %d: close: %v", k, err)
		}
		c = openCoordinator(t, mem, newClock(), nil)
		got := allOffsets(t, c)
		c.Close()
		if !sameOffsets(got, want) {
			t.Fatalf("fail op %d: after reopen:\n got %+v\nwant %+v", k, got, want)
		}
	}
	if abandoned == 0 {
		t.Fatal("no failure abandoned a compaction")
	}
}

// TestCompactionConcurrent commits, fetches and compacts on goroutines (for
// the race detector): every fetch sees each partition's offsets only move
// forward, and after the last commit the offsets are the latest ones, also
// after a reopen.
func TestCompactionConcurrent(t *testing.T) {
	mem := vfs.NewMem()
	c := openCoordinator(t, mem, newClock(), func(o *Options) { o.CompactMinSuperseded = 50 })
	const writers, commits, parts = 3, 400, 4
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for w := range writers {
		wg.Go(func() {
			g := fmt.Sprint("w", w)
			for i := range commits {
				ocs := make([]OffsetCommit, parts)
				for p := range ocs {
					ocs[p] = oc("t", int32(p), int64(i), nil)
				}
				if perr, err := c.Commit(g, "", nil, -1, ocs); err != nil || perr[0] != nil {
					errs <- fmt.Errorf("commit %d of %s: %v %v", i, g, perr, err)
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	fetched := make(chan struct{})
	go func() {
		defer close(fetched)
		last := map[string]int64{}
		for {
			for w := range writers {
				g := fmt.Sprint("w", w)
				m, err := c.Fetch(g, nil)
				if err != nil {
					errs <- err
					return
				}
				for p, v := range m {
					key := fmt.Sprint(g, p)
					if v.Offset < last[key] {
						errs <- fmt.Errorf("%s went back from %d to %d", key, last[key], v.Offset)
						return
					}
					last[key] = v.Offset
				}
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-fetched
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitFor(t, c, "the last compaction", func() bool { return c.compaction == nil })
	// The compactions may have lagged behind the writers: one more commit
	// starts another if it is due.
	want := map[string]map[TopicPartition]Committed{}
	for w := range writers {
		round(t, c, fmt.Sprint("w", w), parts, commits, want)
	}
	waitFor(t, c, "the last compaction", func() bool { return c.compaction == nil })
	c.mu.Lock()
	compactions, records, live := c.store.compactions, c.store.records, int64(c.store.live)
	c.mu.Unlock()
	if compactions == 0 || records > live+max(50, live) {
		t.Fatalf("%d compactions, %d records in the log for %d offsets", compactions, records, live)
	}
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after the commits:\n got %+v\nwant %+v", got, want)
	}
	c.Close()
	c = openCoordinator(t, mem, newClock(), nil)
	defer c.Close()
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after reopen:\n got %+v\nwant %+v", got, want)
	}
}
