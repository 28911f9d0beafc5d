package mirror_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/mirror"
)

// waitTimeout bounds each wait for the mirror to get somewhere; generous
// for a 2-core machine shared with other test binaries.
const waitTimeout = 60 * time.Second

// testConfig is a mirror of source to target tuned for tests: topics are
// noticed, positions committed and failures retried within milliseconds.
func testConfig(t testing.TB, source, target, topics string) mirror.Config {
	return mirror.Config{
		Source: []string{source}, Target: []string{target}, Topics: topics,
		RefreshInterval: 100 * time.Millisecond, CommitInterval: 50 * time.Millisecond,
		BackoffMin: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// runMirror runs a mirror until the returned stop is called (or the test
// ends); stop waits for Run to return and fails the test on its error.
func runMirror(t testing.TB, cfg mirror.Config) (*mirror.Mirror, func()) {
	t.Helper()
	m, err := mirror.New(cfg)
	if err != nil {
		t.Fatalf("mirror.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("mirror.Run: %v", err)
			}
			m.Close()
		})
	}
	t.Cleanup(stop)
	return m, stop
}

// waitFor polls cond every 10 ms until it holds or waitTimeout passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// produce writes n records to each of partitions [0, parts) of topic: key
// "p/i", value "topic p i", a header, and a distinct timestamp.
func produce(t testing.TB, addr, topic string, parts int32, from, n int) {
	t.Helper()
	cl := brokertest.Client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := range parts {
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p,
				Key:       fmt.Appendf(nil, "%d/%d", p, i),
				Value:     fmt.Appendf(nil, "%s %d %d", topic, p, i),
				Headers:   []kgo.RecordHeader{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}},
				Timestamp: time.UnixMilli(1_600_000_000_000 + int64(i)),
			})
		}
	}
	if err := cl.ProduceSync(brokertest.Context(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// readAll reads every record of topic's partitions [0, parts) up to their
// current ends.
func readAll(t testing.TB, addr, topic string, parts int32) map[int32][]*kgo.Record {
	t.Helper()
	ends := brokertest.ListOffsets(t, addr, topic, parts, -1)
	out := make(map[int32][]*kgo.Record)
	at := map[int32]kgo.Offset{}
	left := 0
	for p := range parts {
		if ends[p] > 0 {
			at[p] = kgo.NewOffset().AtStart()
			left++
		}
	}
	if left == 0 {
		return out
	}
	cl := brokertest.Client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: at}), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	ctx := brokertest.Context(t)
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d partitions short of their end", topic, left)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("read %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			out[r.Partition] = append(out[r.Partition], r)
			if r.Offset == ends[r.Partition]-1 {
				left--
			}
		})
	}
	return out
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

// TestMirrorCopiesTopics mirrors a topic with its partitions, configs,
// keys, headers and timestamps; picks up a new topic and added partitions
// while running; commits its positions; and after a restart copies only
// what is new.
func TestMirrorCopiesTopics(t *testing.T) { testMirrorCopiesTopics(t, false) }

// TestMirrorCopiesTopicsForwarded is TestMirrorCopiesTopics with
// Config.Forward: the batches go byte for byte, the records come out the
// same.
func TestMirrorCopiesTopicsForwarded(t *testing.T) { testMirrorCopiesTopics(t, true) }

func testMirrorCopiesTopics(t *testing.T, forward bool) {
	src := brokertest.Start(t, "").Addr()
	dst := brokertest.Start(t, "").Addr()
	brokertest.CreateTopic(t, src, "events", 3, map[string]string{"retention.ms": "123456789"})
	brokertest.CreateTopic(t, src, "other", 1, nil) // not matched
	produce(t, src, "events", 3, 0, 200)
	produce(t, src, "other", 1, 0, 5)

	cfg := testConfig(t, src, dst, "events|added")
	cfg.SourceAlias = "dc1"
	cfg.Forward = forward
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	_, stop := runMirror(t, cfg)
	waitFor(t, "dc1.events mirrored", func() bool { return mirroredAll(t, dst, "dc1.events", 3, 200) })
	waitFor(t, "the metrics counting 600 records", func() bool { return metricSum(t, reg, "weir_mirror_records_total") == 600 })
	if lag := metricSum(t, reg, "weir_mirror_lag_records"); lag != 0 {
		t.Errorf("weir_mirror_lag_records sums to %v once caught up, want 0", lag)
	}

	got := readAll(t, dst, "dc1.events", 3)
	want := readAll(t, src, "events", 3)
	for p := range int32(3) {
		if len(got[p]) != len(want[p]) {
			t.Fatalf("partition %d: %d records mirrored, want %d", p, len(got[p]), len(want[p]))
		}
		for i, w := range want[p] {
			g := got[p][i]
			if string(g.Key) != string(w.Key) || string(g.Value) != string(w.Value) || !g.Timestamp.Equal(w.Timestamp) ||
				len(g.Headers) != 1 || g.Headers[0].Key != w.Headers[0].Key || string(g.Headers[0].Value) != string(w.Headers[0].Value) {
				t.Fatalf("partition %d record %d: got %s=%s %v %v, want %s=%s %v %v", p, i,
					g.Key, g.Value, g.Timestamp, g.Headers, w.Key, w.Value, w.Timestamp, w.Headers)
			}
		}
	}
	adm := kadm.NewClient(brokertest.Client(t, dst))
	rcs, err := adm.DescribeTopicConfigs(brokertest.Context(t), "dc1.events")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rcs.On("dc1.events", nil); err != nil {
		t.Fatal(err)
	} else if v := configValue(c, "retention.ms"); v != "123456789" {
		t.Errorf("target retention.ms = %q, want the source's 123456789", v)
	}
	if topics, _ := adm.ListTopics(brokertest.Context(t)); topics.Has("other") || topics.Has("dc1.other") {
		t.Error("a topic the expression does not match was mirrored")
	}

	// New partitions and a new topic, while running.
	sadm := kadm.NewClient(brokertest.Client(t, src))
	if _, err := sadm.UpdatePartitions(brokertest.Context(t), 5, "events"); err != nil {
		t.Fatal(err)
	}
	brokertest.CreateTopic(t, src, "added", 2, nil)
	produce(t, src, "events", 5, 200, 50)
	produce(t, src, "added", 2, 0, 30)
	waitFor(t, "added partitions mirrored", func() bool { return mirroredAll(t, dst, "dc1.events", 5, 250, 250, 250, 50, 50) })
	waitFor(t, "new topic mirrored", func() bool { return mirroredAll(t, dst, "dc1.added", 2, 30) })
	stop()

	// The positions are committed; a restart copies only new records.
	pos := brokertest.CommittedOffsets(t, dst, mirror.DefaultName, "dc1.events", 5)
	if ends := brokertest.ListOffsets(t, src, "events", 5, -1); fmt.Sprint(pos) != fmt.Sprint(ends) {
		t.Fatalf("committed positions %v, want the source ends %v", pos, ends)
	}
	produce(t, src, "events", 5, 250, 10)
	_, stop = runMirror(t, cfg)
	waitFor(t, "records after the restart mirrored", func() bool { return mirroredAll(t, dst, "dc1.events", 5, 260, 260, 260, 60, 60) })
	stop()
	if ends := brokertest.ListOffsets(t, dst, "dc1.events", 5, -1); fmt.Sprint(ends) != "[260 260 260 60 60]" {
		t.Errorf("target ends %v after the restart: records copied twice", ends)
	}
}

// mirroredAll reports whether target topic's partitions [0, parts) hold
// want records each (one want for all, or one per partition).
func mirroredAll(t testing.TB, addr, topic string, parts int32, want ...int64) bool {
	adm := kadm.NewClient(brokertest.Client(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		return false
	}
	for p := range parts {
		w := want[0]
		if len(want) > 1 {
			w = want[p]
		}
		o, ok := ends.Lookup(topic, p)
		if !ok || o.Offset != w {
			return false
		}
	}
	return true
}

// metricSum gathers reg and sums the samples of metric name.
func metricSum(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

func configValue(rc kadm.ResourceConfig, key string) string {
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue()
		}
	}
	return ""
}

// TestMirrorTranslatesGroups: a group consumed part of a topic on the
// source; the target's copy sits at other offsets (the target topic held
// records before mirroring began); the translated offset makes a consumer
// on the target re-read fewer than the sync interval and skip nothing, and
// SyncGroups commits it into the target's group.
func TestMirrorTranslatesGroups(t *testing.T) {
	const every, n, consumed = 20, 500, 337
	src := brokertest.Start(t, "").Addr()
	dst := brokertest.Start(t, "").Addr()
	brokertest.CreateTopic(t, src, "orders", 2, nil)
	brokertest.CreateTopic(t, dst, "orders", 2, nil)
	produce(t, dst, "orders", 2, -1000, 77) // offsets differ between the clusters
	produce(t, src, "orders", 2, 0, n)

	group := "billing"
	commit := kadm.Offsets{}
	commit.AddOffset("orders", 0, consumed, -1)
	commit.AddOffset("orders", 1, 0, -1)
	if _, err := kadm.NewClient(brokertest.Client(t, src)).CommitOffsets(brokertest.Context(t), group, commit); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, src, dst, "orders")
	cfg.OffsetSyncInterval = every
	cfg.SyncGroups = "bill.*"
	cfg.SyncGroupsInterval = 100 * time.Millisecond
	_, stop := runMirror(t, cfg)
	waitFor(t, "orders mirrored", func() bool { return mirroredAll(t, dst, "orders", 2, 77+n) })
	waitFor(t, "group translated on the target", func() bool {
		return brokertest.CommittedOffsets(t, dst, group, "orders", 2)[0] >= 77
	})
	stop()

	tgtCl := brokertest.Client(t, dst)
	syncs, err := mirror.ReadSyncs(brokertest.Context(t), tgtCl, cfg.SyncTopic())
	if err != nil {
		t.Fatal(err)
	}
	if syncs.Len() < 2*n/every {
		t.Errorf("%d offset syncs for %d records every %d, want at least %d", syncs.Len(), 2*n, every, 2*n/every)
	}
	tr, err := mirror.TranslateGroup(brokertest.Context(t), cfg, brokertest.Client(t, src), syncs, group)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Offsets) != 2 || !tr.Offsets[0].OK || !tr.Offsets[1].OK {
		t.Fatalf("translation %+v: want both partitions translated", tr)
	}
	at := tr.Offsets[0].Target
	if got := brokertest.CommittedOffsets(t, dst, group, "orders", 2); got[0] != at || got[1] != tr.Offsets[1].Target {
		t.Errorf("target group committed %v, want the translation %d, %d", got, at, tr.Offsets[1].Target)
	}
	// Read partition 0 of the target from the translated offset.
	recs := readAll(t, dst, "orders", 1)[0]
	var first int = -1
	for _, r := range recs {
		if r.Offset == at {
			fmt.Sscanf(string(r.Headers[0].Value), "%d", &first)
		}
	}
	if first < 0 {
		t.Fatalf("no target record at translated offset %d", at)
	}
	if first > consumed {
		t.Errorf("translated offset %d starts at source record %d: skips records from %d", at, first, consumed)
	}
	if consumed-first >= every {
		t.Errorf("translated offset %d starts at source record %d: re-reads %d records, want < %d", at, first, consumed-first, every)
	}
	if tr.Offsets[1].Target != 77 {
		t.Errorf("partition 1 (committed at 0) translated to %d, want 77, the first mirrored record", tr.Offsets[1].Target)
	}
}

// TestMirrorRefusedRecordRetried: the target refuses a record too large
// for its topic; the mirror reports it with topic and partition, copies the
// other partition, keeps the refused partition's position before the
// record, and finishes once the target accepts it.
func TestMirrorRefusedRecordRetried(t *testing.T) {
	src := brokertest.Start(t, "").Addr()
	dst := brokertest.Start(t, "").Addr()
	brokertest.CreateTopic(t, src, "big", 2, nil)
	brokertest.CreateTopic(t, dst, "big", 2, map[string]string{"max.message.bytes": "2000"})
	produce(t, src, "big", 2, 0, 10)
	cl := brokertest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(brokertest.Context(t), &kgo.Record{Topic: "big", Partition: 0, Value: make([]byte, 10_000)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produce(t, src, "big", 2, 10, 10)

	m, stop := runMirror(t, testConfig(t, src, dst, "big"))
	waitFor(t, "partition 1 mirrored", func() bool { return mirroredAll(t, dst, "big", 2, 0, 20) })
	// The batch holding records 0..20 is refused; sent again one by one,
	// records 0..9 get through, and only record 10 is refused.
	var st mirror.PartitionStatus
	waitFor(t, "the refusal of record 10 reported", func() bool {
		st = m.Status()[0]
		return st.Next == 10 && st.Retrying
	})
	if !strings.Contains(st.LastError, "big/0 offset 10") || !strings.Contains(st.LastError, "MESSAGE_TOO_LARGE") {
		t.Errorf("last error %q: want the topic, partition, offset and the target's error", st.LastError)
	}
	waitFor(t, "position 10 committed", func() bool {
		return brokertest.CommittedOffsets(t, dst, mirror.DefaultName, "big", 2)[0] == 10
	})
	if got := brokertest.CommittedOffsets(t, dst, mirror.DefaultName, "big", 2)[0]; got != 10 {
		t.Fatalf("committed %d past the refused record", got)
	}
	adm := kadm.NewClient(brokertest.Client(t, dst))
	resp, err := adm.AlterTopicConfigs(brokertest.Context(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("100000")}}, "big")
	if err == nil {
		_, err = resp.On("big", nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "partition 0 mirrored after the target accepted", func() bool {
		return brokertest.CommittedOffsets(t, dst, mirror.DefaultName, "big", 2)[0] == 21
	})
	stop()
	recs := readAll(t, dst, "big", 1)[0]
	seen := map[string]bool{}
	for _, r := range recs {
		seen[string(r.Key)+"|"+fmt.Sprint(len(r.Value))] = true
	}
	if len(recs) < 21 || !seen["|10000"] {
		t.Errorf("target partition 0 holds %d records (big one: %v), want all 21", len(recs), seen["|10000"])
	}
}

// TestMirrorSourceTopicDeleted: a source topic deleted while mirroring is
// dropped, and the others go on.
func TestMirrorSourceTopicDeleted(t *testing.T) {
	src := brokertest.Start(t, "").Addr()
	dst := brokertest.Start(t, "").Addr()
	brokertest.CreateTopic(t, src, "gone", 1, nil)
	brokertest.CreateTopic(t, src, "stays", 1, nil)
	produce(t, src, "gone", 1, 0, 10)
	produce(t, src, "stays", 1, 0, 10)
	m, _ := runMirror(t, testConfig(t, src, dst, "gone|stays"))
	waitFor(t, "both mirrored", func() bool {
		return mirroredAll(t, dst, "gone", 1, 10) && mirroredAll(t, dst, "stays", 1, 10)
	})
	if _, err := kadm.NewClient(brokertest.Client(t, src)).DeleteTopics(brokertest.Context(t), "gone"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted topic dropped", func() bool {
		for _, s := range m.Status() {
			if s.Topic == "gone" {
				return false
			}
		}
		return true
	})
	produce(t, src, "stays", 1, 10, 10)
	waitFor(t, "the other topic still mirrored", func() bool { return mirroredAll(t, dst, "stays", 1, 20) })
}

// quietLogger logs warnings to the test's log, which a benchmark prints
// after its result line rather than into it.
func quietLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
