package logs

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weir-broker/weir/core/internal/logtest"
	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// follow copies what leader's log holds past the follower's end with
// AppendReplicated, in fetches of at most maxBytes.
func follow(t testing.TB, follower, leader *Partition, maxBytes int64) {
	t.Helper()
	for follower.Log().EndOffset() < leader.Log().EndOffset() {
		sl, err := leader.Log().Read(follower.Log().EndOffset(), maxBytes, partlog.NoLimit)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sl.Bytes()
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendReplicated(ctx, b); err != nil {
			t.Fatalf("replicate from %d: %v", sl.FirstOffset, err)
		}
	}
}

// snapshotFiles lists the producer-state snapshot offsets of p's directory.
func snapshotFiles(t testing.TB, fsys vfs.FS, p *Partition) []int64 {
	t.Helper()
	names, err := fsys.List(p.Log().Dir())
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, n := range names {
		if off, tmp, ok := parseSnapshotName(n); ok && !tmp {
			offs = append(offs, off)
		} else if ok {
			t.Errorf("temporary snapshot file %s left", n)
		}
	}
	return offs
}

// TestRoleChange: a follower copies its leader's log with AppendReplicated
// (the leader appending an idempotent producer's batches in epoch 1); it
// then becomes leader of epoch 2, and the producer's retry of its last
// batch, sent to it, is answered as a duplicate with the original offsets,
// before and after a restart of the new leader, and the producer goes on.
func TestRoleChange(t *testing.T) {
	clock := newClock()
	leader := topicPartition(t, nil, clock, map[string]string{"segment.bytes": "2048"})
	mem := vfs.NewMem()
	m := newManager(t, mem, clock)
	fcfg := topicConfig(t, clock, nil, map[string]string{"segment.bytes": "2048"}, false)
	follower := openPartition(t, m, "t", fcfg)
	if err := leader.Log().AssignEpoch(1, 0); err != nil {
		t.Fatal(err)
	}
	var last AppendResult
	for i := range 30 {
		if i%4 == 0 { // another producer's batches in between
			if _, err := leader.AppendEpoch(ctx, testbatch.Tagged(fmt.Sprint("plain", i), 3), 1); err != nil {
				t.Fatal(err)
			}
		}
		res, err := leader.AppendEpoch(ctx, testbatch.Idempotent(5, 2, int32(2*i), 2), 1)
		if err != nil {
			t.Fatal(err)
		}
		last = res
		follow(t, follower, leader, 700)
	}
	if !bytes.Equal(bytes.Join(logtest.Batches(t, leader.Log()), nil), bytes.Join(logtest.Batches(t, follower.Log()), nil)) {
		t.Fatal("the follower's log differs from the leader's")
	}
	if len(follower.Log().Segments()) < 2 || len(snapshotFiles(t, mem, follower)) == 0 {
		t.Fatalf("want rolls and snapshots on the follower: %d segments, snapshots %v",
			len(follower.Log().Segments()), snapshotFiles(t, mem, follower))
	}
	// The leader goes away; the follower leads epoch 2.
	if err := follower.Log().AssignEpoch(2, follower.Log().EndOffset()); err != nil {
		t.Fatal(err)
	}
	retry := testbatch.Idempotent(5, 2, 58, 2)
	check := func(p *Partition, when string) {
		t.Helper()
		end := p.Log().EndOffset()
		res, err := p.AppendEpoch(ctx, retry, 2)
		if err != nil || !res.Duplicate || res.BaseOffset != last.BaseOffset || res.NextOffset != last.NextOffset || p.Log().EndOffset() != end {
			t.Fatalf("%s: retry on the new leader: %+v %v (end %d -> %d), want a duplicate of %+v",
				when, res, err, end, p.Log().EndOffset(), last)
		}
		if _, err := p.AppendEpoch(ctx, testbatch.Idempotent(5, 2, 62, 1), 2); !errors.Is(err, producers.ErrOutOfOrderSequence) {
			t.Fatalf("%s: a gap after the retry: %v, want ErrOutOfOrderSequence", when, err)
		}
	}
	check(follower, "live")
	if err := follower.Close(); err != nil {
		t.Fatal(err)
	}
	follower = openPartition(t, newManager(t, mem, clock), "t", fcfg)
	check(follower, "after a restart")
	res, err := follower.AppendEpoch(ctx, testbatch.Idempotent(5, 2, 60, 1), 2)
	if err != nil || res.Duplicate {
		t.Fatalf("the producer's next batch: %+v %v", res, err)
	}
	if es := follower.Log().Epochs(); !slices.Equal(es, []partlog.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: res.BaseOffset}}) {
		t.Fatalf("epochs %v", es)
	}
}

// TestSnapshotsAcrossCuts: the partition keeps the two latest snapshots; a
// Truncate through Log() drops the snapshots past the cut and the producer
// state the cut records gave (a retry of a cut batch is appended again, not
// answered with its old offsets); a Reset drops them all, and the producer
// is unknown after it. Reopening agrees each time.
func TestSnapshotsAcrossCuts(t *testing.T) {
	clock := newClock()
	mem := vfs.NewMem()
	pc := topicConfig(t, clock, nil, map[string]string{"segment.bytes": "1024"}, false)
	p := openPartition(t, newManager(t, mem, clock), "t", pc)
	var res []AppendResult
	for i := range 40 {
		r, err := p.Append(ctx, testbatch.Idempotent(8, 0, int32(i), 1))
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	offs := snapshotFiles(t, mem, p)
	if len(offs) != keepSnapshots || len(p.Log().Segments()) < 4 {
		t.Fatalf("snapshots %v over %d segments, want the %d latest", offs, len(p.Log().Segments()), keepSnapshots)
	}
	// Cut below the older snapshot: both go.
	cut := res[len(res)-1].BaseOffset - 1
	for _, r := range res {
		if r.BaseOffset < offs[0] {
			cut = r.BaseOffset
		}
	}
	if err := p.Log().Truncate(cut); err != nil {
		t.Fatal(err)
	}
	for _, off := range snapshotFiles(t, mem, p) {
		if off > cut {
			t.Fatalf("snapshot at %d survived a cut to %d", off, cut)
		}
	}
	seq := int32(slices.IndexFunc(res, func(r AppendResult) bool { return r.BaseOffset == cut }))
	r, err := p.Append(ctx, testbatch.Idempotent(8, 0, seq, 1)) // the retry of the first batch cut
	if err != nil || r.Duplicate || r.BaseOffset != cut {
		t.Fatalf("retry of a cut batch: %+v %v, want it appended at %d", r, err, cut)
	}
	if r, err := p.Append(ctx, testbatch.Idempotent(8, 0, seq-1, 1)); err != nil || !r.Duplicate || r.BaseOffset != cut-1 {
		t.Fatalf("retry of the batch before the cut: %+v %v, want a duplicate at %d", r, err, cut-1)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p = openPartition(t, newManager(t, mem, clock), "t", pc)
	if r, err := p.Append(ctx, testbatch.Idempotent(8, 0, seq, 1)); err != nil || !r.Duplicate || r.BaseOffset != cut {
		t.Fatalf("after a reopen, retry of the batch appended after the cut: %+v %v", r, err)
	}
	// Reset: every snapshot goes, and the producer with its batches.
	if err := p.Log().Reset(5000); err != nil {
		t.Fatal(err)
	}
	if offs := snapshotFiles(t, mem, p); len(offs) != 0 {
		t.Fatalf("snapshots %v survived a reset", offs)
	}
	if _, err := p.Append(ctx, testbatch.Idempotent(8, 0, seq+1, 1)); !errors.Is(err, producers.ErrUnknownProducerID) {
		t.Fatalf("after a reset the producer's next batch: %v, want ErrUnknownProducerID", err)
	}
	if r, err := p.Append(ctx, testbatch.Idempotent(8, 1, 0, 1)); err != nil || r.BaseOffset != 5000 {
		t.Fatalf("a new epoch after the reset: %+v %v", r, err)
	}
}

// oracleSnapshot is the producer state a rebuild from every batch header of
// p's log gives, encoded as of its end: what a snapshot and the replay after
// it must add up to.
func oracleSnapshot(t testing.TB, p *Partition, now int64) []byte {
	t.Helper()
	q := &Partition{}
	for _, h := range logtest.Headers(t, p.Log()) {
		if h.ProducerID >= 0 {
			q.record(h, now)
		}
	}
	return q.prod.AppendSnapshot(nil, p.Log().EndOffset())
}

// snapWorkload: two idempotent producers and plain batches over rolls (so
// snapshots), a Truncate below the latest snapshot and appends past it
// again (a snapshot the cut left would now lie inside the log, wrong), a
// clean reopen, a Reset and more appends.
func snapWorkload(t testing.TB, fsys vfs.FS) error {
	clock := newClock()
	pc := topicConfig(t, clock, nil, map[string]string{"segment.bytes": "1024"}, false)
	m, err := NewManager(Options{FS: fsys, Dir: "/d", Clock: clock})
	if err != nil {
		return err
	}
	p, err := m.Open("t", 0, testTopicID("t"), pc)
	if err != nil {
		return err
	}
	seqs, epoch := map[int64]int32{}, int16(0)
	appendSome := func(n int) error {
		for i := range n {
			id := int64(1 + i%2)
			if _, err := p.Append(ctx, testbatch.Idempotent(id, epoch, seqs[id], 2)); err != nil {
				return err
			}
			seqs[id] += 2
			if i%3 == 0 {
				if _, err := p.Append(ctx, testbatch.Tagged(fmt.Sprint(i), 2)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := appendSome(20); err != nil {
		return err
	}
	cut := p.Log().ActiveBase() - 3
	if err := p.Log().Truncate(cut); err != nil {
		return err
	}
	seqs, epoch = map[int64]int32{}, 1 // the producers start new epochs
	for p.Log().EndOffset() < cut+20 {
		if err := appendSome(2); err != nil {
			return err
		}
	}
	if err := p.Close(); err != nil {
		return err
	}
	if p, err = m.Open("t", 0, testTopicID("t"), pc); err != nil {
		return err
	}
	if err := p.Log().Reset(p.Log().EndOffset() + 100); err != nil {
		return err
	}
	seqs, epoch = map[int64]int32{}, 0 // unknown again
	if err := appendSome(12); err != nil {
		return err
	}
	return p.Close()
}

// checkProducers reopens the partition on fsys and checks that its
// producer state is what its batch headers give (snapshots and the replay
// add up to the truth, no snapshot stale), and that no temporary snapshot
// file is left.
func checkProducers(t *testing.T, fsys vfs.FS, what string) {
	t.Helper()
	checkProducersOf(t, fsys, map[string]string{"segment.bytes": "1024"}, what)
}

// checkProducersOf is checkProducers for topic "t" with configs.
func checkProducersOf(t *testing.T, fsys vfs.FS, configs map[string]string, what string) {
	t.Helper()
	clock := newClock()
	pc := topicConfig(t, clock, nil, configs, false)
	p, err := newManager(t, fsys, clock).Open("t", 0, testTopicID("t"), pc)
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer p.Close()
	now := clock.Now().UnixMilli()
	want := oracleSnapshot(t, p, now)
	p.prodMu.Lock()
	got := p.prod.AppendSnapshot(nil, p.Log().EndOffset())
	p.prodMu.Unlock()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: producer state differs from the log's (log [%d, %d), snapshots %v)", what,
			p.Log().StartOffset(), p.Log().EndOffset(), snapshotFiles(t, fsys, p))
	}
	snapshotFiles(t, fsys, p)
}

// TestSnapshotCrashLoop cuts the power before every file-system operation
// of snapWorkload: the partition reopens with the producer state its log
// gives. TestSnapshotErrorLoop fails each operation in turn, the error
// coming back; a reopen agrees too.
func TestSnapshotCrashLoop(t *testing.T) {
	probe := &errorfs.FailAt{K: -1}
	if err := snapWorkload(t, errorfs.Wrap(vfs.NewMem(), probe)); err != nil {
		t.Fatal(err)
	}
	step := 1
	if testing.Short() {
		step = 7
	}
	for k := 0; k < probe.Count(); k += step {
		mem := vfs.NewMem()
		var clone *vfs.MemFS
		n := 0
		fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(errorfs.Op, string) error {
			if n == k {
				clone = mem.CrashClone()
			}
			n++
			return nil
		}))
		if err := snapWorkload(t, fs); err != nil {
			t.Fatal(err)
		}
		checkProducers(t, clone, fmt.Sprintf("crash %d", k))
	}
}

func TestSnapshotErrorLoop(t *testing.T) {
	probe := &errorfs.FailAt{K: -1}
	if err := snapWorkload(t, errorfs.Wrap(vfs.NewMem(), probe)); err != nil {
		t.Fatal(err)
	}
	for k := range probe.Count() {
		mem := vfs.NewMem()
		inj := &errorfs.FailAt{K: k}
		err := snapWorkload(t, errorfs.Wrap(mem, inj))
		if err != nil && !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("op %d: error without its cause: %v", k, err)
		}
		// A failed log is closed without its marker; what the workload
		// left open is released by the reopen's own files (MemFS).
		checkProducers(t, mem, fmt.Sprintf("error at op %d (%v)", k, err))
	}
}

// TestSnapshotNames: the names partlog ignores and AfterCut understands.
func TestSnapshotNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		off     int64
		tmp, ok bool
	}{
		{"00000000000000000042.snapshot", 42, false, true},
		{"00000000000000000042.snapshot.tmp", 42, true, true},
		{"42.snapshot", 0, false, false},
		{"00000000000000000042.log", 0, false, false},
		{"0000000000000000004x.snapshot", 0, false, false},
	} {
		off, tmp, ok := parseSnapshotName(tc.name)
		if ok != tc.ok || ok && (off != tc.off || tmp != tc.tmp) {
			t.Errorf("parseSnapshotName(%q) = %d, %v, %v", tc.name, off, tmp, ok)
		}
	}
	if !strings.HasSuffix(snapshotName("/d", 7), "00000000000000000007.snapshot") {
		t.Error(snapshotName("/d", 7))
	}
}

// TestConcurrentCutsAndSnapshots races idempotent producers (each starting
// a new epoch when a cut made its sequence unknown), a follower-style
// cutter (Truncate through Log()) and the snapshots the rolls cause: no
// deadlock, and a reopen has the producer state the log gives.
func TestConcurrentCutsAndSnapshots(t *testing.T) {
	mem := vfs.NewMem()
	configs := map[string]string{topicconfig.SegmentBytes: "1024"}
	p := topicPartition(t, mem, newClock(), configs)
	const nprod, batches = 3, 80
	var prods, cutter sync.WaitGroup
	stop := make(chan struct{})
	fail := make(chan error, nprod+1)
	for pid := range int64(nprod) {
		prods.Go(func() {
			epoch, seq := int16(0), int32(0)
			for range batches {
				_, err := p.Append(ctx, testbatch.Idempotent(pid, epoch, seq, 2))
				switch {
				case err == nil:
					seq += 2
				case errors.Is(err, producers.ErrOutOfOrderSequence), errors.Is(err, producers.ErrUnknownProducerID),
					errors.Is(err, producers.ErrDuplicateSequence), errors.Is(err, partlog.ErrFailed):
					epoch, seq = epoch+1, 0 // a cut took batches this producer counted on
				default:
					fail <- fmt.Errorf("producer %d: %w", pid, err)
					return
				}
			}
		})
	}
	cuts := 0
	cutter.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				if cuts > 0 {
					return
				}
			default:
			}
			if end := p.Log().EndOffset(); end > 40 && i%50 == 0 {
				if err := p.Log().Truncate(end - 13); err != nil {
					fail <- err
					return
				}
				cuts++
			}
			if _, err := p.Append(ctx, testbatch.Tagged(fmt.Sprint(i), 1)); err != nil {
				fail <- err
				return
			}
		}
	})
	prods.Wait()
	close(stop)
	cutter.Wait()
	select {
	case err := <-fail:
		t.Fatal(err)
	default:
	}
	if cuts == 0 || len(p.Log().Segments()) < 2 {
		t.Fatalf("%d cuts over %d segments: the race did not happen", cuts, len(p.Log().Segments()))
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkProducersOf(t, mem, configs, "reopened")
}
