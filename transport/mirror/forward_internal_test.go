package mirror

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// testForwarder is a forwarder of source partition "s"/0 starting at
// offset 0, with no clients: tests feed it fetch responses (partition) and
// produce responses (resolve) themselves.
func testForwarder(t *testing.T) (*forwarder, *fwdPart, *tracker) {
	t.Helper()
	m := &Mirror{log: slog.New(slog.NewTextHandler(io.Discard, nil)), wake: make(chan struct{}, 1),
		paused: map[*tracker]bool{}, fetchErrs: map[topicPartition]string{},
		e2e: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "test_e2e"})}
	f := newForwarder(m)
	tr := newTracker("s", "s", 0, 0, 1, time.Millisecond, time.Millisecond)
	f.add("s", map[int32]*tracker{0: tr}, map[int32]int64{0: 0})
	fp := f.parts[topicPartition{"s", 0}]
	fp.tgtLeader, fp.pid, fp.epoch = 0, 7, 0
	f.pid = 7
	return f, fp, tr
}

// testBatch is a batch of n records at base; with gap, its last offset is
// one further than its records fill (a record compacted away).
func testBatch(t *testing.T, base int64, n int, gap bool) []byte {
	t.Helper()
	var recs []record.Record
	for range n {
		recs = append(recs, record.Record{Value: []byte("v"), Timestamp: 1})
	}
	b, err := record.Build(record.DefaultBuildOptions(), recs)
	if err != nil {
		t.Fatal(err)
	}
	h, err := record.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	h.BaseOffset = base
	if gap {
		h.LastOffsetDelta++
	}
	record.Reheader(b, h)
	return b
}

// fetched hands the forwarder a fetch response holding batches.
func fetched(t *testing.T, f *forwarder, hwm int64, batches ...[]byte) {
	t.Helper()
	var all []byte
	for _, b := range batches {
		all = append(all, b...)
	}
	whole, err := wholeBatches(all)
	if err != nil || len(whole) != len(all) {
		t.Fatalf("wholeBatches: %d of %d bytes, %v", len(whole), len(all), err)
	}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark = hwm
	f.partition(context.Background(), "s", &rp, whole, nil, nil)
}

// sendAll does round's bookkeeping for every batch fp may send now, and
// returns them as sent.
func sendAll(f *forwarder, fp *fwdPart) []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ss []sent
	for fp.sendable() {
		bt := fp.queue[fp.sent]
		ss = append(ss, sent{fp, bt, fp.gen})
		fp.nextSeq += bt.count
		fp.sent++
		fp.unresolved++
		fp.sentTo = fp.tgtLeader
	}
	return ss
}

// answer resolves one sent batch with the target's error code (0: written
// at base).
func answer(f *forwarder, s sent, code int16, base int64) {
	resp := kmsg.NewPtrProduceResponse()
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = s.fp.tr.target
	p := kmsg.NewProduceResponseTopicPartition()
	p.Partition, p.ErrorCode, p.BaseOffset = s.fp.tr.partition, code, base
	rt.Partitions = append(rt.Partitions, p)
	resp.Topics = append(resp.Topics, rt)
	f.resolve([]sent{s}, resp, nil)
}

// TestForwardGapAfterPlainBatches: a fetch holds plain batches A (0-1) and
// B (2-3), then G (4-6, a record compacted away). A and B are forwarded
// and acknowledged; the partition then fails at G, and the rewind starts
// at G, not before: A and B are not sent again (they would be, under new
// sequences, and be written twice). G is never sent.
func TestForwardGapAfterPlainBatches(t *testing.T) {
	f, fp, tr := testForwarder(t)
	fetched(t, f, 7, testBatch(t, 0, 2, false), testBatch(t, 2, 2, false), testBatch(t, 4, 2, true))
	if tr.failed || len(fp.queue) != 2 || !fp.gap {
		t.Fatalf("after the fetch: tracker failed %v, %d batches queued, gap %v; want not failed, A and B queued, the gap pending",
			tr.failed, len(fp.queue), fp.gap)
	}
	ss := sendAll(f, fp)
	if len(ss) != 2 || ss[0].bt.base != 0 || ss[1].bt.base != 2 {
		t.Fatalf("sent %d batches, want A and B", len(ss))
	}
	answer(f, ss[0], 0, 0)
	if tr.failed {
		t.Fatalf("failed with B still in flight: its acknowledgement would not move the position")
	}
	answer(f, ss[1], 0, 2)

	tr.mu.Lock()
	at, due := tr.rewindDue(time.Now().Add(time.Hour))
	next, lastErr := tr.next, tr.lastErr
	tr.mu.Unlock()
	if !due || at != 4 || next != 4 {
		t.Fatalf("after A and B were acknowledged: rewind due %v at %d, position %d; want due at 4 (G's offset)", due, at, next)
	}
	if !errors.Is(lastErr, errForwardGap) {
		t.Fatalf("last error %v, want the gap's", lastErr)
	}
	if fp.seq != 4 || fp.gap || len(fp.queue) != 0 {
		t.Fatalf("forwarder: sequence %d (want 4), gap %v, %d queued", fp.seq, fp.gap, len(fp.queue))
	}

	// The rewind fetches G again: the partition fails again at once,
	// nothing sent.
	tr.mu.Lock()
	tr.rewound()
	tr.mu.Unlock()
	f.setOffsets(map[string]map[int32]kgo.EpochOffset{"s": {0: {Epoch: -1, Offset: at}}})
	fetched(t, f, 7, testBatch(t, 4, 2, true))
	if !tr.failed || tr.next != 4 || len(fp.queue) != 0 || len(sendAll(f, fp)) != 0 {
		t.Fatalf("G fetched again: tracker failed %v at %d, %d queued; want failed at 4, nothing queued", tr.failed, tr.next, len(fp.queue))
	}
}

// TestForwardGapTargetRefusesBefore: with the gap pending, the target
// refuses A: the partition fails at A like any refused batch, the pending
// gap is forgotten, and after the rewind A and B are fetched and sent
// again with their first sequences (answered as duplicates if written).
func TestForwardGapTargetRefusesBefore(t *testing.T) {
	f, fp, tr := testForwarder(t)
	a, b, g := testBatch(t, 0, 2, false), testBatch(t, 2, 2, false), testBatch(t, 4, 2, true)
	fetched(t, f, 7, a, b, g)
	ss := sendAll(f, fp)
	if len(ss) != 2 {
		t.Fatalf("sent %d batches, want A and B", len(ss))
	}
	answer(f, ss[0], kerr.NotLeaderForPartition.Code, -1)
	answer(f, ss[1], kerr.OutOfOrderSequenceNumber.Code, -1) // of the old generation: ignored
	tr.mu.Lock()
	at, due := tr.rewindDue(time.Now().Add(time.Hour))
	tr.mu.Unlock()
	if !due || at != 0 || fp.gap || len(fp.queue) != 0 || fp.unresolved != 0 {
		t.Fatalf("A refused: rewind due %v at %d, gap %v, %d queued, %d unresolved; want due at 0, no gap, nothing queued",
			due, at, fp.gap, len(fp.queue), fp.unresolved)
	}
	tr.mu.Lock()
	tr.rewound()
	tr.mu.Unlock()
	f.setOffsets(map[string]map[int32]kgo.EpochOffset{"s": {0: {Epoch: -1, Offset: at}}})
	fetched(t, f, 7, a, b, g)
	ss = sendAll(f, fp)
	if len(ss) != 2 || fp.seq != 0 || fp.nextSeq != 4 || !fp.gap {
		t.Fatalf("after the rewind: sent %d, sequence %d to %d, gap %v; want A and B sent again from sequence 0, the gap pending",
			len(ss), fp.seq, fp.nextSeq, fp.gap)
	}
	answer(f, ss[0], kerr.DuplicateSequenceNumber.Code, -1)
	answer(f, ss[1], 0, 2)
	if !tr.failed || tr.next != 4 {
		t.Fatalf("A and B acknowledged: tracker failed %v at %d, want failed at 4", tr.failed, tr.next)
	}
}

// TestForwardResetAboveLogEnd: the mirror's position (100) is above the
// source's log end (10), as after an unclean leader election truncated the
// source's log below it. The fetch there is answered OFFSET_OUT_OF_RANGE;
// the forwarder counts a fetch error naming it and moves back to where the
// source's log diverged from what it copied, its position with it, rather
// than fetching at 100 again forever or passing over what the source
// writes below 100:
//   - divergence: the last batch copied has the source's current leader
//     epoch, whose end (OffsetForLeaderEpoch) is the log end 10: the
//     partition resumes at 10, and the records written at 10..104 after
//     the truncation are all queued;
//   - unknown: no batch was copied under an epoch the forwarder knows: it
//     resumes at the log start, the records 0..9 queued again
//     (duplicates, never a loss), then 10..104.
func TestForwardResetAboveLogEnd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		withEpoch bool
		resume    int64
	}{
		{"divergence", true, 10},
		{"unknown", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := brokertest.Start(t, "").Addr()
			brokertest.CreateTopic(t, addr, "s", 1, nil)
			cl := brokertest.Client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			ctx := brokertest.Context(t)
			produceN := func(n int) {
				for range n { // one batch each
					if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "s", Value: []byte("v")}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
			}
			produceN(10)
			m, err := New(Config{Source: []string{addr}, Target: []string{addr}, Topics: "s", Forward: true,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			f := m.fw
			const position = 100
			tr := newTracker("s", "s", 0, position, 1, time.Millisecond, time.Millisecond)
			f.add("s", map[int32]*tracker{0: tr}, map[int32]int64{0: position})
			fp := f.parts[topicPartition{"s", 0}]
			if tc.withEpoch {
				epoch := sourceLeaderEpoch(ctx, t, m)
				f.mu.Lock()
				fp.srcEpoch = epoch // as if the last batch copied, below 100, had it
				f.mu.Unlock()
			}
			state := func() (fetchAt int64, reset bool, queued []fwdBatch, fetchErrs int64, lastErr error, next int64) {
				f.mu.Lock()
				defer f.mu.Unlock()
				tr.mu.Lock()
				defer tr.mu.Unlock()
				return fp.fetchAt, fp.reset, slices.Clone(fp.queue), tr.fetchErrors, tr.lastErr, tr.next
			}
			// fetchUntil runs the loop's fetches until cond holds (each is a
			// whole fetch: request, answer, queueing), at most for the
			// test's timeout.
			fetchUntil := func(what string, cond func() bool) {
				t.Helper()
				for !cond() {
					if ctx.Err() != nil {
						at, reset, queued, errs, lastErr, next := state()
						t.Fatalf("waiting for %s: fetching at %d, reset %v, %d queued, %d fetch errors, last %v, position %d",
							what, at, reset, len(queued), errs, lastErr, next)
					}
					f.fetchOnce(ctx)
				}
			}
			fetchUntil("the out-of-range answer", func() bool { _, _, _, errs, _, _ := state(); return errs > 0 })
			if _, _, _, errs, lastErr, _ := state(); errs != 1 || !errors.Is(lastErr, kerr.OffsetOutOfRange) {
				t.Fatalf("after the fetch at %d: %d fetch errors, last %v; want 1, OFFSET_OUT_OF_RANGE", position, errs, lastErr)
			}
			fetchUntil("the reset", func() bool { _, reset, _, _, _, _ := state(); return !reset })
			// The fetch that follows the reset in the same fetchOnce
			// may have queued batches already: from the resume offset.
			if _, _, queued, _, _, next := state(); next != tc.resume || len(queued) > 0 && queued[0].base != tc.resume {
				t.Fatalf("after the reset: position %d, %d queued; want the position at %d, batches queued from there",
					next, len(queued), tc.resume)
			}
			// Written after the truncation, at offsets below the
			// mirror's old position: new records, to be copied.
			produceN(position + 5 - 10)
			fetchUntil("the new records", func() bool { at, _, _, _, _, _ := state(); return at == position+5 })
			_, _, queued, errs, _, _ := state()
			if errs != 1 || tr.failed {
				t.Fatalf("%d fetch errors, failed %v; want 1, not failed", errs, tr.failed)
			}
			if want := position + 5 - tc.resume; int64(len(queued)) != want {
				t.Fatalf("queued %d batches, want %d: every one from %d on", len(queued), want, tc.resume)
			}
			for i, q := range queued {
				if q.base != tc.resume+int64(i) || q.last != q.base {
					t.Fatalf("queued batch %d is %d-%d, want %d", i, q.base, q.last, tc.resume+int64(i))
				}
			}
		})
	}
}

// TestForwardResetWaitsForInFlight: a partition whose fetch was out of
// range is not moved while batches of it are queued or in flight (their
// answers would move the position again); once they are acknowledged it
// is, and the epoch asked for is the last fetched batch's (the source's).
func TestForwardResetWaitsForInFlight(t *testing.T) {
	f, fp, tr := testForwarder(t)
	b := testBatch(t, 0, 2, false)
	h, err := record.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	h.PartitionLeaderEpoch = 3
	record.Reheader(b, h)
	fetched(t, f, 2, b)
	f.mu.Lock()
	fp.reset = true
	queued, resettable := len(fp.queue), fp.resettable()
	f.mu.Unlock()
	if queued != 1 || resettable {
		t.Fatalf("%d queued, resettable %v; want 1, not resettable", queued, resettable)
	}
	ss := sendAll(f, fp)
	if len(ss) != 1 {
		t.Fatalf("sent %d batches, want 1", len(ss))
	}
	f.mu.Lock()
	resettable = fp.resettable()
	f.mu.Unlock()
	if resettable {
		t.Fatal("resettable with a batch in flight")
	}
	answer(f, ss[0], 0, 0)
	f.mu.Lock()
	resettable, epoch, ackEpoch := fp.resettable(), fp.srcEpoch, fp.ackEpoch
	f.mu.Unlock()
	if !resettable || epoch != 3 || ackEpoch != 3 || tr.next != 2 {
		t.Fatalf("acknowledged: resettable %v, epoch %d, acknowledged epoch %d, position %d; want resettable, 3, 3, 2",
			resettable, epoch, ackEpoch, tr.next)
	}
	tr.mu.Lock()
	tr.resetTo(1)
	next, expect := tr.next, tr.expect
	tr.mu.Unlock()
	if next != 1 || expect != 1 {
		t.Fatalf("reset to 1: position %d, expecting %d; want both 1", next, expect)
	}
}

// TestForwardRewindKeepsLeaderCheck: a new source leader is found (a
// newer leader epoch) while a batch is in flight, and the target then
// refuses that batch: the partition fails, and its new-leader check waits
// (a failed partition is not reset). The rewind that follows moves it
// back to its acknowledged position, from where it fetches from the new
// leader, whose log may have been truncated below that position and grown
// past it again (no fetch out of range would tell): the check must still
// be due after the rewind, with the epoch of the batch acknowledged last,
// not be dropped with it.
func TestForwardRewindKeepsLeaderCheck(t *testing.T) {
	f, fp, tr := testForwarder(t)
	atEpoch := func(b []byte, epoch int32) []byte {
		h, err := record.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		h.PartitionLeaderEpoch = epoch
		record.Reheader(b, h)
		return b
	}
	f.mu.Lock()
	fp.sourceLeader(1, 3, [16]byte{})
	f.mu.Unlock()
	fetched(t, f, 4, atEpoch(testBatch(t, 0, 2, false), 3), atEpoch(testBatch(t, 2, 2, false), 3))
	ss := sendAll(f, fp)
	if len(ss) != 2 {
		t.Fatalf("sent %d batches, want 2", len(ss))
	}
	answer(f, ss[0], 0, 0)
	f.mu.Lock()
	fp.sourceLeader(2, 4, [16]byte{}) // a new leader, at a newer epoch
	due := fp.reset && fp.validating
	f.mu.Unlock()
	if !due {
		t.Fatal("a new source leader: no check due")
	}
	answer(f, ss[1], kerr.NotLeaderForPartition.Code, -1)
	f.mu.Lock()
	resettable := fp.resettable()
	f.mu.Unlock()
	tr.mu.Lock()
	at, rewind := tr.rewindDue(time.Now().Add(time.Hour))
	if rewind {
		tr.rewound()
	}
	tr.mu.Unlock()
	if resettable || !rewind || at != 2 {
		t.Fatalf("the second batch refused: resettable %v, rewind due %v at %d; want not resettable, a rewind at 2", resettable, rewind, at)
	}
	f.setOffsets(map[string]map[int32]kgo.EpochOffset{"s": {0: {Epoch: -1, Offset: at}}})
	f.mu.Lock()
	defer f.mu.Unlock()
	if !fp.reset || !fp.validating || fp.srcEpoch != 3 || fp.fetchAt != 2 || !fp.resettable() {
		t.Fatalf("after the rewind: check due %v (validating %v), epoch %d, fetching at %d, resettable %v; "+
			"want the new leader's check still due, for epoch 3 at 2, before any fetch",
			fp.reset, fp.validating, fp.srcEpoch, fp.fetchAt, fp.resettable())
	}
}

// TestForwardResetTakesFreshProducerID: a batch at the mirror's position
// (100) is sent under sequence 0 and its answer is lost (the target may
// have written it); then the source's log turns out truncated below the
// position (its end at 10) and the partition moves back (to its log
// start: the epoch at the rewind's position is unknown). The batch it
// sends from there holds other records, which under the same producer
// id and sequence the target would take for a duplicate of the one it may
// have written, acknowledge without writing, and the mirror would pass
// over them. A partition moved back by a reset starts again under a fresh
// producer id, and sends nothing before it has it.
func TestForwardResetTakesFreshProducerID(t *testing.T) {
	addr := brokertest.Start(t, "").Addr()
	brokertest.CreateTopic(t, addr, "s", 1, nil)
	cl := brokertest.Client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := brokertest.Context(t)
	for range 10 { // one batch each
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "s", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	m, err := New(Config{Source: []string{addr}, Target: []string{addr}, Topics: "s", Forward: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	m.e2e = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "test_e2e"})
	f := m.fw
	const position = 100
	tr := newTracker("s", "s", 0, position, 1, time.Millisecond, time.Millisecond)
	f.add("s", map[int32]*tracker{0: tr}, map[int32]int64{0: position})
	md, err := m.srcAdm.Metadata(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	epoch := md.Topics["s"].Partitions[0].LeaderEpoch
	fp := f.parts[topicPartition{"s", 0}]
	f.mu.Lock()
	fp.tgtLeader, fp.pid, f.pid = 0, 7, 7
	f.mu.Unlock()

	// The batch at 100 (fetched before the truncation), at the source's
	// epoch: sent under sequence 0, its answer lost.
	b := testBatch(t, position, 1, false)
	h, err := record.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	h.PartitionLeaderEpoch = epoch
	record.Reheader(b, h)
	fetched(t, f, position+1, b)
	ss := sendAll(f, fp)
	if len(ss) != 1 || fp.nextSeq != 1 {
		t.Fatalf("sent %d batches, next sequence %d; want 1 batch under sequence 0", len(ss), fp.nextSeq)
	}
	f.resolve(ss, nil, errors.New("connection to the target lost"))
	tr.mu.Lock()
	at, due := tr.rewindDue(time.Now().Add(time.Hour))
	if due {
		tr.rewound()
	}
	tr.mu.Unlock()
	if !due || at != position {
		t.Fatalf("the answer lost: rewind due %v at %d, want at %d", due, at, position)
	}
	f.setOffsets(map[string]map[int32]kgo.EpochOffset{"s": {0: {Epoch: -1, Offset: at}}})

	// The fetch at 100 is out of range; the partition moves back.
	for {
		f.mu.Lock()
		fetchAt, queued := fp.fetchAt, len(fp.queue)
		f.mu.Unlock()
		if fetchAt < position && queued > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting for the reset and a batch fetched after it: fetching at %d, %d queued", fetchAt, queued)
		}
		f.fetchOnce(ctx)
	}
	f.mu.Lock()
	stale := fp.pid == f.pid && !fp.needPid && fp.nextSeq == 0
	base := fp.queue[0].base
	f.mu.Unlock()
	if stale {
		t.Fatalf("after the reset the batch at %d goes under producer %d sequence 0, as the batch at %d did, "+
			"which the target may have written: it would be taken for a duplicate", base, fp.pid, position)
	}
	// Nor is it sent before the fresh producer id came (the send loop
	// asks for it before a round; the reset may come in between).
	if f.round(ctx) {
		t.Fatalf("a round sent the batch at %d under producer %d before a fresh producer id came", base, fp.pid)
	}
}

// sourceLeaderEpoch is the leader epoch of source partition "s"/0, from
// m's source metadata; it fails the test if there is none.
func sourceLeaderEpoch(ctx context.Context, t *testing.T, m *Mirror) int32 {
	t.Helper()
	md, err := m.srcAdm.Metadata(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := md.Topics["s"].Partitions[0]
	if !ok || p.LeaderEpoch < 0 {
		t.Fatalf("source metadata: partition 0 %v, leader epoch %d", ok, p.LeaderEpoch)
	}
	return p.LeaderEpoch
}
