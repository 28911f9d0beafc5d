package plan

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.9g, want %.9g", what, got, want)
	}
}

func answer(t *testing.T, p *Plan, name string) Answer {
	t.Helper()
	a, ok := p.Answer(name)
	if !ok {
		t.Fatalf("no answer %q in %+v", name, p.Answers)
	}
	return a
}

func binding(p *Plan) []string {
	var out []string
	for _, c := range p.Constraints {
		if c.Binding {
			out = append(out, c.Name)
		}
	}
	return out
}

// The expansion e, worked by hand: a 1024-byte record takes 1034 bytes
// with its ~10 bytes of varints, 15 of them fill a 16 KiB batch, whose
// 61-byte header adds 61/15 per record.
func TestExpansion(t *testing.T) {
	near(t, "e(1024)", Expansion(1024), (1024+10+61.0/15)/1024)
	near(t, "e(100)", Expansion(100), (100+10+61.0/148)/100)
	near(t, "e(1000)", Expansion(1000), (1000+10+61.0/16)/1000)
	// A record larger than a batch is its own batch.
	near(t, "e(1 MiB)", Expansion(1<<20), (1<<20+10+61.0)/(1<<20))
}

// The README's example, every answer worked by hand.
func TestPlanReadmeExample(t *testing.T) {
	p, err := Make(Workload{IngressMBps: 50, RecordBytes: 1024, PeakFactor: 2, Retention: 7 * 24 * time.Hour,
		ReplicationFactor: 3, ConsumerGroups: 3, PartitionProduceMBps: 10},
		Hardware{DiskSeqWriteMBps: 200, DisksPerBroker: 4, NetworkMBps: 1190})
	if err != nil {
		t.Fatal(err)
	}
	e := (1024 + 10 + 61.0/15) / 1024
	stored := 50 * 604800 * 3 * e * (1 + 20.0/4096) // MiB
	near(t, "peak ingress", answer(t, p, "peak ingress").Value, 100)
	near(t, "stored", answer(t, p, "stored (cluster)").Value, stored/1024)
	if p.Partitions != 10 || p.Brokers != 3 {
		t.Errorf("partitions %d, brokers %d; want 10 (100/10), 3 (RF)", p.Partitions, p.Brokers)
	}
	if b := binding(p); strings.Join(b, ",") != "replication" {
		t.Errorf("binding %v, want replication", b)
	}
	near(t, "stored per broker", answer(t, p, "stored per broker").Value, stored/1024/3)
	near(t, "disk size", answer(t, p, "disk size").Value, stored/1024/3/0.8/4)
	near(t, "net in", answer(t, p, "network in per broker").Value, 100.0*3/3)
	near(t, "net out", answer(t, p, "network out per broker").Value, 100.0*5/3)
	near(t, "NIC", answer(t, p, "NIC per broker").Value, 100.0*5/3*1.4)
	near(t, "page cache", answer(t, p, "page cache per broker").Value, 50.0/3*60/1024)
	if a := answer(t, p, "NIC per broker"); a.BoundBy != "network out" {
		t.Errorf("NIC bound by %q, want network out (G + R − 1 = 5 > R)", a.BoundBy)
	}
	if a := answer(t, p, "stored (cluster)"); !strings.Contains(a.Numbers, "50 MB/s × 604800 s × 3") {
		t.Errorf("stored numbers %q do not show the inputs", a.Numbers)
	}
}

// Each constraint binding in turn, with the count worked by hand.
func TestPlanBinding(t *testing.T) {
	tests := []struct {
		name    string
		w       Workload
		h       Hardware
		brokers int
		bind    string
	}{{
		// 100 × 3 × 1.01374 / (1 × 50 × 0.8) = 7.6 → 8
		name: "disk write", brokers: 8, bind: "disk write",
		w: Workload{IngressMBps: 100, RecordBytes: 1024, Retention: time.Hour, ReplicationFactor: 3, ConsumerGroups: 1, Partitions: 12},
		h: Hardware{DiskSeqWriteMBps: 50, NetworkMBps: 1190},
	}, {
		// max(1000 × 3, 1000 × (5 + 3 − 1)) × 1.4 / 1190 = 8.24 → 9; disk 0.48 → 1
		name: "network", brokers: 9, bind: "network",
		w: Workload{IngressMBps: 1000, RecordBytes: 1024, Retention: time.Hour, ReplicationFactor: 3, ConsumerGroups: 5, Partitions: 100},
		h: Hardware{DiskSeqWriteMBps: 2000, DisksPerBroker: 4, NetworkMBps: 1190},
	}, {
		// S = 10 × 2592000 × 3 × 1.0138125 × 1.0048828 / 1024 = 77362 GiB;
		// / (2 × 1000 × 0.8) = 48.35 → 49
		name: "storage", brokers: 49, bind: "storage",
		w: Workload{IngressMBps: 10, RecordBytes: 1000, Retention: 30 * 24 * time.Hour, ReplicationFactor: 3, Partitions: 30},
		h: Hardware{DiskSeqWriteMBps: 200, DisksPerBroker: 2, DiskGiB: 1000},
	}, {
		// 20000 × 3 / 4000 = 15
		name: "partitions", brokers: 15, bind: "partitions",
		w: Workload{IngressMBps: 1, RecordBytes: 100, Retention: time.Hour, ReplicationFactor: 3, Partitions: 20000},
	}, {
		// 500 × (0.002 + 2 × (0.002 + 0.001) + 1 × 0.001) / (2 × 0.7) = 3.21 → 4
		name: "CPU", brokers: 4, bind: "CPU",
		w: Workload{IngressMBps: 500, RecordBytes: 100, Retention: time.Hour, ReplicationFactor: 3, ConsumerGroups: 1, Partitions: 6},
		h: Hardware{Cores: 2, AppendCPUPerMB: 0.002, ServeCPUPerMB: 0.001},
	}, {
		// 150 × 3 / 100 = 4.5 → 5; consume 150 × 1 / 300 → 1
		name: "broker produce", brokers: 5, bind: "broker produce",
		w: Workload{IngressMBps: 150, RecordBytes: 100, Retention: time.Hour, ReplicationFactor: 3, ConsumerGroups: 1, Partitions: 6},
		h: Hardware{BrokerProduceMBps: 100, BrokerConsumeMBps: 300},
	}, {
		// 150 × 4 / 100 = 6; produce 150 × 2 / 100 = 3
		name: "broker consume", brokers: 6, bind: "broker consume",
		w: Workload{IngressMBps: 150, RecordBytes: 100, Retention: time.Hour, ReplicationFactor: 2, ConsumerGroups: 4, Partitions: 6},
		h: Hardware{BrokerProduceMBps: 100, BrokerConsumeMBps: 100},
	}, {
		// Two constraints tie at 3: both bind.
		name: "tie", brokers: 3, bind: "replication,broker produce",
		w: Workload{IngressMBps: 100, RecordBytes: 100, Retention: time.Hour, ReplicationFactor: 3, Partitions: 6},
		h: Hardware{BrokerProduceMBps: 100},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Make(tc.w, tc.h)
			if err != nil {
				t.Fatal(err)
			}
			if p.Brokers != tc.brokers {
				t.Errorf("brokers %d, want %d; constraints %+v", p.Brokers, tc.brokers, p.Constraints)
			}
			if b := strings.Join(binding(p), ","); b != tc.bind {
				t.Errorf("binding %q, want %q", b, tc.bind)
			}
			if a := answer(t, p, "brokers"); a.BoundBy != strings.ReplaceAll(tc.bind, ",", ", ") {
				t.Errorf("brokers bound by %q, want %q", a.BoundBy, tc.bind)
			}
		})
	}
}

func TestPlanNetworkPerBroker(t *testing.T) {
	p, err := Make(Workload{IngressMBps: 1000, RecordBytes: 1024, Retention: time.Hour, ReplicationFactor: 3, ConsumerGroups: 5, Partitions: 100},
		Hardware{DiskSeqWriteMBps: 2000, DisksPerBroker: 4, NetworkMBps: 1190})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "in", answer(t, p, "network in per broker").Value, 1000.0*3/9)
	near(t, "out", answer(t, p, "network out per broker").Value, 1000.0*7/9)
	near(t, "reads on misses", answer(t, p, "disk read per broker (all misses)").Value, 1000.0*7/9)
}

// Rao's max(t/p, t/c): the slower consumer decides.
func TestPlanPartitions(t *testing.T) {
	p, err := Make(Workload{IngressMBps: 100, RecordBytes: 100, Retention: time.Hour, ReplicationFactor: 1,
		PartitionProduceMBps: 10, PartitionConsumeMBps: 4}, Hardware{})
	if err != nil {
		t.Fatal(err)
	}
	a := answer(t, p, "partitions")
	if p.Partitions != 25 || a.BoundBy != "per-partition consumer rate" {
		t.Errorf("partitions %d bound by %q; want 25 (100/4) by the consumer rate", p.Partitions, a.BoundBy)
	}
	// The profile's measured rate when none is given, and the peak counts.
	p, err = Make(Workload{IngressMBps: 100, PeakFactor: 1.5, RecordBytes: 100, Retention: time.Hour, ReplicationFactor: 1},
		Hardware{PartitionProduceMBps: 7})
	if err != nil {
		t.Fatal(err)
	}
	if p.Partitions != 22 { // ⌈150 / 7⌉
		t.Errorf("partitions %d, want ⌈150/7⌉ = 22", p.Partitions)
	}
}

// retention.bytes is per partition, and the smaller retention wins.
func TestPlanRetentionBytes(t *testing.T) {
	w := Workload{IngressMBps: 100, RecordBytes: 1000, Retention: 24 * time.Hour, RetentionBytes: 1 << 30, ReplicationFactor: 3, Partitions: 10}
	p, err := Make(w, Hardware{})
	if err != nil {
		t.Fatal(err)
	}
	a := answer(t, p, "stored (cluster)")
	near(t, "stored", a.Value, 1*10*3*(1+20.0/4096))
	if a.BoundBy != "retention bytes" {
		t.Errorf("bound by %q, want retention bytes", a.BoundBy)
	}
	w.RetentionBytes = 1 << 50 // more than a day holds
	if p, err = Make(w, Hardware{}); err != nil {
		t.Fatal(err)
	}
	if a := answer(t, p, "stored (cluster)"); a.BoundBy != "retention time" {
		t.Errorf("bound by %q, want retention time", a.BoundBy)
	}
}

func TestPlanRecordsPerSec(t *testing.T) {
	p, err := Make(Workload{RecordsPerSec: 100_000, RecordBytes: 100, Retention: time.Hour, ReplicationFactor: 1, Partitions: 1}, Hardware{})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "ingress", p.Workload.IngressMBps, 100_000*100.0/(1<<20))
}

func TestPlanBadInput(t *testing.T) {
	ok := Workload{IngressMBps: 10, RecordBytes: 100, Retention: time.Hour, ReplicationFactor: 3, Partitions: 3}
	tests := []struct {
		name string
		edit func(*Workload, *Hardware)
		want string
	}{
		{"negative ingress", func(w *Workload, _ *Hardware) { w.IngressMBps = -1 }, "ingress MB/s -1"},
		{"no ingress", func(w *Workload, _ *Hardware) { w.IngressMBps = 0 }, "ingress is required"},
		{"zero RF", func(w *Workload, _ *Hardware) { w.ReplicationFactor = 0 }, "replication factor 0"},
		{"retention missing", func(w *Workload, _ *Hardware) { w.Retention = 0 }, "retention is required"},
		{"negative retention", func(w *Workload, _ *Hardware) { w.Retention = -time.Hour }, "retention -1h0m0s"},
		{"no record size", func(w *Workload, _ *Hardware) { w.RecordBytes = 0 }, "record size is required"},
		{"peak below 1", func(w *Workload, _ *Hardware) { w.PeakFactor = 0.5 }, "peak factor 0.5"},
		{"NaN", func(w *Workload, _ *Hardware) { w.IngressMBps = math.NaN() }, "ingress MB/s NaN"},
		{"disagreeing rates", func(w *Workload, _ *Hardware) { w.RecordsPerSec = 1 }, "disagrees"},
		{"negative groups", func(w *Workload, _ *Hardware) { w.ConsumerGroups = -1 }, "consumer groups -1"},
		{"no partitions, no rates", func(w *Workload, _ *Hardware) { w.Partitions = 0 }, "partitions: give"},
		{"negative disk", func(_ *Workload, h *Hardware) { h.DiskSeqWriteMBps = -5 }, "disk MB/s -5"},
		{"negative disks", func(_ *Workload, h *Hardware) { h.DisksPerBroker = -1 }, "disks per broker -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, h := ok, Hardware{}
			tc.edit(&w, &h)
			p, err := Make(w, h)
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Make = %v, %v; want ErrInput naming %q", p, err, tc.want)
			}
		})
	}
	if _, err := Make(ok, Hardware{}); err != nil {
		t.Errorf("the valid workload fails: %v", err)
	}
}

func TestCapacityFile(t *testing.T) {
	p, err := Make(Workload{IngressMBps: 100, RecordBytes: 1024, Retention: time.Hour, ReplicationFactor: 3, Partitions: 6},
		Hardware{DisksPerBroker: 2, DiskGiB: 500})
	if err != nil {
		t.Fatal(err)
	}
	f := p.Capacity(1)
	if len(f.BrokerCapacities) != 1+p.Brokers || f.BrokerCapacities[0].BrokerID != "-1" || f.BrokerCapacities[1].BrokerID != "1" {
		t.Fatalf("entries %+v: want the default and brokers 1..%d", f.BrokerCapacities, p.Brokers)
	}
	c := f.BrokerCapacities[1].Capacity
	dirs, ok := c["DISK"].(map[string]string)
	if !ok || len(dirs) != 2 || dirs[LogDir+"0"] != "512000" {
		t.Errorf("DISK %v, want two log dirs of 500 GiB = 512000 MB", c["DISK"])
	}
	// No NIC given: the need with 40% headroom, in KB/s.
	if c["NW_IN"] != "143360" || c["NW_OUT"] != "95573" || c["CPU"] != "100" {
		t.Errorf("NW_IN %v NW_OUT %v CPU %v; want 100×3/3×1.4×1024 = 143360, 100×2/3×1.4×1024 = 95573, 100", c["NW_IN"], c["NW_OUT"], c["CPU"])
	}
	if !strings.Contains(string(f.JSON()), `"brokerCapacities": [`) {
		t.Errorf("JSON %s", f.JSON())
	}
}
