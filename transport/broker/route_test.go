package broker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cluster/faultproxy"
	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// ReplicaRoutes sends replication through the address given: each of two
// brokers follows the other through its own faultproxy. Cutting the
// follower's proxy stalls it (its log end stays behind and it leaves the
// ISR); healing the proxy lets it catch up and rejoin.
func TestReplicaRoutesThroughFaultProxy(t *testing.T) {
	proxies := map[int32]*faultproxy.Proxy{} // broker id -> its connections to the other
	for _, id := range []int32{1, 2} {
		p, err := faultproxy.New("127.0.0.1:0", "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() }) // after the cluster's, registered later
		proxies[id] = p
	}
	c := brokertest.StartMemCluster(t, 2, func(cfg *broker.Config) {
		cfg.ReplicaLagTimeMax = 2 * time.Second
		cfg.ReplicaRoutes = map[int32]string{3 - cfg.NodeID: proxies[cfg.NodeID].Addr()}
	})
	for id, p := range proxies {
		p.SetTarget(c.Member(3 - id).Addr)
	}
	createReplicated(t, c.Member(1).Addr, "routed", 1, 2, nil)
	leader := leaderOf(t, c, "routed", 0)
	follower := 3 - leader
	ln, fn := c.Member(leader).Broker().Node(), c.Member(follower).Broker().Node()
	isr := func() []int32 { return ln.ISROf("routed", 0) }
	ends := func() (int64, int64) {
		return replicaLog(t, c.Member(leader).Broker(), "routed", 0).EndOffset(),
			replicaLog(t, c.Member(follower).Broker(), "routed", 0).EndOffset()
	}
	produce := func(acks kgo.Acks, from int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite(),
			kgo.DefaultProduceTopic("routed"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var recs []*kgo.Record
		for i := range 100 {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "v%04d", from+i)})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	produce(kgo.AllISRAcks(), 0)
	inSync(t, c, "routed", 0)
	if s := proxies[follower].Stats(); s.Forwarded[faultproxy.Upstream] == 0 || s.Forwarded[faultproxy.Downstream] == 0 {
		t.Fatalf("broker %d replicated without its proxy: %+v", follower, s)
	}
	if got := isr(); !slices.Contains(got, follower) {
		t.Fatalf("ISR %v without the follower %d", got, follower)
	}

	proxies[follower].Cut()
	produce(kgo.LeaderAck(), 100)
	eventually(t, fmt.Sprintf("broker %d out of the ISR", follower), func() (bool, string) {
		got := isr()
		return !slices.Contains(got, follower), fmt.Sprintf("ISR %v", got)
	})
	if le, fe := ends(); fe >= le {
		t.Fatalf("broker %d followed through a cut proxy: log end %d, the leader's %d", follower, fe, le)
	}
	if s := proxies[follower].Stats(); s.Reset+s.Refused == 0 {
		t.Fatalf("the cut never struck a connection: %+v", s)
	}

	proxies[follower].Heal()
	inSync(t, c, "routed", 0)
	eventually(t, fmt.Sprintf("broker %d back in the ISR", follower), func() (bool, string) {
		got := isr()
		return slices.Contains(got, follower), fmt.Sprintf("ISR %v", got)
	})
	if hw, _ := fn.ReplicaHighWatermark("routed", 0); hw != 200 {
		t.Errorf("the follower's high watermark is %d, want 200", hw)
	}
	sameBytes(t, c, "routed", 0)
}
