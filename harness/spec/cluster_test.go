package spec

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/cluster/zk/zkserver"
)

func TestClusterTargetDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       Cluster
	}{
		{"empty block", "target: {cluster: {}}", Cluster{Brokers: 3, ZooKeeper: ZooKeeperEmbedded, Networking: "loopback"}},
		{"all fields", "target:\n  cluster:\n    brokers: 2\n    zookeeper: \"zk:2181/weir\"\n    data_dir: /d\n    broker_flags: [--disable-sendfile]\n    session_timeout: 6s\n    networking: netns",
			Cluster{Brokers: 2, ZooKeeper: "zk:2181/weir", DataDir: "/d", BrokerFlags: []string{"--disable-sendfile"}, SessionTimeout: 6 * time.Second, Networking: "netns"}},
		{"auto", "target: {cluster: {networking: auto}}", Cluster{Brokers: 3, ZooKeeper: ZooKeeperEmbedded, Networking: "auto"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, "name: c\n"+tc.yaml+"\n")
			c := s.Target.Cluster
			if c == nil || c.Brokers != tc.want.Brokers || c.ZooKeeper != tc.want.ZooKeeper || c.DataDir != tc.want.DataDir ||
				strings.Join(c.BrokerFlags, " ") != strings.Join(tc.want.BrokerFlags, " ") || c.SessionTimeout != tc.want.SessionTimeout ||
				c.Networking != tc.want.Networking {
				t.Fatalf("cluster = %+v, want %+v", c, tc.want)
			}
			if !s.Target.IsCluster() || s.Target.IsEmbedded() || !s.Target.Managed() || s.Target.Brokers() != tc.want.Brokers {
				t.Errorf("IsCluster %v, IsEmbedded %v, Managed %v, Brokers %d", s.Target.IsCluster(), s.Target.IsEmbedded(), s.Target.Managed(), s.Target.Brokers())
			}
			if w := s.Workload; w.ReplicationFactor != 1 || w.MinInsync != 1 {
				t.Errorf("workload replication_factor %d, min_insync %d; want the defaults 1 and 1", w.ReplicationFactor, w.MinInsync)
			}
			if err := s.Validate(fakePlugins{}); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
	if _, err := Parse([]byte("target: {cluster: {brokrs: 3}}\n"), ""); err == nil ||
		!strings.Contains(err.Error(), `line 1: unknown field "brokrs" in target.cluster (known: brokers, zookeeper, data_dir, broker_flags, session_timeout, networking)`) {
		t.Errorf("a misspelt cluster field: %v", err)
	}
}

// The replication factors vary, through factors or explicit points, and
// land in point IDs in matrix order: after durable_acks, before acks.
func TestReplicationFactorsInMatrix(t *testing.T) {
	s := mustParse(t, `
name: r
target: {cluster: {brokers: 3}}
experiments:
  - name: product
    factors:
      acks: ["1", all]
      min_insync: [1, 2]
      replication_factor: [2, 3]
  - name: points
    baseline: replication_factor=1/min_insync=1/acks=1/message_size=1KiB
    points:
      - {replication_factor: 1, acks: "1"}
      - {acks: all, replication_factor: 3, min_insync: 2}
      - {message_size: {distribution: uniform, min: 100, max: 200}, replication_factor: 3}
`)
	if err := s.Validate(fakePlugins{}); err != nil {
		t.Fatal(err)
	}
	secs, err := s.Sections()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(secs[0].Factors, ","); got != "replication_factor,min_insync,acks" {
		t.Errorf("product factors %s", got)
	}
	if got := secs[0].Points[5].ID; got != "replication_factor=3/min_insync=1/acks=all" {
		t.Errorf("product point 6: %s", got)
	}
	if w := secs[0].Points[5].Workload; w.ReplicationFactor != 3 || w.MinInsync != 1 || w.Acks != "all" {
		t.Errorf("product point 6 workload: %s", w.Summary())
	}
	pts := secs[1]
	if got := strings.Join(pts.Factors, ","); got != "replication_factor,min_insync,acks,message_size" {
		t.Errorf("points factors %s", got)
	}
	want := []string{
		"replication_factor=1/min_insync=1/acks=1/message_size=1KiB",
		"replication_factor=3/min_insync=2/acks=all/message_size=1KiB",
		"replication_factor=3/min_insync=1/acks=all/message_size=uniform-100-200",
	}
	if len(pts.Points) != len(want) {
		t.Fatalf("%d points, want %d", len(pts.Points), len(want))
	}
	for i, p := range pts.Points {
		if p.ID != want[i] {
			t.Errorf("point %d = %s, want %s", i, p.ID, want[i])
		}
	}
	if w := pts.Points[1].Workload; w.ReplicationFactor != 3 || w.MinInsync != 2 || w.Acks != "all" {
		t.Errorf("point 2 workload: %s", w.Summary())
	}
	if pts.Baseline != want[0] {
		t.Errorf("baseline %q", pts.Baseline)
	}
}

func TestValidateClusterAndReplication(t *testing.T) {
	cluster := "target: {cluster: {brokers: 2}}\n"
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"two targets", "target: {cluster: {}, embedded: {}}", []string{"target: give one of embedded, bootstrap and cluster"}},
		{"no brokers", "target: {cluster: {brokers: 0}}", []string{"target.cluster.brokers: must be in 1..64, got 0"}},
		{"bad zookeeper", "target: {cluster: {zookeeper: \"zk:99999\"}}", []string{`target.cluster.zookeeper: "zk:99999": want "embedded" or host:port`}},
		{"empty zookeeper", "target: {cluster: {zookeeper: \"\"}}", []string{"target.cluster.zookeeper: required"}},
		{"session timeout outside the embedded ZooKeeper's", "target: {cluster: {session_timeout: 100ms}}", []string{"target.cluster.session_timeout: 100ms: the embedded ZooKeeper grants 1s..1m0s"}},
		{"unknown networking", "target: {cluster: {networking: bridge}}", []string{`target.cluster.networking: "bridge": want loopback (the default), netns or auto`}},
		{"empty networking", "target: {cluster: {networking: \"\"}}", []string{`target.cluster.networking: "": want loopback`}},
		{"netns with a loopback zookeeper", "target: {cluster: {networking: netns, zookeeper: \"127.0.0.1:2181\"}}",
			[]string{"target.cluster.networking: netns: ZooKeeper server 127.0.0.1:2181 is on loopback"}},
		{"negative session timeout", "target: {cluster: {zookeeper: \"zk:2181\", session_timeout: -1s}}", []string{"target.cluster.session_timeout: must be >= 0"}},
		{"reserved cluster flag", "target: {cluster: {broker_flags: [--broker-id=4, --zookeeper=x, --data-dir=y]}}",
			[]string{"target.cluster.broker_flags[0]: --broker-id is set by the runner", "broker_flags[1]: --zookeeper is set", "broker_flags[2]: --data-dir is set"}},
		{"rf over brokers", cluster + "workload: {replication_factor: 3}", []string{"workload.replication_factor: 3 exceeds target.cluster.brokers (2)"}},
		{"rf level over brokers", cluster + "factors: {replication_factor: [1, 2, 3]}", []string{"factors.replication_factor[2]: 3 exceeds target.cluster.brokers (2)"}},
		{"rf on embedded", "factors: {replication_factor: [1, 2]}", []string{"factors.replication_factor[1]: 2: an embedded target is one broker, so 1"}},
		{"rf zero", cluster + "workload: {replication_factor: 0, min_insync: 0}", []string{"workload.replication_factor: must be in 1..32767, got 0", "workload.min_insync: must be >= 1, got 0"}},
		{"min_insync level zero", cluster + "factors: {min_insync: [0, 1]}", []string{"factors.min_insync[0]: must be >= 1, got 0"}},
		{"min_insync over rf at a point", cluster + "factors: {replication_factor: [1, 2], min_insync: [2]}",
			[]string{"load point replication_factor=1/min_insync=2: workload.min_insync: 2 exceeds replication_factor 1"}},
		{"min_insync over rf in an experiment's point", cluster + "experiments: [{name: e, points: [{replication_factor: 2, min_insync: 2}, {min_insync: 2}]}]",
			[]string{"load-e point replication_factor=1/min_insync=2: workload.min_insync: 2 exceeds replication_factor 1"}},
		{"rf on bootstrap is not bounded", "target: {bootstrap: a:1}\nworkload: {replication_factor: 40000}", []string{"workload.replication_factor: must be in 1..32767, got 40000"}},
		{"min.insync.replicas in topic_config", cluster + "workload: {topic_config: {min.insync.replicas: \"2\"}}", []string{"workload.topic_config: min.insync.replicas: set it with min_insync"}},
		{"points and factors", cluster + "factors: {acks: [all]}\npoints: [{acks: \"1\"}]", []string{"points: give factors or points, not both"}},
		{"empty point", cluster + "points: [{acks: \"1\"}, {}]", []string{"points[1]: names no factor"}},
		{"repeated point", cluster + "points: [{acks: \"1\"}, {acks: all}, {acks: \"1\"}]", []string{"points[2]: repeats point acks=1"}},
		{"bad point level", cluster + "experiments: [{name: e, points: [{acks: two}, {replication_factor: 5}]}]",
			[]string{`experiments[0].points[0].acks: unknown acks "two"`, "experiments[0].points[1].replication_factor: 5 exceeds target.cluster.brokers (2)"}},
		{"unknown baseline", cluster + "factors: {acks: [\"1\", all]}\nbaseline: acks=0", []string{`baseline: "acks=0" is not a point of section load (its points: acks=1, acks=all)`}},
		{"unknown experiment baseline", cluster + "experiments: [{name: e, points: [{acks: all}], baseline: x}]", []string{`experiments[0].baseline: "x" is not a point of section load-e`}},
		{"top baseline with experiments", cluster + "baseline: x\nexperiments: [{name: e}]", []string{"baseline: a spec with experiments gives a baseline per experiment"}},
		{"durable acks on bootstrap still refused", "target: {bootstrap: a:1}\nworkload: {durable_acks: true}", []string{"workload.durable_acks: only for targets the runner starts"}},
		{"cluster durability takes cluster faults", cluster + "durability: {faults: [power, zk-stop], mixed_kinds: [flood]}", []string{
			`durability.faults[0]: unknown fault "power" for this target`, `durability.mixed_kinds[0]: unknown cluster fault "flood"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte("name: v\n"+tc.yaml+"\n"), "")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			err = s.Validate(fakePlugins{})
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// Flush policies and durable acks are topic and broker configs: a cluster
// takes them as an embedded broker does.
func TestClusterTakesBrokerSettings(t *testing.T) {
	s := mustParse(t, "name: c\ntarget: {cluster: {brokers: 3}}\nworkload: {durable_acks: true, replication_factor: 3, min_insync: 2}\n"+
		"factors: {flush_policy: [never, every-batch], durable_acks: [false, true]}\nprobes: {disk: {}}\n")
	if err := s.Validate(fakePlugins{}); err != nil {
		t.Fatal(err)
	}
}

func TestPointParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown factor", "points: [{acks: all, replicas: 3}]", `line 2: unknown factor "replicas" in a point (known: security_protocol, codec,`},
		{"a list", "points:\n  - {acks: [all, \"1\"]}", "line 3: acks: a point gives one level; a list of levels belongs in factors"},
		{"not a map", "points: [all]", "line 2: a point: want a map of factor levels"},
		{"bad value", "points: [{replication_factor: three}]", "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte("name: p\n"+tc.yaml+"\n"), "")
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckTargetCluster(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	s := mustParse(t, "name: t\ntarget: {cluster: {zookeeper: \""+closed+"/weir\"}}\n")
	err = s.CheckTarget(context.Background(), 2*time.Second)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "target.cluster.zookeeper: ZooKeeper server "+closed+": ") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Errorf("CheckTarget(zookeeper %s) = %v, want target.cluster.zookeeper unreachable", closed, err)
	}
}

// A netns cluster is checked before anything runs: without root (or the
// ip command) CheckTarget says so and names the field; as root it passes.
func TestCheckTargetNetns(t *testing.T) {
	if err := zkserver.Debian().Check(); err != nil {
		t.Skip(err) // CheckTarget would stop at the embedded ZooKeeper
	}
	s := mustParse(t, "name: t\ntarget: {cluster: {networking: netns}}\n")
	err := s.CheckTarget(context.Background(), 2*time.Second)
	if os.Geteuid() != 0 {
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "target.cluster.networking: netns: ") || !strings.Contains(err.Error(), "needs root") {
			t.Errorf("CheckTarget(netns) without root = %v, want target.cluster.networking unreachable", err)
		}
		return
	}
	if err != nil {
		t.Errorf("CheckTarget(netns) as root = %v", err)
	}
}
