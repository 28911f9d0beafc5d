package logs

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// txnBatch is a transactional batch of n records from producer id.
func txnBatch(t testing.TB, id int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	opts := record.DefaultBuildOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = id, epoch, seq, true
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte("v"), Timestamp: 1_700_000_000_000}
	}
	b, err := record.Build(opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func plainBatch(t testing.TB, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte("p"), Timestamp: 1_700_000_000_000}
	}
	b, err := record.Build(record.DefaultBuildOptions(), recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustAppend(t testing.TB, p *Partition, b []byte) AppendResult {
	t.Helper()
	r, err := p.Append(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustMarker(t testing.TB, p *Partition, m Marker) int64 {
	t.Helper()
	r, err := p.AppendMarker(ctx, m, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.NextOffset != r.BaseOffset+1 {
		t.Fatalf("marker took offsets [%d, %d)", r.BaseOffset, r.NextOffset)
	}
	return r.BaseOffset
}

func wantFUO(t testing.TB, p *Partition, want int64, open bool) {
	t.Helper()
	got, ok := p.FirstUnstableOffset()
	if ok != open || (open && got != want) {
		t.Fatalf("FirstUnstableOffset = %d %v, want %d %v", got, ok, want, open)
	}
}

// txnScenario fills p: producer 1's transaction (offsets 0-1, 4) aborted at
// 6, producer 2's (2-3) committed at 7, plain records at 5, producer 3's
// transaction open from 8.
func txnScenario(t testing.TB, p *Partition) {
	mustAppend(t, p, txnBatch(t, 1, 0, 0, 2)) // 0-1
	wantFUO(t, p, 0, true)
	mustAppend(t, p, txnBatch(t, 2, 0, 0, 2)) // 2-3
	mustAppend(t, p, txnBatch(t, 1, 0, 2, 1)) // 4
	mustAppend(t, p, plainBatch(t, 1))        // 5
	wantFUO(t, p, 0, true)
	if off := mustMarker(t, p, Marker{ProducerID: 1, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 3}); off != 6 {
		t.Fatalf("abort marker at %d, want 6", off)
	}
	wantFUO(t, p, 2, true)
	mustMarker(t, p, Marker{ProducerID: 2, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 3}) // 7
	wantFUO(t, p, 0, false)
	mustAppend(t, p, txnBatch(t, 3, 0, 0, 1)) // 8
	wantFUO(t, p, 8, true)
}

func checkScenario(t testing.TB, p *Partition) {
	t.Helper()
	wantFUO(t, p, 8, true)
	if got := p.AbortedTxns(0, 9); !slices.Equal(got, []AbortedTxn{{ProducerID: 1, FirstOffset: 0}}) {
		t.Fatalf("AbortedTxns(0, 9) = %v", got)
	}
	if got := p.AbortedTxns(7, 9); len(got) != 0 {
		t.Fatalf("AbortedTxns(7, 9) = %v, want none (its marker is at 6)", got)
	}
	if got := p.AbortedTxns(6, 7); len(got) != 1 {
		t.Fatalf("AbortedTxns(6, 7) = %v, want producer 1's", got)
	}
	if got := p.AbortedTxns(0, 0); len(got) != 0 {
		t.Fatalf("AbortedTxns(0, 0) = %v, want none", got)
	}
	var info []producers.Info
	for _, in := range p.Producers() {
		info = append(info, in)
	}
	if len(info) != 3 || info[0].CurrentTxnStartOffset != -1 || info[0].CoordinatorEpoch != 3 || info[2].CurrentTxnStartOffset != 8 {
		t.Fatalf("Producers = %+v", info)
	}
}

// TestTxnMarkers: transactional batches open transactions, markers close
// them, the first unstable offset follows, aborts go to the index, which
// is in Kafka's .txnindex format; and all of it survives a clean restart
// and a crash (the index replayed from the log after the last snapshot).
func TestTxnMarkers(t *testing.T) {
	for _, mode := range []string{"clean", "crash", "crash, no snapshot, no index"} {
		t.Run(mode, func(t *testing.T) {
			mem := vfs.NewMem()
			clk := newClock()
			m := newManager(t, mem, clk)
			pc := topicConfig(t, clk, nil, nil, false)
			p, err := m.Open("t", 0, testTopicID("t"), pc)
			if err != nil {
				t.Fatal(err)
			}
			txnScenario(t, p)
			checkScenario(t, p)
			dir := p.Log().Dir()
			b, err := vfs.ReadFile(mem, txnIndexName(dir, 0))
			if err != nil {
				t.Fatal(err)
			}
			be := binary.BigEndian
			if len(b) != 34 || be.Uint16(b) != 0 || be.Uint64(b[2:]) != 1 || be.Uint64(b[10:]) != 0 || be.Uint64(b[18:]) != 6 || be.Uint64(b[26:]) != 2 {
				t.Fatalf("txnindex %x: want version 0, producer 1, first 0, last 6, LSO 2", b)
			}
			if mode == "clean" {
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := p.Log().Flush(p.Log().EndOffset()); err != nil {
					t.Fatal(err)
				}
				clone := mem.CrashClone()
				p.Close()
				mem = clone
				if mode == "crash, no snapshot, no index" {
					names, _ := mem.List(dir)
					for _, n := range names {
						if _, ok := parseTxnIndexName(n); ok || len(n) > len(snapshotSuffix) && n[len(n)-len(snapshotSuffix):] == snapshotSuffix {
							if err := mem.Remove(dir + "/" + n); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			}
			p = openPartition(t, newManager(t, mem, clk), "t", pc)
			checkScenario(t, p)
			// Producer 1 goes on after its abort in the same epoch.
			mustAppend(t, p, txnBatch(t, 1, 0, 3, 1))
		})
	}
}

// TestTxnRefusals: markers of an older producer or coordinator epoch, and
// control batches or producer-less transactional batches in a produce.
func TestTxnRefusals(t *testing.T) {
	p := topicPartition(t, nil, newClock(), nil)
	mustAppend(t, p, txnBatch(t, 1, 2, 0, 1))
	mustMarker(t, p, Marker{ProducerID: 1, ProducerEpoch: 2, Commit: true, CoordinatorEpoch: 5})
	end := p.Log().EndOffset()
	for _, tc := range []struct {
		m    Marker
		want error
	}{
		{Marker{ProducerID: 1, ProducerEpoch: 1, CoordinatorEpoch: 5}, producers.ErrInvalidProducerEpoch},
		{Marker{ProducerID: 1, ProducerEpoch: 2, CoordinatorEpoch: 4}, producers.ErrTransactionCoordinatorFenced},
		{Marker{ProducerID: -1, ProducerEpoch: 2}, producers.ErrInvalidProducerEpoch},
	} {
		if _, err := p.AppendMarker(ctx, tc.m, 0); !errors.Is(err, tc.want) {
			t.Errorf("marker %+v: %v, want %v", tc.m, err, tc.want)
		}
	}
	ctl := record.BuildControlBatch(record.ControlBatchOptions{ProducerID: 1, ProducerEpoch: 2, Commit: true})
	if _, err := p.Append(ctx, ctl); !errors.Is(err, ErrControlBatch) {
		t.Errorf("produced control batch: %v, want ErrControlBatch", err)
	}
	opts := record.DefaultBuildOptions()
	opts.Transactional = true
	nopid, err := record.Build(opts, []record.Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(ctx, nopid); !errors.Is(err, ErrTransactionalWithoutProducer) {
		t.Errorf("transactional batch without producer id: %v", err)
	}
	mustAppend(t, p, txnBatch(t, 1, 2, 1, 1))
	if _, err := p.Append(ctx, func() []byte {
		o := record.DefaultBuildOptions()
		o.ProducerID, o.ProducerEpoch, o.BaseSequence = 1, 2, 2
		b, _ := record.Build(o, []record.Record{{Value: []byte("x")}})
		return b
	}()); !errors.Is(err, producers.ErrInvalidTxnState) {
		t.Errorf("plain batch inside a transaction: %v, want ErrInvalidTxnState", err)
	}
	if p.Log().EndOffset() != end+1 {
		t.Errorf("log end %d, want %d: a refusal appended", p.Log().EndOffset(), end+1)
	}
	// A marker of a newer epoch (the coordinator fencing a zombie) aborts
	// and becomes the producer's epoch.
	mustMarker(t, p, Marker{ProducerID: 1, ProducerEpoch: 3, CoordinatorEpoch: 5})
	if _, err := p.Append(ctx, txnBatch(t, 1, 2, 2, 1)); !errors.Is(err, producers.ErrInvalidProducerEpoch) {
		t.Errorf("zombie batch after the fencing marker: %v", err)
	}
	if got := p.AbortedTxns(0, p.Log().EndOffset()); !slices.Equal(got, []AbortedTxn{{ProducerID: 1, FirstOffset: end}}) {
		t.Errorf("AbortedTxns = %v", got)
	}
}

// TestTxnCutAndReplica: a follower's replicated appends build the same
// transaction state; a truncation below an abort marker drops its index
// entry and reopens the transaction; a reset forgets everything.
func TestTxnCutAndReplica(t *testing.T) {
	clk := newClock()
	leader := topicPartition(t, nil, clk, nil)
	txnScenario(t, leader)
	sl, err := leader.Log().Read(0, 1<<20, partlog.NoLimit)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sl.Bytes()
	sl.Release()
	if err != nil {
		t.Fatal(err)
	}
	mem := vfs.NewMem()
	f := topicPartition(t, mem, clk, nil)
	if _, err := f.AppendReplicated(ctx, b); err != nil {
		t.Fatal(err)
	}
	checkScenario(t, f)
	if err := f.Log().Truncate(6); err != nil { // the abort marker goes
		t.Fatal(err)
	}
	if got := f.AbortedTxns(0, 100); len(got) != 0 {
		t.Fatalf("after truncation: AbortedTxns = %v", got)
	}
	wantFUO(t, f, 0, true)
	names, _ := mem.List(f.Log().Dir())
	for _, n := range names {
		if _, ok := parseTxnIndexName(n); ok {
			t.Fatalf("%s left after its only entry was cut", n)
		}
	}
	if err := f.Log().Reset(50); err != nil {
		t.Fatal(err)
	}
	wantFUO(t, f, 0, false)
}

// TestTxnRetention: retention removing the segments that hold aborted
// transactions' markers drops their index entries and files; those whose
// marker is still in the log stay.
func TestTxnRetention(t *testing.T) {
	mem := vfs.NewMem()
	clk := newClock()
	pc := topicConfig(t, clk, nil, map[string]string{"segment.bytes": "1024", "retention.bytes": "2048"}, true)
	p := openPartition(t, newManager(t, mem, clk), "t", pc)
	for id := range int64(40) {
		mustAppend(t, p, txnBatch(t, id, 0, 0, 3))
		mustMarker(t, p, Marker{ProducerID: id, ProducerEpoch: 0, Commit: id%2 == 1})
	}
	if err := p.Log().Flush(p.Log().EndOffset()); err != nil {
		t.Fatal(err)
	}
	before := len(p.AbortedTxns(0, p.Log().EndOffset()))
	if err := p.ApplyRetention(-1); err != nil {
		t.Fatal(err)
	}
	start := p.Log().StartOffset()
	if start == 0 {
		t.Fatal("retention removed nothing")
	}
	got := p.AbortedTxns(0, p.Log().EndOffset())
	if len(got) == 0 || len(got) >= before {
		t.Fatalf("%d aborted transactions after retention, %d before", len(got), before)
	}
	for _, a := range got {
		if a.FirstOffset+3 < start { // its marker is at FirstOffset+3
			t.Fatalf("aborted %+v kept, its marker is below the log start %d", a, start)
		}
	}
	// Every index file left holds an entry still in the log; and a
	// restart reads the same list back.
	names, _ := mem.List(p.Log().Dir())
	x := p.txn.idx
	for _, n := range names {
		if base, ok := parseTxnIndexName(n); ok {
			x.mu.Lock()
			holds := slices.ContainsFunc(x.entries, func(e txnEntry) bool { return e.file == base })
			x.mu.Unlock()
			if !holds {
				t.Errorf("%s left with no entry in the log", n)
			}
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p = openPartition(t, newManager(t, mem, clk), "t", pc)
	if again := p.AbortedTxns(0, p.Log().EndOffset()); !slices.Equal(again, got) {
		t.Fatalf("after a restart: %v, before %v", again, got)
	}
}

// TestTxnIndexWriteFails: an index entry that cannot be written is served
// all the same, and no producer snapshot is taken past its marker, so that
// a restart after a crash replays the marker and writes the entry.
func TestTxnIndexWriteFails(t *testing.T) {
	mem := vfs.NewMem()
	var failing atomic.Bool
	fsys := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if failing.Load() && strings.HasSuffix(path, txnIndexSuffix) && (op == errorfs.OpWrite || op == errorfs.OpCreate) {
			return syscall.EIO
		}
		return nil
	}))
	clk := newClock()
	pc := topicConfig(t, clk, nil, nil, false)
	p := openPartition(t, newManager(t, fsys, clk), "t", pc)
	mustAppend(t, p, txnBatch(t, 1, 0, 0, 2))
	failing.Store(true)
	mustMarker(t, p, Marker{ProducerID: 1, ProducerEpoch: 0})
	if got := p.AbortedTxns(0, 10); len(got) != 1 {
		t.Fatalf("AbortedTxns = %v, want the entry served from memory", got)
	}
	if err := p.writeSnapshot(); err == nil {
		t.Fatal("a snapshot was written past a marker whose index entry is not on disk")
	}
	if err := p.Log().Flush(p.Log().EndOffset()); err != nil {
		t.Fatal(err)
	}
	clone := mem.CrashClone()
	p = openPartition(t, newManager(t, clone, clk), "t", pc)
	if got := p.AbortedTxns(0, 10); !slices.Equal(got, []AbortedTxn{{ProducerID: 1, FirstOffset: 0}}) {
		t.Fatalf("after the crash: AbortedTxns = %v", got)
	}
}

// TestTxnAbortAfterRestart: TestTransactionCrash's after-abort, one
// partition's view. A transaction open when the broker stops (cleanly: the
// snapshot holds it open; or in a crash: replayed from the log) is still
// open after the restart; the abort marker its coordinator then writes,
// under the bumped epoch of a timeout's abort, closes it, and so does its
// retry (the coordinator writes the markers of a prepared transaction again
// after its own restart, to partitions that may have them): the first
// unstable offset goes, the index holds the abort once, the old epoch's
// marker is refused, and a crash after all of it changes none of it.
func TestTxnAbortAfterRestart(t *testing.T) {
	for _, mode := range []string{"clean", "crash"} {
		t.Run(mode, func(t *testing.T) {
			mem := vfs.NewMem()
			clk := newClock()
			pc := topicConfig(t, clk, nil, nil, false)
			p := openPartition(t, newManager(t, mem, clk), "t", pc)
			mustAppend(t, p, plainBatch(t, 1))        // 0
			mustAppend(t, p, txnBatch(t, 5, 0, 0, 2)) // 1-2
			wantFUO(t, p, 1, true)
			crash := func() {
				t.Helper()
				if err := p.Log().Flush(p.Log().EndOffset()); err != nil {
					t.Fatal(err)
				}
				clone := mem.CrashClone()
				p.Close()
				mem = clone
			}
			if mode == "clean" {
				dir := p.Log().Dir()
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
				if _, err := vfs.ReadFile(mem, snapshotName(dir, 3)); err != nil {
					t.Fatalf("the snapshot at close, holding the transaction open: %v", err)
				}
			} else {
				crash()
			}
			p = openPartition(t, newManager(t, mem, clk), "t", pc)
			wantFUO(t, p, 1, true)
			abort := Marker{ProducerID: 5, ProducerEpoch: 1, Commit: false, CoordinatorEpoch: 0}
			if off := mustMarker(t, p, abort); off != 3 {
				t.Fatalf("abort marker at %d, want 3", off)
			}
			wantFUO(t, p, 0, false)
			mustMarker(t, p, abort) // 4: the coordinator's retry
			wantFUO(t, p, 0, false)
			if _, err := p.AppendMarker(ctx, Marker{ProducerID: 5, ProducerEpoch: 0, CoordinatorEpoch: 0}, 0); !errors.Is(err, producers.ErrInvalidProducerEpoch) {
				t.Fatalf("marker of the epoch the abort fenced: %v", err)
			}
			check := func() {
				t.Helper()
				wantFUO(t, p, 0, false)
				if got := p.AbortedTxns(0, 5); !slices.Equal(got, []AbortedTxn{{ProducerID: 5, FirstOffset: 1}}) {
					t.Fatalf("AbortedTxns(0, 5) = %v, want producer 5's from 1", got)
				}
			}
			check()
			crash()
			p = openPartition(t, newManager(t, mem, clk), "t", pc)
			check()
			// The producer, fenced, comes back with the epoch after the
			// abort's, from sequence 0.
			mustAppend(t, p, txnBatch(t, 5, 2, 0, 1))
			wantFUO(t, p, 5, true)
		})
	}
}
