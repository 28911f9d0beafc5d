package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/mirror"
)

// TestMirrorSourceUncleanFailover mirrors (forwarding) from a weir cluster
// of two brokers coordinated by a real ZooKeeper, whose topic has
// replication factor 2 and unclean.leader.election.enable=true, into a
// single broker, through an unclean leader election on the source:
//
//   - both replicas hold the first records (offsets [0, E));
//   - the follower F stops; the leader L alone takes more (acks=1 in
//     effect: the ISR is L alone), up to P, and the mirror copies them;
//   - the mirror is cut off the source; L is killed; F comes back and
//     becomes leader by unclean election, its log ending at E < P; it
//     takes M records, at offsets [E, E+M) below P;
//   - the mirror reconnects: the metadata it asks for names F, at a newer
//     leader epoch, so before fetching from F it asks where F's log
//     diverged from what it copied (OffsetForLeaderEpoch with the epoch of
//     the last batch it copied, KIP-320), E, and moves back there;
//   - the source takes K more records, past P; L comes back, truncates to
//     E and follows F.
//
// In the end every record the source holds is in the target, in the
// source's order (at least once: the target also holds L's lost records,
// [E, P) of the old log); the M records written after the failover at
// offsets the mirror had passed are the point.
//
// The mirror is cut off (its source connections closed, its dials refused)
// from before L is killed until the M records are written (and, in the
// second run, the K records too: F's log has passed P again when the
// mirror comes back, so no fetch of it would be out of range; a mirror
// that learnt of truncations only from those would pass over [E, P)).
// The fetch out of range itself is TestForwardResetAboveLogEnd's.
func TestMirrorSourceUncleanFailover(t *testing.T) {
	t.Run("forward", func(t *testing.T) { testMirrorSourceUncleanFailover(t, true, false, false) })
	// The new leader's log passes the mirror's position before the mirror
	// fetches again: no fetch is out of range.
	t.Run("forward, the source past the position", func(t *testing.T) { testMirrorSourceUncleanFailover(t, true, true, false) })
	t.Run("record", func(t *testing.T) { testMirrorSourceUncleanFailover(t, false, false, false) })
	t.Run("record, the source past the position", func(t *testing.T) { testMirrorSourceUncleanFailover(t, false, true, false) })
	// The mirror stopped instead of cut off, and started again once the
	// source's log passed its committed position: the leader epoch
	// committed with the position tells it to check.
	t.Run("forward, restarted", func(t *testing.T) { testMirrorSourceUncleanFailover(t, true, true, true) })
	t.Run("record, restarted", func(t *testing.T) { testMirrorSourceUncleanFailover(t, false, true, true) })
}

func testMirrorSourceUncleanFailover(t *testing.T, forward, passed, restart bool) {
	const topic = "orders"
	c := brokertest.StartCluster(t, 2)
	lead, follow := c.IDs()[0], c.IDs()[1]
	leadAddr, followAddr := c.Member(lead).Addr, c.Member(follow).Addr
	brokertest.CreateTopicOnReplicas(t, leadAddr, topic, []int32{lead, follow}, map[string]string{"unclean.leader.election.enable": "true"})
	waitFor(t, fmt.Sprintf("%s/0 led by %d with both replicas in sync", topic, lead), func() bool {
		l, isr := partitionState(t, leadAddr, topic, 0)
		return l == lead && len(isr) == 2
	})
	dst := brokertest.Start(t, "").Addr()

	g := newGate()
	logs := &brokertest.LogBuffer{}
	cfg := testConfig(t, leadAddr, dst, topic)
	cfg.Source = c.Addrs()
	cfg.Forward = forward
	cfg.SourceOpts = []kgo.Opt{kgo.Dialer(g.dial)}
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, logs), &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, stop := runMirror(t, cfg)
	status := func() mirror.PartitionStatus {
		for _, s := range m.Status() {
			if s.Topic == topic && s.Partition == 0 {
				return s
			}
		}
		return mirror.PartitionStatus{Next: -1}
	}
	position := func() int64 { return status().Next }

	// Values: "orders 0 i", i from a range of its own for each round, so
	// that a record lost on the source is never taken for a later one.
	produce(t, leadAddr, topic, 1, 0, 200) // on both replicas (acks=all, ISR of two)
	c.Stop(follow)
	waitFor(t, fmt.Sprintf("broker %d out of %s/0's ISR", follow, topic), func() bool {
		l, isr := partitionState(t, leadAddr, topic, 0)
		return l == lead && slices.Equal(isr, []int32{lead})
	})
	produce(t, leadAddr, topic, 1, 10_000, 300) // on L alone
	p := brokertest.ListOffsets(t, leadAddr, topic, 1, -1)[0]
	waitFor(t, fmt.Sprintf("the mirror's position at %d", p), func() bool { return position() == p })

	if restart {
		waitFor(t, fmt.Sprintf("the mirror's committed position at %d", p), func() bool {
			return brokertest.CommittedOffsets(t, dst, mirror.DefaultName, topic, 1)[0] == p
		})
		stop()
	} else {
		g.cut()
	}
	c.Kill(lead)
	c.Restart(follow)
	waitFor(t, fmt.Sprintf("broker %d leading %s/0 (unclean election)", follow, topic), func() bool {
		l, _ := partitionState(t, followAddr, topic, 0)
		return l == follow
	})
	fl, err := c.Broker(follow).Node().ReplicaLog(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := fl.EndOffset()
	waitFor(t, fmt.Sprintf("the high watermark at the new leader's log end %d", e), func() bool {
		return brokertest.ListOffsets(t, followAddr, topic, 1, -1)[0] == e
	})
	if e >= p {
		t.Fatalf("the new leader's log ends at %d, not below the mirror's position %d: no truncation to test", e, p)
	}
	mm := (p - e) / 2
	produce(t, followAddr, topic, 1, 20_000, int(mm)) // at [e, e+mm), below p
	if end := brokertest.ListOffsets(t, followAddr, topic, 1, -1)[0]; end != e+mm || end >= p {
		t.Fatalf("the source's log ends at %d after %d records on %d, want %d (below %d)", end, mm, e, e+mm, p)
	}
	if passed {
		produce(t, followAddr, topic, 1, 30_000, int(p-e)) // past p
	}
	if !restart && g.refused() == 0 {
		t.Fatal("the mirror did not try the source while cut off: the cut proves nothing")
	}
	t.Logf("the source truncated from %d to %d by the unclean election, then took %d records", p, e, mm)
	if restart {
		m, stop = runMirror(t, cfg)
	} else {
		g.open()
	}

	// It moves back to e and copies from there: forwarding, before it
	// fetches from F, found by F's new leader epoch; on the record path,
	// once kgo moved below its position (kgo's own epoch check, or its
	// reset after a fetch out of range).
	waitFor(t, fmt.Sprintf("the mirror moving back to %d, where the source diverged", e), func() bool {
		how := "found_by=epoch_check"
		if !forward {
			how = "resuming where it diverged" // logged by either path
		}
		return logs.Contains("resuming where it diverged", "from=divergence", fmt.Sprintf("resume_offset=%d", e),
			fmt.Sprintf("position=%d", p), how)
	})
	if !passed {
		// Its position goes up to e+mm as it copies the mm records
		// (resumed at the log end, it would be there at once, and the
		// checks below find them missing in the target).
		waitFor(t, fmt.Sprintf("the mirror's position at %d", e+mm), func() bool { return position() == e+mm })
		produce(t, followAddr, topic, 1, 30_000, int(p-e)) // past p
	}
	c.Restart(lead)
	waitFor(t, fmt.Sprintf("broker %d back in %s/0's ISR", lead, topic), func() bool {
		_, isr := partitionState(t, followAddr, topic, 0)
		return len(isr) == 2
	})
	if !c.Member(lead).Log.Contains("msg=truncate", "partition="+topic+"-0", fmt.Sprintf("to=%d", e)) {
		t.Errorf("broker %d back: no truncation of %s-0 to %d logged", lead, topic, e)
	}
	end := brokertest.ListOffsets(t, followAddr, topic, 1, -1)[0]
	waitFor(t, fmt.Sprintf("the mirror's committed position at the source's end %d", end), func() bool {
		return brokertest.CommittedOffsets(t, dst, mirror.DefaultName, topic, 1)[0] == end
	})
	stop()

	want := readAll(t, followAddr, topic, 1)[0]
	got := readAll(t, dst, topic, 1)[0]
	if int64(len(want)) != end {
		t.Fatalf("read %d records of the source, its end is %d", len(want), end)
	}
	i := 0
	for _, r := range got {
		if i < len(want) && string(r.Value) == string(want[i].Value) {
			i++
		}
	}
	if i != len(want) {
		t.Errorf("the target holds the source's records 0..%d in order, then not offset %d (%s)", i-1, i, want[i].Value)
	}
	copied := map[string]bool{}
	for _, r := range got {
		copied[string(r.Value)] = true
	}
	for _, r := range want[e : e+mm] {
		if !copied[string(r.Value)] {
			t.Errorf("source offset %d (%s), written after the failover below the mirror's position %d, is not in the target", r.Offset, r.Value, p)
		}
	}
	t.Logf("source: %d records, target: %d", len(want), len(got))
}

// partitionState is the leader (-1 when none) and the sorted ISR of
// topic/partition as the broker at addr describes them.
func partitionState(t testing.TB, addr, topic string, partition int32) (int32, []int32) {
	t.Helper()
	adm := kadm.NewClient(brokertest.Client(t, addr))
	ctx, cancel := context.WithTimeout(brokertest.Context(t), waitTimeout/10)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return -1, nil
	}
	p, ok := md.Topics[topic].Partitions[partition]
	if !ok || p.Err != nil {
		return -1, nil
	}
	isr := slices.Clone(p.ISR)
	slices.Sort(isr)
	return p.Leader, isr
}

// gate stands between the mirror and the source cluster (a kgo.Dialer):
// cut closes the connections it let through and refuses new ones until
// open.
type gate struct {
	mu      sync.Mutex
	closed  bool
	conns   map[net.Conn]bool
	refusal int
}

var errCut = errors.New("test: the mirror is cut off the source")

func newGate() *gate { return &gate{conns: map[net.Conn]bool{}} }

func (g *gate) dial(ctx context.Context, network, host string) (net.Conn, error) {
	if g.refuse() {
		return nil, errCut
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		conn.Close()
		g.refusal++
		return nil, errCut
	}
	g.conns[conn] = true
	return &gatedConn{Conn: conn, g: g}, nil
}

func (g *gate) refuse() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.refusal++
	}
	return g.closed
}

func (g *gate) cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for conn := range g.conns {
		conn.Close()
	}
	clear(g.conns)
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = false
}

// refused is how many dials the gate refused.
func (g *gate) refused() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refusal
}

type gatedConn struct {
	net.Conn
	g *gate
}

func (c *gatedConn) Close() error {
	c.g.mu.Lock()
	delete(c.g.conns, c.Conn)
	c.g.mu.Unlock()
	return c.Conn.Close()
}

// TestMirrorSourceCleanFailover: the source's leader is stopped and its
// in-sync follower takes over (a clean election, a new leader epoch) while
// the mirror forwards. The mirror checks its position against the new
// leader before fetching from it (the check TestMirrorSourceUncleanFailover
// needs), finds nothing diverged and goes on from where it was: the target
// holds every source record exactly once, in order, and no truncation is
// logged.
func TestMirrorSourceCleanFailover(t *testing.T) {
	const topic = "clean"
	c := brokertest.StartCluster(t, 2)
	lead, follow := c.IDs()[0], c.IDs()[1]
	leadAddr, followAddr := c.Member(lead).Addr, c.Member(follow).Addr
	brokertest.CreateTopicOnReplicas(t, leadAddr, topic, []int32{lead, follow}, nil)
	waitFor(t, fmt.Sprintf("%s/0 led by %d with both replicas in sync", topic, lead), func() bool {
		l, isr := partitionState(t, leadAddr, topic, 0)
		return l == lead && len(isr) == 2
	})
	dst := brokertest.Start(t, "").Addr()
	logs := &brokertest.LogBuffer{}
	cfg := testConfig(t, leadAddr, dst, topic)
	cfg.Source, cfg.Forward = c.Addrs(), true
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, stop := runMirror(t, cfg)

	produce(t, leadAddr, topic, 1, 0, 300) // acks=all: on both replicas
	waitFor(t, "the first 300 records on the target", func() bool { return mirroredAll(t, dst, topic, 1, 300) })
	c.Stop(lead)
	waitFor(t, fmt.Sprintf("broker %d leading %s/0", follow, topic), func() bool {
		l, _ := partitionState(t, followAddr, topic, 0)
		return l == follow
	})
	produce(t, followAddr, topic, 1, 300, 300)
	waitFor(t, "600 records on the target", func() bool { return mirroredAll(t, dst, topic, 1, 600) })
	stop()
	if !logs.Contains("position checked against the source's new leader", "position=300") {
		t.Error("the mirror did not check its position against the new leader")
	}
	if logs.Contains("truncated") {
		t.Error("a clean election was taken for a truncation")
	}
	got, want := readAll(t, dst, topic, 1)[0], readAll(t, followAddr, topic, 1)[0]
	if len(got) != 600 || len(want) != 600 {
		t.Fatalf("target %d records, source %d; want 600 each", len(got), len(want))
	}
	for i := range got {
		if string(got[i].Value) != string(want[i].Value) {
			t.Fatalf("target record %d is %q, source's %q", i, got[i].Value, want[i].Value)
		}
	}
}
