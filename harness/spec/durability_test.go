package spec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDurabilitySections(t *testing.T) {
	s, err := Load("testdata/durability.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(nil); err != nil {
		t.Fatal(err)
	}
	d := s.Durability
	if d == nil || strings.Join(d.Faults, ",") != "kill,power" || d.Torn != 0.25 || d.SyncLatency != 500*time.Microsecond ||
		d.RecoveryTimeout != 30*time.Second || d.VerifyRecords != 10 || d.AgeSlack != 25*time.Millisecond {
		t.Fatalf("durability block with defaults = %+v", d)
	}
	secs, err := s.Sections()
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != 1 || secs[0].Name != "durability" || strings.Join(secs[0].Factors, ",") != "flush_policy,durable_acks,fault" {
		t.Fatalf("sections = %+v", secs)
	}
	want := []string{
		"flush_policy=every-batch/durable_acks=false/fault=kill", "flush_policy=every-batch/durable_acks=false/fault=power",
		"flush_policy=every-batch/durable_acks=true/fault=kill", "flush_policy=every-batch/durable_acks=true/fault=power",
		"flush_policy=interval:ms=20/durable_acks=false/fault=kill", "flush_policy=interval:ms=20/durable_acks=false/fault=power",
		"flush_policy=interval:ms=20/durable_acks=true/fault=kill", "flush_policy=interval:ms=20/durable_acks=true/fault=power",
	}
	if len(secs[0].Points) != len(want) {
		t.Fatalf("%d points, want %d", len(secs[0].Points), len(want))
	}
	for i, p := range secs[0].Points {
		f, _ := factor(p, FactorFault)
		if p.ID != want[i] || p.Fault != f || p.Fault == "" {
			t.Errorf("point %d = %s (fault %q, factor %q), want %s", i, p.ID, p.Fault, f, want[i])
		}
	}
}

func TestDurabilityFaultsReplaceDefault(t *testing.T) {
	s := mustParse(t, "name: d\ndurability: {faults: [power]}\nworkload: {message_size: 64}\n")
	if err := s.Validate(nil); err != nil {
		t.Fatal(err)
	}
	secs, _ := s.Sections()
	if len(secs[0].Points) != 1 || secs[0].Points[0].ID != "fault=power" || secs[0].Points[0].Fault != FaultPower {
		t.Fatalf("points = %+v", secs[0].Points)
	}
	empty := mustParse(t, "name: d\ndurability: {}\nworkload: {message_size: 64}\n")
	if err := empty.Validate(nil); err != nil || strings.Join(empty.Durability.Faults, ",") != "kill,power" {
		t.Errorf("durability: {} faults = %v (%v), want the default", empty.Durability.Faults, err)
	}
	cl := mustParse(t, "name: d\ntarget: {cluster: {brokers: 3}}\ndurability: {}\nworkload: {message_size: 64, replication_factor: 3}\n")
	if err := cl.Validate(nil); err != nil || strings.Join(cl.Durability.Faults, ",") != "mixed" {
		t.Errorf("a cluster's durability: {} faults = %v (%v), want [mixed]", cl.Durability.Faults, err)
	}
}

func TestDurabilityValidateErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown field", "durability: {faults: [kill], tron: 1}", []string{`unknown field "tron" in durability`}},
		{"unknown fault", "durability: {faults: [kill, flood, kill]}", []string{
			`durability.faults[1]: unknown fault "flood"`, "durability.faults[2]: repeats level 0 (kill)"}},
		{"no fault", "durability: {faults: []}", []string{"durability.faults: give at least one"}},
		{"disk-power without a device", "durability: {faults: [disk-power]}", []string{
			"durability.faults[0]: disk-power cuts the power of an emulated disk: needs the device: field"}},
		{"disk-power-cut without a device", "target: {cluster: {brokers: 3}}\ndurability: {faults: [disk-power-cut], mixed_kinds: [disk-power-cut]}", []string{
			"durability.faults[0]: disk-power-cut cuts the power of an emulated disk: needs the device: field",
			"durability.mixed_kinds[0]: disk-power-cut needs the device: field"}},
		{"disk-full on emulated disks", "target: {cluster: {brokers: 3}}\ndevice: {profile: hdd-7200}\ndurability: {faults: [disk-full]}", []string{
			"durability.faults[0]: disk-full fills a broker's tmpfs"}},
		{"torn", "durability: {torn: 1.5}", []string{"durability.torn: must be in 0..1"}},
		{"timeouts", "durability: {recovery_timeout: 0s, verify_records: 0, age_slack: -1s, sync_latency: 2s}", []string{
			"durability.recovery_timeout: must be > 0", "durability.verify_records: must be in 1..10000",
			"durability.age_slack: must be >= 0", "durability.sync_latency: must be in 0..1s"}},
		{"bootstrap", "target: {bootstrap: 127.0.0.1:9092}\ndurability: {}", []string{"durability: only for embedded and cluster targets"}},
		{"cluster lab fields", "target: {cluster: {zookeeper: \"zk:2181\"}}\ndurability: {faults: [zk-stop], faults_per_run: 0, fault_hold: 0s, heal_timeout: 0s}", []string{
			"durability.faults[0]: zk-stop stops the ZooKeeper the runner starts", "durability.faults_per_run: must be in 1..10000",
			"durability.fault_hold: must be > 0", "durability.heal_timeout: must be > 0"}},
		{"unclean election of one replica", "target: {cluster: {brokers: 3}}\ndurability: {}\nworkload: {message_size: 64, unclean_election: true}", []string{
			"workload.unclean_election: needs replication_factor 2 or more"}},
		{"acks 0 and small records", "durability: {}\nworkload: {message_size: 16}\nfactors: {acks: [\"0\", all]}", []string{
			"durability point acks=0: workload.acks: acks 0 acknowledges nothing",
			"durability point acks=0: workload.message_size: durability records carry a 20-byte header",
			"durability point acks=all: workload.message_size"}},
		{"unused fields", "durability: {}\nworkload: {payload: json, keys: {kind: uniform}, partitioner: murmur2}", []string{
			"workload.payload: durability payloads are seeded random bytes", "workload.keys: durability records have no keys",
			"workload.partitioner: durability records go to partitions round robin"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte("name: d\n"+tc.yaml+"\n"), "")
			if err == nil {
				err = s.Validate(nil)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}
