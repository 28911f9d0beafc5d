package transport

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

// tracker848 watches the members of a KIP-848 group from their callbacks:
// who owns which partition (never two members at once), and every record
// consumed (each at most once, by the partition's owner).
type tracker848 struct {
	mu       sync.Mutex
	owner    map[int32]string
	seen     map[string]string // "p@offset" -> member
	problems []string
}

func (tr *tracker848) problem(f string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.problems = append(tr.problems, fmt.Sprintf(f, args...))
}

func (tr *tracker848) assign(member string, ps []int32) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, p := range ps {
		if o, ok := tr.owner[p]; ok && o != member {
			tr.problems = append(tr.problems, fmt.Sprintf("partition %d assigned to %s while %s owns it", p, member, o))
		}
		tr.owner[p] = member
	}
}

func (tr *tracker848) release(member string, ps []int32) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, p := range ps {
		if tr.owner[p] == member {
			delete(tr.owner, p)
		}
	}
}

func (tr *tracker848) record(member string, r *kgo.Record) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if o := tr.owner[r.Partition]; o != member {
		tr.problems = append(tr.problems, fmt.Sprintf("%s consumed partition %d, owned by %q", member, r.Partition, o))
	}
	k := fmt.Sprintf("%d@%d", r.Partition, r.Offset)
	if o, dup := tr.seen[k]; dup {
		tr.problems = append(tr.problems, fmt.Sprintf("record %s consumed by %s and %s", k, o, member))
	}
	tr.seen[k] = member
}

func (tr *tracker848) consumed() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.seen)
}

// owns counts the partitions each member owns.
func (tr *tracker848) owns() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[string]int{}
	for _, m := range tr.owner {
		out[m]++
	}
	return out
}

type member848 struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// start848 starts a member of group consuming topic with franz-go's KIP-848
// mode (ServerSideBalancer), committing after each poll and on revocation.
func start848(t *testing.T, b *testBroker, tr *tracker848, topic, group, name string) *member848 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m := &member848{cancel: cancel, done: make(chan struct{})}
	m.cl = kgoClient(t, b, kgo.ClientID(name), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { tr.assign(name, a[topic]) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				tr.problem("%s: commit on revoke: %v", name, err)
			}
			tr.release(name, r[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) { tr.release(name, l[topic]) }),
	)
	go func() {
		defer close(m.done)
		for {
			fs := m.cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				m.cl.AllowRebalance()
				return
			}
			fs.EachError(func(topic string, p int32, err error) { tr.problem("%s: fetch %s/%d: %v", name, topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) { tr.record(name, r) })
			if err := m.cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				t.Logf("%s: commit (retried by the next one): %v", name, err)
			}
			m.cl.AllowRebalance()
		}
	}()
	return m
}

// stop ends the poll loop and closes the client, which revokes (committing)
// and leaves the group.
func (m *member848) stop() {
	m.cancel()
	<-m.done
	m.cl.Close()
}

// TestKgoNextGenGroup: franz-go's KIP-848 mode consumes through the
// coordinator's assignments while members join and leave: every record is
// consumed exactly once, no partition is ever owned by two members, the
// partitions spread evenly, commits carry the member epoch and a new member
// resumes from them.
func TestKgoNextGenGroup(t *testing.T) {
	b := startBroker(t, func(_ *Config, o *node.Config) {
		o.ConsumerGroupHeartbeatInterval = 100 * time.Millisecond
		o.ConsumerGroupSessionTimeout = 6 * time.Second
	})
	ctx := testCtx(t)
	const topic, group, parts = "kip848", "g848", 6
	prod := kgoClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	createTopics(t, ctx, prod, parts, topic)
	produced := 0
	produce := func(n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "v%d", produced+i)})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced += n
	}
	tr := &tracker848{owner: map[int32]string{}, seen: map[string]string{}}
	settled := func(what string, want map[string]int) {
		t.Helper()
		pollUntil(t, what, func() bool { return tr.consumed() == produced && maps.Equal(tr.owns(), want) })
	}

	produce(120)
	m1 := start848(t, b, tr, topic, group, "m1")
	m2 := start848(t, b, tr, topic, group, "m2")
	settled("two members consuming", map[string]int{"m1": 3, "m2": 3})

	m3 := start848(t, b, tr, topic, group, "m3")
	produce(120)
	settled("a third member joining", map[string]int{"m1": 2, "m2": 2, "m3": 2})

	// The group as ConsumerGroupDescribe and ListGroups v5 tell it.
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{group}
	dr, err := d.RequestWith(ctx, prod)
	if err != nil {
		t.Fatal(err)
	}
	if g := dr.Groups[0]; g.ErrorCode != 0 || len(g.Members) != 3 || g.AssignorName != "uniform" {
		t.Fatalf("described: %+v", g)
	}
	l := kmsg.NewPtrListGroupsRequest()
	l.TypesFilter = []string{"consumer"}
	lr, err := l.RequestWith(ctx, prod)
	if err != nil || len(lr.Groups) != 1 || lr.Groups[0].Group != group || lr.Groups[0].GroupType != "consumer" {
		t.Fatalf("listed consumer groups: %+v %v", lr, err)
	}

	// Classic tools' DescribeGroups sees it too, assignments in the classic
	// consumer encoding: six partitions over three members.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{group}
	dgr, err := dg.RequestWith(ctx, prod)
	if err != nil || len(dgr.Groups) != 1 || dgr.Groups[0].ProtocolType != "consumer" || len(dgr.Groups[0].Members) != 3 {
		t.Fatalf("DescribeGroups: %+v %v", dgr, err)
	}
	total := 0
	for _, m := range dgr.Groups[0].Members {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(m.MemberAssignment); err != nil {
			t.Fatalf("member %s assignment: %v", m.MemberID, err)
		}
		for _, at := range a.Topics {
			total += len(at.Partitions)
		}
	}
	if total != parts {
		t.Errorf("DescribeGroups shows %d partitions assigned, want %d", total, parts)
	}

	m1.stop()
	produce(120)
	settled("a member leaving", map[string]int{"m2": 3, "m3": 3})
	m2.stop()
	m3.stop()

	// Every partition's commit is at its end.
	f := kmsg.NewPtrOffsetFetchRequest()
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = group
	f.Groups = []kmsg.OffsetFetchRequestGroup{fg}
	fr, err := f.RequestWith(ctx, prod)
	if err != nil || fr.Groups[0].ErrorCode != 0 {
		t.Fatalf("offset fetch: %+v %v", fr, err)
	}
	committed := map[int32]int64{}
	for _, ft := range fr.Groups[0].Topics {
		for _, p := range ft.Partitions {
			committed[p.Partition] = p.Offset
		}
	}
	for p := range int32(parts) {
		if committed[p] != int64(produced/parts) {
			t.Errorf("partition %d committed at %d, want %d", p, committed[p], produced/parts)
		}
	}

	// A new member resumes where the others committed.
	before := tr.consumed()
	m4 := start848(t, b, tr, topic, group, "m4")
	produce(60)
	settled("a new member resuming", map[string]int{"m4": parts})
	if got := tr.consumed() - before; got != 60 {
		t.Errorf("the resuming member consumed %d records, want the 60 new ones", got)
	}
	m4.stop()

	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, p := range tr.problems {
		t.Error(p)
	}
	keys := slices.Sorted(maps.Keys(tr.seen))
	if len(keys) != produced {
		t.Errorf("consumed %d distinct records of %d", len(keys), produced)
	}
}

// TestKgoNextGenFencing: a member that stops heartbeating (here a raw client
// that joined and went silent) is removed at the broker's session timeout,
// and franz-go's member, which waited for those partitions, then gets and
// consumes them; the silent member's next heartbeat is UNKNOWN_MEMBER_ID.
func TestKgoNextGenFencing(t *testing.T) {
	b := startBroker(t, func(_ *Config, o *node.Config) {
		o.ConsumerGroupHeartbeatInterval = 100 * time.Millisecond
		o.ConsumerGroupSessionTimeout = time.Second
	})
	ctx := testCtx(t)
	const topic, group = "kip848-fence", "g848-fence"
	prod := kgoClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	createTopics(t, ctx, prod, 4, topic)

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = group, "silent", 30000
	hb.SubscribedTopicNames, hb.Topics = []string{topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp, err := hb.RequestWith(ctx, prod)
	if err != nil || resp.ErrorCode != 0 || resp.Assignment == nil || len(resp.Assignment.Topics[0].Partitions) != 4 {
		t.Fatalf("silent member's join: %+v %v", resp, err)
	}

	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tr := &tracker848{owner: map[int32]string{}, seen: map[string]string{}}
	m := start848(t, b, tr, topic, group, "m1")
	pollUntil(t, "the waiting member consuming after the silent one is fenced", func() bool {
		return tr.consumed() == len(recs) && tr.owns()["m1"] == 4
	})
	m.stop()

	hb.MemberEpoch, hb.Topics = resp.MemberEpoch, nil
	resp, err = hb.RequestWith(ctx, prod)
	if err != nil || resp.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("silent member's heartbeat after its session: %+v %v", resp, err)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, p := range tr.problems {
		t.Error(p)
	}
}

// TestKgoNextGenRegex: a regex subscription (franz-go sends its ConsumeRegex
// patterns as SubscribedTopicRegex) is resolved by the coordinator: the
// member consumes the matching topics, including one created after it
// joined, and nothing else.
func TestKgoNextGenRegex(t *testing.T) {
	b := startBroker(t, func(_ *Config, o *node.Config) { o.ConsumerGroupHeartbeatInterval = 100 * time.Millisecond })
	ctx := testCtx(t)
	prod := kgoClient(t, b)
	createTopics(t, ctx, prod, 2, "rx-a", "other")
	cons := kgoClient(t, b, kgo.ConsumerGroup("g848-rx"), kgo.ConsumeRegex(), kgo.ConsumeTopics("rx-.*"),
		kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond))
	produce := func(topic string, n int) {
		for i := range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", topic, i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("rx-a", 10)
	produce("other", 10)
	got := map[string]int{}
	for got["rx-a"] < 10 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %v: %v", got, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Topic]++ })
	}
	createTopics(t, ctx, prod, 3, "rx-b")
	produce("rx-b", 10)
	for got["rx-b"] < 10 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %v: %v", got, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Topic]++ })
	}
	if got["other"] != 0 || got["rx-a"] != 10 || got["rx-b"] != 10 {
		t.Fatalf("consumed %v", got)
	}
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{"g848-rx"}
	dr, err := d.RequestWith(ctx, prod)
	if err != nil || len(dr.Groups[0].Members) != 1 || dr.Groups[0].Members[0].SubscribedTopicRegex == nil {
		t.Fatalf("described: %+v %v", dr, err)
	}
}

// TestKgoNextGenStatic: a static member (kgo.InstanceID) that closes leaves
// with epoch -2 and keeps its partitions; the same instance coming back as a
// new client gets the same partitions, without the other member ever getting
// them, and consumes what was produced while it was away.
func TestKgoNextGenStatic(t *testing.T) {
	b := startBroker(t, func(_ *Config, o *node.Config) { o.ConsumerGroupHeartbeatInterval = 100 * time.Millisecond })
	ctx := testCtx(t)
	const topic, group = "kip848-static", "g848-static"
	prod := kgoClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	createTopics(t, ctx, prod, 4, topic)
	produced := 0
	produce := func(n int) {
		t.Helper()
		for i := range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", produced+i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		produced += n
	}
	tr := &tracker848{owner: map[int32]string{}, seen: map[string]string{}}
	startStatic := func(name string) *member848 {
		ctx, cancel := context.WithCancel(context.Background())
		m := &member848{cancel: cancel, done: make(chan struct{})}
		m.cl = kgoClient(t, b, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
			kgo.InstanceID("static-1"), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { tr.assign(name, a[topic]) }),
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					tr.problem("%s: commit on revoke: %v", name, err)
				}
				tr.release(name, r[topic])
			}))
		go func() {
			defer close(m.done)
			for {
				fs := m.cl.PollFetches(ctx)
				if ctx.Err() != nil || fs.IsClientClosed() {
					return
				}
				fs.EachRecord(func(r *kgo.Record) { tr.record(name, r) })
				if err := m.cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
					t.Logf("%s: commit: %v", name, err)
				}
			}
		}()
		return m
	}
	produce(40)
	s1 := startStatic("static")
	other := start848(t, b, tr, topic, group, "dynamic")
	pollUntil(t, "both consuming", func() bool {
		return tr.consumed() == produced && maps.Equal(tr.owns(), map[string]int{"static": 2, "dynamic": 2})
	})
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{group}
	epochOf := func() int32 {
		dr, err := d.RequestWith(ctx, prod)
		if err != nil || dr.Groups[0].ErrorCode != 0 {
			t.Fatalf("describe: %+v %v", dr, err)
		}
		return dr.Groups[0].Epoch
	}
	epoch := epochOf()
	s1.stop()
	produce(40)
	s2 := startStatic("static")
	pollUntil(t, "the instance back on its partitions", func() bool {
		return tr.consumed() == produced && maps.Equal(tr.owns(), map[string]int{"static": 2, "dynamic": 2})
	})
	if e := epochOf(); e != epoch {
		t.Errorf("the static member's return moved the group epoch from %d to %d", epoch, e)
	}
	s2.stop()
	other.stop()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, p := range tr.problems {
		t.Error(p)
	}
}
