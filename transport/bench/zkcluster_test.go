package bench_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/harness/brokerproc"
)

// The cluster benchmarks run `weir broker` itself (cmd/weir, built once per
// test binary) as subprocesses through harness/brokerproc, against a real
// ZooKeeper from cluster/zk/zktest (tickTime 200 ms, so it grants session
// timeouts from 0.4 s to 20 s).

// zkSession is the ZooKeeper session timeout the cluster brokers ask for
// (--zookeeper-session-timeout): how long a SIGKILLed broker stays
// registered, so the floor of every failover time.
var zkSession = flag.Duration("zk-session", 4*time.Second, "ZooKeeper session timeout of the cluster benchmarks' brokers")

// pollInterval is how often the cluster benchmarks poll for a state: the
// resolution of their times, besides a request's own round trip.
const pollInterval = 10 * time.Millisecond

var weirBin struct {
	once      sync.Once
	dir, path string
	err       error
}

// weirFlag names a `weir` binary to run instead of building cmd/weir, or
// several builds to compare, as name=path,name=path: the replication
// benchmarks then run every setup on each build in turn (their names get a
// weir=<name> key), the other cluster benchmarks on the first.
var weirFlag = flag.String("weir", "", "run this weir `binary` as the cluster benchmarks' brokers instead of building cmd/weir from this tree; name=path,name=path compares builds in BenchmarkReplication(Latency)")

// weirBuild is one build of `weir` a benchmark runs; name is empty for the
// one build there is without a list in -weir.
type weirBuild struct{ name, path string }

// key is the build's part of a sub-benchmark name.
func (w weirBuild) key() string {
	if w.name == "" {
		return ""
	}
	return "/weir=" + w.name
}

// weirBuilds returns the builds -weir lists, or the one build weirBinary
// returns.
func weirBuilds(tb testing.TB) []weirBuild {
	tb.Helper()
	if !strings.Contains(*weirFlag, "=") {
		return []weirBuild{{"", weirBinary(tb)}}
	}
	var out []weirBuild
	for _, kv := range strings.Split(*weirFlag, ",") {
		name, path, ok := strings.Cut(kv, "=")
		if !ok || name == "" || path == "" {
			tb.Fatalf("-weir %q: want a path or name=path,name=path", *weirFlag)
		}
		out = append(out, weirBuild{name, path})
	}
	return out
}

// weirBinary builds cmd/weir into a temporary directory, once per test
// binary (TestMain removes it), and returns its path; or returns -weir (its
// first build when it lists several).
func weirBinary(tb testing.TB) string {
	tb.Helper()
	if *weirFlag != "" && !strings.Contains(*weirFlag, "=") {
		return *weirFlag
	}
	if *weirFlag != "" {
		return weirBuilds(tb)[0].path
	}
	weirBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "weir-bench-")
		if err != nil {
			weirBin.err = err
			return
		}
		weirBin.dir = dir
		path := filepath.Join(dir, "weir")
		cmd := exec.Command("go", "build", "-o", path, "github.com/weir-broker/weir/cmd/weir")
		// In this module, wherever the test binary runs from.
		if _, file, _, ok := runtime.Caller(0); ok {
			if _, err := os.Stat(file); err == nil {
				cmd.Dir = filepath.Dir(file)
			}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			weirBin.err = fmt.Errorf("go build cmd/weir: %w\n%s", err, out)
			return
		}
		weirBin.path = path
	})
	if weirBin.err != nil {
		tb.Fatal(weirBin.err)
	}
	return weirBin.path
}

// removeWeirBinary removes what weirBinary built; TestMain calls it.
func removeWeirBinary() {
	if weirBin.dir != "" {
		os.RemoveAll(weirBin.dir)
	}
}

// brokerSet is a set of `weir broker` processes: the brokers of one
// ZooKeeper cluster, or one broker alone on its file store. Its methods must
// be called from the test's goroutine, except the request helpers.
type brokerSet struct {
	tb      testing.TB
	bin     string
	dir     string // holds the brokers' data directories
	flags   func(id int32) []string
	brokers map[int32]*setBroker // by broker id

	pprof map[int32]string // pprof endpoints by broker id (-broker-pprof)

	mu      sync.Mutex
	clients map[string]*kgo.Client // by address: see pinned
}

type setBroker struct {
	id   int32
	dir  string              // its data directory, kept across restarts
	proc *brokerproc.Process // nil while it is down
}

// startZKCluster starts a ZooKeeper server and n brokers (ids 1..n) joining
// it under the chroot /weir, each with the session timeout asked for, and
// waits until every broker sees all of them and a controller. When tb ends
// the brokers are stopped (SIGTERM), then ZooKeeper.
func startZKCluster(tb testing.TB, n int, session time.Duration, logLevel string) *brokerSet {
	tb.Helper()
	return startZKClusterOf(tb, weirBinary(tb), n, session, logLevel)
}

// startZKClusterOf is startZKCluster running the weir binary bin.
func startZKClusterOf(tb testing.TB, bin string, n int, session time.Duration, logLevel string) *brokerSet {
	tb.Helper()
	zk := zktest.Start(tb, zktest.Options{})
	connect := zk.ConnectString() + "/weir"
	s := newBrokerSet(tb, bin, func(id int32) []string {
		return []string{"--zookeeper", connect, "--broker-id", strconv.Itoa(int(id)),
			"--zookeeper-session-timeout", session.String(), "--log-level", logLevel}
	})
	for id := int32(1); id <= int32(n); id++ {
		s.start(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := s.awaitHealthy(ctx, "", 0); err != nil {
		tb.Fatalf("cluster of %d: %v%s", n, err, s.outputs())
	}
	return s
}

// startSingleBroker starts one `weir broker` without --zookeeper: a single
// node on the file store in its data directory, broker id 0.
func startSingleBroker(tb testing.TB) *brokerSet {
	tb.Helper()
	s := newBrokerSet(tb, weirBinary(tb), func(int32) []string { return nil })
	s.start(0)
	return s
}

func newBrokerSet(tb testing.TB, bin string, flags func(int32) []string) *brokerSet {
	s := &brokerSet{tb: tb, bin: bin, dir: tb.TempDir(), flags: flags, brokers: map[int32]*setBroker{}, pprof: map[int32]string{}, clients: map[string]*kgo.Client{}}
	// After dir's cleanup is registered, so that it runs first: the
	// brokers stop before their data directories are removed.
	tb.Cleanup(s.close)
	return s
}

// start starts broker id (again, on the same data directory, but a new
// port: brokerproc picks a free one each time) and returns once its port
// accepts connections.
func (s *brokerSet) start(id int32) {
	s.tb.Helper()
	b := s.brokers[id]
	if b == nil {
		b = &setBroker{id: id, dir: filepath.Join(s.dir, fmt.Sprintf("broker-%d", id))}
		s.brokers[id] = b
	}
	if b.proc != nil {
		s.tb.Fatalf("broker %d is running", id)
	}
	p, err := brokerproc.Start(context.Background(), brokerproc.Options{Weir: s.bin, DataDir: b.dir,
		Flags: append(s.flags(id), s.pprofFlags(id)...), Metrics: true, DeathSignal: syscall.SIGKILL})
	if err != nil {
		s.tb.Fatalf("broker %d: %v", id, err)
	}
	b.proc = p
}

// term stops broker id with SIGTERM (its controlled shutdown) and returns
// the time just before the signal; it returns before the process exits.
func (s *brokerSet) term(id int32) (time.Time, <-chan struct{}) {
	s.tb.Helper()
	b := s.brokers[id]
	if b == nil || b.proc == nil {
		s.tb.Fatalf("broker %d is not running", id)
	}
	t := time.Now()
	if err := b.proc.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.tb.Fatalf("stop broker %d: %v", id, err)
	}
	exited := b.proc.Exited()
	b.proc = nil
	return t, exited
}

// kill SIGKILLs broker id, waits until it has been reaped, and returns the
// time just before the signal.
func (s *brokerSet) kill(id int32) time.Time {
	s.tb.Helper()
	b := s.brokers[id]
	if b == nil || b.proc == nil {
		s.tb.Fatalf("broker %d is not running", id)
	}
	t := time.Now()
	if err := b.proc.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.tb.Fatalf("kill broker %d: %v", id, err)
	}
	<-b.proc.Exited()
	b.proc = nil
	return t
}

// close stops every running broker and closes the clients.
func (s *brokerSet) close() {
	for _, id := range slices.Sorted(maps.Keys(s.brokers)) {
		if b := s.brokers[id]; b.proc != nil {
			if err := b.proc.Stop(); err != nil {
				s.tb.Errorf("broker %d: %v", id, err)
			}
			b.proc = nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cl := range s.clients {
		cl.Close()
	}
}

// live returns the ids of the running brokers, sorted.
func (s *brokerSet) live() []int32 {
	var ids []int32
	for id, b := range s.brokers {
		if b.proc != nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// addr is broker id's address (it must be running).
func (s *brokerSet) addr(id int32) string {
	s.tb.Helper()
	b := s.brokers[id]
	if b == nil || b.proc == nil {
		s.tb.Fatalf("broker %d is not running", id)
	}
	return b.proc.Addr
}

// addrs are the running brokers' addresses, by id.
func (s *brokerSet) addrs() []string {
	var a []string
	for _, id := range s.live() {
		a = append(a, s.brokers[id].proc.Addr)
	}
	return a
}

// outputs is the end of every running broker's log, for failures.
func (s *brokerSet) outputs() string {
	var out string
	for _, id := range slices.Sorted(maps.Keys(s.brokers)) {
		if b := s.brokers[id]; b.proc != nil {
			out += fmt.Sprintf("\n==== broker %d (%s)\n%s", id, b.proc.Addr, b.proc.Output())
		}
	}
	return out
}

// requestTimeout bounds each request of the cluster benchmarks' polls, so
// a broker that stops answering cannot stall a poll past its deadline.
const requestTimeout = 5 * time.Second

// pinned sends req to the broker at addr and nowhere else: through a kgo
// client whose only seed is addr, one per address, kept until the set is
// closed (its requests are never retried or rerouted).
func (s *brokerSet) pinned(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	s.mu.Lock()
	cl := s.clients[addr]
	if cl == nil {
		var err error
		cl, err = kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		s.clients[addr] = cl
	}
	s.mu.Unlock()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// metadata asks the broker at addr for the brokers, the controller and
// topic's partitions (no topics with topic "").
func (s *brokerSet) metadata(ctx context.Context, addr, topic string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	if topic != "" {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, t)
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := s.pinned(rctx, addr, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// leaders returns the leader of each partition of topic in a Metadata
// response (-1 for a partition answered with an error), or an error when
// the topic is missing or has not the partitions expected.
func leaders(resp *kmsg.MetadataResponse, topic string, partitions int) ([]int32, error) {
	if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != topic {
		return nil, fmt.Errorf("metadata: topic %s not answered", topic)
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		return nil, fmt.Errorf("metadata: topic %s: %w", topic, err)
	}
	if len(t.Partitions) != partitions {
		return nil, fmt.Errorf("metadata: topic %s: %d partitions, want %d", topic, len(t.Partitions), partitions)
	}
	l := make([]int32, partitions)
	for _, p := range t.Partitions {
		if p.Partition < 0 || int(p.Partition) >= partitions {
			return nil, fmt.Errorf("metadata: topic %s: partition %d", topic, p.Partition)
		}
		l[p.Partition] = p.Leader
		if p.ErrorCode != 0 {
			l[p.Partition] = -1
		}
	}
	return l, nil
}

// brokerAddr is broker id's address in a Metadata response, or "".
func brokerAddr(resp *kmsg.MetadataResponse, id int32) string {
	for _, b := range resp.Brokers {
		if b.NodeID == id {
			return fmt.Sprintf("%s:%d", b.Host, b.Port)
		}
	}
	return ""
}

// healthy reports whether a Metadata response from a broker of the set shows
// exactly the running brokers at their addresses, one of them as
// controller, and, with topic != "", a leader for each of its partitions.
func (s *brokerSet) healthy(resp *kmsg.MetadataResponse, topic string, partitions int) error {
	live := s.live()
	if len(resp.Brokers) != len(live) {
		return fmt.Errorf("%d brokers, want %d", len(resp.Brokers), len(live))
	}
	for _, id := range live {
		if got, want := brokerAddr(resp, id), s.brokers[id].proc.Addr; got != want {
			return fmt.Errorf("broker %d at %q, want %s", id, got, want)
		}
	}
	if !slices.Contains(live, resp.ControllerID) {
		return fmt.Errorf("controller %d", resp.ControllerID)
	}
	if topic == "" {
		return nil
	}
	l, err := leaders(resp, topic, partitions)
	if err != nil {
		return err
	}
	for p, id := range l {
		if !slices.Contains(live, id) {
			return fmt.Errorf("partition %d: leader %d", p, id)
		}
	}
	return nil
}

// awaitHealthy polls every running broker's Metadata until each is healthy
// (see healthy), or ctx ends.
func (s *brokerSet) awaitHealthy(ctx context.Context, topic string, partitions int) error {
	for _, id := range s.live() {
		addr := s.brokers[id].proc.Addr
		if err := poll(ctx, func() error {
			resp, err := s.metadata(ctx, addr, topic)
			if err != nil {
				return err
			}
			return s.healthy(resp, topic, partitions)
		}); err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
	}
	return nil
}

// controller returns the controller in broker id's Metadata.
func (s *brokerSet) controller(ctx context.Context, id int32) (int32, error) {
	resp, err := s.metadata(ctx, s.addr(id), "")
	if err != nil {
		return -1, err
	}
	return resp.ControllerID, nil
}

// poll calls f every pollInterval until it returns nil, and returns the
// last error wrapped in ctx's when ctx ends first.
func poll(ctx context.Context, f func() error) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// produceOne sends one record of 100 B to topic's partition p at addr with
// acks=1 (a plain, non-idempotent batch) and returns the partition's error.
func (s *brokerSet) produceOne(ctx context.Context, addr, topic string, p int32) error {
	return s.produceOneAcks(ctx, addr, topic, p, 1)
}

// produceOneAcks is produceOne with the acks given (-1: acks=all).
func (s *brokerSet) produceOneAcks(ctx context.Context, addr, topic string, p int32, acks int16) error {
	batch, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: make([]byte, 100), Timestamp: time.Now().UnixMilli()}})
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	req.TimeoutMillis = int32(requestTimeout / time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := s.pinned(rctx, addr, req)
	if err != nil {
		return err
	}
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return errors.New("produce: malformed response")
	}
	return kerr.ErrorForCode(pr.Topics[0].Partitions[0].ErrorCode)
}
