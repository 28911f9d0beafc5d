package groups

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/clock/clocktest"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

// markerBatch is a transaction marker as Kafka's coordinator writes it
// (EndTransactionMarker.java): one control batch, attributes 0x30
// (transactional, control), base sequence -1; its record's key is version
// int16 0 and type int16 (0 abort, 1 commit), its value version int16 0
// and the coordinator epoch int32. (A private builder: core/record's comes
// with helper txndata's branch.)
func markerBatch(t testing.TB, pid int64, epoch int16, commit bool, coordinatorEpoch int32) []byte {
	t.Helper()
	typ := uint16(0)
	if commit {
		typ = 1
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), typ)
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(coordinatorEpoch))
	opts := record.DefaultBuildOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.Transactional, opts.Control = pid, epoch, true, true
	b, err := record.Build(opts, []record.Record{{Key: key, Value: value, Timestamp: t0.UnixMilli()}})
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := record.ParseHeader(b); h.Attributes != 0x30 || h.BaseSequence != -1 {
		t.Fatalf("marker batch: attributes %#x, base sequence %d", h.Attributes, h.BaseSequence)
	}
	return b
}

// writeMarker appends a marker to partition 0's log, as the broker's
// marker writer does, and then tells the coordinator (CompleteTxn).
func writeMarker(t *testing.T, c *Coordinator, pid int64, epoch int16, commit bool) {
	t.Helper()
	l := testLogs[c]
	if _, err := l.Log.Append(bg, markerBatch(t, pid, epoch, commit, 0), 0); err != nil {
		t.Fatal(err)
	}
	c.CompleteTxn(0, pid, commit)
}

func txnReq(group string, pid int64, epoch int16, offsets ...OffsetCommit) TxnCommitRequest {
	return TxnCommitRequest{Group: group, TransactionalID: "tx", ProducerID: pid, ProducerEpoch: epoch,
		GenerationID: -1, Offsets: offsets}
}

// txnCommit commits offsets in producer pid's transaction, failing the test
// on any error.
func txnCommit(t *testing.T, c *Coordinator, r TxnCommitRequest) {
	t.Helper()
	res, err := c.TxnCommit(bg, r)
	if err != nil {
		t.Fatalf("txn commit: %v", err)
	}
	for tp, e := range res {
		if e != nil {
			t.Fatalf("txn commit of %v: %v", tp, e)
		}
	}
	if len(res) == 0 {
		t.Fatal("txn commit answered no partition")
	}
}

// fetchOne returns group's committed offset of tp (-1: none) and whether
// FetchStable calls it unstable.
func fetchOne(t *testing.T, c *Coordinator, group string, tp TopicPartition) (int64, bool) {
	t.Helper()
	got, unstable, err := c.FetchStable(group, nil, -1, []TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	off := int64(-1)
	if v, ok := got[tp]; ok {
		off = v.Offset
	}
	return off, unstable[tp]
}

func wantOffset(t *testing.T, c *Coordinator, what, group string, tp TopicPartition, offset int64, unstable bool) {
	t.Helper()
	got, u := fetchOne(t, c, group, tp)
	if got != offset || u != unstable {
		t.Fatalf("%s: %s %v: offset %d unstable %v, want %d %v", what, group, tp, got, u, offset, unstable)
	}
}

// A transaction's offsets are invisible (and unstable) until its commit
// marker, then committed; across a restart (replay of the records and the
// marker) too. An abort drops them and leaves the earlier commit.
func TestTxnCommitAndAbort(t *testing.T) {
	mem, clk := vfs.NewMem(), newClock()
	c := openCoordinator(t, mem, clk, nil)
	a0, a1 := tp("a", 0), tp("a", 1)
	simpleCommit(t, c, "g", oc("a", 1, 3, nil))

	txnCommit(t, c, txnReq("g", 7, 0, oc("a", 0, 5, str("m")), oc("a", 1, 6, nil)))
	wantOffset(t, c, "before the marker", "g", a0, -1, true)
	wantOffset(t, c, "before the marker", "g", a1, 3, true)
	if got, err := c.Fetch("g", nil); err != nil || len(got) != 1 {
		t.Fatalf("fetch of every offset before the marker: %v %v", got, err)
	}
	writeMarker(t, c, 7, 0, true)
	wantOffset(t, c, "after the commit marker", "g", a0, 5, false)
	wantOffset(t, c, "after the commit marker", "g", a1, 6, false)
	if got, _ := c.Fetch("g", []TopicPartition{a0}); got[a0].Metadata != "m" || got[a0].LeaderEpoch != 5%7 {
		t.Fatalf("committed: %+v", got[a0])
	}

	// The next transaction of the same producer aborts.
	txnCommit(t, c, txnReq("g", 7, 0, oc("a", 0, 50, nil)))
	wantOffset(t, c, "second transaction", "g", a0, 5, true)
	writeMarker(t, c, 7, 0, false)
	wantOffset(t, c, "after the abort marker", "g", a0, 5, false)
	want := allOffsets(t, c)

	closeCoordinator(t, c)
	c = openCoordinator(t, mem, clk, nil)
	defer closeCoordinator(t, c)
	if got := allOffsets(t, c); !sameOffsets(got, want) {
		t.Fatalf("after a restart: %v, want %v", got, want)
	}
	wantOffset(t, c, "after a restart", "g", a0, 5, false)
}

// Replay keeps the offsets of a transaction whose marker is not in the log
// waiting (unstable, invisible); the marker then applies them, live or at
// the next replay. A group known only by them is loaded.
func TestTxnReplayOpenTransaction(t *testing.T) {
	for _, commit := range []bool{true, false} {
		mem, clk := vfs.NewMem(), newClock()
		c := openCoordinator(t, mem, clk, nil)
		b0 := tp("b", 0)
		txnCommit(t, c, txnReq("only-txn", 9, 2, oc("b", 0, 11, nil)))
		txnCommit(t, c, txnReq("other", 10, 0, oc("b", 0, 12, nil)))
		writeMarker(t, c, 10, 0, true) // another producer's marker: not 9's
		closeCoordinator(t, c)

		c = openCoordinator(t, mem, clk, nil)
		wantOffset(t, c, "replayed, open", "only-txn", b0, -1, true)
		wantOffset(t, c, "replayed, committed", "other", b0, 12, false)
		if d, err := c.Describe("only-txn"); err != nil || d.State != "Empty" {
			t.Fatalf("group with only an open transaction after load: %+v %v", d, err)
		}
		// The producer goes on in the same epoch after the restart: its
		// sequence follows from the replayed batch.
		txnCommit(t, c, txnReq("only-txn", 9, 2, oc("b", 1, 13, nil)))
		writeMarker(t, c, 9, 2, commit)
		want, wantB1 := int64(-1), int64(-1)
		if commit {
			want, wantB1 = 11, 13
		}
		wantOffset(t, c, "marker after the restart", "only-txn", b0, want, false)
		wantOffset(t, c, "marker after the restart", "only-txn", tp("b", 1), wantB1, false)
		if !commit {
			// Nothing is left of the group: it is forgotten.
			for _, l := range c.List() {
				if l.Group == "only-txn" {
					t.Fatalf("aborted group listed: %+v", l)
				}
			}
		}
		closeCoordinator(t, c)

		c = openCoordinator(t, mem, clk, nil)
		wantOffset(t, c, "second replay", "only-txn", b0, want, false)
		closeCoordinator(t, c)
	}
}

// The committed offset of a partition is the record latest in the log: a
// plain commit written after a transaction's offsets wins over them when the
// transaction commits later, and a transaction's offsets written after a
// plain commit replace it; live and after a replay alike.
func TestTxnCommitOrder(t *testing.T) {
	mem, clk := vfs.NewMem(), newClock()
	c := openCoordinator(t, mem, clk, nil)
	x, y := tp("x", 0), tp("y", 0)
	txnCommit(t, c, txnReq("g", 1, 0, oc("x", 0, 100, nil)))
	simpleCommit(t, c, "g", oc("x", 0, 90, nil), oc("y", 0, 90, nil))
	txnCommit(t, c, txnReq("g", 1, 0, oc("y", 0, 100, nil)))
	wantOffset(t, c, "before the marker", "g", x, 90, true)
	writeMarker(t, c, 1, 0, true)
	wantOffset(t, c, "plain commit after the transaction's", "g", x, 90, false)
	wantOffset(t, c, "transaction's after the plain commit", "g", y, 100, false)
	closeCoordinator(t, c)
	c = openCoordinator(t, mem, clk, nil)
	defer closeCoordinator(t, c)
	wantOffset(t, c, "replayed: plain commit after the transaction's", "g", x, 90, false)
	wantOffset(t, c, "replayed: transaction's after the plain commit", "g", y, 100, false)
}

// Deleting offsets (a group, a topic, OffsetDelete) removes the offsets
// waiting in open transactions too: the transaction's commit brings none
// back, live or replayed. Expiry spares a group with an open transaction.
func TestTxnPendingDeleted(t *testing.T) {
	mem, clk := vfs.NewMem(), newClock()
	c := openCoordinator(t, mem, clk, nil)
	txnCommit(t, c, txnReq("del-group", 1, 0, oc("t", 0, 5, nil)))
	txnCommit(t, c, txnReq("del-topic", 1, 0, oc("gone", 0, 5, nil), oc("kept", 0, 6, nil)))
	txnCommit(t, c, txnReq("del-offset", 1, 0, oc("t", 0, 5, nil), oc("t", 1, 6, nil)))
	txnCommit(t, c, txnReq("expire", 2, 0, oc("t", 0, 7, nil)))
	if err := c.Delete("del-group"); err != nil {
		t.Fatalf("delete of a group with only an open transaction: %v", err)
	}
	if err := c.RemoveTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if errs, err := c.DeleteOffsets("del-offset", []TopicPartition{tp("t", 0)}); err != nil || errs[0] != nil {
		t.Fatalf("offset delete: %v %v", errs, err)
	}
	clk.Advance(48 * time.Hour)
	if exp, err := c.ExpireOffsets(24 * time.Hour); err != nil || len(exp) != 0 {
		t.Fatalf("expired %v (%v), want none: every group has an open transaction", exp, err)
	}
	writeMarker(t, c, 1, 0, true)
	check := func(when string) {
		wantOffset(t, c, when, "del-group", tp("t", 0), -1, false)
		wantOffset(t, c, when, "del-topic", tp("gone", 0), -1, false)
		wantOffset(t, c, when, "del-topic", tp("kept", 0), 6, false)
		wantOffset(t, c, when, "del-offset", tp("t", 0), -1, false)
		wantOffset(t, c, when, "del-offset", tp("t", 1), 6, false)
		wantOffset(t, c, when, "expire", tp("t", 0), -1, true)
	}
	check("live")
	closeCoordinator(t, c)
	c = openCoordinator(t, mem, clk, nil)
	defer closeCoordinator(t, c)
	check("replayed")
}

// A transactional commit naming a member is checked as OffsetCommit checks
// one (KIP-447: unknown member, stale generation, fenced static member),
// except that it is accepted while the group awaits its assignment; one
// naming no member (TxnOffsetCommit v0-v2) is accepted whatever the group.
func TestTxnCommitChecksMembership(t *testing.T) {
	clk := newClock()
	c := openCoordinator(t, vfs.NewMem(), clk, nil)
	defer c.Close()
	r := joinReq("")
	r.InstanceID = str("i1")
	rs := joinAll(t, c, clk, r)
	m := rs[0]
	commit := func(member string, instance *string, gen int32) error {
		req := txnReq("g", 3, 0, oc("t", 0, 1, nil), oc("t", 1, 1, nil))
		req.MemberID, req.GroupInstanceID, req.GenerationID = member, instance, gen
		res, err := c.TxnCommit(bg, req)
		for tp, e := range res {
			if !errors.Is(e, err) && err != nil || err == nil && e != nil && !errors.Is(e, res[tp]) {
				t.Fatalf("group error %v, partition %v: %v", err, tp, e)
			}
		}
		if err == nil {
			err = res[tp("t", 0)]
		}
		return err
	}
	wantErr(t, "CompletingRebalance", commit(m.MemberID, nil, m.Generation), nil)
	syncAll(t, c, rs)
	wantErr(t, "member of the generation", commit(m.MemberID, nil, m.Generation), nil)
	wantErr(t, "static member", commit(m.MemberID, str("i1"), m.Generation), nil)
	wantErr(t, "stale generation", commit(m.MemberID, nil, m.Generation-1), ErrIllegalGeneration)
	wantErr(t, "unknown member", commit("nobody", nil, m.Generation), ErrUnknownMemberID)
	wantErr(t, "fenced instance", commit("old-id", str("i1"), m.Generation), ErrFencedInstanceID)
	wantErr(t, "unknown instance", commit(m.MemberID, str("i2"), m.Generation), ErrUnknownMemberID)
	wantErr(t, "no member named (v0-v2)", commit("", nil, -1), nil)
	wantErr(t, "generation of a group that does not exist", func() error {
		_, err := c.TxnCommit(bg, TxnCommitRequest{Group: "nope", ProducerID: 3, GenerationID: 1,
			Offsets: []OffsetCommit{oc("t", 0, 1, nil)}})
		return err
	}(), ErrIllegalGeneration)
	for _, bad := range []TxnCommitRequest{
		{Group: "", ProducerID: 3, GenerationID: -1, Offsets: []OffsetCommit{oc("t", 0, 1, nil)}},
		{Group: "g", ProducerID: -1, GenerationID: -1, Offsets: []OffsetCommit{oc("t", 0, 1, nil)}},
	} {
		res, err := c.TxnCommit(bg, bad)
		if err == nil || !errors.Is(res[tp("t", 0)], err) {
			t.Fatalf("%+v: %v %v", bad, res, err)
		}
	}
	// Metadata too large fails its partition alone.
	long := string(make([]byte, DefaultMaxMetadataBytes+1))
	res, err := c.TxnCommit(bg, txnReq("g", 3, 0, oc("t", 0, 1, &long), oc("t", 1, 2, nil)))
	if err != nil || !errors.Is(res[tp("t", 0)], ErrOffsetMetadataTooLarge) || res[tp("t", 1)] != nil {
		t.Fatalf("metadata too large: %v %v", res, err)
	}
}

// A producer epoch older than one the partition has seen for the producer
// is fenced (producers.ErrInvalidProducerEpoch), before anything is
// written; a newer one starts its sequences again at 0.
func TestTxnCommitFencesOldEpoch(t *testing.T) {
	mem, clk := vfs.NewMem(), newClock()
	c := openCoordinator(t, mem, clk, nil)
	txnCommit(t, c, txnReq("g", 4, 1, oc("t", 0, 1, nil)))
	end := testLogs[c].EndOffset()
	res, err := c.TxnCommit(bg, txnReq("g", 4, 0, oc("t", 0, 2, nil)))
	if err != nil || !errors.Is(res[tp("t", 0)], producers.ErrInvalidProducerEpoch) {
		t.Fatalf("older epoch: %v %v", res, err)
	}
	if testLogs[c].EndOffset() != end {
		t.Fatal("a fenced commit was written")
	}
	txnCommit(t, c, txnReq("g", 4, 2, oc("t", 0, 3, nil)))
	writeMarker(t, c, 4, 2, true)
	wantOffset(t, c, "newer epoch", "g", tp("t", 0), 3, false)
	closeCoordinator(t, c)
	// The epochs are replayed: still fenced after a restart.
	c = openCoordinator(t, mem, clk, nil)
	defer closeCoordinator(t, c)
	res, _ = c.TxnCommit(bg, txnReq("g", 4, 1, oc("t", 0, 2, nil)))
	if !errors.Is(res[tp("t", 0)], producers.ErrInvalidProducerEpoch) {
		t.Fatalf("older epoch after a restart: %v", res)
	}
}

// The records are Kafka's: transactional batches (attributes 0x10) with the
// producer's id and epoch, sequences following on from batch to batch
// (several batches for a large commit), offset commit keys and values.
func TestTxnCommitRecords(t *testing.T) {
	mem, clk := vfs.NewMem(), newClock()
	c := openCoordinator(t, mem, clk, nil)
	defer closeCoordinator(t, c)
	txnCommit(t, c, txnReq("g", 5, 3, oc("t", 0, 1, nil), oc("t", 1, 2, nil)))
	var big []OffsetCommit
	meta := string(make([]byte, 4000))
	for i := range 100 { // 100 x ~4 KB: two batches of batchTarget
		big = append(big, oc("u", int32(i), int64(i), &meta))
	}
	txnCommit(t, c, txnReq("g", 5, 3, big...))
	l := testLogs[c]
	sl, err := l.Read(0, 1<<30, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Release()
	b, err := sl.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int32
	records := 0
	for len(b) > 0 {
		h, n, err := record.Next(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if h.Attributes&0x30 != 0x10 || h.ProducerID != 5 || h.ProducerEpoch != 3 {
			t.Fatalf("batch: attributes %#x, producer %d epoch %d", h.Attributes, h.ProducerID, h.ProducerEpoch)
		}
		if want := int32(records); h.BaseSequence != want {
			t.Fatalf("batch at %d: base sequence %d, want %d", h.BaseOffset, h.BaseSequence, want)
		}
		recs, err := record.Records(b[:n], nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			k, err := decodeKey(r.Key)
			if err != nil || k.group != "g" {
				t.Fatalf("key %q: %+v %v", r.Key, k, err)
			}
			if _, err := decodeValue(r.Value); err != nil {
				t.Fatal(err)
			}
		}
		records += len(recs)
		seqs = append(seqs, h.BaseSequence)
		b = b[n:]
	}
	if records != 102 || len(seqs) < 3 {
		t.Fatalf("%d records in %d batches (sequences %v), want 102 in 3 or more", records, len(seqs), seqs)
	}
}

// A marker that comes while the partition loads is applied when the replay
// ends (Kafka orders both on the coordinator's one scheduler thread); one
// for a partition not here is ignored.
func TestTxnMarkerWhileLoading(t *testing.T) {
	mem, clk := vfs.NewMem(), newClock()
	pre := openCoordinator(t, mem, clk, nil)
	txnCommit(t, pre, txnReq("g", 6, 0, oc("t", 0, 8, nil)))
	closeCoordinator(t, pre)

	c, err := New(Options{Clock: clk, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.CompleteTxn(0, 6, true) // not loaded here: nothing to do
	l := openTestLog(t, mem, dir)
	bl := &blockingLog{testLog: l, reading: make(chan struct{}), release: make(chan struct{})}
	reading := bl.reading
	loaded := make(chan error, 1)
	go func() { loaded <- c.Load(bg, 0, bl) }()
	<-reading
	// The marker reaches the log after the replay took its end offset.
	if _, err := l.Log.Append(bg, markerBatch(t, 6, 0, true, 0), 0); err != nil {
		t.Fatal(err)
	}
	c.CompleteTxn(0, 6, true)
	close(bl.release)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	wantOffset(t, c, "marker while loading", "g", tp("t", 0), 8, false)
}

// A transactional commit whose write fails leaves nothing waiting, and its
// sequence is not used up; the next one succeeds.
func TestTxnCommitStoreFailure(t *testing.T) {
	clk := newClock()
	c, err := New(Options{Clock: clk, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fl := &failingLog{testLog: openTestLog(t, vfs.NewMem(), dir)}
	if err := c.Load(bg, 0, fl); err != nil {
		t.Fatal(err)
	}
	fl.failWait = errors.New("replication timed out")
	res, err := c.TxnCommit(bg, txnReq("g", 8, 0, oc("t", 0, 1, nil)))
	if err != nil || !errors.Is(res[tp("t", 0)], ErrCoordinatorNotAvailable) {
		t.Fatalf("failed write: %v %v", res, err)
	}
	wantOffset(t, c, "failed write", "g", tp("t", 0), -1, false)
	fl.failWait = nil
	fl.failAppend = errors.New("disk gone")
	res, _ = c.TxnCommit(bg, txnReq("g", 8, 0, oc("t", 0, 1, nil)))
	if !errors.Is(res[tp("t", 0)], ErrCoordinatorNotAvailable) {
		t.Fatalf("failed append: %v", res)
	}
	fl.failAppend = nil
	txnCommit(t, c, txnReq("g", 8, 0, oc("t", 0, 2, nil)))
	wantOffset(t, c, "after the failures", "g", tp("t", 0), -1, true)
}

// failingLog is a test log whose Append or wait fails on demand.
type failingLog struct {
	testLog
	failAppend, failWait error
}

func (l *failingLog) Append(ctx context.Context, b []byte) (func(context.Context) error, error) {
	if l.failAppend != nil {
		return nil, l.failAppend
	}
	wait, err := l.testLog.Append(ctx, b)
	if err != nil || l.failWait == nil {
		return wait, err
	}
	fail := l.failWait
	return func(context.Context) error { return fail }, nil
}

func (l *failingLog) AppendVerified(ctx context.Context, b []byte, _ producers.Guard) (func(context.Context) error, error) {
	return l.Append(ctx, b)
}

// partitionLog is a partition of package logs as the coordinator's Log,
// as the broker gives it: appends go through the partition's idempotence
// checks.
type partitionLog struct{ p *logs.Partition }

func (l partitionLog) Append(ctx context.Context, b []byte) (func(context.Context) error, error) {
	return l.AppendVerified(ctx, b, producers.Unverified)
}

func (l partitionLog) AppendVerified(ctx context.Context, b []byte, g producers.Guard) (func(context.Context) error, error) {
	if _, err := l.p.AppendVerified(ctx, b, 0, g); err != nil {
		return nil, err
	}
	return func(context.Context) error { return nil }, nil
}
func (l partitionLog) StartOffset() int64 { return l.p.Log().StartOffset() }
func (l partitionLog) EndOffset() int64   { return l.p.Log().EndOffset() }
func (l partitionLog) Read(offset, maxBytes, maxOffset int64) (partlog.Slice, error) {
	return l.p.Log().Read(offset, maxBytes, maxOffset)
}

// The batches pass the idempotence checks of a real partition: several
// commits in one transaction, transactions after markers, a new epoch, and
// a coordinator that reloaded the partition in between (sequences rebuilt
// by the replay), each appended, none taken for a duplicate.
func TestTxnCommitsPassProducerChecks(t *testing.T) {
	mem := vfs.NewMem()
	clk := clocktest.New(t0)
	m, err := logs.NewManager(logs.Options{FS: mem, Dir: "/d", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Open("__consumer_offsets", 0, [16]byte{1}, logs.PartitionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Close() }()
	open := func() *Coordinator {
		c, err := New(Options{Clock: clk, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Load(bg, 0, partitionLog{p}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	marker := func(c *Coordinator, pid int64, epoch int16, commit bool) {
		// The data path's AppendMarker comes with helper txndata's branch;
		// the marker goes to the log directly here.
		if _, err := p.Log().Append(bg, markerBatch(t, pid, epoch, commit, 0), 0); err != nil {
			t.Fatal(err)
		}
		c.CompleteTxn(0, pid, commit)
	}
	c := open()
	step := func(what string, pid int64, epoch int16, offsets ...OffsetCommit) {
		t.Helper()
		end := p.Log().EndOffset()
		txnCommit(t, c, txnReq("g", pid, epoch, offsets...))
		if got := p.Log().EndOffset(); got != end+int64(len(offsets)) {
			t.Fatalf("%s: log end %d -> %d, want %d more records", what, end, got, len(offsets))
		}
	}
	step("first", 1, 0, oc("t", 0, 1, nil))
	step("same transaction", 1, 0, oc("t", 0, 2, nil))
	step("same count again", 1, 0, oc("t", 0, 3, nil))
	step("another producer", 2, 0, oc("t", 1, 1, nil), oc("t", 2, 1, nil))
	marker(c, 1, 0, true)
	step("next transaction", 1, 0, oc("t", 0, 4, nil), oc("t", 1, 4, nil))
	c.Close()
	c = open()
	step("after a reload", 1, 0, oc("t", 0, 5, nil))
	step("new epoch", 1, 1, oc("t", 0, 6, nil))
	marker(c, 1, 1, true)
	marker(c, 2, 0, false)
	wantOffset(t, c, "end", "g", tp("t", 0), 6, false)
	wantOffset(t, c, "end", "g", tp("t", 1), 4, false)
	wantOffset(t, c, "end", "g", tp("t", 2), -1, false)
	// A marker of a newer epoch (a fenced producer's abort) starts the
	// sequences again.
	marker(c, 1, 3, false)
	c.Close()
	// The broker restarts: the partition's producer state comes back from
	// its snapshot and log, the coordinator's from its replay; they agree.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if m, err = logs.NewManager(logs.Options{FS: mem, Dir: "/d", Clock: clk}); err != nil {
		t.Fatal(err)
	}
	if p, err = m.Open("__consumer_offsets", 0, [16]byte{1}, logs.PartitionConfig{}); err != nil {
		t.Fatal(err)
	}
	c = open()
	defer c.Close()
	step("another producer after a restart", 2, 0, oc("t", 2, 2, nil))
	if res, _ := c.TxnCommit(bg, txnReq("g", 1, 1, oc("t", 0, 7, nil))); !errors.Is(res[tp("t", 0)], producers.ErrInvalidProducerEpoch) {
		t.Fatalf("epoch older than the replayed marker's: %v", res)
	}
	step("after a marker of a new epoch", 1, 3, oc("t", 0, 7, nil))
	want := map[TopicPartition]Committed{tp("t", 0): {Offset: 6, LeaderEpoch: 6}, tp("t", 1): {Offset: 4, LeaderEpoch: 4}}
	if got, _ := c.Fetch("g", nil); !maps.Equal(got, want) {
		t.Fatalf("offsets %v, want %v", got, want)
	}
}

// BenchmarkTxnCommit is the coordinator's cost of committing 10 partitions'
// offsets: plainly (Commit), and in a transaction (TxnCommit, then its
// commit marker written and applied with CompleteTxn), each to a
// partition log in memory; and of replaying a log of 1,000 such commits
// (Load).
func BenchmarkTxnCommit(b *testing.B) {
	offsets := make([]OffsetCommit, 10)
	for i := range offsets {
		offsets[i] = OffsetCommit{TopicPartition: tp("topic", int32(i)), Offset: int64(i), LeaderEpoch: -1}
	}
	open := func(b *testing.B) (*Coordinator, testLog) {
		c, err := New(Options{Clock: newClock(), Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		l, _, err := partlog.Open(vfs.NewMem(), dir, partlog.Config{RetentionAge: -1, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		if err := c.Load(bg, 0, testLog{l}); err != nil {
			b.Fatal(err)
		}
		return c, testLog{l}
	}
	plain := func(b *testing.B, c *Coordinator, _ testLog, i int) {
		if _, err := c.Commit("g", "", nil, -1, offsets); err != nil {
			b.Fatal(err)
		}
	}
	txn := func(b *testing.B, c *Coordinator, l testLog, i int) {
		res, err := c.TxnCommit(bg, txnReq("g", int64(i%100), 0, offsets...))
		if err != nil || res[offsets[0].TopicPartition] != nil {
			b.Fatal(res, err)
		}
		if _, err := l.Log.Append(bg, markerBatch(b, int64(i%100), 0, true, 0), 0); err != nil {
			b.Fatal(err)
		}
		c.CompleteTxn(0, int64(i%100), true)
	}
	for _, k := range []struct {
		name   string
		commit func(*testing.B, *Coordinator, testLog, int)
	}{{"plain", plain}, {"txn", txn}} {
		b.Run("commit="+k.name, func(b *testing.B) {
			c, l := open(b)
			for i := 0; b.Loop(); i++ {
				k.commit(b, c, l, i)
			}
		})
		b.Run("load="+k.name, func(b *testing.B) {
			c, l := open(b)
			for i := range 1000 {
				k.commit(b, c, l, i)
			}
			for b.Loop() {
				c2, err := New(Options{Clock: newClock(), Logger: quietLogger()})
				if err != nil {
					b.Fatal(err)
				}
				if err := c2.Load(bg, 0, l); err != nil {
					b.Fatal(err)
				}
				c2.Close()
			}
		})
	}
}

// A transactional commit waiting for its records to be committed holds no
// lock, and its offsets are pending (unstable) from the moment they are in
// the log. A marker that lands meanwhile completes them; the wait failing
// afterwards changes nothing more, as a replay of the log (records, then
// marker) would show the same.
func TestTxnCommitWaitsWithoutTheLock(t *testing.T) {
	c, err := New(Options{Clock: newClock(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := gatedLog{testLog: openTestLog(t, vfs.NewMem(), dir), gates: make(chan chan error, 2)}
	if err := c.Load(bg, 0, l); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		res, err := c.TxnCommit(bg, txnReq("g", 1, 0, oc("t", 0, 10, nil)))
		if err == nil {
			err = res[tp("t", 0)]
		}
		done <- err
	}()
	gate := <-l.gates
	wantOffset(t, c, "while the write waits", "g", tp("t", 0), -1, true)
	if _, err := l.Log.Append(bg, markerBatch(t, 1, 0, true, 0), 0); err != nil {
		t.Fatal(err)
	}
	c.CompleteTxn(0, 1, true)
	wantOffset(t, c, "marker while the write waits", "g", tp("t", 0), 10, false)
	gate <- errors.New("not enough replicas")
	if err := <-done; !errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Fatalf("commit whose wait failed: %v", err)
	}
	wantOffset(t, c, "after the failed wait", "g", tp("t", 0), 10, false)
	c2, err := New(Options{Clock: newClock(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.Load(bg, 0, l.testLog); err != nil {
		t.Fatal(err)
	}
	wantOffset(t, c2, "replayed", "g", tp("t", 0), 10, false)
}

// Random plain commits, transactional commits of three producers, their
// markers, offset and group deletions, in seeded runs: after every step,
// what the coordinator serves (offsets and which are unstable) is what a
// coordinator replaying the log from scratch serves, so a restart or a
// coordinator move changes nothing a consumer sees.
func TestTxnRandomLiveMatchesReplay(t *testing.T) {
	type view struct {
		offsets  map[string]map[TopicPartition]Committed
		unstable map[string]map[TopicPartition]bool
	}
	groups := []string{"g1", "g2"}
	var parts []TopicPartition
	for i := range int32(3) {
		parts = append(parts, tp("t", i))
	}
	see := func(c *Coordinator) view {
		v := view{offsets: map[string]map[TopicPartition]Committed{}, unstable: map[string]map[TopicPartition]bool{}}
		for _, g := range groups {
			got, unstable, err := c.FetchStable(g, nil, -1, parts)
			if err != nil {
				t.Fatal(err)
			}
			v.offsets[g], v.unstable[g] = got, unstable
		}
		return v
	}
	for seed := range int64(30) {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		mem, clk := vfs.NewMem(), newClock()
		c := openCoordinator(t, mem, clk, nil)
		var ops []string
		for step := range 120 {
			g := groups[rng.IntN(len(groups))]
			pid := int64(rng.IntN(3))
			offsets := []OffsetCommit{oc("t", int32(rng.IntN(3)), int64(step), nil)}
			if rng.IntN(2) == 0 {
				offsets = append(offsets, oc("t", int32(rng.IntN(3)), int64(step), nil))
			}
			switch op := rng.IntN(10); {
			case op < 3:
				ops = append(ops, fmt.Sprintf("commit %s %v", g, offsets))
				simpleCommit(t, c, g, offsets...)
			case op < 6:
				ops = append(ops, fmt.Sprintf("txn %d %s %v", pid, g, offsets))
				txnCommit(t, c, txnReq(g, pid, 0, offsets...))
			case op < 8:
				commit := rng.IntN(3) > 0
				ops = append(ops, fmt.Sprintf("marker %d commit=%v", pid, commit))
				writeMarker(t, c, pid, 0, commit)
			case op < 9:
				ops = append(ops, fmt.Sprintf("offset delete %s %v", g, offsets[0].TopicPartition))
				if _, err := c.DeleteOffsets(g, []TopicPartition{offsets[0].TopicPartition}); err != nil && !errors.Is(err, ErrGroupIDNotFound) {
					t.Fatal(err)
				}
			default:
				ops = append(ops, fmt.Sprintf("delete %s", g))
				if err := c.Delete(g); err != nil && !errors.Is(err, ErrGroupIDNotFound) {
					t.Fatal(err)
				}
			}
			if step%10 != 9 {
				continue
			}
			live := see(c)
			r, err := New(Options{Clock: clk, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Load(bg, 0, testLogs[c]); err != nil {
				t.Fatal(err)
			}
			replayed := see(r)
			r.Close()
			for _, g := range groups {
				if !maps.Equal(live.offsets[g], replayed.offsets[g]) || !maps.Equal(live.unstable[g], replayed.unstable[g]) {
					t.Fatalf("seed %d step %d, group %s: live %v unstable %v, replayed %v unstable %v; ops:\n%s",
						seed, step, g, live.offsets[g], live.unstable[g], replayed.offsets[g], replayed.unstable[g],
						strings.Join(ops, "\n"))
				}
			}
		}
		closeCoordinator(t, c)
	}
}

// TestTxnCommitGuard: KIP-890 part 1's race for transactional offset
// commits, against a real partition. The broker starts the verification
// (the guard), the transaction coordinator answers yes, the transaction
// aborts and its marker lands in the offsets partition, then the commit
// arrives: it is INVALID_TXN_STATE, nothing is written, no transaction is
// left open in the partition (its first unstable offset is none), and the
// offsets are neither visible nor unstable. The producer's next
// transaction, verified afresh, commits; its later commits carry Ongoing;
// its commit marker makes the last offsets visible.
func TestTxnCommitGuard(t *testing.T) {
	clk := clocktest.New(t0)
	m, err := logs.NewManager(logs.Options{FS: vfs.NewMem(), Dir: "/d", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Open("__consumer_offsets", 0, [16]byte{1}, logs.PartitionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Close() }()
	c, err := New(Options{Clock: clk, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Load(bg, 0, partitionLog{p}); err != nil {
		t.Fatal(err)
	}
	const pid = 5
	marker := func(commit bool) {
		t.Helper()
		if _, err := p.AppendMarker(bg, logs.Marker{ProducerID: pid, Commit: commit}, 0); err != nil {
			t.Fatal(err)
		}
		c.CompleteTxn(0, pid, commit)
	}
	verify := func(want string) producers.Guard {
		t.Helper()
		g, err := p.StartTxnVerification(pid, 0)
		if err != nil {
			t.Fatal(err)
		}
		if (g == producers.Ongoing) != (want == "ongoing") || g == producers.Unverified {
			t.Fatalf("verification: guard %d, want %s", g, want)
		}
		return g
	}
	guarded := func(g producers.Guard, offsets ...OffsetCommit) TxnCommitRequest {
		r := txnReq("g", pid, 0, offsets...)
		r.Guard = g
		return r
	}

	g := verify("fresh")
	marker(false) // the abort lands between the verification and the append
	end := p.Log().EndOffset()
	res, err := c.TxnCommit(bg, guarded(g, oc("t", 0, 3, nil)))
	if err != nil || !errors.Is(res[tp("t", 0)], producers.ErrInvalidTxnState) {
		t.Fatalf("commit verified before the abort marker: %v %v, want ErrInvalidTxnState", res, err)
	}
	if got := p.Log().EndOffset(); got != end {
		t.Fatalf("log end %d after the refused commit, want %d", got, end)
	}
	if fuo, open := p.FirstUnstableOffset(); open {
		t.Fatalf("a transaction left open at %d by the refused commit", fuo)
	}
	wantOffset(t, c, "after the refused commit", "g", tp("t", 0), -1, false)

	// The next transaction: verified once, then ongoing.
	txnCommit(t, c, guarded(verify("fresh"), oc("t", 0, 4, nil)))
	txnCommit(t, c, guarded(verify("ongoing"), oc("t", 0, 5, nil), oc("t", 1, 5, nil)))
	wantOffset(t, c, "transaction open", "g", tp("t", 0), -1, true)
	if _, open := p.FirstUnstableOffset(); !open {
		t.Fatal("no transaction open in the partition after the commits")
	}
	marker(true)
	wantOffset(t, c, "after the commit marker", "g", tp("t", 0), 5, false)
	wantOffset(t, c, "after the commit marker", "g", tp("t", 1), 5, false)
	// A commit carrying Ongoing after the marker (its transaction ended):
	// refused.
	res, _ = c.TxnCommit(bg, guarded(producers.Ongoing, oc("t", 0, 6, nil)))
	if !errors.Is(res[tp("t", 0)], producers.ErrInvalidTxnState) {
		t.Fatalf("commit carrying Ongoing after the marker: %v, want ErrInvalidTxnState", res)
	}
	if _, open := p.FirstUnstableOffset(); open {
		t.Fatal("a transaction left open by the refused Ongoing commit")
	}
	wantOffset(t, c, "end", "g", tp("t", 0), 5, false)
}
