package plan

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/weir-broker/weir/harness/result"
)

func TestPredict(t *testing.T) {
	h := Hardware{HostCPU: 1.6, ProducerCPUPerMB: 0.012, AppendCPUPerMB: 0.002, ServeCPUPerMB: 0.001, ConsumerCPUPerMB: 0.002}
	p, err := Predict(h, Colocated{Brokers: 3, ReplicationFactor: 3, RecordBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "RF 3", p.ProduceMBps, 1.6/(0.012+0.002+2*(0.002+0.001))) // 80
	near(t, "disk", p.DiskPerProduced, 3*(110+61.0/148)/100*(1+20.0/4096))
	p, err = Predict(h, Colocated{Brokers: 1, ReplicationFactor: 1, ConsumerGroups: 1, RecordBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "RF 1 + consumer", p.ProduceMBps, 1.6/(0.012+0.002+0.001+0.002))
	for _, c := range []Colocated{{Brokers: 2, ReplicationFactor: 3, RecordBytes: 100}, {Brokers: 1, ReplicationFactor: 1}} {
		if _, err := Predict(h, c); !errors.Is(err, ErrInput) {
			t.Errorf("Predict(%+v) = %v, want ErrInput", c, err)
		}
	}
	if _, err := Predict(Hardware{}, Colocated{Brokers: 1, ReplicationFactor: 1, RecordBytes: 100}); !errors.Is(err, ErrInput) {
		t.Errorf("Predict without CPU figures = %v, want ErrInput", err)
	}
}

func rep(m map[string]float64) result.Rep {
	return result.Rep{Duration: 5 * time.Second, Metrics: m}
}

const profileSpec = `name: plan-profile
target: {embedded: {}}
workload: {topics: 1, partitions: 6, message_size: 100, producers: 1, warmup: 1s, duration: 5s}
experiments:
  - name: produce
    workload: {consumers: 0}
    points: [{replication_factor: 1}]
  - name: produce-consume
    workload: {consumers: 1, consume: live}
    points: [{replication_factor: 1}]
`

// A profile worked by hand: 100 MB/s over 5 s is 500 MB; the medians of
// three reps (one failed rep is ignored).
func TestProfileFromRun(t *testing.T) {
	const mb = 1 << 20
	r := &result.Run{Version: result.SchemaVersion, Spec: profileSpec, Env: result.Env{CPUs: 2, MemoryMiB: 4096, Brokers: 1},
		Sections: []result.Section{
			{Name: "disk", Points: []result.Point{
				{ID: diskSeqDirect, Reps: []result.Rep{rep(map[string]float64{result.MBPerSec: 500}), rep(map[string]float64{result.MBPerSec: 700}), rep(map[string]float64{result.MBPerSec: 600})}},
				{ID: diskFdatasync, Reps: []result.Rep{rep(map[string]float64{result.LatP50: 250})}},
			}},
			{Name: profileProduce, Points: []result.Point{{ID: "replication_factor=1", Reps: []result.Rep{
				rep(map[string]float64{result.ProduceMBPerSec: 100, result.BytesProduced: 500 * mb, result.BrokerCPUSeconds: 1, result.ClientCPUSeconds: 6}),
				rep(map[string]float64{result.ProduceMBPerSec: 90, result.BytesProduced: 450 * mb, result.BrokerCPUSeconds: 0.9, result.ClientCPUSeconds: 5.4}),
				rep(map[string]float64{result.ProduceMBPerSec: 110, result.BytesProduced: 550 * mb, result.BrokerCPUSeconds: 1.1, result.ClientCPUSeconds: 6.6}),
				{Error: "lost records", Metrics: map[string]float64{result.ProduceMBPerSec: 1}},
			}}}},
			{Name: profileProduceConsume, Points: []result.Point{{ID: "replication_factor=1", Reps: []result.Rep{
				rep(map[string]float64{result.ProduceMBPerSec: 80, result.ConsumeMBPerSec: 80, result.BytesProduced: 400 * mb, result.BrokerCPUSeconds: 1.2, result.ClientCPUSeconds: 5.6}),
			}}}},
		}}
	h, err := ProfileFromRun(r, "test")
	if err != nil {
		t.Fatal(err)
	}
	near(t, "disk", h.DiskSeqWriteMBps, 600)
	if h.FsyncLatency != 250*time.Microsecond {
		t.Errorf("fsync %v, want 250µs", h.FsyncLatency)
	}
	near(t, "P", h.BrokerProduceMBps, 100)
	near(t, "p", h.PartitionProduceMBps, 100.0/6)
	near(t, "k_l", h.AppendCPUPerMB, 1.0/500)
	near(t, "k_c", h.ProducerCPUPerMB, 6.0/500)
	near(t, "B", h.HostCPU, 7.0/5)
	near(t, "C", h.BrokerConsumeMBps, 80)
	near(t, "k_s", h.ServeCPUPerMB, 1.2/400-1.0/500)
	near(t, "k_cc", h.ConsumerCPUPerMB, 5.6/400-6.0/500)
	if h.Cores != 2 || h.MemoryGiB != 4 {
		t.Errorf("cores %v memory %v", h.Cores, h.MemoryGiB)
	}

	r.Env.Brokers = 3
	if _, err := ProfileFromRun(r, "cluster"); !errors.Is(err, ErrInput) {
		t.Errorf("a cluster run as profile: %v, want ErrInput", err)
	}
}

const clusterSpec = `name: replication
target: {cluster: {brokers: 3}}
workload: {topics: 1, partitions: 6, message_size: 100, producers: 1, consumers: 0, warmup: 1s, duration: 5s}
experiments:
  - name: throughput
    points: [{replication_factor: 1, acks: "1"}, {replication_factor: 3, acks: "1"}]
  - name: paced
    workload: {rate: 1000, consumers: 1, consume: live}
    points: [{replication_factor: 3, acks: "1"}]
`

func TestCompare(t *testing.T) {
	h := Hardware{HostCPU: 1.6, ProducerCPUPerMB: 0.012, AppendCPUPerMB: 0.002, ServeCPUPerMB: 0.001}
	pt := func(id string, mbps, disk float64) result.Point {
		return result.Point{ID: id, Reps: []result.Rep{rep(map[string]float64{result.ProduceMBPerSec: mbps, result.BytesProduced: 1 << 20, result.DiskWriteBytes: disk * (1 << 20) / 1000,
			result.ClientCPUSeconds: 0.012, result.BrokerCPUSeconds: 0.004})}}
	}
	r := &result.Run{Version: result.SchemaVersion, Spec: clusterSpec, Env: result.Env{Brokers: 3, Target: "cluster"},
		Sections: []result.Section{
			{Name: "load-throughput", Baseline: "replication_factor=1/acks=1", Points: []result.Point{pt("replication_factor=1/acks=1", 100, 1100), pt("replication_factor=3/acks=1", 100, 3300)}},
			{Name: "load-paced", Points: []result.Point{pt("replication_factor=3/acks=1", 0.1, 3300)}},
		}}
	cs, err := Compare(h, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 9 {
		t.Fatalf("%d comparisons, want 9 (two unpaced points × throughput, cores, CPU per MB and disk, and RF 3 over the baseline): %+v", len(cs), cs)
	}
	want := []struct {
		metric    string
		predicted float64
	}{
		{result.ProduceMBPerSec, 1.6 / 0.014},
		{MetricBusy, 1.6},
		{MetricCPUPerMB, 0.014},
		{MetricDiskPerProduced, 1 * (110 + 61.0/148) / 100 * (1 + 20.0/4096)},
		{result.ProduceMBPerSec, 80},
		{MetricPerBaseline, 0.014 / 0.02},
		{MetricBusy, 1.6},
		{MetricCPUPerMB, 0.02},
		{MetricDiskPerProduced, 3 * (110 + 61.0/148) / 100 * (1 + 20.0/4096)},
	}
	for i, w := range want {
		if cs[i].Metric != w.metric {
			t.Errorf("comparison %d: metric %s, want %s", i, cs[i].Metric, w.metric)
		}
		near(t, cs[i].Point+" "+w.metric, cs[i].Predicted, w.predicted)
		if assumed := w.metric == MetricBusy; cs[i].Assumption != assumed || (assumed && cs[i].Fails(0)) {
			t.Errorf("comparison %d (%s): assumption %v, fails %v: want only the cores busy rows assumptions, never failing", i, w.metric, cs[i].Assumption, cs[i].Fails(0))
		}
	}
	near(t, "measured cores", cs[1].Measured, 0.016/5)
	near(t, "measured CPU", cs[2].Measured, 0.016)
	near(t, "measured disk", cs[8].Measured, 3.3)
	near(t, "measured ratio", cs[5].Measured, 1)
	if c := cs[4]; math.Abs(c.Error-(-0.2)) > 1e-9 || c.Within(0.19) || !c.Within(0.2) {
		t.Errorf("80 predicted against 100 measured: error %v, want -20%%", c.Error)
	}
	r.Env.Brokers = 0
	if _, err := Compare(h, r); !errors.Is(err, ErrInput) {
		t.Errorf("bootstrap run: %v, want ErrInput", err)
	}
}

func TestMergeRuns(t *testing.T) {
	mk := func(mbps ...float64) *result.Run {
		r := &result.Run{Name: "x", Env: result.Env{Brokers: 1}}
		var reps []result.Rep
		for _, v := range mbps {
			reps = append(reps, rep(map[string]float64{result.ProduceMBPerSec: v}))
		}
		r.Sections = []result.Section{{Name: "load-a", Points: []result.Point{{ID: "p", Reps: reps}, {ID: "q", Reps: reps}}}}
		return r
	}
	a, b := mk(1, 2), mk(3)
	b.Sections = append(b.Sections, result.Section{Name: "load-b", Points: []result.Point{{ID: "p", Reps: []result.Rep{rep(map[string]float64{result.ProduceMBPerSec: 9})}}}})
	m, err := MergeRuns(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Sections) != 2 || len(m.Sections[0].Points) != 2 {
		t.Fatalf("sections %+v", m.Sections)
	}
	if got := m.Sections[0].Points[1].Values(result.ProduceMBPerSec); len(got) != 3 || got[2] != 3 {
		t.Errorf("load-a q pooled %v, want [1 2 3]", got)
	}
	if got := m.Sections[1].Points[0].Values(result.ProduceMBPerSec); len(got) != 1 || got[0] != 9 {
		t.Errorf("load-b p %v, want [9]", got)
	}
	if len(a.Sections[0].Points[0].Reps) != 2 {
		t.Error("MergeRuns changed its input")
	}
	b.Name = "y"
	if _, err := MergeRuns(a, b); !errors.Is(err, ErrInput) {
		t.Errorf("runs of two specs: %v, want ErrInput", err)
	}
}
