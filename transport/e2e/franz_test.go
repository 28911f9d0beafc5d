package e2e_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/transport/broker"
)

// franzRecords returns records that exercise the encoding: nil and empty
// keys and values, headers, binary bytes, and one value large enough to span
// many index intervals.
func franzRecords(prefix string, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		r := &kgo.Record{
			Key:   fmt.Appendf(nil, "%s-%d", prefix, i),
			Value: bytes.Repeat(fmt.Appendf(nil, "%s value %d ", prefix, i), 1+i%7),
		}
		switch i % 10 {
		case 1:
			r.Key = nil
		case 2:
			r.Value = nil
		case 3:
			r.Value = []byte{}
		case 4:
			r.Headers = []kgo.RecordHeader{{Key: "h1", Value: []byte("v1")}, {Key: "empty"}, {Key: "bin", Value: []byte{0, 1, 0xff}}}
		case 5:
			r.Value = append([]byte{0, 0xff, 0x80, '\n', '\t'}, r.Value...)
		}
		recs[i] = r
	}
	recs[n/2].Value = bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16) // 64 KiB
	return recs
}

// recordKey identifies a record's content for comparison across clients.
func recordKey(r *kgo.Record) string {
	return fmt.Sprintf("%q|%q|%v|%v|%v", r.Key, r.Value, r.Key == nil, r.Value == nil, r.Headers)
}

// TestFranzCodecs: franz-go produces with every codec to a 3-partition topic
// and reads back every record intact, in order per partition, from a batch
// stored with the codec it was produced with.
func TestFranzCodecs(t *testing.T) {
	b := startBroker(t, t.TempDir())
	for _, codec := range codecs {
		t.Run(codec.Name, func(t *testing.T) {
			topic := "franz-codec-" + codec.Name
			createTopic(t, b.Addr(), topic, 3, nil)
			want := franzRecords(topic, 300)
			cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(franzCodec(t, codec.Name)))
			if err := cl.ProduceSync(testContext(t), want...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			// What was acknowledged, by partition and offset.
			byOffset := make(map[[2]int64]*kgo.Record)
			for _, r := range want {
				byOffset[[2]int64{int64(r.Partition), r.Offset}] = r
			}
			got := consumeFranz(t, b.Addr(), topic, len(want))
			last := map[int32]int64{}
			for _, r := range got {
				w, ok := byOffset[[2]int64{int64(r.Partition), r.Offset}]
				if !ok {
					t.Fatalf("consumed %s/%d@%d, which no produce was acknowledged at", topic, r.Partition, r.Offset)
				}
				if recordKey(r) != recordKey(w) {
					t.Fatalf("%s/%d@%d: got %s, want %s", topic, r.Partition, r.Offset, recordKey(r), recordKey(w))
				}
				if prev, ok := last[r.Partition]; ok && r.Offset != prev+1 {
					t.Errorf("%s/%d: offset %d after %d", topic, r.Partition, r.Offset, prev)
				}
				last[r.Partition] = r.Offset
				if r.Attrs.CompressionType() != codec.ID {
					t.Fatalf("%s/%d@%d stored with codec %d, want %d", topic, r.Partition, r.Offset, r.Attrs.CompressionType(), codec.ID)
				}
			}
		})
	}
}

// TestFranzAcks: acks 0, 1 and all each get every record stored (acks=0 has
// no response, so the test waits for the records to be readable).
func TestFranzAcks(t *testing.T) {
	b := startBroker(t, t.TempDir())
	for _, tc := range []struct {
		name string
		acks kgo.Acks
	}{{"0", kgo.NoAck()}, {"1", kgo.LeaderAck()}, {"all", kgo.AllISRAcks()}} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "franz-acks-" + tc.name
			createTopic(t, b.Addr(), topic, 1, nil)
			opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(tc.acks)}
			if tc.name != "all" {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
			cl := newClient(t, b.Addr(), opts...)
			want := textMessages(topic, 200)
			for _, m := range want {
				cl.Produce(testContext(t), &kgo.Record{Key: []byte(m.Key), Value: []byte(m.Value)}, func(r *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
			}
			if err := cl.Flush(testContext(t)); err != nil {
				t.Fatal(err)
			}
			sameMessages(t, "acks="+tc.name, franzMessages(consumeFranz(t, b.Addr(), topic, len(want))), want)
		})
	}
}

// TestFranzIdempotentProducer: franz-go's idempotent producer (its default
// when the broker serves InitProducerId) writes every record exactly once,
// in order, from many goroutines at once, with a producer id on every batch.
func TestFranzIdempotentProducer(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic, partitions, workers, perWorker = "franz-idempotent", 4, 8, 250
	createTopic(t, b.Addr(), topic, partitions, nil)
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				r := &kgo.Record{Partition: int32(w % partitions), Key: fmt.Appendf(nil, "w%d", w), Value: fmt.Appendf(nil, "w%d-%05d", w, i)}
				cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
			}
		})
	}
	wg.Wait()
	if err := cl.Flush(testContext(t)); err != nil {
		t.Fatal(err)
	}
	got := consumeFranz(t, b.Addr(), topic, workers*perWorker)
	next := make(map[string]int)
	producerIDs := make(map[int64]bool)
	for _, r := range got {
		if r.ProducerID < 0 {
			t.Fatalf("%s/%d@%d has producer id %d: the producer was not idempotent", topic, r.Partition, r.Offset, r.ProducerID)
		}
		producerIDs[r.ProducerID] = true
		want := fmt.Sprintf("%s-%05d", r.Key, next[string(r.Key)])
		if string(r.Value) != want {
			t.Fatalf("%s/%d@%d = %q, want %q (lost, duplicated or reordered)", topic, r.Partition, r.Offset, r.Value, want)
		}
		next[string(r.Key)]++
	}
	if len(producerIDs) != 1 {
		t.Errorf("records carry producer ids %v, want one", producerIDs)
	}
	if ends := endOffsets(t, b.Addr(), topic, partitions); !slices.Equal(ends, []int64{500, 500, 500, 500}) {
		t.Errorf("end offsets %v, want 500 each (nothing appended twice)", ends)
	}
}

// groupMember is one franz-go consumer group member that records what it is
// assigned and what it consumes, committing after every poll.
type groupMember struct {
	name string
	cl   *kgo.Client

	mu       sync.Mutex
	assigned map[int32]bool
	consumed map[string]int // record value -> times consumed

	stop chan struct{}
	done chan struct{}
}

func startGroupMember(t *testing.T, addr, group, topic, name string) *groupMember {
	m := &groupMember{name: name, assigned: map[int32]bool{}, consumed: map[string]int{},
		stop: make(chan struct{}), done: make(chan struct{})}
	m.cl = newClient(t, addr,
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(3*time.Second),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range a[topic] {
				m.assigned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			// Commit what was consumed before giving partitions away.
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("%s: commit on revoke: %v", name, err)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range r[topic] {
				delete(m.assigned, p)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range l[topic] {
				delete(m.assigned, p)
			}
		}),
	)
	go func() {
		defer close(m.done)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-m.stop
			cancel()
		}()
		for ctx.Err() == nil {
			fs := m.cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return // the test ended early and closed the client
			}
			fs.EachError(func(topic string, p int32, err error) {
				if ctx.Err() == nil {
					t.Logf("%s: fetch %s/%d: %v", name, topic, p, err)
				}
			})
			m.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { m.consumed[string(r.Value)]++ })
			m.mu.Unlock()
			if ctx.Err() == nil {
				if err := m.cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
					t.Logf("%s: commit: %v", name, err)
				}
			}
		}
	}()
	return m
}

// leave stops polling, commits and leaves the group (Close sends LeaveGroup).
func (m *groupMember) leave(t *testing.T) {
	close(m.stop)
	<-m.done
	if err := m.cl.CommitUncommittedOffsets(testContext(t)); err != nil {
		t.Errorf("%s: final commit: %v", m.name, err)
	}
	m.cl.Close()
	m.mu.Lock()
	clear(m.assigned)
	m.mu.Unlock()
}

func (m *groupMember) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for p := range m.assigned {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

func (m *groupMember) count(value string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.consumed[value]
}

func (m *groupMember) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.consumed {
		n += c
	}
	return n
}

// waitBalanced waits until members own every partition of the topic between
// them, each the same number (give or take one), none twice.
func waitBalanced(t *testing.T, partitions int32, members ...*groupMember) {
	t.Helper()
	var last [][]int32
	waitFor(t, fmt.Sprintf("%d members to share %d partitions", len(members), partitions), func() bool {
		last = last[:0]
		owned := make(map[int32]bool)
		for _, m := range members {
			ps := m.partitions()
			last = append(last, ps)
			if n := int32(len(ps)); n < partitions/int32(len(members)) || n > (partitions+int32(len(members))-1)/int32(len(members)) {
				return false
			}
			for _, p := range ps {
				if owned[p] {
					return false
				}
				owned[p] = true
			}
		}
		return int32(len(owned)) == partitions
	})
	t.Logf("assignment: %v", last)
}

// produceValues produces one record per value, spread over the partitions by
// key, and waits for the acks.
func produceValues(t *testing.T, cl *kgo.Client, topic string, values []string) {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}
	}
	if err := cl.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func waitConsumed(t *testing.T, values []string, members ...*groupMember) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d records to be consumed", len(values)), func() bool {
		for _, v := range values {
			n := 0
			for _, m := range members {
				n += m.count(v)
			}
			if n == 0 {
				return false
			}
		}
		return true
	})
}

func batchValues(batch string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", batch, i)
	}
	return out
}

// TestFranzConsumerGroup: three franz-go members share six partitions; one
// leaves and the other two take its partitions; it rejoins and the six are
// shared by three again. Every record is consumed at each stage, by the
// members that own partitions then, and the committed offsets end at the
// high watermarks.
func TestFranzConsumerGroup(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic, group, partitions = "franz-group", "franz-group-g", 6
	createTopic(t, b.Addr(), topic, partitions, nil)
	producer := newClient(t, b.Addr())

	a := startGroupMember(t, b.Addr(), group, topic, "a")
	bm := startGroupMember(t, b.Addr(), group, topic, "b")
	c := startGroupMember(t, b.Addr(), group, topic, "c")
	waitBalanced(t, partitions, a, bm, c)
	first := batchValues("first", 300)
	produceValues(t, producer, topic, first)
	waitConsumed(t, first, a, bm, c)
	for _, m := range []*groupMember{a, bm, c} {
		if m.total() == 0 {
			t.Errorf("member %s consumed nothing with partitions %v", m.name, m.partitions())
		}
	}

	c.leave(t)
	cTotal := c.total()
	waitBalanced(t, partitions, a, bm)
	second := batchValues("second", 300)
	produceValues(t, producer, topic, second)
	waitConsumed(t, second, a, bm)
	if c.total() != cTotal {
		t.Errorf("member c consumed after leaving")
	}

	c2 := startGroupMember(t, b.Addr(), group, topic, "c-rejoined")
	waitBalanced(t, partitions, a, bm, c2)
	third := batchValues("third", 300)
	produceValues(t, producer, topic, third)
	waitConsumed(t, third, a, bm, c2)
	if c2.total() == 0 {
		t.Errorf("the rejoined member consumed nothing with partitions %v", c2.partitions())
	}

	for _, m := range []*groupMember{a, bm, c2} {
		m.leave(t)
	}
	ends := endOffsets(t, b.Addr(), topic, partitions)
	if committed := committedOffsets(t, b.Addr(), group, topic, partitions); !slices.Equal(committed, ends) {
		t.Errorf("committed offsets %v, want the end offsets %v", committed, ends)
	}
}

// TestFranzCommittedOffsetsSurviveRestart: a group commits, the broker shuts
// down (writing its clean-shutdown markers) and starts again on the same
// data directory; the group's offsets, the topic and its records are still
// there, the group lists and describes as an Empty consumer group, and a
// new member resumes exactly after what was committed.
func TestFranzCommittedOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	const topic, group, partitions = "franz-restart", "franz-restart-g", 3
	createTopic(t, b.Addr(), topic, partitions, nil)
	producer := newClient(t, b.Addr())
	first := batchValues("before", 90)
	produceValues(t, producer, topic, first)

	m := startGroupMember(t, b.Addr(), group, topic, "m")
	waitConsumed(t, first, m)
	m.leave(t)
	producer.Close()
	ends := endOffsets(t, b.Addr(), topic, partitions)
	committed := committedOffsets(t, b.Addr(), group, topic, partitions)
	if !slices.Equal(committed, ends) {
		t.Fatalf("committed %v before the restart, want the end offsets %v", committed, ends)
	}

	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for p := range partitions {
		marker := filepath.Join(dir, fmt.Sprintf("%s-%d", topic, p), "clean-shutdown")
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("after a graceful close: %v", err)
		}
	}

	b2 := startBroker(t, dir)
	if got := endOffsets(t, b2.Addr(), topic, partitions); !slices.Equal(got, ends) {
		t.Errorf("end offsets after restart %v, want %v", got, ends)
	}
	if got := committedOffsets(t, b2.Addr(), group, topic, partitions); !slices.Equal(got, committed) {
		t.Errorf("committed offsets after restart %v, want %v", got, committed)
	}
	// The group reads back as a consumer group (its metadata record), so
	// tools that list consumer groups find it.
	admin := newClient(t, b2.Addr())
	lg, err := kmsg.NewPtrListGroupsRequest().RequestWith(testContext(t), admin)
	if err != nil || lg.ErrorCode != 0 || len(lg.Groups) != 1 || lg.Groups[0].Group != group ||
		lg.Groups[0].ProtocolType != "consumer" || lg.Groups[0].GroupState != "Empty" {
		t.Errorf("ListGroups after restart: %+v, %v; want %s, consumer, Empty", lg, err, group)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{group}
	dgr, err := dg.RequestWith(testContext(t), admin)
	if err != nil || len(dgr.Groups) != 1 || dgr.Groups[0].ProtocolType != "consumer" || dgr.Groups[0].State != "Empty" {
		t.Errorf("DescribeGroups after restart: %+v, %v", dgr, err)
	}
	second := batchValues("after", 60)
	produceValues(t, newClient(t, b2.Addr()), topic, second)
	m2 := startGroupMember(t, b2.Addr(), group, topic, "m2")
	waitConsumed(t, second, m2)
	m2.leave(t)
	for _, v := range first {
		if m2.count(v) != 0 {
			t.Fatalf("after the restart the group re-read %q, committed before it", v)
		}
	}
	if m2.total() != len(second) {
		t.Errorf("after the restart the group consumed %d records, want %d", m2.total(), len(second))
	}
}

// TestFranzReadsOffsetsTopic: committed offsets are records of
// __consumer_offsets in Kafka's formats, which lag tools such as Burrow read
// with Fetch: a plain franz-go consumer reads the topic from the start,
// decodes every record with kmsg's OffsetCommitKey and OffsetCommitValue
// (or GroupMetadataKey and GroupMetadataValue), the last commit of each
// partition is what OffsetFetch answers, and the group's metadata records
// say what it was (Stable with its member, then Empty). The
// topic is internal in Metadata, and clients cannot write to it.
func TestFranzReadsOffsetsTopic(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic, group, partitions = "franz-offsets", "franz-offsets-g", 3
	createTopic(t, b.Addr(), topic, partitions, nil)
	producer := newClient(t, b.Addr())
	values := batchValues("v", 60)
	produceValues(t, producer, topic, values)
	m := startGroupMember(t, b.Addr(), group, topic, "m")
	waitConsumed(t, values, m)
	m.leave(t)
	committed := committedOffsets(t, b.Addr(), group, topic, partitions)

	ctx := testContext(t)
	md := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(offsetsTopic)
	md.Topics = append(md.Topics, rt)
	mdr, err := md.RequestWith(ctx, producer)
	if err != nil || len(mdr.Topics) != 1 || mdr.Topics[0].ErrorCode != 0 || !mdr.Topics[0].IsInternal {
		t.Fatalf("metadata of %s: %+v, %v", offsetsTopic, mdr, err)
	}
	nparts := int32(len(mdr.Topics[0].Partitions))
	ends := endOffsets(t, b.Addr(), offsetsTopic, nparts)
	var total int64
	for _, e := range ends {
		total += e
	}
	if total == 0 {
		t.Fatalf("%s is empty after commits", offsetsTopic)
	}

	offsets := map[int32]kgo.Offset{}
	for p := range nparts {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := newClient(t, b.Addr(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{offsetsTopic: offsets}))
	last := map[int32]int64{} // partition of topic -> last committed offset in the records
	var groupMeta []*kmsg.GroupMetadataValue
	var read int64
	for read < total {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch %s: %v", offsetsTopic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			if len(r.Key) >= 2 && binary.BigEndian.Uint16(r.Key) == 2 { // a group metadata key
				var gk kmsg.GroupMetadataKey
				if err := gk.ReadFrom(r.Key); err != nil {
					t.Fatalf("record %d of %s-%d: group metadata key %x: %v", r.Offset, offsetsTopic, r.Partition, r.Key, err)
				}
				if gk.Group != group {
					return
				}
				var v *kmsg.GroupMetadataValue
				if r.Value != nil {
					v = new(kmsg.GroupMetadataValue)
					if err := v.ReadFrom(r.Value); err != nil || v.Version != 3 {
						t.Fatalf("record %d of %s-%d: group metadata value v%d %x: %v", r.Offset, offsetsTopic, r.Partition, v.Version, r.Value, err)
					}
				}
				groupMeta = append(groupMeta, v)
				return
			}
			var k kmsg.OffsetCommitKey
			if err := k.ReadFrom(r.Key); err != nil || k.Version > 1 {
				t.Fatalf("record %d of %s-%d: key %x is not an offset commit key (%v)", r.Offset, offsetsTopic, r.Partition, r.Key, err)
			}
			if k.Group != group || k.Topic != topic {
				return
			}
			if r.Value == nil {
				delete(last, k.Partition)
				return
			}
			var v kmsg.OffsetCommitValue
			if err := v.ReadFrom(r.Value); err != nil {
				t.Fatalf("record %d of %s-%d: value %x: %v", r.Offset, offsetsTopic, r.Partition, r.Value, err)
			}
			last[k.Partition] = v.Offset
		})
	}
	for p, want := range committed {
		if got, ok := last[int32(p)]; !ok || got != want {
			t.Errorf("partition %d: last commit in %s is %d (found %v), OffsetFetch says %d", p, offsetsTopic, got, ok, want)
		}
	}
	// The group's metadata: Stable with its member once it had its
	// assignment, Empty once the member left.
	n := len(groupMeta)
	switch {
	case n < 2 || groupMeta[0] == nil || groupMeta[n-1] == nil:
		t.Errorf("group metadata records of %s: %+v; want a Stable group, ..., the Empty group", group, groupMeta)
	case groupMeta[0].ProtocolType != "consumer" || groupMeta[0].Protocol == nil || len(groupMeta[0].Members) != 1 ||
		len(groupMeta[0].Members[0].Assignment) == 0 || groupMeta[0].Members[0].SessionTimeoutMillis != 3000:
		t.Errorf("first group metadata record: %+v", groupMeta[0])
	case groupMeta[n-1].ProtocolType != "consumer" || len(groupMeta[n-1].Members) != 0 || groupMeta[n-1].Generation <= groupMeta[0].Generation:
		t.Errorf("last group metadata record: %+v, want the Empty group", groupMeta[n-1])
	}

	res := producer.ProduceSync(ctx, &kgo.Record{Topic: offsetsTopic, Value: []byte("forged")})
	if err := res.FirstErr(); !errors.Is(err, kerr.InvalidTopicException) {
		t.Errorf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", offsetsTopic, err)
	}
}

// TestFranzGroupMembersSurviveRestart: a franz-go member of a Stable group
// carries on across a broker restart without a rebalance, as with Kafka:
// the group's metadata record brings the group back Stable with its member,
// whose heartbeats (same member id and generation) keep its place. Between
// the restart and its first heartbeat, DescribeGroups shows the restored
// group: Stable, protocol type "consumer", its protocol and member.
func TestFranzGroupMembersSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	addr := b.Addr()
	const topic, group, session = "franz-stays", "franz-stays-g", 2 * time.Second
	createTopic(t, addr, topic, 2, nil)
	var assigned, lost atomic.Int32
	member := newClient(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(session), kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { assigned.Add(1) }),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) { lost.Add(1) }))
	ctx, stop := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			member.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { stop(); <-polled })
	describe := func(addr string) kmsg.DescribeGroupsResponseGroup {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(testContext(t), newClient(t, addr))
		if err != nil || len(resp.Groups) != 1 {
			t.Fatalf("DescribeGroups: %+v, %v", resp, err)
		}
		return resp.Groups[0]
	}
	waitFor(t, "the group Stable", func() bool { return describe(addr).State == "Stable" })
	before := describe(addr)

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, dir, func(c *broker.Config) { c.Listen = addr })
	after := describe(b2.Addr())
	if after.State != "Stable" || after.ProtocolType != "consumer" || after.Protocol != before.Protocol ||
		len(after.Members) != 1 || after.Members[0].MemberID != before.Members[0].MemberID ||
		!bytes.Equal(after.Members[0].MemberAssignment, before.Members[0].MemberAssignment) {
		t.Fatalf("after the restart the group is %+v, want it as before: %+v", after, before)
	}
	// Watched for two session timeouts: had its heartbeats not counted,
	// the restored member would have been removed and the group
	// rebalanced.
	memberID, gen := member.GroupMetadata()
	watchUntil := time.Now().Add(2 * session)
	for time.Now().Before(watchUntil) {
		d := describe(b2.Addr())
		if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != memberID {
			t.Fatalf("group after the restart: %+v", d)
		}
	}
	if id, g := member.GroupMetadata(); id != memberID || g != gen {
		t.Errorf("member %s generation %d after the restart, was %s %d", id, g, memberID, gen)
	}
	if a, l := assigned.Load(), lost.Load(); a != 1 || l != 0 {
		t.Errorf("%d assignments and %d losses across the restart, want 1 and 0 (no rebalance)", a, l)
	}
}
