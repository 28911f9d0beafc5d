package e2e_test

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/tlsfiles"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// TestClusterSecurity: three `weir broker` processes joined through a real
// ZooKeeper, each with the ACL authorizer on and two listeners: INTERNAL
// (SASL_PLAINTEXT, the inter-broker listener, where brokers authenticate as
// User:broker, a super user) and EXTERNAL (SASL_SSL, for clients). The
// admin (a super user) grants alice Write and Read on topic t and creates
// it with three replicas. alice's acks=all produce succeeds with an ISR of
// three (the followers fetch from the leader as User:broker, which has
// ClusterAction), she consumes what she wrote, and Metadata on EXTERNAL
// lists every broker at its EXTERNAL address. mallory, with no ACL, neither
// sees t nor produces to it; alice posing as a follower (a Fetch or
// OffsetForLeaderEpoch with a replica id) is refused: she has no
// ClusterAction.
func TestClusterSecurity(t *testing.T) {
	zktest.Require(t)
	zk := zktest.Start(t, zktest.Options{})
	ca := tlstest.NewCA(t, "weir cluster CA")
	srv := ca.Issue("broker", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	users := writeFile(t, "jaas.conf", []byte(`KafkaServer {
  org.apache.kafka.common.security.plain.PlainLoginModule required
  user_broker="broker-secret"
  user_admin="admin-secret"
  user_alice="alice-secret"
  user_mallory="mallory-secret";
};`))
	internal, external := map[int32]string{}, map[int32]string{}
	weir := weirBinary(t)
	start := make(chan error, 3)
	for id := int32(1); id <= 3; id++ {
		internal[id], external[id] = brokertest.FreeAddr(t), brokertest.FreeAddr(t)
		dir, in, ex := t.TempDir(), internal[id], external[id]
		go func() {
			p, err := brokerproc.Start(testContext(t), brokerproc.Options{
				Weir: weir, DataDir: dir, Listen: in, DeathSignal: syscall.SIGKILL,
				Flags: []string{"--broker-id", fmt.Sprint(id), "--zookeeper", zk.ConnectString(),
					"--zookeeper-session-timeout", brokertest.DefaultSessionTimeout.String(), "--log-level", "info",
					"--listeners", "INTERNAL://" + in + ",EXTERNAL://" + ex,
					"--listener-security-protocol-map", "INTERNAL:SASL_PLAINTEXT,EXTERNAL:SASL_SSL",
					"--inter-broker-listener-name", "INTERNAL",
					"--ssl-cert-file", srv.CertFile, "--ssl-key-file", srv.KeyFile, "--ssl-ca-file", ca.File,
					"--sasl-plain-users-file", users,
					"--inter-broker-sasl-mechanism", "PLAIN", "--inter-broker-sasl-user", "broker",
					"--inter-broker-sasl-password", "broker-secret",
					"--authorizer", "acl", "--super-users", "User:broker;User:admin"},
			})
			if err == nil {
				t.Cleanup(func() {
					if err := p.Stop(); err != nil {
						t.Errorf("broker %d: %v", id, err)
					}
				})
			} else {
				err = fmt.Errorf("broker %d: %w", id, err)
			}
			start <- err
		}()
	}
	for range 3 {
		if err := <-start; err != nil {
			t.Fatal(err)
		}
	}
	tcfg, err := tlsfiles.ClientConfig(tlsfiles.Client{CAFile: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	as := func(user string, addr string, opts ...kgo.Opt) *kgo.Client {
		return secClient(t, addr, append([]kgo.Opt{kgo.DialTLSConfig(tcfg.Clone()),
			kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism())}, opts...)...)
	}
	ctx := testContext(t)
	wantBrokers := fmt.Sprint(external)

	// Every broker lists the three at their EXTERNAL addresses to EXTERNAL
	// clients (the admin's view: it may describe everything).
	for id := int32(1); id <= 3; id++ {
		adm := as("admin", external[id]).SeedBrokers()[0]
		eventually(t, waitTimeout, fmt.Sprintf("broker %d lists every broker at its EXTERNAL address", id), func() (bool, string) {
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, adm)
			if err != nil {
				return false, err.Error()
			}
			got := brokerAddrs(resp)
			return got == wantBrokers, got
		})
	}

	admin := kadm.NewClient(as("admin", external[1]))
	acls := kadm.NewACLs().Allow("User:alice").Topics("t").Operations(kadm.OpWrite, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := admin.CreateACLs(ctx, acls)
	if err != nil || len(res) != 2 || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("create ACLs: %v %+v", err, res)
	}
	if res, err := admin.CreateTopic(ctx, 1, 3, nil, "t"); err != nil || res.Err != nil {
		t.Fatalf("create t: %v %+v", err, res)
	}
	// Each broker knows alice's ACLs (through its watch) once she sees t.
	for id := int32(1); id <= 3; id++ {
		alice := as("alice", external[id]).SeedBrokers()[0]
		eventually(t, waitTimeout, fmt.Sprintf("alice sees t on broker %d", id), func() (bool, string) {
			md, err := metadataVia(ctx, alice, "t")
			if err != nil {
				return false, err.Error()
			}
			tp := topicOf(md, "t")
			if tp == nil || tp.ErrorCode != 0 || len(tp.Partitions) != 1 || tp.Partitions[0].Leader < 0 {
				return false, fmt.Sprintf("%+v", md.Topics)
			}
			if got := brokerAddrs(md); got != wantBrokers {
				return false, "alice is told the brokers " + got + ", want " + wantBrokers
			}
			return true, ""
		})
	}

	// alice produces with acks=all: the followers fetch as User:broker.
	alice := as("alice", external[1], kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var produced []string
	for i := range 20 {
		v := seqValue("alice", i)
		if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("alice produce %d: %v", i, err)
		}
		produced = append(produced, v)
	}
	md, err := metadataVia(ctx, as("admin", external[1]).SeedBrokers()[0], "t")
	if err != nil {
		t.Fatal(err)
	}
	p := topicOf(md, "t").Partitions[0]
	if isr := slices.Sorted(slices.Values(p.ISR)); !slices.Equal(isr, []int32{1, 2, 3}) {
		t.Errorf("ISR of t-0 after alice's acks=all produce: %v, want 1, 2, 3", isr)
	}
	leader := p.Leader
	if ends := endOffsetsWith(t, ctx, alice, "t"); ends != 20 {
		t.Errorf("end offset of t-0: %d, want 20", ends)
	}
	var consumed []string
	for len(consumed) < len(produced) {
		fs := alice.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("alice consumed %d of %d records", len(consumed), len(produced))
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("alice consuming: %v", errs)
		}
		fs.EachRecord(func(r *kgo.Record) { consumed = append(consumed, string(r.Value)) })
	}
	if !slices.Equal(consumed, produced) {
		t.Errorf("alice consumed %q, want %q", consumed, produced)
	}

	// mallory: t is hidden, named it is TOPIC_AUTHORIZATION_FAILED, and
	// her produce is refused.
	mallory := as("mallory", external[leader], kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	all, err := metadataVia(ctx, mallory.SeedBrokers()[0])
	if err != nil {
		t.Fatal(err)
	}
	if topicOf(all, "t") != nil {
		t.Errorf("mallory's metadata of every topic lists t")
	}
	named, err := metadataVia(ctx, mallory.SeedBrokers()[0], "t")
	if err != nil {
		t.Fatal(err)
	}
	if tp := topicOf(named, "t"); tp == nil || tp.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("mallory's metadata of t: %+v, want TOPIC_AUTHORIZATION_FAILED", named.Topics)
	}
	if err := mallory.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("mallory")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("mallory's produce to t: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// alice posing as a follower of t-0 on its leader: no ClusterAction.
	// Kafka answers a follower Fetch without it TOPIC_AUTHORIZATION_FAILED
	// per partition (KafkaApis.handleFetchRequest), a follower
	// OffsetForLeaderEpoch CLUSTER_AUTHORIZATION_FAILED.
	poser := as("alice", external[leader]).SeedBrokers()[0]
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MaxBytes = 2, 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, 0, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fresp, err := fetch.RequestWith(ctx, poser)
	if err != nil {
		t.Fatal(err)
	}
	if len(fresp.Topics) != 1 || len(fresp.Topics[0].Partitions) != 1 ||
		fresp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || len(fresp.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Errorf("alice's follower fetch: %+v, want TOPIC_AUTHORIZATION_FAILED and no records", fresp.Topics)
	}
	ofle := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ofle.ReplicaID = 2
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "t"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.Partition, op.CurrentLeaderEpoch, op.LeaderEpoch = 0, -1, 0
	ot.Partitions = append(ot.Partitions, op)
	ofle.Topics = append(ofle.Topics, ot)
	oresp, err := ofle.RequestWith(ctx, poser)
	if err != nil {
		t.Fatal(err)
	}
	if len(oresp.Topics) != 1 || len(oresp.Topics[0].Partitions) != 1 || oresp.Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("alice's follower OffsetForLeaderEpoch: %+v, want CLUSTER_AUTHORIZATION_FAILED", oresp.Topics)
	}
	// The same Fetch as a consumer (replica id -1) is hers to make.
	fetch.ReplicaID = -1
	if fresp, err = fetch.RequestWith(ctx, poser); err != nil || fresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Errorf("alice's consumer fetch: %v %+v", err, fresp)
	}
}

// brokerAddrs is a Metadata response's brokers, id to host:port, printed.
func brokerAddrs(md *kmsg.MetadataResponse) string {
	got := map[int32]string{}
	for _, b := range md.Brokers {
		got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	return fmt.Sprint(got)
}

// metadataVia asks for the metadata of topics (all without) through r,
// without auto-creation.
func metadataVia(ctx context.Context, r kmsg.Requestor, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return req.RequestWith(ctx, r)
}

// endOffsetsWith is the end offset of partition 0 of topic, asked through cl.
func endOffsetsWith(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s-0: %+v", topic, o)
	}
	return o.Offset
}
