package mirror_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/mirror"
)

func TestMain(m *testing.M) {
	code := m.Run()
	brokertest.RemoveWeirBinary()
	os.Exit(code)
}

// weirBinary is cmd/weir, built on first use for the tests that run real
// processes.
func weirBinary(t testing.TB) string { return brokertest.WeirBinary(t) }

// envInt is the integer in environment variable name, or def.
func envInt(t testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// mirrorProc is `weir mirror` running as a process.
type mirrorProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func startMirrorProc(t testing.TB, weir, logPath string, args ...string) *mirrorProc {
	t.Helper()
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(weir, append([]string{"mirror"}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &mirrorProc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		log.Close()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *mirrorProc) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// TestMirrorSurvivesKills mirrors a topic under produce load while SIGKILL
// strikes the mirror process and the target broker process at random
// moments (after the mirror copied a random number of records more), and checks that the
// target then holds every source record, each partition's records in
// their source order (the source partition is a subsequence of the target
// partition; at least once allows re-sent runs between). The source broker
// runs in the test. WEIR_MIRROR_KILL_RECORDS (default 12000),
// WEIR_MIRROR_KILL_ROUNDS (default 4) and WEIR_MIRROR_KILL_SEED (default:
// random, logged) scale and repeat it; WEIR_MIRROR_KILL_LOG=1 prints the
// mirror processes' log even when the test passes. A kill often strikes a
// mirror that has not committed yet: a restarted mirror re-sends from the
// last commit in a burst that reaches the next kill's threshold before its
// first commit (about half a second after it starts).
func TestMirrorSurvivesKills(t *testing.T) { testMirrorSurvivesKills(t, false, false) }

// TestMirrorSurvivesKillsForwarded is TestMirrorSurvivesKills with
// --forward: batches sent byte for byte under the same faults.
func TestMirrorSurvivesKillsForwarded(t *testing.T) { testMirrorSurvivesKills(t, false, true) }

// TestMirrorSurvivesKillsExactlyOnce is TestMirrorSurvivesKills with
// --exactly-once, and the stronger promise: read with read_committed, each
// target partition holds exactly the source partition's records, in order,
// none lost and none duplicated.
func TestMirrorSurvivesKillsExactlyOnce(t *testing.T) { testMirrorSurvivesKills(t, true, false) }

func testMirrorSurvivesKills(t *testing.T, exactlyOnce, forward bool) {
	total := envInt(t, "WEIR_MIRROR_KILL_RECORDS", 12000)
	rounds := envInt(t, "WEIR_MIRROR_KILL_ROUNDS", 4)
	seed := uint64(envInt(t, "WEIR_MIRROR_KILL_SEED", int(time.Now().UnixNano()%1_000_000)))
	t.Logf("seed %d (WEIR_MIRROR_KILL_SEED reproduces the fault schedule)", seed)
	rng := rand.New(rand.NewPCG(seed, 18))
	const parts = 4
	weir := weirBinary(t)

	src := brokertest.Start(t, "").Addr()
	brokertest.CreateTopic(t, src, "load", parts, nil)
	tgtDir, tgtAddr := t.TempDir(), brokertest.FreeAddr(t)
	var target *brokerproc.Process
	startTarget := func() {
		t.Helper()
		p, err := brokerproc.Start(context.Background(), brokerproc.Options{Weir: weir, DataDir: tgtDir, Listen: tgtAddr})
		if err != nil {
			t.Fatalf("target broker: %v", err)
		}
		target = p
	}
	startTarget()
	t.Cleanup(func() {
		if target != nil {
			target.Stop()
		}
	})
	logPath := filepath.Join(t.TempDir(), "mirror.log")
	mirrorArgs := []string{"--source", src, "--target", tgtAddr, "--topics", "load",
		"--commit-interval", "100ms", "--refresh-interval", "200ms", "--backoff-min", "50ms", "--backoff-max", "500ms",
		"--progress", "never", "--log-level", "info"}
	if exactlyOnce {
		mirrorArgs = append(mirrorArgs, "--exactly-once")
	}
	if forward {
		mirrorArgs = append(mirrorArgs, "--forward")
	}
	mp := startMirrorProc(t, weir, logPath, mirrorArgs...)
	defer func() {
		if t.Failed() || os.Getenv("WEIR_MIRROR_KILL_LOG") != "" {
			out, _ := os.ReadFile(logPath)
			t.Logf("mirror log:\n%s", tail(out, 20000))
		}
	}()

	// The load: records "p/seq" to partition p, 20 every 10 ms (2,000/s),
	// so that it lasts through the rounds.
	var produced atomic.Int64
	prodErr := make(chan error, 1)
	go func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(src), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			prodErr <- err
			return
		}
		defer cl.Close()
		pace := time.NewTicker(10 * time.Millisecond)
		defer pace.Stop()
		for i := 0; i < total; {
			<-pace.C
			var recs []*kgo.Record
			for ; len(recs) < 20 && i < total; i++ {
				p := int32(i % parts)
				v := fmt.Appendf(nil, "%d/%08d", p, i/parts)
				recs = append(recs, &kgo.Record{Topic: "load", Partition: p, Key: v, Value: v})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				prodErr <- err
				return
			}
			produced.Add(int64(len(recs)))
		}
		prodErr <- nil
	}()
	waitProduced := func(n int64) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d records produced", n), func() bool { return produced.Load() >= min(n, int64(total)) })
	}
	step := int64(total / (2*rounds + 1))
	killedMidLoad := 0
	for round := range rounds {
		// Strike after the mirror copied a random number of records more.
		goal := endsOr0(tgtAddr, "load") + 1 + rng.Int64N(step)
		waitFor(t, fmt.Sprintf("%d records in the target", goal), func() bool { return endsOr0(tgtAddr, "load") >= min(goal, int64(total)) })
		victim := rng.IntN(3) // 0 mirror, 1 target, 2 both
		if produced.Load() < int64(total) {
			killedMidLoad++
		}
		before := endsOr0(tgtAddr, "load")
		if victim != 1 {
			mp.kill()
		}
		committed := sum(brokertest.CommittedOffsets(t, tgtAddr, mirror.DefaultName, "load", parts))
		if victim != 0 {
			target.Cmd.Process.Kill()
			<-target.Exited()
			target = nil
		}
		t.Logf("round %d: SIGKILL %s after %d records produced, %d in the target, %d committed",
			round, []string{"mirror", "target", "mirror and target"}[victim], produced.Load(), before, committed)
		// Down for a while: the load goes on.
		waitProduced(produced.Load() + 1 + rng.Int64N(step/2))
		if victim != 0 {
			startTarget()
		}
		if victim != 1 {
			mp = startMirrorProc(t, weir, logPath, mirrorArgs...)
		}
	}
	if err := <-prodErr; err != nil {
		t.Fatalf("producer: %v", err)
	}
	if killedMidLoad == 0 {
		t.Fatal("no kill struck while the load ran: the test tested nothing")
	}
	ends := brokertest.ListOffsets(t, src, "load", parts, -1)
	waitFor(t, "the mirror caught up", func() bool {
		return fmt.Sprint(brokertest.CommittedOffsets(t, tgtAddr, mirror.DefaultName, "load", parts)) == fmt.Sprint(ends)
	})
	mp.cmd.Process.Signal(os.Interrupt)
	<-mp.exited

	want := readAll(t, src, "load", parts)
	if exactlyOnce {
		got := readCommitted(t, tgtAddr, "load", parts)
		for p := range int32(parts) {
			n := min(len(got[p]), len(want[p]))
			for i := range n {
				if string(got[p][i].Value) != string(want[p][i].Value) {
					t.Fatalf("partition %d: committed record %d of the target is %s, want source record %s (offset %d)",
						p, i, got[p][i].Value, want[p][i].Value, want[p][i].Offset)
				}
			}
			if len(got[p]) != len(want[p]) {
				t.Errorf("partition %d: %d source records, %d committed in the target", p, len(want[p]), len(got[p]))
			}
			t.Logf("partition %d: %d source records, %d committed in the target, target end offset %d (aborted records and markers)",
				p, len(want[p]), len(got[p]), brokertest.ListOffsets(t, tgtAddr, "load", parts, -1)[p])
		}
		return
	}
	got := readAll(t, tgtAddr, "load", parts)
	for p := range int32(parts) {
		i := 0
		seen := make(map[string]bool, len(got[p]))
		for _, r := range got[p] {
			seen[string(r.Value)] = true
			if i < len(want[p]) && string(r.Value) == string(want[p][i].Value) {
				i++
			}
		}
		for _, w := range want[p] {
			if !seen[string(w.Value)] {
				t.Errorf("partition %d: source record %s (offset %d) missing from the target", p, w.Value, w.Offset)
				break
			}
		}
		if i != len(want[p]) {
			t.Errorf("partition %d: the target holds source records 0..%d in order, then not %s", p, i-1, want[p][i].Value)
		}
		t.Logf("partition %d: %d source records, %d in the target (%d sent again)", p, len(want[p]), len(got[p]), len(got[p])-len(want[p]))
	}
}

// readCommitted reads topic's partitions with read_committed up to their
// last stable offset, control records (transaction markers) included so
// that the end is seen, and returns the data records.
func readCommitted(t testing.TB, addr, topic string, parts int32) map[int32][]*kgo.Record {
	t.Helper()
	ctx := brokertest.Context(t)
	adm := kadm.NewClient(brokertest.Client(t, addr))
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		t.Fatalf("list last stable offsets of %s: %v", topic, err)
	}
	out := make(map[int32][]*kgo.Record)
	at := map[int32]kgo.Offset{}
	ends := map[int32]int64{}
	for p := range parts {
		if o, ok := lso.Lookup(topic, p); ok && o.Offset > 0 {
			at[p], ends[p] = kgo.NewOffset().AtStart(), o.Offset
		}
	}
	if len(at) == 0 {
		return out
	}
	cl := brokertest.Client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: at}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	left := len(at)
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s committed: %d partitions short of their last stable offset", topic, left)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("read %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], r)
			}
			if r.Offset == ends[r.Partition]-1 {
				left--
			}
		})
	}
	return out
}

// endsOr0 sums topic's end offsets, 0 when the topic does not exist yet.
func endsOr0(addr, topic string) int64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
