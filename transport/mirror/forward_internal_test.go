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
	f.partition(context.Background(), "s", &rp, whole, nil)
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
// the forwarder counts a fetch error naming it, resets to the source's log
// start as the record path's consumer does, passes over the batches below
// its position, and copies from its position once the source has records
// there, rather than fetching at 100 again forever.
func TestForwardResetAboveLogEnd(t *testing.T) {
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
	state := func() (fetchAt int64, reset bool, queued []fwdBatch, fetchErrs int64, lastErr error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return fp.fetchAt, fp.reset, slices.Clone(fp.queue), tr.fetchErrors, tr.lastErr
	}
	// fetchUntil runs the loop's fetches until cond holds (each is a
	// whole fetch: request, answer, queueing), at most for the test's
	// timeout.
	fetchUntil := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				at, reset, queued, errs, lastErr := state()
				t.Fatalf("waiting for %s: fetching at %d, reset %v, %d queued, %d fetch errors, last %v", what, at, reset, len(queued), errs, lastErr)
			}
			f.fetchOnce(ctx)
		}
	}
	fetchUntil("the out-of-range answer", func() bool { _, _, _, errs, _ := state(); return errs > 0 })
	if _, _, _, errs, lastErr := state(); errs != 1 || !errors.Is(lastErr, kerr.OffsetOutOfRange) {
		t.Fatalf("after the fetch at %d: %d fetch errors, last %v; want 1, OFFSET_OUT_OF_RANGE", position, errs, lastErr)
	}
	fetchUntil("the source's end", func() bool { at, _, _, _, _ := state(); return at == 10 })
	if _, reset, queued, errs, _ := state(); reset || len(queued) != 0 || errs != 1 || tr.failed {
		t.Fatalf("at the source's end: reset %v, %d queued, %d fetch errors, failed %v; want the batches below %d passed over",
			reset, len(queued), errs, tr.failed, position)
	}
	produceN(position + 5 - 10)
	fetchUntil("the new records", func() bool { at, _, _, _, _ := state(); return at == position+5 })
	_, _, queued, _, _ := state()
	if len(queued) != 5 || queued[0].base != position || queued[4].last != position+4 {
		t.Fatalf("queued %d batches, want the 5 from the mirror's position %d on", len(queued), position)
	}
}
