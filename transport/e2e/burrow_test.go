package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// burrowPath finds Burrow (Debian's package burrow installs /usr/bin/Burrow):
// missing, the test is skipped, or fails under CI=true.
func burrowPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"Burrow", "burrow"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("Burrow not found, and CI=true: .ci/run must install the Debian package burrow")
	}
	t.Skip("Burrow not found: install the Debian package burrow (apt-get install burrow) to run the Burrow test")
	return ""
}

// burrowConfig is the README's Burrow configuration (the toml block of
// "Lag tools: Burrow"), so the recipe there is what this test runs, with
// the test's addresses (weir at addr, ZooKeeper at zk, the HTTP API at
// httpAddr), Burrow's pid file and log in dir, and short intervals: topics
// and broker offsets refreshed every second, a window of five offsets per
// partition (at least a second apart, as in the README), status recomputed
// every second.
func burrowConfig(t *testing.T, dir, zk, addr, httpAddr string) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "**Lag tools: Burrow.**")
	_, rest, ok2 := strings.Cut(rest, "```toml\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no toml block after **Lag tools: Burrow.**")
	}
	for _, r := range [][2]string{
		{"127.0.0.1:9092", addr}, {"127.0.0.1:2181", zk}, {"127.0.0.1:8000", httpAddr},
		{"topic-refresh=60", "topic-refresh=1"}, {"offset-refresh=10", "offset-refresh=1"},
		{"intervals=10", "intervals=5"}, {"expire-cache=10", "expire-cache=1"},
	} {
		if !strings.Contains(block, r[0]) {
			t.Fatalf("README.md's Burrow configuration lacks %q", r[0])
		}
		block = strings.ReplaceAll(block, r[0], r[1])
	}
	return fmt.Sprintf("[general]\npidfile=%q\n\n[logging]\nfilename=%q\nlevel=\"info\"\n\n",
		filepath.Join(dir, "burrow.pid"), filepath.Join(dir, "burrow.log")) + block
}

// burrowStatus is the part of Burrow's /v3/kafka/<cluster>/consumer/<group>/status
// answer the test reads.
type burrowStatus struct {
	Error   bool   `json:"error"`
	Message string `json:"message"`
	Status  struct {
		Status     string `json:"status"`
		TotalLag   int64  `json:"totallag"`
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Status    string `json:"status"`
			End       *struct {
				Offset int64 `json:"offset"`
			} `json:"end"`
		} `json:"partitions"`
	} `json:"status"`
}

// TestBurrow: LinkedIn's lag monitor Burrow (Debian's 1.2.1, sarama inside)
// reads committed offsets from weir's __consumer_offsets and broker offsets
// with ListOffsets, as it does from Kafka, with ZooKeeper of its own.
// Started before any group exists, its lookup of __consumer_offsets creates
// the real internal topic, not an ordinary one.
// While a producer writes all along, a group that commits as it consumes
// is reported OK, and a group that commits an offset behind the end and
// then stops committing is reported in error (its partition STALL while
// it commits the same offset, then STOP), with lag, through Burrow's HTTP
// API (/v3/kafka/weir/consumer/<group>/status, and /lag, which lists every
// partition).
func TestBurrow(t *testing.T) {
	bin := burrowPath(t)
	zktest.Require(t)
	zk := zktest.Start(t, zktest.Options{})

	logs := &syncBuffer{}
	b := startBroker(t, "", func(c *broker.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	const topic = "burrow-t"
	createTopic(t, b.Addr(), topic, 1, nil)

	// A producer writing all along.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	producer := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			producer.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("r%d", i)))
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	waitFor(t, "records produced", func() bool { return endOffsets(t, b.Addr(), topic, 1)[0] >= 20 })

	dir := t.TempDir()
	httpAddr := brokertest.FreeAddr(t)
	if err := os.WriteFile(filepath.Join(dir, "burrow.toml"), []byte(burrowConfig(t, dir, zk.Servers[0].Addr, b.Addr(), httpAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "burrow.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(bin, "-config-dir", dir)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start Burrow: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("the broker's log:\n%s", tail(logs.String(), 40))
			for _, f := range []string{"burrow.out", "burrow.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				t.Logf("Burrow's %s:\n%s", f, tail(string(b), 60))
			}
		}
	})

	get := func(path string, v any) error {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(v)
	}
	// Burrow's lookup of __consumer_offsets, before any group exists,
	// creates the real one: internal, compacted, Kafka's 50 partitions.
	md := kmsg.NewPtrMetadataRequest()
	md.AllowAutoTopicCreation = false // Burrow's request creates it, not this one
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(offsetsTopic)
	md.Topics = append(md.Topics, mt)
	admin := newClient(t, b.Addr())
	var offsetsMeta kmsg.MetadataResponseTopic
	burrowWait(t, "Burrow to look "+offsetsTopic+" up", func() bool {
		mdr, err := md.RequestWith(testContext(t), admin)
		if err != nil {
			t.Fatal(err)
		}
		offsetsMeta = mdr.Topics[0]
		for _, p := range offsetsMeta.Partitions {
			if p.Leader < 0 { // created, leaders not elected yet: groups get COORDINATOR_NOT_AVAILABLE
				return false
			}
		}
		return offsetsMeta.ErrorCode == 0
	})
	if !offsetsMeta.IsInternal || len(offsetsMeta.Partitions) != 50 {
		t.Fatalf("%s after Burrow's lookup: internal %v, %d partitions; want the internal topic of 50 partitions",
			offsetsTopic, offsetsMeta.IsInternal, len(offsetsMeta.Partitions))
	}

	// "burrow-ok" consumes and commits after every poll.
	okMember := newClient(t, b.Addr(), kgo.ConsumerGroup("burrow-ok"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond))
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			okMember.PollFetches(ctx)
			if ctx.Err() == nil {
				okMember.CommitUncommittedOffsets(ctx)
			}
		}
	}()
	waitFor(t, "burrow-ok committed", func() bool { return committedOffsets(t, b.Addr(), "burrow-ok", topic, 1)[0] > 0 })

	// Burrow knows the topic's end offset (ListOffsets) before the
	// stalled group commits, so that its commit is stored with lag.
	burrowWait(t, "Burrow to read the topic's offsets", func() bool {
		var r struct {
			Offsets []int64 `json:"offsets"`
		}
		return get("/v3/kafka/weir/topic/"+topic, &r) == nil && len(r.Offsets) == 1 && r.Offsets[0] >= 20
	})

	// "burrow-stalled" commits offset 5, far behind, a few times (with no
	// members: simple commits), then stops while the producer goes on.
	commitAt := func(offset int64) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = "burrow-stalled", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testContext(t), admin)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit burrow-stalled: %+v, %v", resp, err)
		}
	}
	burrowWait(t, "Burrow to see burrow-stalled", func() bool {
		commitAt(5)
		var s burrowStatus
		return get("/v3/kafka/weir/consumer/burrow-stalled/status", &s) == nil && len(s.Status.Partitions) == 1
	})

	var ok, stalled burrowStatus
	burrowWait(t, "burrow-ok OK and burrow-stalled in error", func() bool {
		ok, stalled = burrowStatus{}, burrowStatus{}
		// /lag lists every partition, /status only those not OK.
		if get("/v3/kafka/weir/consumer/burrow-ok/lag", &ok) != nil ||
			get("/v3/kafka/weir/consumer/burrow-stalled/status", &stalled) != nil {
			return false
		}
		return ok.Status.Status == "OK" && len(ok.Status.Partitions) == 1 && stalled.Status.Status == "ERR"
	})
	if p := stalled.Status.Partitions; len(p) != 1 || p[0].Topic != topic || p[0].Status != "STOP" && p[0].Status != "STALL" ||
		stalled.Status.TotalLag < 10 {
		t.Errorf("burrow-stalled: %+v; want its partition STOP or STALL, with lag", stalled.Status)
	}
	if p := ok.Status.Partitions; p[0].Topic != topic || p[0].Status != "OK" || p[0].End == nil || p[0].End.Offset < 20 {
		t.Errorf("burrow-ok: %+v", ok.Status)
	}
	var groups struct {
		ConsumerGroups []string `json:"consumers"`
	}
	if err := get("/v3/kafka/weir/consumer", &groups); err != nil || !contains(groups.ConsumerGroups, "burrow-ok") {
		t.Errorf("Burrow's consumer list: %v, %v", groups.ConsumerGroups, err)
	}
	if lines := grepLines(logs.String(), "not served"); lines != "" {
		t.Logf("Burrow asked for something weir does not serve:\n%s", lines)
	}
}

// burrowWait polls cond every 200 ms for up to 45 s: Burrow works on its own
// intervals (one second here), so what it reports lags what happened.
func burrowWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func grepLines(s, substr string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// syncBuffer keeps the broker's log for the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
