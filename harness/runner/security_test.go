package runner

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/harness/clusterproc"
	"github.com/weir-broker/weir/harness/load"
	"github.com/weir-broker/weir/harness/presets"
	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/spec"
	wbroker "github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// The target's security settings make clients that reach a SASL_SSL
// listener; bad settings are errors naming the field.
func TestSecurityOpts(t *testing.T) {
	for _, bad := range []spec.Security{{Protocol: "TLS"}, {Protocol: "SASL_PLAINTEXT", SASLMechanism: "GSSAPI"},
		{Protocol: "SSL", SSLCAFile: "/nonexistent"}} {
		if _, err := securityOpts(&bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	ca := tlstest.NewCA(t, "harness CA")
	srv := ca.Issue("broker", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte(`user_load="load-pass"`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := brokertest.Start(t, "", func(c *wbroker.Config) {
		c.Security = wbroker.Security{Listeners: "SASL_SSL://127.0.0.1:0", CertFile: srv.CertFile, KeyFile: srv.KeyFile, PlainUsersFile: users}
	})
	opts, err := securityOpts(&spec.Security{Protocol: "sasl_ssl", SASLUser: "load", SASLPassword: "load-pass", SSLCAFile: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.ListenerAddr("SASL_SSL"))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("ping over SASL_SSL: %v", err)
	}
}

// A tiny run of the security preset (two interleaved repetitions): each of
// PLAINTEXT, SSL and SASL_SSL gets a broker serving that listener, the load's clients connect over it
// (TLS trusting the point's throwaway CA, SCRAM-SHA-512 as the user the
// runner created), move bytes both ways, and the results name the factor.
func TestSecurityPreset(t *testing.T) {
	s, err := presets.Spec("security")
	if err != nil {
		t.Fatal(err)
	}
	s.Repetitions = 2 // interleaved: PLAINTEXT, SSL, SASL_SSL, then again
	s.Workload.Warmup, s.Workload.Duration = 200*time.Millisecond, 700*time.Millisecond
	s.Workload.Partitions = 2

	// What the load's admin client was configured with, per point in order.
	type seen struct {
		tls   bool
		mechs []string
		seeds []string
	}
	var mu sync.Mutex
	var clients []seen
	out := filepath.Join(t.TempDir(), "results")
	var stdout, stderr bytes.Buffer
	run, _, err := Run(context.Background(), Options{Spec: s, Out: out, DataDir: t.TempDir(), Weir: weirBin, Stdout: &stdout, Stderr: &stderr,
		afterSetup: func(_ context.Context, cl *kgo.Client, _ []string) error {
			var c seen
			if cfg, _ := cl.OptValue(kgo.DialTLSConfig).(*tls.Config); cfg != nil {
				c.tls = true
			}
			ms, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
			for _, m := range ms {
				c.mechs = append(c.mechs, m.Name())
			}
			c.seeds, _ = cl.OptValue(kgo.SeedBrokers).([]string)
			mu.Lock()
			clients = append(clients, c)
			mu.Unlock()
			return nil
		}})
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
	}
	if len(run.Sections) != 1 || len(run.Sections[0].Points) != 3 || strings.Join(run.Sections[0].Factors, ",") != "security_protocol" {
		t.Fatalf("sections %+v: want one with 3 points of factor security_protocol", run.Sections)
	}
	if run.Sections[0].Baseline != "security_protocol=PLAINTEXT" {
		t.Errorf("baseline %q", run.Sections[0].Baseline)
	}
	if !strings.HasPrefix(run.Env.TLSFetch, "copy") {
		t.Errorf("env tls_fetch %q: want the copy path named", run.Env.TLSFetch)
	}
	if len(clients) != 6 {
		t.Fatalf("%d load setups seen, want 3 points x 2 reps", len(clients))
	}
	for i, want := range []struct {
		protocol string
		tls      bool
		mech     string
	}{{"PLAINTEXT", false, ""}, {"SSL", true, ""}, {"SASL_SSL", true, "SCRAM-SHA-512"}} {
		p := run.Sections[0].Points[i]
		if p.ID != "security_protocol="+want.protocol || len(p.Factors) != 1 || p.Factors[0] != (result.FactorValue{Name: "security_protocol", Value: want.protocol}) {
			t.Errorf("point %d: id %q factors %v, want security_protocol=%s", i, p.ID, p.Factors, want.protocol)
		}
		// Setups come in rounds: rep r of point i is setup 3r+i.
		for _, c := range []seen{clients[i], clients[3+i]} {
			if c.tls != want.tls || strings.Join(c.mechs, ",") != want.mech {
				t.Errorf("%s: the load's client had TLS %v, SASL %v; want %v, %q", want.protocol, c.tls, c.mechs, want.tls, want.mech)
			}
		}
		if len(p.Reps) != 2 || p.Reps[0].Error != "" || p.Reps[1].Error != "" {
			t.Fatalf("%s: reps %+v", want.protocol, p.Reps)
		}
		if i > 0 && !p.Reps[0].Started.Before(run.Sections[0].Points[0].Reps[1].Started) {
			t.Errorf("%s: rep 1 started %v, after PLAINTEXT's rep 2 (%v): not interleaved", want.protocol, p.Reps[0].Started,
				run.Sections[0].Points[0].Reps[1].Started)
		}
		m := p.Reps[0].Metrics
		if m[result.BytesProduced] <= 0 || m[result.BytesConsumed] != m[result.BytesProduced] || m[result.ConsumeMBPerSec] <= 0 {
			t.Errorf("%s: produced %v bytes, consumed %v, consume %v MB/s", want.protocol, m[result.BytesProduced], m[result.BytesConsumed], m[result.ConsumeMBPerSec])
		}
		for _, k := range []string{result.BrokerCPUSeconds, result.BrokerCPUPerGBProduced, result.BrokerConsumeCPUSeconds, result.BrokerCPUPerGBConsumed} {
			if v, ok := m[k]; !ok || v < 0 {
				t.Errorf("%s: %s %v (present %v)", want.protocol, k, v, ok)
			}
		}
	}
	for file, wants := range map[string][]string{
		report.MarkdownFile: {`SASL\_SSL`, "TLS fetch path", "broker-cpu-s-per-GB-consumed", "Against the baseline"},
		report.BenchFile:    {"BenchmarkLoad/security_protocol=SASL_SSL", "BenchmarkLoad/security_protocol=SSL"},
	} {
		b, err := os.ReadFile(filepath.Join(out, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s does not mention %q", file, want)
			}
		}
	}
}

// tinyClusterSecuritySpec is a PLAINTEXT and a SASL_SSL point of one
// repetition each on a 3-broker cluster, every partition on all three.
const tinyClusterSecuritySpec = `
name: tiny-cluster-security
seed: 11
repetitions: 1
target:
  cluster: {brokers: 3, networking: %s}
workload:
  partitions: 3
  message_size: 256
  producers: 1
  consumers: 1
  warmup: 200ms
  duration: 1s
  linger: 2ms
  replication_factor: 3
  min_insync: 2
  acks: all
baseline: security_protocol=PLAINTEXT
points:
  - {security_protocol: PLAINTEXT}
  - {security_protocol: SASL_SSL}
`

// listenerSeen is what a point's load client found out about the
// listeners it was pointed at, before the load.
type listenerSeen struct {
	tls         bool
	mechs       []string
	seeds       []string
	advertised  []string // the brokers Metadata answered on the load's listener
	plainErrors []error  // a PLAINTEXT client's ping of each seed
}

// look records the load client's settings, the brokers Metadata lists on
// its listener, and whether a PLAINTEXT client without credentials gets an
// answer from each seed.
func (s *listenerSeen) look(ctx context.Context, cl *kgo.Client, topics []string) error {
	if cfg, _ := cl.OptValue(kgo.DialTLSConfig).(*tls.Config); cfg != nil {
		s.tls = true
	}
	ms, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	for _, m := range ms {
		s.mechs = append(s.mechs, m.Name())
	}
	s.seeds, _ = cl.OptValue(kgo.SeedBrokers).([]string)
	resp, err := load.Metadata(ctx, cl, topics)
	if err != nil {
		return err
	}
	for _, b := range resp.Brokers {
		s.advertised = append(s.advertised, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	for _, seed := range s.seeds {
		plain, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.RetryTimeout(time.Second), kgo.DialTimeout(2*time.Second))
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		s.plainErrors = append(s.plainErrors, plain.Ping(pctx))
		cancel()
		plain.Close()
	}
	return nil
}

// TestRunClusterSecurity runs a PLAINTEXT and a SASL_SSL point on 3-broker
// clusters on a real ZooKeeper: on the SASL_SSL point every broker serves
// SASL_SSL (the load's client, TLS trusting the point's CA and logging in
// with SCRAM-SHA-512, is seeded with all three listeners, Metadata on
// that listener answers the three brokers at those addresses, and a
// PLAINTEXT client gets no answer from any of them), the PLAINTEXT point's
// are PLAINTEXT, and both points' records are all consumed. With netns
// networking too (where it can be had), where the brokers' listeners are
// not on loopback, the address the throwaway certificate names.
func TestRunClusterSecurity(t *testing.T) {
	zktest.Require(t)
	t.Run("loopback", func(t *testing.T) { testRunClusterSecurity(t, clusterproc.NetworkingLoopback) })
	t.Run("netns", func(t *testing.T) {
		if err := clusterproc.NetnsAvailable(""); err != nil {
			t.Skipf("netns networking: %v", err)
		}
		testRunClusterSecurity(t, clusterproc.NetworkingNetns)
	})
}

func testRunClusterSecurity(t *testing.T, networking string) {
	data := t.TempDir()
	var mu sync.Mutex
	var points []*listenerSeen
	var stderr strings.Builder
	run, _, err := Run(context.Background(), Options{
		Spec: parse(t, fmt.Sprintf(tinyClusterSecuritySpec, networking)), Out: filepath.Join(t.TempDir(), "results"), DataDir: data, Weir: weirBin,
		Stderr: &lockedWriter{w: &stderr},
		afterSetup: func(ctx context.Context, cl *kgo.Client, topics []string) error {
			s := &listenerSeen{}
			mu.Lock()
			points = append(points, s)
			mu.Unlock()
			return s.look(ctx, cl, topics)
		},
	})
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
	}
	if left := clusterproc.ProcessesMentioning(data); len(left) > 0 {
		t.Errorf("processes left after the run:\n%s", strings.Join(left, "\n"))
	}
	if e := run.Env; e.Target != "cluster" || e.Brokers != 3 || e.Networking != networking || !strings.HasPrefix(e.TLSFetch, "copy") {
		t.Errorf("env: target %q, brokers %d, networking %q, TLS fetch path %q", e.Target, e.Brokers, e.Networking, e.TLSFetch)
	}
	if len(run.Sections) != 1 || len(run.Sections[0].Points) != 2 || len(points) != 2 {
		t.Fatalf("sections %+v, %d load setups seen: want one section of 2 points, a setup each", run.Sections, len(points))
	}
	for i, want := range []struct {
		protocol string
		secure   bool
	}{{"PLAINTEXT", false}, {"SASL_SSL", true}} {
		p, seen := run.Sections[0].Points[i], points[i]
		if p.ID != "security_protocol="+want.protocol {
			t.Errorf("point %d: id %q, want security_protocol=%s", i, p.ID, want.protocol)
		}
		if len(p.Reps) != 1 || p.Reps[0].Error != "" {
			t.Fatalf("%s: reps %+v", want.protocol, p.Reps)
		}
		m := p.Reps[0].Metrics
		if m[result.MsgsProduced] <= 0 || m[result.MsgsConsumed] != m[result.MsgsProduced] || m[result.BytesConsumed] != m[result.BytesProduced] {
			t.Errorf("%s: produced %v records / %v bytes, consumed %v / %v", want.protocol, m[result.MsgsProduced], m[result.BytesProduced],
				m[result.MsgsConsumed], m[result.BytesConsumed])
		}
		if len(p.Reps[0].Brokers) != 3 {
			t.Errorf("%s: per-broker figures of %d brokers, want 3", want.protocol, len(p.Reps[0].Brokers))
		}
		wantMech := ""
		if want.secure {
			wantMech = "SCRAM-SHA-512"
		}
		if seen.tls != want.secure || strings.Join(seen.mechs, ",") != wantMech {
			t.Errorf("%s: the load's client had TLS %v, SASL %v; want %v, %q", want.protocol, seen.tls, seen.mechs, want.secure, wantMech)
		}
		seeds, advertised := slices.Sorted(slices.Values(seen.seeds)), slices.Sorted(slices.Values(seen.advertised))
		if len(seeds) != 3 || !slices.Equal(seeds, advertised) {
			t.Errorf("%s: the load was seeded with %v; Metadata on that listener lists brokers at %v: want the same 3", want.protocol, seeds, advertised)
		}
		if len(seen.plainErrors) != 3 {
			t.Fatalf("%s: %d PLAINTEXT pings, want one per seed", want.protocol, len(seen.plainErrors))
		}
		for j, err := range seen.plainErrors {
			if (err != nil) != want.secure {
				t.Errorf("%s: a PLAINTEXT client's ping of %s: %v (want it to fail: %v)", want.protocol, seen.seeds[j], err, want.secure)
			}
		}
	}
}
