package presets

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/harness/result"
)

func TestPresetsValidate(t *testing.T) {
	want := []string{"chaos", "durability", "durability-disk", "flush", "hdd", "kreps2014", "plan-profile", "probes", "quick", "replication", "scale", "scale-quick", "security", "security-cluster"}
	if got := Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("presets %v, want %v", got, want)
	}
	for _, p := range All() {
		t.Run(p.Name, func(t *testing.T) {
			if p.Summary == "" || strings.HasPrefix(p.Summary, "#") {
				t.Errorf("summary %q: the file must open with \"# %s: what it is for\"", p.Summary, p.Name)
			}
			s, err := Spec(p.Name)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != p.Name {
				t.Errorf("spec name %q, want the preset's name", s.Name)
			}
			if err := s.Validate(nil); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if s.Text != p.Text {
				t.Error("the spec does not keep its text")
			}
		})
	}
}

// chaos proves issue 12's guarantee over at least 100 faults of every kind
// (acks=all, RF 3, min.insync.replicas 2, clean elections) and measures
// acks=1 and unclean election beside it, on a cluster.
func TestChaosShape(t *testing.T) {
	s, err := Spec("chaos")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(nil); err != nil {
		t.Fatal(err)
	}
	d := s.Durability
	if !s.Target.IsCluster() || d == nil || strings.Join(d.Faults, ",") != "mixed" || len(d.MixedKinds) != 0 {
		t.Fatalf("target %+v, durability %+v: want a cluster and every kind of fault", s.Target, d)
	}
	if n := s.Repetitions * d.FaultsPerRun; n < 100 {
		t.Errorf("%d faults per setting, want at least 100", n)
	}
	secs, err := s.Sections()
	if err != nil {
		t.Fatal(err)
	}
	// The guarantee's setting, and each dimension of the matrix (acks,
	// replication factor, unclean election) varied from it.
	guarantee := false
	acks, rfs, unclean := map[string]bool{}, map[int]bool{}, map[bool]bool{}
	for _, p := range secs[0].Points {
		w := p.Workload
		if w.Acks == "all" && !w.UncleanElection && w.ReplicationFactor == 3 && w.MinInsync == 2 {
			guarantee = true
		}
		acks[w.Acks], rfs[w.ReplicationFactor], unclean[w.UncleanElection] = true, true, true
	}
	if !guarantee || len(acks) < 2 || len(rfs) < 2 || len(unclean) < 2 {
		t.Errorf("points %d: the guarantee's among them %v; acks %v, replication factors %v, unclean election %v",
			len(secs[0].Points), guarantee, acks, rfs, unclean)
	}
}

func TestQuickShape(t *testing.T) {
	s, err := Spec("quick")
	if err != nil {
		t.Fatal(err)
	}
	secs, err := s.Sections()
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != 1 || len(secs[0].Points) != 4 || s.Probes.Disk == nil || s.Repetitions != 3 {
		t.Fatalf("quick: %d sections, %d points, disk probe %v, %d reps; want a disk probe and 4 points x 3 reps",
			len(secs), len(secs[0].Points), s.Probes.Disk != nil, s.Repetitions)
	}
	w := secs[0].Points[0].Workload
	if w.Partitions != 4 || w.MessageSize.Size != 1024 || w.Payload != "json" || w.Producers != 1 || w.Consumers != 1 || w.Rate != 0 {
		t.Errorf("quick workload: %s", w.Summary())
	}
}

// The kreps2014 references must each sit beside a point the preset has, or
// on a section it has, with a metric that point measures.
func TestKrepsReferences(t *testing.T) {
	s, err := Spec("kreps2014")
	if err != nil {
		t.Fatal(err)
	}
	secs, err := s.Sections()
	if err != nil {
		t.Fatal(err)
	}
	points := map[string]bool{}
	for _, sec := range secs {
		points[sec.Name+"|"] = true
		for _, p := range sec.Points {
			points[sec.Name+"|"+p.ID] = true
		}
	}
	known := []string{result.ProduceMsgsPerSec, result.ProduceMBPerSec, result.ConsumeMsgsPerSec, result.ConsumeMBPerSec,
		result.E2EP50, result.E2EP99, result.E2EP999}
	if len(s.References) < 10 {
		t.Fatalf("%d references", len(s.References))
	}
	for _, r := range s.References {
		if !points[r.Section+"|"+r.Point] {
			t.Errorf("reference %q sits beside %s %q, which the preset does not have", r.Label, r.Section, r.Point)
		}
		found := false
		for _, k := range known {
			found = found || k == r.Metric
		}
		if !found || r.Value <= 0 || !strings.Contains(r.Source, "Kreps") {
			t.Errorf("reference %+v", r)
		}
	}
}

// The replication preset: a 3-broker cluster, an unpaced and a 100k
// records/s section, each the same three settings against the RF 1 acks=1
// baseline, and a run of a few minutes at most.
func TestReplicationShape(t *testing.T) {
	s, err := Spec("replication")
	if err != nil {
		t.Fatal(err)
	}
	c := s.Target.Cluster
	if c == nil || c.Brokers != 3 || c.ZooKeeper != "embedded" || s.Repetitions < 3 {
		t.Fatalf("target %+v, %d reps; want a 3-broker cluster on an embedded ZooKeeper, 3 reps or more", c, s.Repetitions)
	}
	secs, err := s.Sections()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"replication_factor=1/min_insync=1/acks=1", "replication_factor=3/min_insync=1/acks=1", "replication_factor=3/min_insync=2/acks=all"}
	var total time.Duration
	for i, sec := range secs {
		if sec.Baseline != want[0] || len(sec.Points) != len(want) {
			t.Fatalf("section %s: baseline %q, %d points", sec.Name, sec.Baseline, len(sec.Points))
		}
		for j, p := range sec.Points {
			w := p.Workload
			if p.ID != want[j] || w.Partitions != 6 || w.MessageSize.Size != 100 || w.Producers != 1 {
				t.Errorf("%s point %d: %s: %s", sec.Name, j, p.ID, w.Summary())
			}
			if rate := []float64{0, 100000}[i]; w.Rate != rate {
				t.Errorf("%s point %s: rate %v, want %v", sec.Name, p.ID, w.Rate, rate)
			}
			total += time.Duration(s.Repetitions) * (w.Warmup + w.Duration)
		}
	}
	if len(secs) != 2 || total > 3*time.Minute {
		t.Errorf("%d sections, %v of load; want 2 sections and a few minutes", len(secs), total)
	}
}

func TestUnknown(t *testing.T) {
	_, err := Spec("slow")
	if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "quick") {
		t.Errorf("Spec(slow) = %v, want ErrUnknown listing the presets", err)
	}
}

// scale measures issue 16's partition counts under its 20,000-descriptor
// scenario, every step on; scale-quick is the same at small counts.
func TestScaleShape(t *testing.T) {
	for name, counts := range map[string]string{"scale": "1000,10000,100000", "scale-quick": "200,1000"} {
		s, err := Spec(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(nil); err != nil {
			t.Fatal(err)
		}
		sc := s.Scale
		var got []string
		for _, n := range sc.Partitions {
			got = append(got, strconv.Itoa(n))
		}
		if strings.Join(got, ",") != counts || s.Target.Embedded == nil || s.Target.Embedded.OpenFilesLimit != 20000 {
			t.Errorf("%s: partitions %v, target %+v", name, got, s.Target.Embedded)
		}
		if sc.Restarts < 1 || sc.SessionPartitions != 10000 || sc.HotRounds < 2 || s.Workload.Partitions != 4 {
			t.Errorf("%s: a step is off or small: %+v, hot partitions %d", name, sc, s.Workload.Partitions)
		}
	}
}
