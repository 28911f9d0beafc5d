package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// resolve runs `weir broker ARGS` with a stand-in for the broker and returns
// the settings it would have started with.
func resolve(t *testing.T, args ...string) (brokerSettings, error) {
	t.Helper()
	var got brokerSettings
	cmd := newBrokerCmdWith(func(_ context.Context, s brokerSettings, _ io.Writer) error {
		got = s
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return got, err
}

func writeConfig(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBrokerSettingsDefaults(t *testing.T) {
	s, err := resolve(t)
	if err != nil {
		t.Fatal(err)
	}
	want := brokerSettings{
		DataDir: "./data", Listen: "127.0.0.1:9092", MetricsListen: "127.0.0.1:9644", AutoCreateTopics: true,
		DefaultPartitions: 1, RetentionCheckInterval: 5 * time.Minute, OffsetsRetention: 7 * 24 * time.Hour,
		GroupInitialRebalanceDelay: 3 * time.Second,
		GroupMinSessionTimeout:     6 * time.Second, GroupMaxSessionTimeout: 30 * time.Minute, MaxRequestBytes: 100 << 20,
		ReplicaLagTimeMax: 30 * time.Second, LeaderImbalanceCheck: 5 * time.Minute, ControlledShutdownTimeout: 30 * time.Second,
		LogLevel: "info", LogFormat: "text",
		TransactionMaxTimeout: 15 * time.Minute, TransactionalIDExpiration: 7 * 24 * time.Hour,
	}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("defaults\n got %+v\nwant %+v", s, want)
	}
}

func TestBrokerSettingsFileAndFlags(t *testing.T) {
	yamlFile := writeConfig(t, "weir.yaml", `
data-dir: /from/file
listen: 127.0.0.1:19092
metrics-listen: ""
pprof-listen: 127.0.0.1:6060
auto-create-topics: false
default-partitions: 4
topic-config:
  retention.ms: 60000
  weir.durable.acks: "true"
group-initial-rebalance-delay: 0s
log-level: debug
max-request-bytes: 1048576
disable-sendfile: true
write-timeout: 20s
max-idle: 5m
max-queued-request-bytes: 8388608
`)
	jsonFile := writeConfig(t, "weir.json", `{"data-dir": "/from/json", "default-partitions": 2,
		"topic-config": {"segment.bytes": "1048576"}, "retention-check-interval": "30s", "offsets-retention": "1h"}`)

	t.Run("yaml", func(t *testing.T) {
		s, err := resolve(t, "--config", yamlFile)
		if err != nil {
			t.Fatal(err)
		}
		if s.DataDir != "/from/file" || s.Listen != "127.0.0.1:19092" || s.MetricsListen != "" || s.PprofListen != "127.0.0.1:6060" || s.AutoCreateTopics ||
			s.DefaultPartitions != 4 || s.GroupInitialRebalanceDelay != 0 || s.LogLevel != "debug" ||
			s.MaxRequestBytes != 1<<20 || !s.DisableSendfile ||
			s.WriteTimeout != 20*time.Second || s.MaxIdle != 5*time.Minute || s.MaxQueuedRequestBytes != 8<<20 ||
			!maps.Equal(s.TopicConfig, map[string]string{"retention.ms": "60000", "weir.durable.acks": "true"}) {
			t.Errorf("from the file: %+v", s)
		}
		if s.GroupMinSessionTimeout != 6*time.Second || s.LogFormat != "text" {
			t.Errorf("settings the file does not give lost their defaults: %+v", s)
		}
	})
	t.Run("flags win", func(t *testing.T) {
		s, err := resolve(t, "--config", yamlFile, "--data-dir", "/from/flag", "--auto-create-topics=true",
			"--metrics-listen", "127.0.0.1:1", "--pprof-listen", "", "--topic-config", "retention.ms=1", "--topic-config", "weir.flush.policy=messages:n=10,x=1",
			"--max-request-bytes", "2048", "--disable-sendfile=false", "--max-idle", "-1s", "--max-queued-request-bytes", "4096")
		if err != nil {
			t.Fatal(err)
		}
		if s.DataDir != "/from/flag" || !s.AutoCreateTopics || s.MetricsListen != "127.0.0.1:1" || s.PprofListen != "" || s.DefaultPartitions != 4 ||
			s.MaxRequestBytes != 2048 || s.DisableSendfile || s.MaxIdle != -time.Second || s.MaxQueuedRequestBytes != 4096 ||
			s.WriteTimeout != 20*time.Second {
			t.Errorf("flags should win over the file: %+v", s)
		}
		want := map[string]string{"retention.ms": "1", "weir.durable.acks": "true", "weir.flush.policy": "messages:n=10,x=1"}
		if !maps.Equal(s.TopicConfig, want) {
			t.Errorf("topic config %v, want %v", s.TopicConfig, want)
		}
	})
	t.Run("json", func(t *testing.T) {
		s, err := resolve(t, "--config", jsonFile)
		if err != nil {
			t.Fatal(err)
		}
		if s.DataDir != "/from/json" || s.DefaultPartitions != 2 || s.RetentionCheckInterval != 30*time.Second || s.OffsetsRetention != time.Hour ||
			!maps.Equal(s.TopicConfig, map[string]string{"segment.bytes": "1048576"}) {
			t.Errorf("from JSON: %+v", s)
		}
	})
}

func TestBrokerSettingsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown key", []string{"--config", writeConfig(t, "a.yaml", "data_dir: x\n")}, "field data_dir not found"},
		{"duration without unit", []string{"--config", writeConfig(t, "b.yaml", "retention-check-interval: 300\n")}, "time.Duration"},
		{"missing file", []string{"--config", "/no/such/weir.yaml"}, "no such file"},
		{"not yaml", []string{"--config", writeConfig(t, "c.yaml", "{[")}, "config file"},
		{"topic config without =", []string{"--topic-config", "retention.ms"}, "want key=value"},
		{"route without =", []string{"--replica-route", "127.0.0.1:9093"}, "--replica-route \"127.0.0.1:9093\": want ID=HOST:PORT"},
		{"route to a bad id", []string{"--replica-route", "two=127.0.0.1:9093"}, "--replica-route \"two=127.0.0.1:9093\": broker id"},
		{"route to a negative id", []string{"--replica-route", "-1=127.0.0.1:9093"}, "broker id \"-1\""},
		{"route without port", []string{"--replica-route", "2=127.0.0.1"}, "--replica-route \"2=127.0.0.1\": address"},
		{"route to port 0", []string{"--replica-route", "1=127.0.0.1:1,2=127.0.0.1:0"}, "--replica-route \"2=127.0.0.1:0\": address"},
		{"route in the file", []string{"--config", writeConfig(t, "d.yaml", "replica-route: {x: 127.0.0.1:1}\n")}, "--replica-route \"x=127.0.0.1:1\""},
		{"stray argument", []string{"extra"}, `unknown command "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolve(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// --replica-route is repeatable and takes comma-separated lists; the config
// file's replica-route is a map, under the flags key by key.
func TestBrokerReplicaRoutes(t *testing.T) {
	s, err := resolve(t, "--replica-route", "2=127.0.0.1:19002,3=127.0.0.1:19003", "--replica-route", "4=[::1]:19004")
	if err != nil {
		t.Fatal(err)
	}
	want := replicaRoutes{2: "127.0.0.1:19002", 3: "127.0.0.1:19003", 4: "[::1]:19004"}
	if !maps.Equal(s.ReplicaRoutes, want) {
		t.Errorf("routes %v, want %v", s.ReplicaRoutes, want)
	}
	for name, content := range map[string]string{
		"weir.yaml": "replica-route:\n  2: 127.0.0.1:29002\n  3: 127.0.0.1:29003\n",
		"weir.json": `{"replica-route": {"2": "127.0.0.1:29002", "3": "127.0.0.1:29003"}}`,
	} {
		s, err := resolve(t, "--config", writeConfig(t, name, content), "--replica-route", "3=127.0.0.1:19003")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := replicaRoutes{2: "127.0.0.1:29002", 3: "127.0.0.1:19003"}
		if !maps.Equal(s.ReplicaRoutes, want) {
			t.Errorf("%s: routes %v, want %v", name, s.ReplicaRoutes, want)
		}
	}
}

func TestBrokerBadLogSettings(t *testing.T) {
	for _, args := range [][]string{{"--log-level", "loud"}, {"--log-format", "xml"}} {
		err := run(append([]string{"broker", "--data-dir", t.TempDir()}, args...), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: %v, want an error naming %s", args, err, args[0])
		}
	}
}

// TestBrokerCommand runs `weir broker` as a real process: it serves a client,
// exposes /metrics, and SIGTERM shuts it down gracefully, exit status 0, with
// the clean-shutdown marker written in the partition directory.
func TestBrokerCommand(t *testing.T) {
	dataDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "broker", "--data-dir", dataDir, "--listen", "127.0.0.1:0",
		"--metrics-listen", "127.0.0.1:0", "--log-format", "json", "--group-initial-rebalance-delay", "0s",
		"--topic-config", "weir.durable.acks=true")
	cmd.Env = append(os.Environ(), "WEIR_TEST_RUN_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	// Read the JSON log lines; the first "broker started" names the address.
	lines := make(chan map[string]any, 100)
	var logs bytes.Buffer
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				lines <- rec
			}
		}
	}()
	var addr string
	for rec := range lines {
		if rec["msg"] == "broker started" {
			addr, _ = rec["listen"].(string)
			break
		}
	}
	if addr == "" {
		cmd.Wait()
		t.Fatalf("no \"broker started\" log line with the address; output:\n%s", logs.String())
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("cli"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cl.Close()

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var stopped bool
	for rec := range lines {
		stopped = stopped || rec["msg"] == "broker stopped"
	}
	err = cmd.Wait()
	if err != nil || !stopped {
		t.Fatalf("after SIGTERM: exit %v, \"broker stopped\" logged %v; output:\n%s", err, stopped, logs.String())
	}
	if _, err := os.Stat(filepath.Join(dataDir, "cli-0", "clean-shutdown")); err != nil {
		t.Errorf("clean-shutdown marker: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "meta.properties")); err != nil {
		t.Errorf("meta.properties: %v", err)
	}
}

// TestBrokerStopsOnContext runs the command in-process and stops it through
// the context, as a SIGINT would.
func TestBrokerStopsOnContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	pr, pw := io.Pipe()
	go func() {
		done <- runContext(ctx, []string{"broker", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics-listen", ""}, io.Discard, pw)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() && !strings.Contains(sc.Text(), "broker started") {
	}
	cancel()
	go io.Copy(io.Discard, pr)
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("broker returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not stop after its context ended")
	}
}

func TestPprofEndpoint(t *testing.T) {
	addr, stop, err := startPprof("127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Errorf("GET goroutine profile: %s\n%.200s", resp.Status, body)
	}
}

// SIGTERM while the broker is still joining its cluster (here: its
// ZooKeeper does not answer) is a stop asked for: exit status 0, said in
// the log, not a failure (the cluster lab's rolling restart stops brokers
// that have just started).
func TestBrokerStopsDuringStartUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there now: the broker keeps dialling
	cmd := exec.CommandContext(ctx, os.Args[0], "broker", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--broker-id", "1", "--zookeeper", closed, "--log-format", "json", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "WEIR_TEST_RUN_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stderr)
	var logs bytes.Buffer
	signalled, stopped := false, false
	for sc.Scan() {
		logs.WriteString(sc.Text() + "\n")
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		msg, _ := rec["msg"].(string)
		// Dialling ZooKeeper happens inside start-up, after the signal
		// handler is installed.
		if !signalled && strings.Contains(msg, "failed to connect") {
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			signalled = true
		}
		stopped = stopped || msg == "stopped during start-up"
	}
	if err := cmd.Wait(); err != nil || !signalled || !stopped {
		t.Fatalf("exit %v, signalled %v, \"stopped during start-up\" logged %v; output:\n%s", err, signalled, stopped, logs.String())
	}
}
