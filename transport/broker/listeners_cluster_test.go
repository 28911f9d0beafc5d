package broker_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// TestListenersInACluster: every broker registers all its listeners, and
// each listener's clients are told every broker at that broker's endpoint
// of the listener's name. Brokers 1 and 2 serve EXTERNAL (PLAINTEXT, first,
// so it is the registration's top-level address) and INTERNAL
// (SASL_PLAINTEXT, the inter-broker listener, authenticated as broker);
// broker 3 serves INTERNAL only. Replication works, so followers dial the
// INTERNAL endpoints with SASL (EXTERNAL would refuse the handshake);
// Metadata, DescribeCluster and FindCoordinator on EXTERNAL leave broker 3
// out (its partitions LISTENER_NOT_FOUND, its groups
// COORDINATOR_NOT_AVAILABLE), on INTERNAL they list all three.
func TestListenersInACluster(t *testing.T) {
	users := filepath.Join(t.TempDir(), "jaas.conf")
	if err := os.WriteFile(users, []byte(`user_broker="broker-secret"`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := brokertest.StartMemCluster(t, 3, func(cfg *broker.Config) {
		listeners := "EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0"
		if cfg.NodeID == 3 {
			listeners = "INTERNAL://127.0.0.1:0"
		}
		cfg.OffsetsPartitions = 6
		cfg.Security = broker.Security{
			Listeners: listeners, ProtocolMap: "EXTERNAL:PLAINTEXT,INTERNAL:SASL_PLAINTEXT", InterBrokerListener: "INTERNAL",
			PlainUsersFile: users, InterBrokerSASLMechanism: "PLAIN", InterBrokerUser: "broker", InterBrokerPass: "broker-secret",
		}
	})
	addrs := func(listener string) map[int32]string {
		out := map[int32]string{}
		for _, id := range c.IDs() {
			if a := c.Member(id).Broker().ListenerAddr(listener); a != "" {
				out[id] = a
			}
		}
		return out
	}
	external, internal := addrs("EXTERNAL"), addrs("INTERNAL")
	if len(external) != 2 || len(internal) != 3 {
		t.Fatalf("EXTERNAL %v, INTERNAL %v", external, internal)
	}
	ext := pinned(t, external[1])
	v5 := kversion.Stable()
	v5.SetMaxKeyVersion(3, 5) // kgo sends the highest version both sides have
	ext5 := pinned(t, external[1], kgo.MaxVersions(v5))
	in := pinned(t, internal[2], kgo.SASL(plain.Auth{User: "broker", Pass: "broker-secret"}.AsMechanism()))

	// Partition 0 led by broker 3, partition 1 by broker 1.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 20_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", -1, -1
	for p, replicas := range [][]int32{{3, 1, 2}, {1, 2, 3}} {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	create.Topics = append(create.Topics, rt)
	if resp, err := create.RequestWith(ctx, ext); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create t: %v %+v", err, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}

	// Metadata: each listener's brokers at that listener's endpoints.
	eventually(t, "every broker's metadata of t on both listeners", func() (bool, string) {
		for _, tc := range []struct {
			cl      *kgo.Broker
			want    map[int32]string
			version int16
			leader0 int32
			code0   int16
		}{
			{ext, external, 12, -1, kerr.ListenerNotFound.Code},
			{ext5, external, 5, -1, kerr.LeaderNotAvailable.Code},
			{in, internal, 12, 3, 0},
		} {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = tc.version
			req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := req.RequestWith(rctx, tc.cl)
			rcancel()
			if err != nil {
				return false, fmt.Sprintf("v%d to %v: %v", tc.version, tc.want, err)
			}
			got := map[int32]string{}
			for _, b := range resp.Brokers {
				got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				return false, fmt.Sprintf("v%d brokers %v, want %v", tc.version, got, tc.want)
			}
			ps := resp.Topics[0].Partitions
			if len(ps) != 2 {
				return false, fmt.Sprintf("v%d partitions %+v", tc.version, ps)
			}
			slices.SortFunc(ps, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
			if ps[0].Leader != tc.leader0 || ps[0].ErrorCode != tc.code0 || ps[1].Leader != 1 || ps[1].ErrorCode != 0 {
				return false, fmt.Sprintf("v%d partition 0 leader %d error %d, partition 1 leader %d error %d; want %d %d, 1 0",
					tc.version, ps[0].Leader, ps[0].ErrorCode, ps[1].Leader, ps[1].ErrorCode, tc.leader0, tc.code0)
			}
		}
		return true, ""
	})

	// DescribeCluster likewise.
	for _, tc := range []struct {
		cl   *kgo.Broker
		want map[int32]string
	}{{ext, external}, {in, internal}} {
		resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, tc.cl)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int32]string{}
		for _, b := range resp.Brokers {
			got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("DescribeCluster brokers %v, want %v", got, tc.want)
		}
	}

	// Replication over INTERNAL: acks=all through EXTERNAL, every replica
	// in sync.
	producer, err := kgo.NewClient(kgo.SeedBrokers(external[1]), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for i := range 5 {
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 1, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	inSync(t, c, "t", 1)
	eventually(t, "ISR of t-1 is 1, 2, 3", func() (bool, string) {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
		resp, err := req.RequestWith(ctx, in)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.Partition == 1 {
				isr := slices.Sorted(slices.Values(p.ISR))
				return slices.Equal(isr, []int32{1, 2, 3}), fmt.Sprint(isr)
			}
		}
		return false, "no partition 1"
	})

	// FindCoordinator: a group coordinated by broker 3 has none on
	// EXTERNAL; one coordinated by broker 1 or 2 is at its EXTERNAL address.
	var keys []string
	for i := range 60 {
		keys = append(keys, "g"+strconv.Itoa(i))
	}
	on3, elsewhere := "", ""
	eventually(t, "a coordinator for every group on INTERNAL", func() (bool, string) {
		resp, err := (&kmsg.FindCoordinatorRequest{CoordinatorKeys: keys}).RequestWith(ctx, in)
		if err != nil {
			return false, err.Error()
		}
		on3, elsewhere = "", ""
		for _, co := range resp.Coordinators {
			if co.ErrorCode != 0 || net.JoinHostPort(co.Host, strconv.Itoa(int(co.Port))) != internal[co.NodeID] {
				return false, fmt.Sprintf("%+v", co)
			}
			switch {
			case co.NodeID == 3 && on3 == "":
				on3 = co.Key
			case co.NodeID != 3 && elsewhere == "":
				elsewhere = co.Key
			}
		}
		return true, ""
	})
	if on3 == "" || elsewhere == "" {
		t.Fatalf("no group coordinated by broker 3 (%q) or by another (%q) among %d", on3, elsewhere, len(keys))
	}
	resp, err := (&kmsg.FindCoordinatorRequest{CoordinatorKeys: []string{on3, elsewhere}}).RequestWith(ctx, ext)
	if err != nil {
		t.Fatal(err)
	}
	for _, co := range resp.Coordinators {
		addr := net.JoinHostPort(co.Host, strconv.Itoa(int(co.Port)))
		switch co.Key {
		case on3:
			if co.ErrorCode != kerr.CoordinatorNotAvailable.Code || co.NodeID != -1 {
				t.Errorf("EXTERNAL: group %s (broker 3's): node %d error %d, want COORDINATOR_NOT_AVAILABLE", on3, co.NodeID, co.ErrorCode)
			}
		case elsewhere:
			if co.ErrorCode != 0 || addr != external[co.NodeID] {
				t.Errorf("EXTERNAL: group %s: node %d at %s error %d, want its EXTERNAL address %v", elsewhere, co.NodeID, addr, co.ErrorCode, external)
			}
		}
	}
	if len(resp.Coordinators) != 2 {
		t.Errorf("coordinators %+v", resp.Coordinators)
	}
}

// pinned sends requests to the broker at addr only.
func pinned(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Broker {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl.SeedBrokers()[0]
}
