package transport

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
)

func fetchReq(version int16, maxWait time.Duration, minBytes, maxBytes int32, topic string, parts map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.MinBytes, req.MaxBytes = minBytes, maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p := range int32(len(parts)) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, parts[p], 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// recordsIn decodes the values of every record a fetched partition carries.
func recordsIn(t testing.TB, p kmsg.FetchResponseTopicPartition) []string {
	t.Helper()
	var out []string
	b := p.RecordBatches
	for len(b) > 0 {
		_, n, err := record.Next(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := record.Records(b[:n], nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, string(r.Value))
		}
		b = b[n:]
	}
	return out
}

// setFetchHook makes every Fetch that starts waiting send on the returned
// channel.
func setFetchHook(t testing.TB) <-chan struct{} {
	waiting := make(chan struct{}, 16)
	testHookFetchWait = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { testHookFetchWait = nil })
	return waiting
}

// A long poll is woken by the append, not by its (long) MaxWait, for every
// partition of the request.
func TestFetchLongPollWokenByAppend(t *testing.T) {
	waiting := setFetchHook(t)
	b := startBroker(t)
	b.createTopic(t, "t", 3, nil)
	offsets := map[int32]int64{0: 0, 1: 0, 2: 0}
	for _, p := range []int32{0, 2} {
		rc := b.dial(t)
		start := time.Now()
		req := fetchReq(11, time.Minute, 1, 1<<20, "t", offsets)
		corr := rc.send(req)
		<-waiting
		prod := b.dial(t)
		if resp := prod.do(produceReq(7, 1, "t", p, batch(t, "woke", 2))).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatal("produce failed")
		}
		resp := rc.recv(req, corr).(*kmsg.FetchResponse)
		if elapsed := time.Since(start); elapsed > 30*time.Second {
			t.Fatalf("fetch answered after %v: not woken by the append", elapsed)
		}
		got := recordsIn(t, resp.Topics[0].Partitions[p])
		if len(got) != 2 || got[0] != "woke-0" {
			t.Fatalf("partition %d: fetched %q", p, got)
		}
		if hw := resp.Topics[0].Partitions[p].HighWatermark; hw != 2 {
			t.Fatalf("high watermark %d", hw)
		}
		offsets[p] = 2
	}
}

func TestFetchMaxWaitAndMinBytes(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 1, nil)
	rc := b.dial(t)

	// Nothing to read: answered empty once MaxWait has passed.
	start := time.Now()
	resp := rc.do(fetchReq(4, 150*time.Millisecond, 1, 1<<20, "t", map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if elapsed := time.Since(start); elapsed < 150*time.Millisecond {
		t.Fatalf("answered after %v, before MaxWait", elapsed)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 0 {
		t.Fatalf("empty fetch: %+v", p)
	}

	// Less than MinBytes: the data is answered when MaxWait passes.
	rc.do(produceReq(7, 1, "t", 0, batch(t, "small", 1)))
	start = time.Now()
	resp = rc.do(fetchReq(4, 150*time.Millisecond, 1<<20, 1<<20, "t", map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if elapsed := time.Since(start); elapsed < 150*time.Millisecond {
		t.Fatalf("answered after %v with less than MinBytes", elapsed)
	}
	if got := recordsIn(t, resp.Topics[0].Partitions[0]); len(got) != 1 {
		t.Fatalf("fetched %q", got)
	}

	// MinBytes met: answered at once, whatever MaxWait says.
	start = time.Now()
	resp = rc.do(fetchReq(4, time.Minute, 1, 1<<20, "t", map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Fatalf("answered after %v", elapsed)
	}
	if got := recordsIn(t, resp.Topics[0].Partitions[0]); len(got) != 1 {
		t.Fatalf("fetched %q", got)
	}
}

func TestFetchErrorsAnswerAtOnce(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 1, nil)
	rc := b.dial(t)
	rc.do(produceReq(7, 1, "t", 0, batch(t, "x", 3)))

	resp := rc.do(fetchReq(11, time.Minute, 1, 1<<20, "t", map[int32]int64{0: 10})).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != 3 || p.LogStartOffset != 0 {
		t.Fatalf("past the end: %+v", p)
	}
	resp = rc.do(fetchReq(11, time.Minute, 1, 1<<20, "nope", map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", p)
	}
}

// MaxBytes bounds the response, but the first batch goes whole; partition
// limits bound each partition.
func TestFetchByteLimits(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 2, nil)
	rc := b.dial(t)
	one := batch(t, "0123456789012345678901234567890123456789", 10)
	for range 5 {
		rc.do(produceReq(7, 1, "t", 0, one))
		rc.do(produceReq(7, 1, "t", 1, one))
	}
	size := int32(len(one))

	// MaxBytes below one batch: the first partition's first batch only.
	resp := rc.do(fetchReq(11, 0, 1, 10, "t", map[int32]int64{0: 0, 1: 0})).(*kmsg.FetchResponse)
	if n0, n1 := len(resp.Topics[0].Partitions[0].RecordBatches), len(resp.Topics[0].Partitions[1].RecordBatches); n0 != int(size) || n1 != 0 {
		t.Fatalf("MaxBytes 10: %d and %d bytes, want %d and 0", n0, n1, size)
	}
	// MaxBytes of 3 batches: 3 from the first partition, none from the second.
	resp = rc.do(fetchReq(11, 0, 1, 3*size, "t", map[int32]int64{0: 0, 1: 0})).(*kmsg.FetchResponse)
	if n0, n1 := len(resp.Topics[0].Partitions[0].RecordBatches), len(resp.Topics[0].Partitions[1].RecordBatches); n0 != 3*int(size) || n1 != 0 {
		t.Fatalf("MaxBytes 3 batches: %d and %d bytes", n0, n1)
	}
	// Partition limits of 2 batches each.
	req := fetchReq(11, 0, 1, 1<<20, "t", map[int32]int64{0: 0, 1: 0})
	for i := range req.Topics[0].Partitions {
		req.Topics[0].Partitions[i].PartitionMaxBytes = 2*size + 5
	}
	resp = rc.do(req).(*kmsg.FetchResponse)
	for i, p := range resp.Topics[0].Partitions {
		if len(p.RecordBatches) != 2*int(size) {
			t.Fatalf("partition %d: %d bytes, want 2 batches", i, len(p.RecordBatches))
		}
	}
	// Fetching from inside a batch returns the whole batch (consumers skip).
	resp = rc.do(fetchReq(11, 0, 1, 1, "t", map[int32]int64{0: 15})).(*kmsg.FetchResponse)
	got := recordsIn(t, resp.Topics[0].Partitions[0])
	if len(got) != 10 {
		t.Fatalf("from offset 15: %d records", len(got))
	}
}

// Close ends long polls: Close returns although a Fetch waits for a minute.
func TestCloseEndsLongPoll(t *testing.T) {
	waiting := setFetchHook(t)
	b := startBroker(t)
	b.createTopic(t, "t", 1, nil)
	rc := b.dial(t)
	rc.send(fetchReq(11, time.Minute, 1, 1<<20, "t", map[int32]int64{0: 0}))
	<-waiting
	start := time.Now()
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Fatalf("Close took %v", elapsed)
	}
}

// A long poll woken several times keeps what each wake-up read: MinBytes
// of three batches is met by appends to three partitions, one at a time,
// each re-reading only its partition, and the answer carries all three.
func TestFetchLongPollAccumulates(t *testing.T) {
	waiting := setFetchHook(t)
	b := startBroker(t)
	b.createTopic(t, "t", 4, nil)
	one := batch(t, "p0", 1) // the size of each batch below
	rc := b.dial(t)
	req := fetchReq(11, time.Minute, int32(3*len(one)), 1<<20, "t", map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0})
	corr := rc.send(req)
	for _, p := range []int32{2, 0, 3} {
		<-waiting
		b.produce(t, "t", p, batch(t, fmt.Sprint("p", p), 1))
	}
	resp := rc.recv(req, corr).(*kmsg.FetchResponse)
	for p, want := range []string{"p0-0", "", "p2-0", "p3-0"} {
		got := recordsIn(t, resp.Topics[0].Partitions[p])
		if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || got[0] != want) {
			t.Fatalf("partition %d: %q, want %q", p, got, want)
		}
	}
}
