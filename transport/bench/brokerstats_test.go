package bench_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// What BenchmarkReplication can say besides throughput and CPU: the
// brokers' own counters (their /metrics endpoints, scraped before and after
// the producer) and, with -broker-pprof, a CPU profile of every broker
// taken while the producer runs (`weir broker --pprof-listen`).
var (
	brokerPprof = flag.String("broker-pprof", "", "BenchmarkReplication: write a CPU profile of every broker, taken while the producer runs, to this `dir`ectory (setup-run-broker.pprof)")
	pprofTime   = flag.Duration("broker-pprof-time", 5*time.Second, "how long each -broker-pprof profile runs, from the producer's start (use a -benchtime that produces for longer)")
)

// brokerCounters are sums over the brokers of some of their counters.
type brokerCounters struct {
	fetches      float64 // Fetch requests served (here only followers fetch)
	fetchSeconds float64 // their summed time from decoding to the response written (long polls included)
	produces     float64 // Produce requests served
	logBytes     float64 // bytes of every partition's segments, on every broker
	// lagBytes is how many bytes the followers have yet to fetch: over
	// the partitions, the longest replica's size times the replicas
	// counted, less their sizes (replicas are byte-identical).
	lagBytes float64
}

func (c brokerCounters) sub(d brokerCounters) brokerCounters {
	return brokerCounters{c.fetches - d.fetches, c.fetchSeconds - d.fetchSeconds, c.produces - d.produces, c.logBytes - d.logBytes, c.lagBytes}
}

// counters scrapes every running broker's /metrics (the set must have been
// started with metrics).
func (s *brokerSet) counters(tb testing.TB) brokerCounters {
	tb.Helper()
	var c brokerCounters
	sizes := map[string][]float64{} // by partition: each replica's size
	for _, id := range s.live() {
		addr := s.brokers[id].proc.MetricsAddr
		if addr == "" {
			tb.Fatalf("broker %d has no metrics endpoint", id)
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			tb.Fatalf("broker %d metrics: %v", id, err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			name, v, ok := metricLine(line)
			if !ok {
				continue
			}
			switch name {
			case `weir_requests_total{api="Fetch"}`:
				c.fetches += v
			case `weir_request_duration_seconds_sum{api="Fetch"}`:
				c.fetchSeconds += v
			case `weir_requests_total{api="Produce"}`:
				c.produces += v
			}
			if strings.HasPrefix(name, "weir_partition_size_bytes{") && strings.Contains(name, `topic="`+topic+`"`) {
				c.logBytes += v
				sizes[name] = append(sizes[name], v)
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			tb.Fatalf("broker %d metrics: %v", id, err)
		}
	}
	for _, rs := range sizes {
		longest := 0.0
		for _, v := range rs {
			longest = max(longest, v)
		}
		for _, v := range rs {
			c.lagBytes += longest - v
		}
	}
	return c
}

// awaitCaughtUp polls the brokers' counters until no follower lags (the
// tail of an acks=1 run is still being fetched when the producer ends).
func (s *brokerSet) awaitCaughtUp(tb testing.TB) brokerCounters {
	tb.Helper()
	deadline := time.Now().Add(setupTimeout)
	for {
		c := s.counters(tb)
		if c.lagBytes == 0 {
			return c
		}
		if time.Now().After(deadline) {
			tb.Fatalf("followers still %.0f bytes behind after %v", c.lagBytes, setupTimeout)
		}
		time.Sleep(pollInterval)
	}
}

// metricLine splits a Prometheus text line into its series and value.
func metricLine(line string) (string, float64, bool) {
	if line == "" || line[0] == '#' {
		return "", 0, false
	}
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(line[i+1:], 64)
	return line[:i], v, err == nil
}

// reportReplication reports what the counters say about a run of rf
// replicas that took elapsed: follower fetches per second, the record
// bytes each brought (the followers' share of the logs' growth), their
// mean time on the leader, and produce requests per second.
func reportReplication(b *testing.B, c brokerCounters, rf int16, elapsed time.Duration) {
	b.ReportMetric(c.produces/elapsed.Seconds(), "produces/s")
	if rf <= 1 {
		return
	}
	b.ReportMetric(c.lagBytes/1e6, "lag-MB")
	b.ReportMetric(c.fetches/elapsed.Seconds(), "fetches/s")
	if c.fetches > 0 {
		b.ReportMetric(c.logBytes*float64(rf-1)/float64(rf)/c.fetches, "B/fetch")
		b.ReportMetric(c.fetchSeconds/c.fetches*1e3, "ms/fetch")
	}
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// pprofFlags are the flags giving broker id a pprof endpoint when
// -broker-pprof is set; s.pprof keeps the address.
func (s *brokerSet) pprofFlags(id int32) []string {
	if *brokerPprof == "" {
		return nil
	}
	addr := freeAddr(s.tb)
	s.pprof[id] = addr
	return []string{"--pprof-listen", addr}
}

var profileRuns sync.Map // name → runs so far, for distinct file names

// profile starts a CPU profile of every broker for -broker-pprof-time when
// -broker-pprof is set, and returns a wait for them to be written as
// DIR/name-run-broker<id>.pprof.
func (s *brokerSet) profile(tb testing.TB, name string) (wait func()) {
	tb.Helper()
	if *brokerPprof == "" {
		return func() {}
	}
	if err := os.MkdirAll(*brokerPprof, 0o755); err != nil {
		tb.Fatal(err)
	}
	run := 0
	if v, ok := profileRuns.Load(name); ok {
		run = v.(int) + 1
	}
	profileRuns.Store(name, run)
	var wg sync.WaitGroup
	errs := make(chan error, len(s.pprof))
	for id, addr := range s.pprof {
		path := filepath.Join(*brokerPprof, fmt.Sprintf("%s-%d-broker%d.pprof", strings.ReplaceAll(name, "/", "_"), run, id))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- fetchProfile(addr, *pprofTime, path)
		}()
	}
	return func() {
		wg.Wait()
		// And what each broker allocated since it started (sampled).
		for id, addr := range s.pprof {
			path := filepath.Join(*brokerPprof, fmt.Sprintf("%s-%d-broker%d.allocs", strings.ReplaceAll(name, "/", "_"), run, id))
			if err := fetchPprof(addr, "allocs", path); err != nil {
				tb.Errorf("allocs profile: %v", err)
			}
		}
		close(errs)
		for err := range errs {
			if err != nil {
				tb.Errorf("profile: %v", err)
			}
		}
	}
}

func fetchProfile(addr string, d time.Duration, path string) error {
	return fetchPprof(addr, fmt.Sprintf("profile?seconds=%d", int(d.Seconds()+0.5)), path)
}

// fetchPprof writes /debug/pprof/<what> of the endpoint at addr to path.
func fetchPprof(addr, what, path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/%s", addr, what), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s: %s", addr, resp.Status, body)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
