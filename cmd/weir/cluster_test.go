package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cluster/zk/zkserver"
	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/harness/clusterproc"
)

// TestClusterUpDown runs `weir cluster up` with 3 brokers on a real
// ZooKeeper, as real processes: up runs as a process of its own (this test
// binary running main), so the brokers and ZooKeeper must outlive it, as
// they outlive a shell's `weir cluster up`. A client produces and consumes
// through the bootstrap list it prints; then status, then down, after which
// no process of the cluster may be left. If the test fails midway, its
// cleanup runs down.
func TestClusterUpDown(t *testing.T) {
	zktest.Require(t)
	dir := filepath.Join(t.TempDir(), "cluster")
	base := freePortRange(t, 3)
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(dir, clusterStateFile)); err != nil {
			return
		}
		var out bytes.Buffer
		if err := run([]string{"cluster", "down", "--dir", dir, "--timeout", "10s"}, &out, &out); err != nil {
			t.Errorf("cleanup: cluster down: %v\n%s", err, out.String())
		}
		if t.Failed() {
			for i := 1; i <= 3; i++ {
				t.Logf("broker-%d.log ends:\n%s", i, lastStart(filepath.Join(dir, fmt.Sprintf("broker-%d.log", i)), 30))
			}
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t0 := time.Now()
	up := exec.CommandContext(ctx, os.Args[0], "cluster", "up", "--dir", dir, "--brokers", "3",
		"--base-port", strconv.Itoa(base), "--metrics-base-port", "0", "--timeout", "30s",
		"--", "--default-partitions", "3")
	up.Env = append(os.Environ(), "WEIR_TEST_RUN_MAIN=1")
	var stdout, stderr bytes.Buffer
	up.Stdout, up.Stderr = &stdout, &stderr
	if err := up.Run(); err != nil {
		t.Fatalf("cluster up: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("cluster up: %v\n%s", time.Since(t0).Round(time.Millisecond), stdout.String())
	want := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", base, base+1, base+2)
	if !strings.Contains(stdout.String(), "\nbootstrap: "+want+"\n") {
		t.Errorf("up's output lacks the line %q", "bootstrap: "+want)
	}
	for _, s := range []string{filepath.Join(dir, "broker-3.log"), filepath.Join(dir, "zookeeper", "zookeeper.log"),
		"cluster down --dir " + dir} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("up's output lacks %q", s)
		}
	}

	// A second up in the same directory refuses, and touches nothing.
	err := run([]string{"cluster", "up", "--dir", dir, "--base-port", strconv.Itoa(base + 10)}, io.Discard, io.Discard)
	if !errors.Is(err, errClusterUp) || !strings.Contains(err.Error(), "cluster down --dir "+dir) {
		t.Errorf("second up: %v, want %v naming cluster down", err, errClusterUp)
	}

	produceConsume(ctx, t, strings.Split(want, ","))

	var out bytes.Buffer
	if err := run([]string{"cluster", "status", "--dir", dir}, &out, io.Discard); err != nil {
		t.Fatalf("cluster status: %v\n%s", err, out.String())
	}
	for _, name := range []string{"zookeeper", "broker-1", "broker-2", "broker-3"} {
		if !regexpLine(out.String(), name, "serving") {
			t.Errorf("status has no line for %s serving:\n%s", name, out.String())
		}
	}

	st, err := readClusterState(dir)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	t0 = time.Now()
	if err := run([]string{"cluster", "down", "--dir", dir}, &out, io.Discard); err != nil {
		t.Fatalf("cluster down: %v\n%s", err, out.String())
	}
	t.Logf("cluster down: %v\n%s", time.Since(t0).Round(time.Millisecond), out.String())
	if strings.Contains(out.String(), "killed") {
		t.Errorf("down had to SIGKILL:\n%s", out.String())
	}
	for _, p := range st.Processes {
		if p.alive() {
			t.Errorf("%s (pid %d) still runs after down", p.Name, p.Pid)
		}
	}
	if left := clusterproc.ProcessesMentioning(dir); len(left) > 0 {
		t.Errorf("processes left after down:\n%s", strings.Join(left, "\n"))
	}
	if _, err := os.Stat(filepath.Join(dir, clusterStateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster.json after down: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "broker-2", "meta.properties")); err != nil {
		t.Errorf("down should keep the data: %v", err)
	}
	if err := run([]string{"cluster", "status", "--dir", dir}, io.Discard, io.Discard); !errors.Is(err, errNoCluster) {
		t.Errorf("status after down: %v, want %v", err, errNoCluster)
	}
	if err := run([]string{"cluster", "down", "--dir", dir, "--purge"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after down --purge: %v, want the directory gone", err)
	}
}

// produceConsume produces through the bootstrap list to a topic the cluster
// auto-creates with 3 partitions, and reads every record back.
func produceConsume(ctx context.Context, t *testing.T, bootstrap []string) {
	t.Helper()
	const n = 30
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	pr, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DefaultProduceTopic("e2e"),
		kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	if err := pr.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	req := kmsg.NewPtrMetadataRequest()
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr("e2e")
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(ctx, pr)
	if err != nil || len(resp.Topics) != 1 {
		t.Fatalf("metadata: %v, %d topics", err, len(resp.Topics))
	}
	leaders := map[int32]bool{}
	for _, p := range resp.Topics[0].Partitions {
		leaders[p.Leader] = true
	}
	t.Logf("topic e2e: %d partitions, leaders on brokers %v", len(resp.Topics[0].Partitions), leaders)

	co, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ConsumeTopics("e2e"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	got := map[string]bool{}
	partitions := map[int32]bool{}
	for len(got) < n {
		fs := co.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), n, ctx.Err())
		}
		for _, e := range fs.Errors() {
			t.Logf("fetch %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)] = true
			partitions[r.Partition] = true
		})
	}
	if len(partitions) != 3 {
		t.Errorf("records came from partitions %v, want 3", partitions)
	}
}

// regexpLine reports whether some line of out starts with name and has
// word as a field.
func regexpLine(out, name, word string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == name && slices.Contains(f, word) {
			return true
		}
	}
	return false
}

// freePortRange returns the first of n consecutive loopback ports that
// were free a moment ago.
func freePortRange(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := ln.Addr().(*net.TCPAddr).Port
		lns := []net.Listener{ln}
		for i := 1; i < n; i++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i)))
			if err != nil {
				break
			}
			lns = append(lns, l)
		}
		for _, l := range lns {
			l.Close()
		}
		if len(lns) == n {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// runClusterCmd runs `weir cluster ARGS` with env in place of the real one.
func runClusterCmd(env clusterEnv, args ...string) (string, error) {
	cmd := newClusterCmdWith(env)
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), err
}

// TestClusterUpRefuses: what up refuses before it starts anything (none of
// these cases needs ZooKeeper).
func TestClusterUpRefuses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	debian := clusterEnv{zookeeper: zkserver.Debian(), weir: os.Executable}
	missing := clusterEnv{zookeeper: zkserver.Install{Java: "java", Classpath: []string{"/no/such/zookeeper.jar"}}, weir: os.Executable}
	for _, tc := range []struct {
		name string
		env  clusterEnv
		args []string
		is   error
		want string
	}{
		{"port taken", debian, []string{"--brokers", "1", "--base-port", strconv.Itoa(taken), "--zookeeper", "127.0.0.1:1"},
			errPortTaken, fmt.Sprintf("%d (broker 1 --listen)", taken)},
		{"metrics port taken", debian, []string{"--brokers", "2", "--base-port", strconv.Itoa(freePortRange(t, 2)),
			"--metrics-base-port", strconv.Itoa(taken - 1), "--zookeeper", "127.0.0.1:1"},
			errPortTaken, fmt.Sprintf("%d (broker 2 --metrics-listen)", taken)},
		{"zookeeper port taken", debian, []string{"--zookeeper-port", strconv.Itoa(taken), "--base-port", strconv.Itoa(freePortRange(t, 3)),
			"--metrics-base-port", "0"}, errPortTaken, fmt.Sprintf("%d (ZooKeeper)", taken)},
		{"zookeeper not installed", missing, nil, zkserver.ErrNotInstalled, "install Debian package zookeeper"},
		{"no brokers", debian, []string{"--brokers", "0"}, errBadFlag, "--brokers 0"},
		{"ports out of range", debian, []string{"--base-port", "65534"}, errBadFlag, "65534-65536 out of range"},
		{"overlapping ports", debian, []string{"--base-port", "9092", "--metrics-base-port", "9093"}, errBadFlag, "overlaps"},
		{"zookeeper port with zookeeper", debian, []string{"--zookeeper", "zk:2181", "--zookeeper-port", "2181"}, errBadFlag, "not with --zookeeper"},
		{"stray argument", debian, []string{"extra"}, errBadFlag, "broker flags go after --"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "zookeeper port taken" {
				zktest.Require(t)
			}
			dir := filepath.Join(t.TempDir(), "c")
			_, err := runClusterCmd(tc.env, append([]string{"up", "--dir", dir}, tc.args...)...)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("up: %v, want %v containing %q", err, tc.is, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, clusterStateFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused up left cluster.json: %v", err)
			}
		})
	}
	if _, err := runClusterCmd(debian, "up"); err == nil || !strings.Contains(err.Error(), `"dir" not set`) {
		t.Errorf("up without --dir: %v", err)
	}
}

// TestClusterStaleState: a cluster.json whose processes are gone (a
// machine rebooted, a kill -9) is reported dead by status, cleared by down,
// and replaced by up.
func TestClusterStaleState(t *testing.T) {
	dir := t.TempDir()
	env := clusterEnv{zookeeper: zkserver.Debian(), weir: os.Executable}
	write := func() {
		// Our own pid, which does not run what Match names: a recycled pid.
		st := &clusterState{Dir: dir, Bootstrap: "127.0.0.1:1", Processes: []clusterProc{
			{Name: "zookeeper", Pid: os.Getpid(), Addr: "127.0.0.1:1", Match: filepath.Join(dir, "zookeeper", "zoo.cfg")},
			{Name: "broker-1", Pid: os.Getpid(), Addr: "127.0.0.1:2", Match: filepath.Join(dir, "broker-1")},
		}}
		if err := st.create(); err != nil {
			t.Fatal(err)
		}
	}
	write()
	out, err := runClusterCmd(env, "status", "--dir", dir)
	if !errors.Is(err, errNotRunning) || !regexpLine(out, "zookeeper", "dead") || !regexpLine(out, "broker-1", "dead") {
		t.Errorf("status: %v\n%s", err, out)
	}
	out, err = runClusterCmd(env, "down", "--dir", dir)
	if err != nil || strings.Count(out, "was not running") != 2 {
		t.Errorf("down: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, clusterStateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster.json after down: %v", err)
	}
	if _, err := runClusterCmd(env, "down", "--dir", dir); !errors.Is(err, errNoCluster) {
		t.Errorf("down without a cluster: %v, want %v", err, errNoCluster)
	}

	// up replaces a stale cluster.json (and here stops at the port check).
	write()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, err = runClusterCmd(env, "up", "--dir", dir, "--zookeeper", "127.0.0.1:1", "--brokers", "1",
		"--base-port", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	if !errors.Is(err, errPortTaken) || !strings.Contains(out, "names no live process") {
		t.Errorf("up over a stale cluster.json: %v\n%s", err, out)
	}
}

func TestClusterPurgeKeepsOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"broker-1/x", "broker-12.log", "zookeeper/data/myid", "broker-x/keep", "notes.txt", "broker-01.log"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := run([]string{"cluster", "down", "--dir", dir, "--purge"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"broker-01.log", "broker-x", "notes.txt"}; !slices.Equal(left, want) {
		t.Errorf("after purge: %v, want %v (%s)", left, want, out.String())
	}
}
