package durability

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/segment"
	"github.com/weir-broker/weir/harness/clusterproc"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/spec"
)

// A schedule is a function of its seed: the same seed, the same faults;
// faults strike one per slot, in the first half of it, in order; Mixed
// draws only the kinds given.
func TestPlan(t *testing.T) {
	kinds := []ClusterFault{KillLeader, Pause}
	a, err := Plan(5, Mixed, kinds, 10, time.Second, 20*time.Second, 500*time.Millisecond, 2, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Plan(5, Mixed, kinds, 10, time.Second, 20*time.Second, 500*time.Millisecond, 2, 3, 3)
	c, _ := Plan(6, Mixed, kinds, 10, time.Second, 20*time.Second, 500*time.Millisecond, 2, 3, 3)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different schedules:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 5 and 6 drew the same schedule %v", a)
	}
	seen := map[ClusterFault]bool{}
	for i, p := range a {
		slot := 2 * time.Second
		from := time.Second + time.Duration(i)*slot
		if p.At < from || p.At >= from+slot/2 {
			t.Errorf("fault %d at %v, want in [%v, %v)", i, p.At, from, from+slot/2)
		}
		if !slices.Contains(kinds, p.Kind) || p.Hold != 500*time.Millisecond || p.Topic > 1 || p.Partition > 2 || p.Broker < 1 || p.Broker > 3 {
			t.Errorf("fault %d: %+v", i, p)
		}
		seen[p.Kind] = true
	}
	if len(seen) != 2 {
		t.Errorf("10 mixed faults drew only %v", seen)
	}
	// Every cluster can take a power cut: it needs neither root nor
	// namespaces, only a broker started on the power-cut file system.
	if k := available(false, false, false); !slices.Contains(k, PowerCut) || slices.Contains(k, DiskFull) || slices.Contains(k, LinkDown) {
		t.Errorf("kinds without root or netns: %v", k)
	}
	if k := available(true, true, false); !slices.Equal(k, ClusterFaults[:len(ClusterFaults)-1]) || slices.Contains(k, DiskPowerCut) {
		t.Errorf("kinds with root and netns: %v, want all but %s", k, DiskPowerCut)
	}
	// On emulated disks a broker's disk is cut, never filled (its backing
	// directory is the machine's disk).
	if k := available(true, true, true); !slices.Contains(k, DiskPowerCut) || slices.Contains(k, DiskFull) {
		t.Errorf("kinds on emulated disks: %v", k)
	}
	cuts, _ := Plan(3, PowerCut, nil, 2, 0, 2*time.Second, time.Second, 1, 1, 3)
	if cuts[0].Kind != PowerCut || cuts[0].String() != "power-cut of the power-cut broker at "+cuts[0].At.String()+" for 1s" {
		t.Errorf("a power-cut schedule: %v", cuts)
	}
	one, _ := Plan(1, Term, nil, 3, 0, 3*time.Second, time.Second, 1, 1, 3)
	for _, p := range one {
		if p.Kind != Term {
			t.Errorf("a term schedule has %v", p)
		}
	}
	for _, bad := range []func() error{
		func() error { _, err := Plan(1, Term, nil, 0, 0, time.Second, time.Second, 1, 1, 1); return err },
		func() error { _, err := Plan(1, Term, nil, 1, 0, 0, time.Second, 1, 1, 1); return err },
		func() error { _, err := Plan(1, Term, nil, 1, 0, time.Second, 0, 1, 1, 1); return err },
		func() error { _, err := ParseClusterFault("kill-everyone"); return err },
	} {
		if err := bad(); !errors.Is(err, ErrConfig) {
			t.Errorf("got %v, want ErrConfig", err)
		}
	}
}

// A power cut needs the cluster's power-cut broker: without one it fails
// as a config error, striking nothing.
func TestPowerCutNeedsItsBroker(t *testing.T) {
	l := &lab{c: &clusterproc.Cluster{}}
	f, err := l.inject(context.Background(), Planned{Kind: PowerCut, Hold: time.Second}, nil, time.Now())
	if !errors.Is(err, ErrConfig) || f.Error == "" || f.Kind != string(PowerCut) {
		t.Errorf("power cut without a power-cut broker: %+v, %v; want ErrConfig", f, err)
	}
}

// A loss is charged to the fault in force when its record was
// acknowledged, else to the first that struck after, else to the last.
func TestChargeTo(t *testing.T) {
	start := time.Unix(100, 0)
	faults := []result.Fault{{At: time.Second, Healed: 1500 * time.Millisecond}, {At: 3 * time.Second, Healed: 4 * time.Second}}
	for _, c := range []struct {
		ack  time.Duration
		want int
	}{{0, 0}, {time.Second, 0}, {1200 * time.Millisecond, 0}, {2 * time.Second, 1}, {3500 * time.Millisecond, 1}, {5 * time.Second, 1}} {
		if got := chargeTo(faults, start, start.Add(c.ack).UnixNano()); got != c.want {
			t.Errorf("ack at %v charged to fault %d, want %d", c.ack, got, c.want)
		}
	}
}

// clusterInput is a small cluster run's check input: one producer, two
// records acknowledged on partition 0/0 at offsets 0 and 1 and served
// there, and a consumer that read both.
func clusterInput() checkInput {
	start := time.Unix(1000, 0)
	l := []entry{
		{topic: 0, partition: 0, size: 30, sum: 1, state: acked, sent: start.UnixNano(), ack: start.Add(10 * time.Millisecond).UnixNano(), offset: 0},
		{topic: 0, partition: 0, size: 30, sum: 2, state: acked, sent: start.UnixNano(), ack: start.Add(20 * time.Millisecond).UnixNano(), offset: 1},
	}
	return checkInput{
		fault: "cluster", start: start, cut: start.Add(time.Second), stop: start.Add(2 * time.Second),
		ledgers: [][]entry{l},
		served: map[tp]*served{{0, 0}: {start: 0, end: 2, records: []servedRecord{
			{offset: 0, id: recordID(0, 0), sum: 1, size: 30}, {offset: 1, id: recordID(0, 1), sum: 2, size: 30}}}},
		recovered: map[tp]int64{{0, 0}: 2},
		faults:    []result.Fault{{Kind: string(KillLeader), Target: "leader of 0/0", At: time.Second, Healed: 2 * time.Second}},
		seen:      map[tp][]seenRecord{{0, 0}: {{0, recordID(0, 0)}, {1, recordID(0, 1)}}},
	}
}

// The cluster checks catch what they are for: a consumer served a record
// the final log does not hold there; replicas that differ; a lost record
// charged to its fault; a duplicate legal only without idempotence.
func TestCheckCluster(t *testing.T) {
	clean := check(clusterInput())
	if err := clean.Verify(Nothing, 0); err != nil || !clean.Cluster || clean.Acked != 2 {
		t.Fatalf("clean run: %v (cluster %v, acked %d)", err, clean.Cluster, clean.Acked)
	}

	in := clusterInput()
	in.seen[tp{0, 0}] = append(in.seen[tp{0, 0}], seenRecord{offset: 2, id: recordID(0, 5)})
	if o := check(in); o.ReadTruncated != 1 || !errors.Is(o.Verify(Nothing, 0), ErrTruncatedRead) {
		t.Errorf("a read of offset 2, not in the log: ReadTruncated %d, Verify %v", o.ReadTruncated, o.Verify(Nothing, 0))
	}

	in = clusterInput()
	in.replicas = []string{"0/0: broker 2's replica differs from broker 1's: ends at 1 vs ends at 2"}
	if o := check(in); o.ReplicaMismatch != 1 || !errors.Is(o.Verify(Nothing, 0), ErrReplicas) {
		t.Errorf("replicas differ: mismatch %d, Verify %v", o.ReplicaMismatch, o.Verify(Nothing, 0))
	}

	in = clusterInput()
	s := in.served[tp{0, 0}]
	s.records, s.end = s.records[:1], 1
	in.seen = nil
	o := check(in)
	if o.AckedLost != 1 || o.Schedule[0].Lost != 1 || o.OldestLostAge != time.Second-20*time.Millisecond {
		t.Errorf("lost %d, charged %d to the kill, oldest %v", o.AckedLost, o.Schedule[0].Lost, o.OldestLostAge)
	}
	if err := o.Verify(Nothing, 0); !errors.Is(err, ErrLoss) {
		t.Errorf("Verify(Nothing) = %v, want ErrLoss", err)
	}
	if err := o.Verify(ClusterBound(spec.Workload{Acks: "1", MinInsync: 2}), 0); err != nil {
		t.Errorf("acks=1 may lose: Verify = %v", err)
	}

	in = clusterInput()
	s = in.served[tp{0, 0}]
	s.records = append(s.records, servedRecord{offset: 2, id: recordID(0, 1), sum: 2, size: 30})
	s.end = 3
	in.allowDuplicates = true
	if o := check(in); o.Duplicates != 1 || o.OffsetReuse != 0 || o.Verify(Nothing, 0) != nil {
		t.Errorf("a retried record stored twice by acks=1: duplicates %d, reuse %d, Verify %v", o.Duplicates, o.OffsetReuse, o.Verify(Nothing, 0))
	}
	in.allowDuplicates = false
	if o := check(in); !errors.Is(o.Verify(Nothing, 0), ErrDuplicate) {
		t.Errorf("an idempotent producer's record stored twice: Verify %v", o.Verify(Nothing, 0))
	}

	// acks=1: the retried copy survives at offset 2, the acknowledged one
	// at 1 is gone; legal without idempotence, offset reuse with it.
	in = clusterInput()
	s = in.served[tp{0, 0}]
	s.records = []servedRecord{s.records[0], {offset: 1, id: recordID(0, 5), sum: 9, size: 30}, {offset: 2, id: recordID(0, 1), sum: 2, size: 30}}
	s.end = 3
	in.ledgers[0] = append(in.ledgers[0], make([]entry, 4)...)
	in.ledgers[0][5] = entry{topic: 0, partition: 0, size: 30, sum: 9, state: failed, offset: -1}
	in.seen = nil
	in.allowDuplicates = true
	if o := check(in); o.Moved != 1 || o.OffsetReuse != 0 || o.Verify(ClusterBound(spec.Workload{Acks: "1", MinInsync: 2}), 0) != nil {
		t.Errorf("acks=1, the acknowledged copy lost, a retried one kept: moved %d, reuse %d, Verify %v", o.Moved, o.OffsetReuse, o.Verify(ClusterBound(spec.Workload{Acks: "1", MinInsync: 2}), 0))
	}
	in.allowDuplicates = false
	if o := check(in); o.OffsetReuse != 1 || !errors.Is(o.Verify(Nothing, 0), ErrOffsets) {
		t.Errorf("idempotent, a record served only away from its acknowledged offset: reuse %d, Verify %v", o.OffsetReuse, o.Verify(Nothing, 0))
	}

	// An unclean election may truncate what a consumer read: measured,
	// not a broken guarantee.
	in = clusterInput()
	in.seen[tp{0, 0}] = append(in.seen[tp{0, 0}], seenRecord{offset: 2, id: recordID(0, 5)})
	in.unclean = true
	if o := check(in); o.ReadTruncated != 1 || o.Verify(ClusterBound(spec.Workload{Acks: "all", MinInsync: 2, UncleanElection: true}), 0) != nil {
		t.Errorf("unclean election, a truncated read: %d, Verify %v", o.ReadTruncated, o.Verify(ClusterBound(spec.Workload{Acks: "all", MinInsync: 2, UncleanElection: true}), 0))
	}
}

// Replicas are compared batch by batch from the latest log start: equal
// logs pass, a missing tail or a changed byte is named.
func TestCompareReplicas(t *testing.T) {
	root := t.TempDir()
	write := func(broker, from, to int, flip bool) {
		dir := filepath.Join(root, string(rune('0'+broker)), logs.DirName("t", 0))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var b []byte
		for off := from; off < to; off++ {
			opts := record.DefaultBuildOptions()
			opts.BaseOffset = int64(off)
			v := []byte("record")
			if flip && off == to-1 {
				v = []byte("recorD")
			}
			var err error
			if b, err = record.AppendBatch(b, opts, []record.Record{{Value: v, Timestamp: 1}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(segment.Name(dir, int64(from), ".log"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dirs := map[int32]string{1: filepath.Join(root, "1"), 2: filepath.Join(root, "2"), 3: filepath.Join(root, "3")}
	write(1, 0, 5, false)
	write(2, 2, 5, false) // its log starts later: compared from there
	write(3, 0, 5, false)
	a := map[tp][]int32{{0, 0}: {1, 2, 3}}
	from2 := map[tp]int64{{0, 0}: 2}
	if got := compareReplicas(dirs, []string{"t"}, a, from2); len(got) != 0 {
		t.Errorf("equal replicas from the log start: %v", got)
	}
	if got := compareReplicas(dirs, []string{"t"}, a, map[tp]int64{{0, 0}: 0}); len(got) != 1 || !strings.Contains(got[0], "broker 2's replica starts at 2, the log at 0") {
		t.Errorf("a replica missing the log's first records: %q", got)
	}
	write(3, 0, 4, false)
	write(2, 2, 5, true)
	got := compareReplicas(dirs, []string{"t"}, a, from2)
	if len(got) != 2 || !strings.Contains(got[0], "broker 2") || !strings.Contains(got[0], "bytes differ") ||
		!strings.Contains(got[1], "broker 3") || !strings.Contains(got[1], "ends at 5 vs ends at 4") {
		t.Errorf("a flipped byte on 2, a short log on 3: %q", got)
	}
}

// The spec knows the cluster faults by the names this package gives them.
func TestClusterFaultNames(t *testing.T) {
	var names []string
	for _, k := range ClusterFaults {
		names = append(names, string(k))
	}
	if !slices.Equal(names, spec.ClusterFaults) || string(Mixed) != spec.FaultMixed {
		t.Errorf("durability's faults %v (and %q), the spec's %v (and %q)", names, Mixed, spec.ClusterFaults, spec.FaultMixed)
	}
}

// ClusterBound promises nothing lost only where an acknowledged record is
// on two in-sync replicas (or on the disk of every one) and only those lead.
func TestClusterBound(t *testing.T) {
	for _, tc := range []struct {
		w    spec.Workload
		safe bool
	}{
		{spec.Workload{Acks: "all", MinInsync: 2}, true},
		{spec.Workload{Acks: "-1", MinInsync: 3}, true},
		{spec.Workload{Acks: "all", MinInsync: 1}, false},
		{spec.Workload{Acks: "all", MinInsync: 1, DurableAcks: true}, true},
		{spec.Workload{Acks: "all", MinInsync: 2, UncleanElection: true}, false},
		{spec.Workload{Acks: "1", MinInsync: 2}, false},
	} {
		if got := ClusterBound(tc.w) == Nothing; got != tc.safe {
			t.Errorf("%+v: bounded to nothing %v, want %v", tc.w, got, tc.safe)
		}
	}
}
