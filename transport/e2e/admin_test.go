package e2e_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// produceTo writes n records to each of the partitions with franz-go and
// fails unless each is acknowledged.
func produceTo(t testing.TB, cl *kgo.Client, topic string, n int, partitions ...int32) {
	t.Helper()
	ctx := testContext(t)
	for _, p := range partitions {
		for i := range n {
			r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s-%d-%d", topic, p, i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce to %s-%d: %v", topic, p, err)
			}
		}
	}
}

// startOffsets returns each partition's log start (ListOffsets earliest),
// by partition.
func startOffsets(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	lo, err := adm.ListStartOffsets(testContext(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("earliest of %s-%d: %v", o.Topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}

// TestSaramaClusterAdmin: sarama's ClusterAdmin adds partitions, deletes
// records and describes the log directory.
func TestSaramaClusterAdmin(t *testing.T) {
	b := startBroker(t, t.TempDir())
	createTopic(t, b.Addr(), "sarama-admin", 2, nil)
	cl := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo(t, cl, "sarama-admin", 10, 0, 1)

	cfg := saramaConfig()
	cfg.Version = sarama.V2_8_0_0
	adm, err := sarama.NewClusterAdmin([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreatePartitions("sarama-admin", 4, nil, false); err != nil {
		t.Fatalf("CreatePartitions: %v", err)
	}
	if err := adm.CreatePartitions("sarama-admin", 3, nil, false); !errors.Is(err, sarama.ErrInvalidPartitions) {
		t.Fatalf("CreatePartitions decreasing: %v, want INVALID_PARTITIONS", err)
	}
	md, err := adm.DescribeTopics([]string{"sarama-admin"})
	if err != nil || len(md) != 1 || len(md[0].Partitions) != 4 {
		t.Fatalf("DescribeTopics: %v %+v", err, md)
	}
	// A client started now learns of the 4 partitions at once.
	cl = newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo(t, cl, "sarama-admin", 3, 2, 3)
	if err := adm.DeleteRecords("sarama-admin", map[int32]int64{0: 7, 1: 10}); err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	if got := startOffsets(t, kadm.NewClient(cl), "sarama-admin"); got[0] != 7 || got[1] != 10 || got[2] != 0 {
		t.Fatalf("log starts after DeleteRecords: %v", got)
	}
	dirs, err := adm.DescribeLogDirs([]int32{b.Node().ID()})
	if err != nil {
		t.Fatalf("DescribeLogDirs: %v", err)
	}
	sizes := map[int32]int64{}
	for _, d := range dirs[b.Node().ID()] {
		if d.ErrorCode != sarama.ErrNoError || d.Path == "" {
			t.Errorf("dir %+v", d)
		}
		for _, tp := range d.Topics {
			if tp.Topic == "sarama-admin" {
				for _, p := range tp.Partitions {
					sizes[p.PartitionID] = p.Size
				}
			}
		}
	}
	if len(sizes) != 4 || sizes[2] == 0 {
		t.Fatalf("log dir sizes of sarama-admin: %v", sizes)
	}
}

// TestAdminSurvivesRestart: partitions added and a log start moved by
// DeleteRecords are there after the broker restarts on its data directory,
// and the new partitions take writes.
func TestAdminSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	createTopic(t, b.Addr(), "restart-admin", 1, nil)
	cl := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := testContext(t)
	if res, err := adm.CreatePartitions(ctx, 2, "restart-admin"); err != nil || res["restart-admin"].Err != nil {
		t.Fatalf("CreatePartitions: %v %+v", err, res)
	}
	cl = newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner())) // knows the 3 partitions
	adm = kadm.NewClient(cl)
	produceTo(t, cl, "restart-admin", 6, 0, 1, 2)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "restart-admin", Partition: 2, At: 4})
	if res, err := adm.DeleteRecords(ctx, offs); err != nil || res.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, res.Error())
	}
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = startBroker(t, dir)
	cl = newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm = kadm.NewClient(cl)
	if got := startOffsets(t, adm, "restart-admin"); len(got) != 3 || got[0] != 0 || got[2] != 4 {
		t.Fatalf("after the restart: log starts %v, want 3 partitions, partition 2 from 4", got)
	}
	produceTo(t, cl, "restart-admin", 1, 2)
	if ends := endOffsets(t, b.Addr(), "restart-admin", 3); !slices.Equal(ends, []int64{6, 6, 7}) {
		t.Fatalf("end offsets %v, want [6 6 7]", ends)
	}
}

// TestClusterAdminPartitionsAndRecords: three brokers on a real ZooKeeper.
// CreatePartitions through broker 1 adds partitions the other brokers lead
// and follow (the leaders keep going round-robin), and a producer and a
// consumer use them; DeleteRecords on a partition replicated on all three
// moves the followers' log start too: once the leader stops, the new leader
// answers ListOffsets earliest with the deleted-up-to offset.
func TestClusterAdminPartitionsAndRecords(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	awaitCluster(t, c, 1, 2, 3)
	boot := c.Member(1).Addr
	cl := newClient(t, boot, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := testContext(t)

	if _, err := adm.CreateTopic(ctx, 3, 2, nil, "grown"); err != nil {
		t.Fatal(err)
	}
	awaitLeaders(t, boot, "grown", func(ls []int32) bool { return len(ls) == 3 && !slices.Contains(ls, -1) })
	res, err := adm.CreatePartitions(ctx, 3, "grown")
	if err != nil || res["grown"].Err != nil {
		t.Fatalf("CreatePartitions: %v %+v", err, res)
	}
	for _, addr := range c.Addrs() { // every broker sees the new partitions led
		awaitLeaders(t, addr, "grown", func(ls []int32) bool { return len(ls) == 6 && !slices.Contains(ls, -1) })
	}
	td, err := adm.ListTopics(ctx, "grown")
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	for _, p := range td["grown"].Partitions {
		leaders[p.Leader]++
		if len(p.Replicas) != 2 || p.Replicas[0] == p.Replicas[1] {
			t.Errorf("partition %d replicas %v", p.Partition, p.Replicas)
		}
	}
	if len(leaders) != 3 || leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Errorf("leaders per broker %v, want 2 each", leaders)
	}
	cl = newClient(t, boot, kgo.RecordPartitioner(kgo.ManualPartitioner())) // knows the 6 partitions
	adm = kadm.NewClient(cl)
	produceTo(t, cl, "grown", 5, 3, 4, 5)
	if ends := endOffsets(t, boot, "grown", 6); !slices.Equal(ends, []int64{0, 0, 0, 5, 5, 5}) {
		t.Fatalf("end offsets %v", ends)
	}

	createLedBy(t, boot, "trimmed", []int32{1, 2, 3})
	awaitInISR(t, boot, "trimmed", 3)
	awaitInISR(t, boot, "trimmed", 2)
	produceTo(t, cl, "trimmed", 20, 0)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "trimmed", Partition: 0, At: 12})
	dr, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("trimmed", 0); r.Err != nil || r.LowWatermark != 12 {
		t.Fatalf("DeleteRecords: %+v", r)
	}
	// A follower refuses DeleteRecords: it does not lead the partition.
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "trimmed"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = 15
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := pin(c.Member(2).Addr).ask(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("DeleteRecords on a follower: %+v, want NOT_LEADER_OR_FOLLOWER", p)
	}
	// A follower cannot be asked for its log start (ListOffsets goes to the
	// leader), so the leader stops: its controlled shutdown hands the
	// partition to a follower, which must answer 12.
	c.Stop(1)
	boot2 := c.Member(2).Addr
	awaitLeaders(t, boot2, "trimmed", func(ls []int32) bool { return len(ls) == 1 && ls[0] != 1 && ls[0] != -1 })
	adm2 := kadm.NewClient(newClient(t, boot2))
	eventually(t, waitTimeout, "the new leader's log start", func() (bool, string) {
		lo, err := adm2.ListStartOffsets(testContext(t), "trimmed")
		if err != nil {
			return false, err.Error()
		}
		o, _ := lo.Lookup("trimmed", 0)
		return o.Err == nil && o.Offset == 12, fmt.Sprintf("%d %v", o.Offset, o.Err)
	})
	// Below it, a fetch is out of range on the new leader too.
	fetch := newClient(t, boot2, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"trimmed": {0: kgo.NewOffset().At(3)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var first int64 = -1
	for first < 0 {
		fs := fetch.PollFetches(testContext(t))
		if err := fs.Err0(); err != nil && !errors.Is(err, kerr.OffsetOutOfRange) {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if first < 0 {
				first = r.Offset
			}
		})
	}
	if first != 12 {
		t.Fatalf("a consumer reset from below the start read from %d, want 12", first)
	}
}

// TestKcatAfterAdmin: kcat (librdkafka) lists the partitions CreatePartitions
// added, and a consumer asked for the beginning of a partition whose records
// were deleted starts at its new log start.
func TestKcatAfterAdmin(t *testing.T) {
	kcatPath(t)
	b := startBroker(t, t.TempDir())
	createTopic(t, b.Addr(), "kcat-admin", 1, nil)
	cl := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo(t, cl, "kcat-admin", 8, 0)
	adm := kadm.NewClient(cl)
	ctx := testContext(t)
	if res, err := adm.CreatePartitions(ctx, 2, "kcat-admin"); err != nil || res["kcat-admin"].Err != nil {
		t.Fatalf("CreatePartitions: %v %+v", err, res)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "kcat-admin", Partition: 0, At: 5})
	if res, err := adm.DeleteRecords(ctx, offs); err != nil || res.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, res.Error())
	}
	var md struct {
		Topics []struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Partition int32 `json:"partition"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(runKcat(t, nil, "-b", b.Addr(), "-L", "-J", "-t", "kcat-admin"), &md); err != nil {
		t.Fatal(err)
	}
	if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 3 {
		t.Fatalf("kcat -L: %+v, want 3 partitions", md)
	}
	out := runKcat(t, nil, "-b", b.Addr(), "-C", "-t", "kcat-admin", "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o\n")
	if got := strings.Fields(string(out)); !slices.Equal(got, []string{"5", "6", "7"}) {
		t.Fatalf("kcat read offsets %q from the beginning, want 5 6 7", got)
	}
}
