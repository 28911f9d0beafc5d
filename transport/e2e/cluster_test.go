package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// The cluster tests: three (or four) brokers joined through a real
// ZooKeeper (Debian's, run by cluster/zk/zktest), driven by the real
// clients. Brokers ask for a 3 s ZooKeeper session, so a broker that dies
// without closing its session is forgotten within seconds.

// offsetsTopic is Kafka's internal topic of committed offsets.
const offsetsTopic = "__consumer_offsets"

// pinnedClient sends each request given to ask to the broker at addr and no
// other (a client's own routing would pick any broker it knows), through a
// franz-go client of its own, closed after the request.
type pinnedClient struct{ addr string }

func pin(addr string) pinnedClient { return pinnedClient{addr} }

func (p pinnedClient) ask(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// metadata asks one broker for the metadata of topics (all topics when
// none), letting it auto-create them.
func (p pinnedClient) metadata(ctx context.Context, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	if len(topics) == 0 {
		req.Topics = nil
	}
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := p.ask(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// topicOf returns the named topic of a Metadata response.
func topicOf(md *kmsg.MetadataResponse, topic string) *kmsg.MetadataResponseTopic {
	for i := range md.Topics {
		if t := &md.Topics[i]; t.Topic != nil && *t.Topic == topic {
			return t
		}
	}
	return nil
}

// partitionLeaders returns each partition's leader (by partition index) and
// error code as a Metadata response gives them; nil when the topic is
// missing or in error.
func partitionLeaders(md *kmsg.MetadataResponse, topic string) (leaders []int32, codes []int16) {
	t := topicOf(md, topic)
	if t == nil || t.ErrorCode != 0 {
		return nil, nil
	}
	leaders, codes = make([]int32, len(t.Partitions)), make([]int16, len(t.Partitions))
	for _, p := range t.Partitions {
		if int(p.Partition) < len(leaders) {
			leaders[p.Partition], codes[p.Partition] = p.Leader, p.ErrorCode
		}
	}
	return leaders, codes
}

func brokerIDs(md *kmsg.MetadataResponse) []int32 {
	var ids []int32
	for _, b := range md.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids
}

// eventually polls cond every 50 ms until it holds, failing the test after
// timeout with the last state cond described.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	begin := time.Now()
	deadline := begin.Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return time.Since(begin)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, what, state)
		}
		<-tick.C
	}
}

// awaitCluster waits until every running broker of c answers Metadata with
// exactly the brokers ids and a controller among them, and returns the
// controller. Every broker must give the same cluster id.
func awaitCluster(t testing.TB, c *brokertest.Cluster, ids ...int32) int32 {
	t.Helper()
	ctx := testContext(t)
	var controller int32
	clusterIDs := map[string][]string{}
	eventually(t, waitTimeout, fmt.Sprintf("every broker to see brokers %v and one controller", ids), func() (bool, string) {
		controller = -2
		clear(clusterIDs)
		for _, addr := range c.Addrs() {
			md, err := pin(addr).metadata(ctx)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", addr, err)
			}
			if got := brokerIDs(md); !slices.Equal(got, ids) || !slices.Contains(ids, md.ControllerID) {
				return false, fmt.Sprintf("%s: brokers %v, controller %d", addr, got, md.ControllerID)
			}
			if controller != -2 && md.ControllerID != controller {
				return false, fmt.Sprintf("controllers %d and %d", controller, md.ControllerID)
			}
			controller = md.ControllerID
			if md.ClusterID != nil {
				clusterIDs[*md.ClusterID] = append(clusterIDs[*md.ClusterID], addr)
			}
		}
		return true, ""
	})
	if len(clusterIDs) != 1 {
		t.Errorf("cluster ids by broker: %v, want one id for the whole cluster", clusterIDs)
	}
	return controller
}

// createClusterTopic creates a topic through the broker at addr and waits
// until that broker names a leader for every partition; it returns them.
func createClusterTopic(t testing.TB, addr, topic string, partitions int32) []int32 {
	t.Helper()
	createTopic(t, addr, topic, partitions, nil)
	return awaitLeaders(t, addr, topic, func(ls []int32) bool { return !slices.Contains(ls, -1) })
}

// awaitLeaders polls the broker at addr until the topic's partition leaders
// satisfy ok, and returns them.
func awaitLeaders(t testing.TB, addr, topic string, ok func([]int32) bool) []int32 {
	t.Helper()
	ctx := testContext(t)
	p := pin(addr)
	var leaders []int32
	eventually(t, waitTimeout, "the leaders of "+topic, func() (bool, string) {
		md, err := p.metadata(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		leaders, _ = partitionLeaders(md, topic)
		return leaders != nil && ok(leaders), fmt.Sprint(leaders)
	})
	return leaders
}

// countLeaders counts the partitions each broker leads.
func countLeaders(leaders []int32) map[int32]int {
	n := map[int32]int{}
	for _, l := range leaders {
		n[l]++
	}
	return n
}

// clusterJavaHash is Java's String.hashCode (ASCII input), Kafka's way of
// mapping a group to its partition of __consumer_offsets.
func clusterJavaHash(s string) int32 {
	var h int32
	for _, r := range s {
		h = 31*h + r
	}
	return h
}

func clusterJavaAbs(n int32) int32 {
	switch {
	case n == math.MinInt32:
		return 0
	case n < 0:
		return -n
	}
	return n
}

// groupCoordinatedElsewhere returns a group name starting with prefix whose
// coordinator (the leader of its partition of __consumer_offsets) is not
// broker avoid, and that coordinator; it checks that FindCoordinator, asked
// of the broker at addr, agrees.
func groupCoordinatedElsewhere(t testing.TB, addr, prefix string, avoid int32) (string, int32) {
	t.Helper()
	return groupCoordinatedBy(t, addr, prefix, func(id int32) bool { return id != avoid })
}

// groupCoordinatedBy returns a group name starting with prefix whose
// coordinator satisfies ok, and that coordinator, checked as
// groupCoordinatedElsewhere does.
func groupCoordinatedBy(t testing.TB, addr, prefix string, ok func(int32) bool) (string, int32) {
	t.Helper()
	ctx := testContext(t)
	p := pin(addr)
	// The first request for __consumer_offsets creates it.
	var leaders []int32
	eventually(t, waitTimeout, "leaders of "+offsetsTopic, func() (bool, string) {
		md, err := p.metadata(ctx, offsetsTopic)
		if err != nil {
			return false, err.Error()
		}
		leaders, _ = partitionLeaders(md, offsetsTopic)
		return len(leaders) > 0 && !slices.Contains(leaders, -1), fmt.Sprint(leaders)
	})
	for k := 0; k < 1000; k++ {
		group := fmt.Sprintf("%s-%d", prefix, k)
		coordinator := leaders[clusterJavaAbs(clusterJavaHash(group))%int32(len(leaders))]
		if !ok(coordinator) {
			continue
		}
		got, err := findCoordinator(ctx, p, group)
		if err != nil || got != coordinator {
			t.Fatalf("FindCoordinator %s at %s: broker %d, %v; want broker %d (leader of %s partition %d)",
				group, addr, got, err, coordinator, offsetsTopic, clusterJavaAbs(clusterJavaHash(group))%int32(len(leaders)))
		}
		return group, coordinator
	}
	t.Fatalf("no group %s-<n> has a coordinator as wanted; leaders of %s: %v", prefix, offsetsTopic, leaders)
	return "", -1
}

// findCoordinator asks one broker for the group's coordinator.
func findCoordinator(ctx context.Context, p pinnedClient, group string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	resp, err := p.ask(ctx, req)
	if err != nil {
		return -1, err
	}
	fc := resp.(*kmsg.FindCoordinatorResponse)
	id, code := fc.NodeID, fc.ErrorCode
	if len(fc.Coordinators) > 0 {
		id, code = fc.Coordinators[0].NodeID, fc.Coordinators[0].ErrorCode
	}
	return id, kerr.ErrorForCode(code)
}

// notCoordinator checks that the broker at addr refuses to serve the group's
// offsets (NOT_COORDINATOR): its state lives on its coordinator.
func notCoordinator(t testing.TB, addr, group, topic string) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.Partitions = topic, []int32{0}
	rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{gt}
	req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	resp, err := pin(addr).ask(testContext(t), req)
	if err != nil {
		t.Fatalf("OffsetFetch %s at %s: %v", group, addr, err)
	}
	of := resp.(*kmsg.OffsetFetchResponse)
	code := of.ErrorCode
	if len(of.Groups) > 0 {
		code = of.Groups[0].ErrorCode
	}
	if !errors.Is(kerr.ErrorForCode(code), kerr.NotCoordinator) {
		t.Errorf("OffsetFetch of group %s at the bootstrap broker %s: %v, want NOT_COORDINATOR", group, addr, kerr.ErrorForCode(code))
	}
}

// seqRec is one record of the cluster tests: its value is "<prefix>-<seq>",
// seq counting in production order.
type seqRec struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

func seqValue(prefix string, i int) string { return fmt.Sprintf("%s-%05d", prefix, i) }

func seqOf(v string) int {
	n, _ := strconv.Atoi(v[strings.LastIndexByte(v, '-')+1:])
	return n
}

// checkExactlyOnce checks what a consumer got (in the order it got them)
// against what was produced: every record once, none other; per
// partition, offsets 0, 1, 2... up to the partition's end (the one
// producer's records, in its order); and where the producer reported where
// a record went (Offset >= 0), there it was.
func checkExactlyOnce(t testing.TB, who string, produced, consumed []seqRec, ends []int64) {
	t.Helper()
	checkExactlyOnceFrom(t, who, produced, consumed, make([]int64, len(ends)), ends)
}

// checkExactlyOnceFrom is checkExactlyOnce for a consumer that started at
// offsets from (committed offsets): produced holds what lies past them.
func checkExactlyOnceFrom(t testing.TB, who string, produced, consumed []seqRec, from, ends []int64) {
	t.Helper()
	want := map[string]seqRec{}
	for _, r := range produced {
		want[r.Value] = r
	}
	seen := map[string]bool{}
	next := slices.Clone(from)
	lastSeq := make([]int, len(ends))
	for i := range lastSeq {
		lastSeq[i] = -1
	}
	errs := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if errs++; errs <= 5 {
			t.Errorf(who+": "+format, args...)
		}
	}
	for _, r := range consumed {
		w, ok := want[r.Value]
		switch {
		case !ok:
			fail("consumed %q (%d@%d), which was never produced", r.Value, r.Partition, r.Offset)
			continue
		case seen[r.Value]:
			fail("consumed %q twice (again at %d@%d)", r.Value, r.Partition, r.Offset)
			continue
		case int(r.Partition) >= len(ends) || r.Partition < 0:
			fail("consumed %q from partition %d", r.Value, r.Partition)
			continue
		}
		seen[r.Value] = true
		if w.Offset >= 0 && (w.Partition != r.Partition || w.Offset != r.Offset) {
			fail("%q consumed at %d@%d, acknowledged at %d@%d", r.Value, r.Partition, r.Offset, w.Partition, w.Offset)
		}
		if r.Offset != next[r.Partition] {
			fail("partition %d: offset %d consumed after %d (%q)", r.Partition, r.Offset, next[r.Partition]-1, r.Value)
		}
		next[r.Partition] = r.Offset + 1
		if s := seqOf(r.Value); s <= lastSeq[r.Partition] {
			fail("partition %d: %q consumed after record %d of the producer: out of order", r.Partition, r.Value, lastSeq[r.Partition])
		} else {
			lastSeq[r.Partition] = s
		}
	}
	if len(seen) != len(want) {
		fail("consumed %d distinct records, want the %d produced", len(seen), len(want))
	}
	if !slices.Equal(next, ends) {
		fail("consumed partitions up to %v, want the end offsets %v", next, ends)
	}
}
