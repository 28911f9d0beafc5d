package e2e_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
