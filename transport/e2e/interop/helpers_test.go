package interop_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// opTimeout bounds one operation of one client (a script run, a Go
// operation): generous for a 2-core machine shared with other test binaries,
// and above the compaction wait, the longest.
const opTimeout = 90 * time.Second

// ops are the operations every client runs, in this order, each on its own
// topic (<client>-<op>) of the client's broker; doc.go says what each does.
var ops = []string{"smoke", "configs", "incremental", "brokerconfigs", "partitions", "deleterecords", "compaction", "internal", "groups", "offsetdelete", "logdirs", "transactions", "restart"}

// lacks says which operations each client has no API for (client -> op ->
// why); README.md's Interoperability table shows the same (TestReadmeInterop).
var lacks = map[string]map[string]string{
	"kafka-python": {
		"incremental":   "2.0.2's KafkaAdminClient has alter_configs (AlterConfigs) only, no incremental_alter_configs",
		"deleterecords": "2.0.2's KafkaAdminClient has no delete_records",
		"offsetdelete":  "2.0.2's KafkaAdminClient has no call for OffsetDelete",
		"logdirs":       "2.0.2's KafkaAdminClient has no call for DescribeLogDirs",
		"transactions":  "2.0.2 has no transactional producer",
	},
	"confluent-kafka": {
		"incremental":   "1.7.0's AdminClient has alter_configs (AlterConfigs) only, no incremental_alter_configs",
		"deleterecords": "1.7.0's AdminClient has no delete_records",
		"offsetdelete":  "1.7.0's AdminClient has no call for OffsetDelete",
		"logdirs":       "1.7.0's AdminClient has no call for DescribeLogDirs",
	},
	"KafkaJS": {
		"incremental":  "2.2.4's admin has alterConfigs (AlterConfigs) only, no IncrementalAlterConfigs",
		"offsetdelete": "2.2.4's admin has no call for OffsetDelete (deleteGroups, resetOffsets and setOffsets only)",
		"logdirs":      "2.2.4's admin has no call for DescribeLogDirs",
	},
	"kafka-go": {
		"deleterecords": "v0.4.51's Client has no DeleteRecords",
		"logdirs":       "v0.4.51's Client has no DescribeLogDirs",
		"transactions":  "v0.4.51 has no transactional producer (its Reader reads read_committed, but nothing here writes a transaction through it)",
	},
	"sarama": {},
}

// client is one client under test: its name (a key of lacks, as in
// README.md's table) and how to run an operation.
type client struct {
	name string
	// run performs op against addr on topic (and group topic+"-g"), failing
	// t when the client reports a failure.
	run func(t *testing.T, addr, op, topic string)
}

// runClient starts a broker for c and runs every operation as a subtest, the
// client's own assertions first, then the broker side's (checks). Before the
// last, restart, it restarts the broker on the same data directory and
// address, and restart looks at the groups operation's group.
func runClient(t *testing.T, c client) {
	dir := t.TempDir()
	b := startBroker(t, dir, "127.0.0.1:0")
	prefix := strings.NewReplacer(".", "-", " ", "-").Replace(c.name)
	for _, op := range ops {
		t.Run(op, func(st *testing.T) {
			if why, ok := lacks[c.name][op]; ok {
				st.Skipf("%s lacks %s: %s (README.md, Interoperability)", c.name, op, why)
			}
			topic := prefix + "-" + op
			if op == "restart" {
				topic = prefix + "-groups"
				addr := b.Addr()
				if err := b.Close(); err != nil {
					st.Fatalf("closing the broker to restart it: %v", err)
				}
				b = startBroker(t, dir, addr)
			}
			c.run(st, b.Addr(), op, topic)
			if check := checks[op]; check != nil {
				check(st, b.Addr(), topic)
			}
		})
	}
}

// startBroker starts a broker on dir and listen tuned by brokertest
// (auto-created topics, rebalances without delay), with a cleaner that looks
// for dirty compacted partitions every 50 ms.
func startBroker(t *testing.T, dir, listen string) *broker.Broker {
	return brokertest.Start(t, dir, func(c *broker.Config) {
		c.Listen = listen
		c.CleanerBackoff = 50 * time.Millisecond
	})
}

// missing skips the test because what is missing, or fails it under CI=true
// (.ci/run installs every client; without one CI would pass by testing less).
func missing(t testing.TB, what, install string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s, and CI=true: .ci/run must install it (%s)", what, install)
	}
	t.Skipf("%s; skipping this client's interop tests (to run them: %s, or make deps as root)", what, install)
}

// run runs a client program in dir (or the test's directory when empty),
// logging its output, and fails the test when it fails or outlives
// opTimeout.
func run(t testing.TB, dir string, name string, args ...string) {
	t.Helper()
	runEnv(t, dir, nil, name, args...)
}

// runEnv is run with env added to the program's environment.
func runEnv(t testing.TB, dir string, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	for line := range strings.Lines(out.String()) {
		t.Log(strings.TrimRight(line, "\n"))
	}
	if ctx.Err() != nil {
		t.Fatalf("%s %s: no result within %s", name, strings.Join(args, " "), opTimeout)
	}
	if err != nil {
		t.Fatalf("%s %s: %v (its output is above)", name, strings.Join(args, " "), err)
	}
}

// checks verify the broker's side of what a client did, with franz-go, so
// that a client reporting success for what it did not do still fails.
var checks = map[string]func(t *testing.T, addr, topic string){
	"smoke": func(t *testing.T, addr, topic string) {
		starts, ends := offsets(t, addr, topic)
		if len(ends) != 3 {
			t.Fatalf("%s: %d partitions, want the 3 the client created", topic, len(ends))
		}
		if n := sum(ends) - sum(starts); n != 20 {
			t.Errorf("%s: %d records, want the 20 the client produced", topic, n)
		}
		if got := committed(t, addr, topic+"-g", topic, len(ends)); sum(got) != 20 {
			t.Errorf("group %s-g committed %v, want offsets summing to the 20 records", topic, got)
		}
	},
	"configs": func(t *testing.T, addr, topic string) {
		if c := topicConfig(t, addr, topic, "retention.ms"); c.value != "7200000" || c.source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("%s: retention.ms is %s, want 7200000 set on the topic", topic, c)
		}
	},
	"incremental": func(t *testing.T, addr, topic string) {
		if c := topicConfig(t, addr, topic, "retention.ms"); c.value != "7200000" || c.source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("%s: retention.ms is %s, want 7200000 set on the topic", topic, c)
		}
		if c := topicConfig(t, addr, topic, "segment.ms"); c.source == kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("%s: segment.ms is %s, want it deleted from the topic", topic, c)
		}
		if c := topicConfig(t, addr, topic, "cleanup.policy"); c.value != "compact" || c.source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("%s: cleanup.policy is %s, want compact set on the topic", topic, c)
		}
	},
	"brokerconfigs": func(t *testing.T, addr, topic string) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx(t), newClient(t, addr))
		if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("DescribeConfigs broker 0: %+v, %v", resp, err)
		}
		if !slices.ContainsFunc(resp.Resources[0].Configs, func(c kmsg.DescribeConfigsResponseResourceConfig) bool {
			return c.Name == "num.partitions" && c.Value != nil && *c.Value != ""
		}) {
			t.Errorf("DescribeConfigs broker 0: no num.partitions in %+v", resp.Resources[0].Configs)
		}
	},
	"partitions": func(t *testing.T, addr, topic string) {
		starts, ends := offsets(t, addr, topic)
		if len(ends) != 3 || ends[2]-starts[2] != 1 {
			t.Errorf("%s: partitions from %v to %v, want 3, with one record in partition 2", topic, starts, ends)
		}
	},
	"deleterecords": func(t *testing.T, addr, topic string) {
		starts, ends := offsets(t, addr, topic)
		if len(ends) != 1 || starts[0] != 5 || ends[0] != 10 {
			t.Errorf("%s: offsets from %v to %v, want one partition from 5 to 10", topic, starts, ends)
		}
	},
	"compaction": func(t *testing.T, addr, topic string) {
		if err := compacted(readAll(t, addr, topic)); err != nil {
			t.Errorf("%s read by franz-go: %v", topic, err)
		}
	},
	"internal": func(t *testing.T, addr, topic string) {
		md := metadata(t, addr, "__consumer_offsets")
		if len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 || !md.Topics[0].IsInternal {
			t.Errorf("Metadata for __consumer_offsets: %+v, want it, internal", md.Topics)
		}
	},
	"groups": checkGroup,
	"logdirs": func(t *testing.T, addr, topic string) {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx(t), newClient(t, addr))
		if err != nil {
			t.Fatalf("DescribeLogDirs %s: %v", topic, err)
		}
		for _, d := range resp.Dirs {
			for _, dt := range d.Topics {
				for _, p := range dt.Partitions {
					if dt.Topic == topic && p.Partition == 0 && p.Size > 0 {
						return
					}
				}
			}
		}
		t.Errorf("DescribeLogDirs %s: no size for partition 0 in %+v", topic, resp.Dirs)
	},
	"restart": func(t *testing.T, addr, topic string) {
		checkGroup(t, addr, topic)
		if got := committed(t, addr, topic+"-g", topic, 1); got[0] != 3 {
			t.Errorf("group %s-g: committed %v after the restart, want 3", topic, got)
		}
	},
	"transactions": checkTransactions,
	"offsetdelete": func(t *testing.T, addr, topic string) {
		if got := committed(t, addr, topic+"-g", topic, 1); got[0] != -1 {
			t.Errorf("group %s-g: committed %v after OffsetDelete, want none", topic, got)
		}
	},
}

// checkTransactions checks the broker's side of the transactions operation:
// 15 records and 3 markers, read_committed reading the 10 committed ones,
// read_uncommitted all 15, the last stable offset at the log end (nothing
// open), and the transactional id listed, its last transaction committed.
func checkTransactions(t *testing.T, addr, topic string) {
	_, ends := offsets(t, addr, topic)
	if len(ends) != 1 || ends[0] != 18 {
		t.Fatalf("%s: log ends at %v, want one partition ending at 18 (15 records, 3 markers)", topic, ends)
	}
	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.IsolationLevel = 1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lreq.Topics = append(lreq.Topics, lt)
	lresp, err := lreq.RequestWith(ctx(t), newClient(t, addr))
	if err != nil || len(lresp.Topics) != 1 || len(lresp.Topics[0].Partitions) != 1 {
		t.Fatalf("ListOffsets read_committed %s: %+v, %v", topic, lresp, err)
	}
	if p := lresp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 18 {
		t.Errorf("ListOffsets read_committed %s: offset %d (error %d), want the last stable offset 18", topic, p.Offset, p.ErrorCode)
	}
	values := func(name string) []string {
		var out []string
		for i := range 5 {
			out = append(out, fmt.Sprintf("%s-%d", name, i))
		}
		return out
	}
	for _, c := range []struct {
		level kgo.IsolationLevel
		name  string
		want  []string
	}{
		{kgo.ReadCommitted(), "read_committed", slices.Concat(values("c0"), values("c1"))},
		{kgo.ReadUncommitted(), "read_uncommitted", slices.Concat(values("c0"), values("a"), values("c1"))},
	} {
		cl := newClient(t, addr, kgo.FetchIsolationLevel(c.level),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchMaxWait(200*time.Millisecond))
		var got []string
		last := int64(-1)
		for last < 16 { // c1-4, the last record
			fs := cl.PollFetches(ctx(t))
			if err := fs.Err(); err != nil {
				t.Fatalf("%s %s: %v (read %v)", c.name, topic, err, got)
			}
			for _, r := range fs.Records() {
				got, last = append(got, string(r.Value)), r.Offset
			}
		}
		cl.Close()
		if !slices.Equal(got, c.want) {
			t.Errorf("franz-go %s %s: read %v, want %v", c.name, topic, got, c.want)
		}
	}
	treq := kmsg.NewPtrListTransactionsRequest()
	tresp, err := treq.RequestWith(ctx(t), newClient(t, addr))
	if err != nil || tresp.ErrorCode != 0 {
		t.Fatalf("ListTransactions: %+v, %v", tresp, err)
	}
	if !slices.ContainsFunc(tresp.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
		return s.TransactionalID == topic+"-tx" && s.TransactionState == "CompleteCommit"
	}) {
		t.Errorf("ListTransactions: no %s-tx in state CompleteCommit in %+v", topic, tresp.TransactionStates)
	}
}

// checkGroup checks that topic's group, topic-g, lists and describes as a
// consumer group (after its member left).
func checkGroup(t *testing.T, addr, topic string) {
	req := kmsg.NewPtrListGroupsRequest()
	resp, err := req.RequestWith(ctx(t), newClient(t, addr))
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	if !slices.ContainsFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
		return g.Group == topic+"-g" && g.ProtocolType == "consumer"
	}) {
		t.Errorf("ListGroups: no group %s-g with protocol type consumer in %+v", topic, resp.Groups)
	}
	// The member has left: an empty group keeps its protocol type.
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{topic + "-g"}
	dresp, err := dreq.RequestWith(ctx(t), newClient(t, addr))
	if err != nil {
		t.Fatalf("DescribeGroups: %v", err)
	}
	if len(dresp.Groups) != 1 || dresp.Groups[0].ErrorCode != 0 || dresp.Groups[0].ProtocolType != "consumer" {
		t.Errorf("DescribeGroups %s-g: %+v, want protocol type consumer", topic, dresp.Groups)
	}
}

// The compaction operation's shape, the same for every client: rounds of
// values for keys, each value "<key>-r<round>", so the last is
// "<key>-r<rounds-1>"; records of the filler key roll the active segment.
const (
	compactKeys   = 10
	compactRounds = 5
	compactFiller = "filler"
)

// record is one record as the checks see it.
type record struct {
	Offset     int64
	Key, Value string
}

// compacted reports what keeps recs (one partition, in offset order) from
// being a log compacted down to the last value of each key: a key twice, or
// a value not the last.
func compacted(recs []record) error {
	seen := map[string]string{}
	for _, r := range recs {
		if r.Key == compactFiller {
			continue
		}
		if v, ok := seen[r.Key]; ok {
			return fmt.Errorf("key %s at %d and before (%s): not compacted", r.Key, r.Offset, v)
		}
		seen[r.Key] = r.Value
		if want := fmt.Sprintf("%s-r%d", r.Key, compactRounds-1); r.Value != want {
			return fmt.Errorf("key %s at %d holds %s, want its last value %s", r.Key, r.Offset, r.Value, want)
		}
	}
	if len(seen) != compactKeys {
		return fmt.Errorf("%d keys, want %d", len(seen), compactKeys)
	}
	return nil
}

func sum(xs []int64) (n int64) {
	for _, x := range xs {
		n += x
	}
	return n
}

func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	return brokertest.Client(t, addr, opts...)
}

func ctx(t testing.TB) context.Context { return brokertest.Context(t) }

// metadata asks for topics (all when none).
func metadata(t testing.TB, addr string, topics ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx(t), newClient(t, addr))
	if err != nil {
		t.Fatalf("Metadata %v: %v", topics, err)
	}
	return resp
}

// offsets returns each partition's start and end offsets (ListOffsets
// earliest and latest).
func offsets(t testing.TB, addr, topic string) (starts, ends []int64) {
	t.Helper()
	md := metadata(t, addr, topic)
	if len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 {
		t.Fatalf("Metadata %s: %+v", topic, md.Topics)
	}
	n := int32(len(md.Topics[0].Partitions))
	return brokertest.ListOffsets(t, addr, topic, n, -2), brokertest.ListOffsets(t, addr, topic, n, -1)
}

// committed returns group's committed offset for each of topic's partitions,
// -1 where none is.
func committed(t testing.TB, addr, group, topic string, partitions int) []int64 {
	t.Helper()
	return brokertest.CommittedOffsets(t, addr, group, topic, int32(partitions))
}

// config is one entry of a DescribeConfigs answer.
type config struct {
	value  string
	source kmsg.ConfigSource
}

func (c config) String() string { return fmt.Sprintf("%q (source %s)", c.value, c.source) }

// topicConfig describes one config of topic.
func topicConfig(t testing.TB, addr, topic, name string) config {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeTopic
	rr.ResourceName = topic
	rr.ConfigNames = []string{name}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx(t), newClient(t, addr))
	if err != nil {
		t.Fatalf("DescribeConfigs %s %s: %v", topic, name, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("DescribeConfigs %s %s: %v", topic, name, err)
		}
		for _, c := range r.Configs {
			if c.Name == name {
				value := "<null>"
				if c.Value != nil {
					value = *c.Value
				}
				return config{value, c.Source}
			}
		}
	}
	t.Fatalf("DescribeConfigs %s: no %s in %+v", topic, name, resp.Resources)
	return config{}
}

// readAll reads partition 0 of topic from its start to its end.
func readAll(t testing.TB, addr, topic string) []record {
	t.Helper()
	_, ends := offsets(t, addr, topic)
	cl := newClient(t, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	var out []record
	c := ctx(t)
	for len(out) == 0 || out[len(out)-1].Offset < ends[0]-1 {
		fs := cl.PollFetches(c)
		if err := fs.Err(); err != nil {
			t.Fatalf("reading %s: %v (%d records read, up to offset %d)", topic, err, len(out), ends[0])
		}
		for _, r := range fs.Records() {
			out = append(out, record{r.Offset, string(r.Key), string(r.Value)})
		}
	}
	return out
}
