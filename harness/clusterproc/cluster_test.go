package clusterproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/harness/internal/weirbin"
)

// weirBin is cmd/weir built once for the tests, the brokers' binary.
var weirBin string

func TestMain(m *testing.M) { os.Exit(weirbin.Main(m, &weirBin)) }

// Two clusters on one external ZooKeeper, each under a chroot of its own:
// each forms with its own brokers 1 and 2 only, serves a produce, and
// leaves no process behind when stopped.
func TestExternalZooKeeperChroots(t *testing.T) {
	zk := zktest.Start(t, zktest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var clusters []*Cluster
	for i := range 2 {
		connect, err := Chroot(zk.ConnectString()+"/runs", fmt.Sprintf("point-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		// auto: the external ZooKeeper is on loopback, out of reach of
		// namespaces, so loopback it is.
		c, err := Start(ctx, Config{Weir: weirBin, Dir: filepath.Join(t.TempDir(), "c"), Brokers: 2, ZooKeeper: connect, SessionTimeout: 4 * time.Second,
			Networking: NetworkingAuto})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop() })
		clusters = append(clusters, c)
		if c.ZooKeeperServer != nil || c.ZooKeeper != connect || c.Networking != NetworkingLoopback || !strings.HasSuffix(connect, fmt.Sprintf("/runs/point-%d", i)) {
			t.Errorf("cluster %d: zookeeper %q (server %v), networking %q", i, c.ZooKeeper, c.ZooKeeperServer, c.Networking)
		}
		if !strings.Contains(c.NetworkingFallback, "is on loopback") {
			t.Errorf("cluster %d: networking fallback %q, want why netns was not used", i, c.NetworkingFallback)
		}
		if err := c.LinkDown(1); !errors.Is(err, ErrNetns) {
			t.Errorf("cluster %d: LinkDown on loopback = %v, want ErrNetns", i, err)
		}
	}
	for i, c := range clusters {
		b := c.Broker(2)
		if b == nil || b.ID != 2 || c.Broker(3) != nil || b.DataDir != filepath.Join(c.Dir, "broker-2") {
			t.Fatalf("cluster %d: Broker(2) = %+v", i, b)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		seen, err := BrokersSeen(ctx, cl)
		if err != nil || !slices.Equal(seen.IDs, []int32{1, 2}) || seen.Controller < 1 {
			t.Errorf("cluster %d: broker 2 sees %+v (%v), want brokers [1 2] and a controller", i, seen, err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Errorf("cluster %d: produce: %v", i, err)
		}
		cl.Close()
		if err := c.CheckRunning(); err != nil {
			t.Error(err)
		}
	}
	for i, c := range clusters {
		if err := c.Stop(); err != nil {
			t.Errorf("cluster %d: Stop: %v", i, err)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("cluster %d: a second Stop: %v", i, err)
		}
		if left := ProcessesMentioning(c.Dir); len(left) > 0 {
			t.Errorf("cluster %d: processes left:\n%s", i, strings.Join(left, "\n"))
		}
	}
}

// A broker that cannot start fails Start with the broker's complaint, and
// the ZooKeeper and the other broker started are stopped.
func TestStartFailureStopsEverything(t *testing.T) {
	zktest.Require(t)
	dir := filepath.Join(t.TempDir(), "c")
	_, err := Start(context.Background(), Config{Weir: weirBin, Dir: dir, Brokers: 2, BrokerFlags: []string{"--no-such-flag"}})
	if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), "no-such-flag") || !strings.Contains(err.Error(), "broker 1") {
		t.Errorf("Start = %v, want ErrStart naming the broker and quoting its complaint", err)
	}
	if left := ProcessesMentioning(dir); len(left) > 0 {
		t.Errorf("processes left after a failed start:\n%s", strings.Join(left, "\n"))
	}
}

func TestConfigAndChroot(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Dir: "d", Brokers: 1}, "Weir"},
		{Config{Weir: "w", Brokers: 1}, "Dir"},
		{Config{Weir: "w", Dir: "d"}, "Brokers 0"},
		{Config{Weir: "w", Dir: "d", Brokers: 1, ZooKeeper: "a:99999"}, "ZooKeeper"},
		{Config{Weir: "w", Dir: "d", Brokers: 1, SessionTimeout: -time.Second}, "SessionTimeout"},
		{Config{Weir: "w", Dir: "d", Brokers: 2, PowerCutBroker: 3}, "PowerCutBroker 3: want 0 (none) or 1..2"},
		{Config{Weir: "w", Dir: "d", Brokers: 1, Networking: "bridge"}, `Networking "bridge": want loopback, netns or auto`},
		{Config{Weir: "w", Dir: "d", Brokers: 1, SecureProtocol: "TLS"}, `SecureProtocol "TLS": want SSL, SASL_PLAINTEXT or SASL_SSL`},
		{Config{Weir: "w", Dir: "d", Brokers: 1, Networking: "netns", ZooKeeper: "localhost:2181/weir"}, "Networking netns: ZooKeeper server localhost:2181 is on loopback"},
	} {
		if _, err := Start(context.Background(), tc.cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(%+v) = %v, want ErrConfig naming %s", tc.cfg, err, tc.want)
		}
	}
	for in, want := range map[[2]string]string{
		{"a:2181", "p1"}:             "a:2181/p1",
		{"a:2181,b/weir/x", "p1"}:    "a:2181,b:2181/weir/x/p1",
		{"a:2181/", "run-1-p000"}:    "a:2181/run-1-p000",
		{"a:2181", "a/b"}:            "",
		{"a:2181/bad//chroot", "p1"}: "",
	} {
		got, err := Chroot(in[0], in[1])
		if got != want || (want == "") != (err != nil) {
			t.Errorf("Chroot(%q, %q) = %q, %v; want %q", in[0], in[1], got, err, want)
		}
	}
}

func TestResolveNetworking(t *testing.T) {
	for _, tc := range []struct{ in, zk, want, why string }{
		{"", "", NetworkingLoopback, ""},
		{"loopback", "", NetworkingLoopback, ""},
		{"netns", "", NetworkingNetns, ""},
		{"auto", "127.0.0.1:2181", NetworkingLoopback, "127.0.0.1:2181 is on loopback"},
	} {
		used, why := ResolveNetworking(tc.in, tc.zk)
		if used != tc.want || (why == nil) != (tc.why == "") || (why != nil && !strings.Contains(why.Error(), tc.why)) {
			t.Errorf("ResolveNetworking(%q, %q) = %q, %v; want %q, %q", tc.in, tc.zk, used, why, tc.want, tc.why)
		}
	}
	// auto with an embedded ZooKeeper: netns exactly when it can be set up.
	used, why := ResolveNetworking(NetworkingAuto, "")
	if err := netnsUsable(); err != nil {
		if used != NetworkingLoopback || !errors.Is(why, ErrNetns) {
			t.Errorf("auto without netns (%v) = %q, %v; want loopback and why", err, used, why)
		}
	} else if used != NetworkingNetns || why != nil {
		t.Errorf("auto as root = %q, %v; want netns", used, why)
	}
}

// With LinkProxies, replication between brokers goes through one fault
// proxy per directed link: records produced with acks=all to a topic
// replicated on both brokers pass through the follower's proxy, and none
// go through a proxy of a link nobody replicates over.
func TestLinkProxies(t *testing.T) {
	zktest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{Weir: weirBin, Dir: filepath.Join(t.TempDir(), "c"), Brokers: 2, SessionTimeout: 8 * time.Second, LinkProxies: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if c.Link(1, 2) == nil || c.Link(2, 1) == nil || c.Link(1, 1) != nil {
		t.Fatalf("links 1->2 %v, 2->1 %v, 1->1 %v", c.Link(1, 2), c.Link(2, 1), c.Link(1, 1))
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, 2
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1, 2}}}
	rt.NumPartitions, rt.ReplicationFactor = -1, -1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, adm)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, resp)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic("t"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("record %d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Broker 1 leads (first in the assignment); broker 2 fetches from it
	// through link 2->1, whose downstream carried the records.
	if s := c.Link(2, 1).Stats(); s.Accepted == 0 || s.Forwarded[1] < 20*int64(len("record 0")) {
		t.Errorf("link 2->1 (the follower's): %+v, want the records forwarded downstream", s)
	}
	if s := c.Link(1, 2).Stats(); s.Forwarded[1] != 0 {
		t.Errorf("link 1->2 (nobody follows broker 2): %+v, want nothing forwarded", s)
	}
}

// The power-cut broker runs on the power-cut file system: only its power
// can be cut; it exits with the power cut's status, leaving its data
// directory to what it fsynced, and comes back on it (on the power-cut
// file system again: a second cut works) to rejoin the cluster.
func TestPowerCut(t *testing.T) {
	zktest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{Weir: weirBin, Dir: filepath.Join(t.TempDir(), "c"), Brokers: 2, SessionTimeout: 2 * time.Second, PowerCutBroker: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if c.PowerCutBroker != 2 {
		t.Errorf("PowerCutBroker = %d, want 2", c.PowerCutBroker)
	}
	if err := c.PowerCut(1); !errors.Is(err, ErrPowerCut) {
		t.Errorf("PowerCut(1), not the power-cut broker: %v, want ErrPowerCut", err)
	}
	if err := c.CheckRunning(); err != nil {
		t.Fatalf("a refused power cut struck: %v", err)
	}
	for cut := 1; cut <= 2; cut++ {
		old := c.Broker(2)
		if err := c.PowerCut(2); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		select {
		case <-old.Exited():
		default:
			t.Fatalf("cut %d: PowerCut returned with the broker running", cut)
		}
		if !brokerproc.PowerCutExit(old.ExitErr()) || !strings.Contains(old.Output(), "power cut") {
			t.Fatalf("cut %d: exit %v: %s", cut, old.ExitErr(), old.Output())
		}
		if _, err := os.Stat(filepath.Join(old.DataDir, "meta.properties")); err != nil {
			t.Errorf("cut %d: the fsynced identity did not survive: %v", cut, err)
		}
		if err := c.StartBroker(ctx, 2); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if err := c.WaitFormed(ctx); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
}
