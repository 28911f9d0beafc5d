package e2e_test

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/transport/broker"
)

// TestCompactedTopicEveryClient: a topic with cleanup.policy=compact, small
// segments and a cleaner that looks every 50 ms. After ten rounds of writes
// to twenty keys (and one key deleted by a tombstone), the cleaner shrinks
// the log while the broker runs, and kcat, franz-go and sarama all read the
// cleaned log from the start: the same records, each at the offset it was
// produced at, the last value of every key, the tombstone and not the value
// it deleted. This is the batch shapes the cleaner writes (records dropped
// from a batch, a batch lowered over the gap before it, batches of no
// records) against the clients' parsers.
func TestCompactedTopicEveryClient(t *testing.T) {
	kcatPath(t)
	b := startBroker(t, t.TempDir(), func(c *broker.Config) { c.CleanerBackoff = 50 * time.Millisecond })
	const topic = "compacted"
	createTopic(t, b.Addr(), topic, 1, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"})
	cl := newClient(t, b.Addr(), kgo.ProducerLinger(0))
	ctx := testContext(t)
	producedAt := map[string]int64{} // value -> offset
	last := map[string]string{}      // key -> last value ("" for the tombstone)
	for round := range 10 {
		var recs []*kgo.Record
		for k := range 20 {
			key := fmt.Sprintf("k%02d", k)
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(fmt.Sprintf("%s-r%d", key, round))})
		}
		switch round {
		case 0:
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("gone"), Value: []byte("gone-r0")})
		case 1:
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("gone")}) // a tombstone
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce round %d: %v", round, err)
		}
		for _, r := range res {
			producedAt[string(r.Record.Value)] = r.Record.Offset
			last[string(r.Record.Key)] = string(r.Record.Value)
		}
	}
	const produced = 10*20 + 2
	p, err := b.Node().Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := b.Node().ReplicaLog(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	// Until a pass has cleaned everything it could: a later pass would
	// otherwise clean more between the clients' reads.
	eventually(t, waitTimeout, "the cleaner to shrink the log and leave nothing dirty", func() (bool, string) {
		st := p.Stats()
		size = st.Size
		dirty, total := l.CleanableRatio(st.HighWatermark)
		return st.Size > 0 && st.Size*2 < int64(produced*30) && dirty == 0,
			fmt.Sprintf("%d bytes, %d of %d cleanable bytes dirty", st.Size, dirty, total)
	})

	kc := consumeKcat(t, b.Addr(), topic, -1)
	if len(kc) >= produced || len(kc) < len(last) {
		t.Fatalf("kcat read %d records of a cleaned log (%d bytes) of %d produced over %d keys", len(kc), size, produced, len(last))
	}
	check := func(who string, got []msg) {
		t.Helper()
		seen := map[string]string{}
		for i, m := range got {
			if want, ok := producedAt[m.Value]; m.Value != "" && (!ok || want != m.Offset) {
				t.Fatalf("%s: record %d %s at offset %d, produced at %d (%v)", who, i, m, m.Offset, want, ok)
			}
			if i > 0 && m.Offset <= got[i-1].Offset {
				t.Fatalf("%s: offsets %d then %d", who, got[i-1].Offset, m.Offset)
			}
			if m.Key == "gone" && m.Value != "" {
				t.Fatalf("%s: the value the tombstone deleted is still there (%s)", who, m)
			}
			seen[m.Key] = m.Value
		}
		if !maps.Equal(seen, last) {
			t.Fatalf("%s: last values %v, want %v", who, seen, last)
		}
	}
	t.Logf("%d records produced, %d left after cleaning (%d bytes)", produced, len(kc), size)
	check("kcat", kc)
	check("franz-go", franzMessages(consumeFranz(t, b.Addr(), topic, len(kc))))
	check("sarama", consumeSarama(t, b.Addr(), topic, len(kc)))
}

// TestCompactionUnderProduceLoad: three idempotent producers write keyed
// records (a tombstone now and then) over 300 keys to a compacted topic with
// 4 KiB segments while a cleaner that looks every 20 ms cleans it; they go
// on until the cleaner has cleaned part of the log under them, and 400
// records each after that. Once the cleaner has nothing dirty left, a
// consumer reading from the start gets every record at the offset it was
// acknowledged at, the latest value of every key (by offset), and below the
// active segment (all cleaned) nothing that a later record of its key
// superseded.
func TestCompactionUnderProduceLoad(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *broker.Config) { c.CleanerBackoff = 20 * time.Millisecond })
	const topic = "compacted-load"
	createTopic(t, b.Addr(), topic, 1, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"})
	l, err := b.Node().ReplicaLog(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	type acked struct {
		key, value string
		tombstone  bool
	}
	var (
		mu      sync.Mutex
		byOff   = map[int64]acked{}
		cleaned atomic.Bool // the cleaner has cleaned part of the log under the producers
		wg      sync.WaitGroup
		errs    = make(chan error, 3)
	)
	for p := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond))
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			after := 0
			for i := 0; after < 400; i++ {
				var recs []*kgo.Record
				for j := range 10 {
					n := i*10 + j
					r := &kgo.Record{Key: fmt.Appendf(nil, "k%03d", (n*7+p*101)%300), Value: fmt.Appendf(nil, "p%d-%d", p, n)}
					if n%37 == 0 {
						r.Value = nil // a tombstone
					}
					recs = append(recs, r)
				}
				res := cl.ProduceSync(ctx, recs...)
				if err := res.FirstErr(); err != nil {
					errs <- fmt.Errorf("producer %d: %w", p, err)
					return
				}
				mu.Lock()
				for _, r := range res {
					byOff[r.Record.Offset] = acked{string(r.Record.Key), string(r.Record.Value), r.Record.Value == nil}
				}
				mu.Unlock()
				if cleaned.Load() {
					after += len(recs)
				}
			}
		}()
	}
	var total int64
	eventually(t, waitTimeout, "the cleaner to clean part of the log while the producers write", func() (bool, string) {
		c := l.Cleanable(partlog.CleanCheck{UpTo: partlog.NoLimit})
		total = c.Total
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		return c.Total > c.Dirty, fmt.Sprintf("%d of %d cleanable bytes dirty", c.Dirty, c.Total)
	})
	cleaned.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	p, err := b.Node().Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	hw := p.Stats().HighWatermark
	if int64(len(byOff)) != hw {
		t.Fatalf("%d records acknowledged, high watermark %d", len(byOff), hw)
	}
	eventually(t, waitTimeout, "the cleaner to leave nothing dirty", func() (bool, string) {
		c := l.Cleanable(partlog.CleanCheck{UpTo: p.Stats().HighWatermark})
		return c.Dirty == 0, fmt.Sprintf("%d of %d cleanable bytes dirty", c.Dirty, c.Total)
	})
	segs := l.Segments()
	active := segs[len(segs)-1].Base // below it, everything is cleaned
	latest := map[string]int64{}     // key -> offset of its latest record
	latestBelow := map[string]int64{}
	for off := range hw {
		a := byOff[off]
		latest[a.key] = max(latest[a.key], off)
		if off < active {
			latestBelow[a.key] = max(latestBelow[a.key], off)
		}
	}

	cl := newClient(t, b.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int64{}
	last := int64(-1)
	for last < hw-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed up to %d of %d before the deadline", last, hw)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		for _, r := range fs.Records() {
			a, ok := byOff[r.Offset]
			switch {
			case r.Offset <= last:
				t.Fatalf("offset %d after %d", r.Offset, last)
			case !ok || a.key != string(r.Key) || a.value != string(r.Value) || a.tombstone != (r.Value == nil):
				t.Fatalf("offset %d holds %q=%q, %+v was acknowledged there", r.Offset, r.Key, r.Value, a)
			case r.Offset < active && latestBelow[a.key] != r.Offset:
				t.Fatalf("offset %d (%s) below the active segment at %d was superseded at %d, yet is still there",
					r.Offset, a.key, active, latestBelow[a.key])
			}
			seen[a.key] = r.Offset
			last = r.Offset
		}
	}
	if !maps.Equal(seen, latest) {
		t.Fatalf("the latest records read are not the latest acknowledged: %d keys read, %d written", len(seen), len(latest))
	}
	st := p.Stats()
	t.Logf("%d records over %d keys acknowledged; %d bytes left (%d cleanable when the producers were told to stop); active segment from %d",
		hw, len(latest), st.Size, total, active)
}
