package mirror

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// TestRecordResetAboveLogEnd is TestForwardResetAboveLogEnd for the record
// path (no --forward): the mirror's position (100) is above the source's
// log end (10), as after an unclean leader election truncated the source's
// log below it. kgo's consumer moves back on its own (its reset after
// OFFSET_OUT_OF_RANGE, to the log start); the mirror counts a fetch error
// and moves the partition back to where the source's log diverged from
// what it copied, its position with it, so that the records written at
// 10..104 after the truncation are copied, none passed over:
//   - divergence: the last record copied has the source's current leader
//     epoch, whose end (OffsetForLeaderEpoch) is the log end 10: the
//     target gets 10..104, nothing before;
//   - unknown: no record copied under an epoch the mirror knows: it
//     resumes at the log start, the target gets 0..9 again (duplicates,
//     never a loss), then 10..104;
//   - data loss: kgo reports the move (ErrDataLoss, as after consuming,
//     or its KIP-320 validation landing on the divergence itself): the
//     same as divergence, counted once.
func TestRecordResetAboveLogEnd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		withEpoch bool
		dataLoss  bool
		resume    int64
	}{
		{"divergence", true, false, 10},
		{"unknown", false, false, 0},
		{"data_loss", true, true, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := brokertest.Start(t, "").Addr()
			brokertest.CreateTopic(t, addr, "s", 1, nil)
			brokertest.CreateTopic(t, addr, "t", 1, nil) // the copy
			cl := brokertest.Client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			ctx := brokertest.Context(t)
			produce := func(from, to int) { // source offset i holds "i"
				for i := from; i < to; i++ {
					if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "s", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
			}
			produce(0, 10)
			const position = 100
			var logs brokertest.LogBuffer
			below := &polledBelow{topic: "s", offset: position}
			m, err := New(Config{Source: []string{addr}, Target: []string{addr}, Topics: "s",
				Logger: slog.New(slog.NewTextHandler(&logs, nil)), SourceOpts: []kgo.Opt{kgo.WithHooks(below)}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			tr := newTracker("s", "t", 0, position, 1, time.Millisecond, time.Millisecond)
			epoch := int32(-1)
			if tc.withEpoch {
				epoch = sourceLeaderEpoch(ctx, t, m)
				tr.epoch = epoch // as if the last record copied, 99, had it
			}
			m.mu.Lock()
			m.parts[topicPartition{"s", 0}] = tr
			m.topics["s"] = 1
			m.mu.Unlock()
			m.src.AddConsumePartitions(map[string]map[int32]kgo.Offset{"s": {0: kgo.NewOffset().At(position)}})
			if tc.dataLoss {
				m.copyFetches(ctx, kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "s", Partitions: []kgo.FetchPartition{{
					Partition: 0,
					Err:       &kgo.ErrDataLoss{Topic: "s", ConsumedTo: position, ConsumedToEpoch: epoch, ResetTo: 10, ResetToEpoch: epoch},
				}}}}}})
			}
			state := func() (fetchErrs int64, lastErr error, next, expect int64, truncated, failed bool) {
				tr.mu.Lock()
				defer tr.mu.Unlock()
				return tr.fetchErrors, tr.lastErr, tr.next, tr.expect, tr.truncated, tr.failed
			}
			// stepUntil runs the loop's steps (Run's, without its timers)
			// until cond holds, at most for the test's timeout.
			stepUntil := func(what string, cond func() bool) {
				t.Helper()
				for !cond() {
					if ctx.Err() != nil {
						errs, lastErr, next, expect, truncated, failed := state()
						t.Fatalf("waiting for %s: %d fetch errors, last %v, position %d, expecting %d, truncated %v, failed %v",
							what, errs, lastErr, next, expect, truncated, failed)
					}
					m.copyFetches(ctx, m.poll(ctx))
					m.housekeep(ctx, time.Now())
					m.resetTruncated(ctx)
				}
			}
			// kgo's move below the position is in the mirror's hands
			// (the mirror polled a record below it, or was told), and
			// settled.
			stepUntil("the consumer below the position, settled", func() bool {
				_, _, _, _, truncated, _ := state()
				return (below.seen.Load() || tc.dataLoss) && !truncated
			})
			errs, lastErr, next, expect, _, _ := state()
			var loss *kgo.ErrDataLoss
			if errs != 1 || tc.dataLoss && !errors.As(lastErr, &loss) || !tc.dataLoss && !errors.Is(lastErr, kerr.OffsetOutOfRange) {
				t.Fatalf("after the reset: %d fetch errors, last %v; want 1, kgo's data loss %v (else OFFSET_OUT_OF_RANGE)", errs, lastErr, tc.dataLoss)
			}
			if next != tc.resume || expect != tc.resume {
				t.Fatalf("after the reset: position %d, expecting %d; want both %d", next, expect, tc.resume)
			}
			if !logs.Contains("resuming where it diverged", "topic=s", "partition=0", "position=100",
				fmt.Sprintf("resume_offset=%d", tc.resume)) {
				t.Fatalf("no Warn naming the partition, its position and the resume offset %d", tc.resume)
			}
			// Written after the truncation, at offsets below the
			// mirror's old position: new records, to be copied.
			produce(10, position+5)
			stepUntil("the new records copied", func() bool { _, _, next, _, _, _ := state(); return next == position+5 })
			if errs, _, _, _, truncated, failed := state(); errs != 1 || truncated || failed {
				t.Fatalf("%d fetch errors, truncated %v, failed %v; want 1, neither", errs, truncated, failed)
			}
			if err := m.tgt.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			var want []string
			for i := tc.resume; i < position+5; i++ {
				want = append(want, strconv.FormatInt(i, 10))
			}
			if got := targetValues(t, addr, "t"); !slices.Equal(got, want) {
				t.Fatalf("target holds %d records %v,\nwant %d: every source record from %d on, once, in order", len(got), got, len(want), tc.resume)
			}
		})
	}
}

// targetValues reads every record of topic's partition 0, up to its end
// offset, and returns their values.
func targetValues(t *testing.T, addr, topic string) []string {
	t.Helper()
	end := brokertest.ListOffsets(t, addr, topic, 1, -1)[0]
	cl := brokertest.Client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx := brokertest.Context(t)
	var out []string
	for int64(len(out)) < end {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %d of %d records", topic, len(out), end)
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("reading %s: %v", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// polledBelow is a kgo hook noting that the consumer returned a record of
// topic below offset.
type polledBelow struct {
	topic  string
	offset int64
	seen   atomic.Bool
}

// OnFetchRecordUnbuffered runs on the polling goroutine before the poll
// returns, for each record polled.
func (h *polledBelow) OnFetchRecordUnbuffered(r *kgo.Record, polled bool) {
	if polled && r.Topic == h.topic && r.Offset < h.offset {
		h.seen.Store(true)
	}
}

// TestModelTruncationNoSkip drives a tracker the way the record path does
// (copyFetches, housekeep, resetTruncated) against a model of a source
// whose log is truncated at random points (unclean elections: the log
// keeps a prefix, a new leader epoch starts), of kgo and of the producer
// (records resolve in order, any may fail). kgo's cursor moves on over
// records the mirror refuses; SetOffsets moves it and forgets what it
// consumed; after a truncation below it, its next fetch moves it back, to
// the end of the epoch it last returned (its KIP-320 validation) or to
// the log start (after OFFSET_OUT_OF_RANGE), with an ErrDataLoss when it
// had consumed since the last SetOffsets, silently when not. Once the
// source stops changing and the mirror caught up, the source's log must
// be in the target in order (duplicates allowed): nothing written after a
// truncation below the position is passed over. And at every step that
// the mirror knows of every truncation (none waits to be seen, signalled
// or not), every record of the source's log below the position is in the
// target: committing it loses nothing. It models the mirror's
// handling of kgo's move, not kgo's detection: every truncation below its
// cursor is assumed seen, even one below an offset the mirror set after
// it.
func TestModelTruncationNoSkip(t *testing.T) {
	type rec struct {
		id    int
		epoch int32
	}
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 2))
		var log []rec
		epoch, ids := int32(0), 0
		// epochEnd answers OffsetForLeaderEpoch: the end offset of the
		// largest epoch at most e, the start of the first one after it.
		epochEnd := func(e int32) int64 {
			for i, r := range log {
				if r.epoch > e {
					return int64(i)
				}
			}
			return int64(len(log))
		}
		var target []int // ids copied, in the target's order
		copied := map[int]bool{}
		var sent []int // ids in flight, oldest first
		tr := newTracker("s", "t", 0, 0, 10, time.Millisecond, time.Millisecond)
		// kgo's cursor: its offset, the epoch of the last record it
		// returned (-1: none since SetOffsets), whether it returned any
		// since, and whether a truncation below it waits to be seen.
		// silent: kgo moved back without an ErrDataLoss; the mirror has
		// not seen a record below its position yet.
		fetched, lastEpoch, consumed, moved, silent := int64(0), int32(-1), false, false, false
		setOffsets := func(at int64) { fetched, lastEpoch, consumed = at, -1, false }
		truncations, resets := 0, 0
		now := t0
		for step := 0; ; step++ {
			if !moved && !silent && !tr.truncated {
				for o := range min(tr.next, int64(len(log))) {
					if !copied[log[o].id] {
						t.Fatalf("seed %d step %d: position %d, but source offset %d (id %d) is not in the target",
							seed, step, tr.next, o, log[o].id)
					}
				}
			}
			changing := step < 3000
			// Caught up; or kgo moved silently to the start of a log left
			// empty, the sign waiting for a record (none to copy).
			settled := !moved && tr.inFlight() == 0 && !tr.truncated && !tr.failed
			if !changing && settled && (!silent && tr.next == int64(len(log)) || silent && len(log) == 0) {
				break
			}
			if step > 200_000 {
				t.Fatalf("seed %d: no progress: position %d of %d, truncated %v, failed %v", seed, tr.next, len(log), tr.truncated, tr.failed)
			}
			now = now.Add(time.Millisecond)
			switch r := rng.IntN(100); {
			case r < 2 && changing && len(log) > 0: // unclean election: truncated, new epoch
				d := int64(rng.IntN(len(log)))
				log, epoch = log[:d], epoch+1
				truncations++
				if fetched > d {
					moved = true
				}
			case r < 30 && changing: // produced
				for k := 1 + rng.IntN(10); k > 0; k-- {
					log = append(log, rec{ids, epoch})
					ids++
				}
			case r < 60: // kgo fetches, the mirror copies (copyFetches)
				if moved {
					moved = false
					validated := lastEpoch >= 0 && rng.IntN(2) == 0
					to := int64(0)
					if validated {
						to = min(fetched, epochEnd(lastEpoch))
					}
					if validated || consumed { // kgo's ErrDataLoss (copyFetches: sourceTruncated)
						tr.truncate(to)
					} else {
						silent = to < tr.expect
					}
					fetched = to
				}
				end := min(int64(len(log)), fetched+int64(rng.IntN(20)))
				if fetched >= end {
					break
				}
				silent = false
				if !tr.truncate(fetched) { // a record below the records accepted: copyFetches drops the fetch
					for off := fetched; off < end; off++ {
						if tr.send(off, log[off].epoch, now) {
							sent = append(sent, log[off].id)
						}
					}
				}
				fetched, lastEpoch, consumed = end, log[end-1].epoch, true
			default: // records resolve in order; housekeep; resetTruncated
				for k := rng.IntN(20); k > 0 && tr.inFlight() > 0; k-- {
					off := tr.queue[tr.head].offset
					id := sent[0]
					sent = sent[1:]
					if r := rng.IntN(100); r < 3 {
						err := errTest
						if r == 0 {
							err = kerr.MessageTooLarge
						}
						tr.fail(off, err, now)
					} else {
						target = append(target, id)
						copied[id] = true
						tr.ack(off, int64(len(target)-1), 1, now)
					}
				}
				tr.takeSyncs()
				if at, due := tr.rewindDue(now); due {
					tr.rewound()
					setOffsets(at)
				} else if at, due := tr.refetchDue(); due {
					setOffsets(at)
				}
				if pos, e, due := tr.resetDue(); due {
					end := int64(-1)
					if e >= 0 {
						end = epochEnd(e)
					}
					at, from := resumeOffset(pos, 0, end)
					tr.resetTo(at)
					if from == "divergence" {
						tr.epoch = e
					}
					setOffsets(at)
					resets++
				}
			}
		}
		i := 0
		for _, id := range target {
			if i < len(log) && id == log[i].id {
				i++
			}
		}
		if i != len(log) {
			t.Fatalf("seed %d (%d truncations, %d resets): the source's records 0..%d are in the target in order, then not %d (id %d)",
				seed, truncations, resets, i-1, i, log[i].id)
		}
		if truncations > 0 && resets == 0 {
			t.Fatalf("seed %d: %d truncations and no reset: the model never moved kgo below the position", seed, truncations)
		}
	}
}
