package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cluster/peer"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/node"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// A follower's fetch on two partitions that finds (or, parked, is woken by)
// a produce request's records in one of them answers with the request's
// records for both: it waits for the request's other appends in progress,
// as Kafka completes parked fetches only once a produce request is
// appended to all its partitions. (Whenever the fetch arrives, it must get
// both; without the wait, it often got one.)
func TestFollowerFetchGetsTheWholeProduceRequest(t *testing.T) {
	c := brokertest.StartMemCluster(t, 2)
	addr := c.Member(1).Addr
	const topic = "gate"
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p := range int32(2) { // both led by broker 1, followed by broker 2
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{1, 2}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(context.Background(), cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", topic, err, resp)
	}
	leader := c.Member(1).Broker().Node()
	eventually(t, "broker 1 leading both partitions", func() (bool, string) {
		for p := range int32(2) {
			if _, err := leader.Partition(topic, p); err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	})

	// Fetch as broker 2 (beside its own fetcher, which does not matter
	// here) from where the logs end.
	pc, err := peer.Dial(addr, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ctx := context.Background()
	for round := range 30 {
		var ends [2]int64
		for p := range int32(2) {
			ends[p] = replicaLog(t, c.Member(1).Broker(), topic, p).EndOffset()
		}
		fetched := make(chan []peer.Fetched, 1)
		go func() {
			fr := peer.FetchRequest{MaxWait: 30 * time.Second, MinBytes: 1, MaxBytes: 1 << 20}
			for p := range int32(2) {
				fr.Partitions = append(fr.Partitions, peer.FetchPartition{Topic: topic, Partition: p,
					CurrentLeaderEpoch: -1, FetchOffset: ends[p], MaxBytes: 1 << 20})
			}
			res, err := pc.Fetch(ctx, fr)
			if err != nil {
				t.Errorf("round %d: fetch: %v", round, err)
			}
			for i := range res { // the records alias the client's buffer
				res[i].Records = append([]byte(nil), res[i].Records...)
			}
			fetched <- res
		}()
		// The second partition's batch is large, so that its append is
		// still going on when a fetch woken by the first one reads.
		preq := &node.ProduceRequest{Acks: 1}
		for p := range int32(2) {
			v := []byte(fmt.Sprintf("%d-%d", round, p))
			if p == 1 {
				v = append(v, make([]byte, 900<<10)...)
			}
			b, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: v, Timestamp: 1}})
			if err != nil {
				t.Fatal(err)
			}
			preq.Partitions = append(preq.Partitions, node.ProducePartition{Topic: topic, Partition: p, Records: b})
		}
		leader.Produce(ctx, preq)
		for _, w := range preq.Partitions {
			if w.Err != nil {
				t.Fatalf("round %d: produce to %d: %v", round, w.Partition, w.Err)
			}
		}
		res := <-fetched
		if len(res) != 2 {
			t.Fatalf("round %d: %d partitions answered", round, len(res))
		}
		for _, f := range res {
			if f.Err != nil || len(f.Records) == 0 {
				t.Fatalf("round %d: partition %d answered %d bytes (%v): the fetch did not wait for the rest of the produce request",
					round, f.Partition, len(f.Records), f.Err)
			}
		}
	}
}
