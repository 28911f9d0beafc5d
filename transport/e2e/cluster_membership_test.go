package e2e_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/node"
	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// TestClusterBrokerJoins: a fourth broker joins a running cluster. A
// franz-go client that was already running learns of it from its metadata
// refreshes, and a topic created afterwards puts partitions on it, which
// that client produces to and consumes from.
func TestClusterBrokerJoins(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	awaitCluster(t, c, 1, 2, 3)
	boot := c.Member(1).Addr
	cl := newClient(t, boot, kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(500*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	// kgo keeps the brokers' ids to itself; how many it knows tells enough.
	known := func() int { return len(cl.DiscoveredBrokers()) }
	if err := cl.Ping(testContext(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "the client to know three brokers", func() (bool, string) {
		return known() == 3, fmt.Sprint(known())
	})

	m4 := c.Add()
	awaitCluster(t, c, 1, 2, 3, 4)
	took := eventually(t, waitTimeout, "the running client to learn of broker 4", func() (bool, string) {
		return known() == 4, fmt.Sprint(known())
	})
	t.Logf("the running client knew of broker 4 %v after it joined", took)

	const topic, partitions = "cluster-grown", 8
	leaders := createClusterTopic(t, boot, topic, partitions)
	if n := countLeaders(leaders); len(n) != 4 || n[4] != 2 {
		t.Fatalf("leaders of a topic created with four brokers: %v, want two partitions each, broker 4 included", leaders)
	}
	produced := produceFranzSeqWith(t, cl, topic, "grown", 0, 200)
	on4 := 0
	for _, r := range produced {
		if leaders[r.Partition] == 4 {
			on4++
		}
	}
	if on4 == 0 {
		t.Fatalf("no record went to broker 4's partitions")
	}
	cl.AddConsumeTopics(topic)
	var consumed []seqRec
	collect(t, cl, &consumed, len(produced))
	checkExactlyOnce(t, "through a client that saw broker 4 join", produced, consumed, endOffsets(t, m4.Addr, topic, partitions))
}

// TestClusterZooKeeperOutage: ZooKeeper stops for 10 s. Meanwhile every
// broker keeps serving produce, fetch and metadata for what it leads;
// when ZooKeeper is back (same data, so the sessions survive) a topic can
// be created again. Then broker 2's session is expired from outside: it
// notices, registers again in a new session (its log says so) and leads
// its partitions again, and clients carry on.
func TestClusterZooKeeperOutage(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	awaitCluster(t, c, 1, 2, 3)
	const topic, partitions = "cluster-zk", 6
	boot := c.Member(1).Addr
	leaders := createClusterTopic(t, boot, topic, partitions)
	if len(countLeaders(leaders)) != 3 {
		t.Fatalf("leaders %v, want all three brokers", leaders)
	}
	// Round robin, so that every round reaches every partition (keyed
	// records would depend on how their keys happen to hash).
	producer := newClient(t, boot, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	consumer := newClient(t, boot, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	var produced, consumed []seqRec
	round := func(what string) {
		t.Helper()
		before := len(produced)
		produced = append(produced, produceFranzSeqWith(t, producer, topic, "zk", len(produced), 60)...)
		hit := map[int32]bool{}
		for _, r := range produced[before:] {
			hit[r.Partition] = true
		}
		if len(hit) != partitions {
			t.Fatalf("%s: 60 records went to partitions %v only", what, hit)
		}
		collect(t, consumer, &consumed, len(produced))
	}
	round("before the outage")

	zk := c.ZK.Servers[0]
	zk.Stop()
	stopped := time.Now()
	// New idempotent producers get their ids from any broker.
	for _, id := range c.IDs() {
		resp, err := pin(c.Member(id).Addr).ask(testContext(t), kmsg.NewPtrInitProducerIDRequest())
		if err == nil {
			err = kerr.ErrorForCode(resp.(*kmsg.InitProducerIDResponse).ErrorCode)
		}
		if err != nil {
			t.Errorf("InitProducerID at broker %d while ZooKeeper is down: %v", id, err)
		}
	}
	rounds := 0
	ctx := testContext(t)
	for time.Since(stopped) < 10*time.Second {
		round("while ZooKeeper is down")
		rounds++
		for _, id := range c.IDs() {
			md, err := pin(c.Member(id).Addr).metadata(ctx, topic)
			if err != nil {
				t.Fatalf("metadata from broker %d while ZooKeeper is down: %v", id, err)
			}
			if ls, _ := partitionLeaders(md, topic); !slices.Equal(ls, leaders) || !slices.Equal(brokerIDs(md), []int32{1, 2, 3}) {
				t.Fatalf("metadata from broker %d while ZooKeeper is down: brokers %v, leaders %v; want 1-3 and %v", id, brokerIDs(md), ls, leaders)
			}
		}
	}
	zk.Start()
	t.Logf("%d rounds of produce and fetch over every partition while ZooKeeper was down for %v", rounds, time.Since(stopped).Round(time.Millisecond))
	createClusterTopic(t, c.Member(2).Addr, "after-zk", 3)
	round("after the outage")
	for _, id := range c.IDs() {
		if c.Member(id).Log.Contains("coordination session replaced") {
			t.Errorf("broker %d lost its session in the outage; ZooKeeper keeps sessions across a restart", id)
		}
	}

	// Session expiry, of a broker that is not the controller, then of the
	// controller: each notices, registers again in a new session (and says
	// so), and leads its partitions again; the cluster has a controller.
	expire := func(id int32) {
		t.Helper()
		m := c.Member(id)
		session, passwd, _ := m.Tap.Session()
		if err := zktest.ExpireSession(zk.Addr, session, passwd, 10*time.Second); err != nil {
			t.Fatalf("expire broker %d's session: %v", id, err)
		}
		took := eventually(t, waitTimeout, fmt.Sprintf("broker %d to register again in a new session", id), func() (bool, string) {
			return m.Log.Contains("coordination session replaced; registering again", fmt.Sprintf("old=%d", session)) &&
				m.Log.Contains("registered in the cluster", fmt.Sprintf("broker=%d", id)), "not logged"
		})
		if now, _, _ := m.Tap.Session(); now == session {
			t.Errorf("broker %d is still in session %#x", id, session)
		}
		t.Logf("broker %d registered again %v after its session %#x was expired", id, took, session)
		awaitCluster(t, c, 1, 2, 3)
		awaitLeaders(t, boot, topic, func(ls []int32) bool { return slices.Equal(ls, leaders) })
		round(fmt.Sprintf("after broker %d's session expired", id))
	}
	controller := awaitCluster(t, c, 1, 2, 3)
	expire(controller%3 + 1)
	expire(controller)
	createClusterTopic(t, boot, "after-expiry", 3)
	checkExactlyOnce(t, "the consumer that ran throughout", produced, consumed, endOffsets(t, boot, topic, partitions))
}

// TestClusterBrokerIDInUse: a broker started with the id of a live broker,
// at another address, refuses to start at once, with an error naming the id
// and the address that holds it; the live broker is unaffected.
func TestClusterBrokerIDInUse(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	awaitCluster(t, c, 1, 2)
	live := c.Member(2).Addr
	cfg := c.Config(2, t.TempDir(), nil)
	cfg.Listen = "127.0.0.1:0"
	begin := time.Now()
	b, err := broker.Start(cfg)
	if err == nil {
		b.Close()
		t.Fatal("a second broker 2 started while broker 2 is live")
	}
	took := time.Since(begin)
	msg := err.Error()
	if !errors.Is(err, node.ErrBrokerIDInUse) || !strings.Contains(msg, "broker 2") || !strings.Contains(msg, live) {
		t.Errorf("second broker 2: %q, want ErrBrokerIDInUse naming broker 2 and %s", msg, live)
	}
	if took > c.SessionTimeout {
		t.Errorf("second broker 2 took %v to refuse, want at once (it is not a restart of the live one)", took)
	}
	t.Logf("refused in %v: %v", took, err)
	awaitCluster(t, c, 1, 2)
	md, err := pin(c.Member(1).Addr).metadata(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, mb := range md.Brokers {
		if mb.NodeID == 2 && fmt.Sprintf("%s:%d", mb.Host, mb.Port) != live {
			t.Errorf("broker 2 is at %s:%d in metadata, want %s still", mb.Host, mb.Port, live)
		}
	}
}
