package clusterproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cluster/zk/zktest"
)

// requireNetns skips without ZooKeeper, root or the ip command, or fails
// under CI=true (which runs as root with ZooKeeper installed).
func requireNetns(t *testing.T) {
	t.Helper()
	zktest.Require(t)
	if err := netnsUsable(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: not skipping)", err)
		}
		t.Skip(err)
	}
}

// A 3-broker netns cluster forms, each broker in its namespace at its own
// address; a client in the root namespace produces to a topic replicated
// over all three and consumes it back. Broker 3's link down cuts it from
// the client and from ZooKeeper (its registration expires) while brokers 1
// and 2 keep serving; its link up brings it back into the cluster; killed
// and started again, it comes back in its namespace, as broker 2 does
// from a Restart. Stop, with broker 1's link down, stops every broker
// cleanly and leaves no process, namespace, link or held slot behind.
func TestNetnsCluster(t *testing.T) {
	requireNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "c")
	c, err := Start(ctx, Config{Weir: weirBin, Dir: dir, Brokers: 3, SessionTimeout: 2 * time.Second, Networking: NetworkingNetns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	n := c.net
	if c.Networking != NetworkingNetns || c.NetworkingFallback != "" || n == nil {
		t.Fatalf("networking %q (fallback %q), want netns", c.Networking, c.NetworkingFallback)
	}
	if host, _, _ := net.SplitHostPort(c.ZooKeeper); host != n.bridgeIP() {
		t.Errorf("ZooKeeper %s, want it on the bridge's address %s", c.ZooKeeper, n.bridgeIP())
	}
	namespaces, err := Namespaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range c.Brokers {
		want := net.JoinHostPort(fmt.Sprintf("10.213.%d.%d", n.slot, 10+b.ID), strconv.Itoa(NetnsKafkaPort))
		if b.Addr != want || !slices.Contains(namespaces, b.Namespace) || b.Veth != n.hostVeth(b.ID) {
			t.Errorf("broker %d: addr %s (want %s), namespace %q (have %v), veth %q", b.ID, b.Addr, want, b.Namespace, namespaces, b.Veth)
		}
		checkInNamespace(t, b)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	createTopic(ctx, t, cl, "t", 3, 3)
	var want []string
	for i := range 30 {
		want = append(want, fmt.Sprintf("r%02d", i))
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(want[i])}).FirstErr(); err != nil {
			t.Fatalf("produce %d (acks=all over 3 replicas): %v", i, err)
		}
	}
	var got []string
	for len(got) < len(want) && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %v, want %v", got, want)
	}

	// Broker 3 cut off.
	b3 := c.Broker(3)
	if err := c.LinkDown(3); err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", b3.Addr, time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("dialled broker 3 at %s with its link down", b3.Addr)
	}
	t.Logf("dial broker 3 with its link down: %v", err)
	one, err := kgo.NewClient(kgo.SeedBrokers(c.Broker(1).Addr, c.Broker(2).Addr), kgo.DefaultProduceTopic("after"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	waitSeen(ctx, t, one, []int32{1, 2}, "broker 3's session expires with its link down")
	select {
	case <-b3.Exited():
		t.Fatalf("broker 3 exited with its link down: %s", b3.describe())
	default:
	}
	if err := one.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Errorf("produce through brokers 1 and 2 with broker 3 cut off: %v", err)
	}

	// Broker 3 back.
	if err := c.LinkUp(3); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFormed(ctx); err != nil {
		t.Fatalf("after LinkUp: %v", err)
	}
	waitSeen(ctx, t, one, []int32{1, 2, 3}, "broker 3 registered again")

	// Broker 3 killed and started again, in its namespace.
	oldPid, oldAddr := b3.Pid(), b3.Addr
	if err := b3.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-b3.Exited()
	if err := c.StartBroker(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if c.Broker(3) == b3 || b3.Pid() != oldPid {
		t.Error("StartBroker changed the Broker value it replaces (readers may hold it)")
	}
	b3 = c.Broker(3)
	if b3.Pid() == oldPid || b3.Addr != oldAddr {
		t.Errorf("after StartBroker: pid %d (was %d), addr %s", b3.Pid(), oldPid, b3.Addr)
	}
	checkInNamespace(t, b3)
	if err := c.StartBroker(ctx, 3); !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), "is running") {
		t.Errorf("StartBroker of a running broker = %v, want ErrStart", err)
	}
	if err := c.WaitFormed(ctx); err != nil {
		t.Fatalf("after StartBroker: %v", err)
	}

	// Broker 2 restarted (a controlled shutdown), in its namespace.
	b2 := c.Broker(2)
	oldPid = b2.Pid()
	if err := c.Restart(ctx, 2); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	b2 = c.Broker(2)
	if b2.Pid() == oldPid {
		t.Errorf("Restart kept pid %d", oldPid)
	}
	checkInNamespace(t, b2)
	if err := c.WaitFormed(ctx); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
	one.Close()
	cl.Close()

	// Stop with a link down: the link comes up for the brokers' controlled
	// shutdown, so none has to be killed.
	if err := c.LinkDown(1); err != nil {
		t.Fatal(err)
	}

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	checkNothingLeft(t, n, dir)
}

// checkInNamespace checks that broker b's pid is the weir binary (ip netns
// exec execs it) and runs in b's network namespace.
func checkInNamespace(t *testing.T, b *Broker) {
	t.Helper()
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", b.Pid())); err != nil || exe != weirBin {
		t.Errorf("broker %d: pid %d runs %q (%v), want %s: the pid must be the broker's", b.ID, b.Pid(), exe, err, weirBin)
	}
	var in, want syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", b.Pid()), &in); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(filepath.Join("/run/netns", b.Namespace), &want); err != nil {
		t.Fatal(err)
	}
	if in.Ino != want.Ino || in.Dev != want.Dev {
		t.Errorf("broker %d (pid %d) is not in network namespace %s", b.ID, b.Pid(), b.Namespace)
	}
}

// checkNothingLeft checks that nothing of a cluster on network n is left:
// processes naming dir, namespaces, links, and the slot's lock.
func checkNothingLeft(t *testing.T, n *network, dir string) {
	t.Helper()
	if left := ProcessesMentioning(dir); len(left) > 0 {
		t.Errorf("processes left:\n%s", strings.Join(left, "\n"))
	}
	checkNoNetwork(t, n)
	again, _, err := claimSlot(n.slot)
	if err != nil || again == nil {
		t.Errorf("slot %d not free after Stop (%v)", n.slot, err)
	} else {
		_ = again.close()
	}
}

// checkNoNetwork checks that no namespace (ip netns list) or link (ip
// link) of n's slot exists.
func checkNoNetwork(t *testing.T, n *network) {
	t.Helper()
	namespaces, err := Namespaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces {
		if strings.HasPrefix(ns, n.nsPrefix()) {
			t.Errorf("namespace %s left (ip netns list: %v)", ns, namespaces)
		}
	}
	links, err := ip("-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(links) {
		if f := strings.Fields(line); len(f) > 1 {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if name == n.bridge() || strings.HasPrefix(name, n.vethPrefix()) {
				t.Errorf("link %s left", name)
			}
		}
	}
}

// waitSeen polls the client's first seed broker until it lists exactly
// ids (and a controller).
func waitSeen(ctx context.Context, t *testing.T, cl *kgo.Client, ids []int32, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last Seen
	var err error
	for ctx.Err() == nil {
		if last, err = BrokersSeen(ctx, cl); err == nil && slices.Equal(last.IDs, ids) && last.Controller >= 0 {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollInterval):
		}
	}
	t.Fatalf("%s: broker lists %+v (%v), want %v", what, last, err, ids)
}

func createTopic(ctx context.Context, t *testing.T, cl *kgo.Client, name string, partitions int32, rf int16) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create topic %s: error code %d", name, code)
	}
}

// A broker that cannot start fails a netns Start, and everything is
// removed: processes, namespaces, links, the slot.
func TestNetnsStartFailureRemovesEverything(t *testing.T) {
	requireNetns(t)
	dir := filepath.Join(t.TempDir(), "c")
	before, err := Namespaces()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(context.Background(), Config{Weir: weirBin, Dir: dir, Brokers: 2, BrokerFlags: []string{"--no-such-flag"}, Networking: NetworkingNetns})
	if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("Start = %v, want ErrStart quoting the broker's complaint", err)
	}
	cfg, rerr := os.ReadFile(filepath.Join(dir, "zookeeper", "zoo.cfg"))
	if rerr != nil || !strings.Contains(string(cfg), "clientPortAddress=10.213.") {
		t.Fatalf("ZooKeeper was not started on a bridge (%v):\n%s", rerr, cfg)
	}
	if left := ProcessesMentioning(dir); len(left) > 0 {
		t.Errorf("processes left after a failed start:\n%s", strings.Join(left, "\n"))
	}
	after, err := Namespaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range after {
		if strings.HasPrefix(ns, "weir-") && !slices.Contains(before, ns) {
			t.Errorf("namespace %s left after a failed start", ns)
		}
	}
}

// Two networks at once get different slots (names and subnets); a
// crashed holder's leftovers (its lock freed, nothing deleted) are removed
// by the next claim of its slot.
func TestNetnsSlots(t *testing.T) {
	requireNetns(t)
	a, err := setupNetwork(2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := setupNetwork(1)
	if err != nil {
		_ = a.close()
		t.Fatal(err)
	}
	if a.slot == b.slot || a.bridge() == b.bridge() || a.subnet() == b.subnet() || a.namespace(1) == b.namespace(1) {
		t.Errorf("two networks share slot %d/%d", a.slot, b.slot)
	}
	if err := b.close(); err != nil {
		t.Error(err)
	}
	// a "crashes": its lock goes with it, its namespaces and links stay.
	if err := a.release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", a.bridge())); err != nil {
		t.Fatalf("the crashed network's bridge is gone before the test: %v", err)
	}
	again, why, err := claimSlot(a.slot)
	if err != nil || again == nil {
		t.Fatalf("claim slot %d after its holder crashed: %v %s", a.slot, err, why)
	}
	checkNoNetwork(t, a)
	if err := again.close(); err != nil {
		t.Error(err)
	}
}

// ip's errors name the command and quote its output.
func TestIPErrors(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip(err)
	}
	_, err := ip("link", "del", "weir-no-such-link")
	if !errors.Is(err, ErrNetns) || !strings.Contains(err.Error(), "ip link del weir-no-such-link: exit status") {
		t.Errorf("ip error %v, want the command and its exit", err)
	}
}
