package bench_test

import (
	"testing"
	"time"
)

// TestBenchSetups runs every benchmark's setup and measured body once, with
// tiny sizes, so that `make test` keeps them compiling and working: both
// implementations, each produce config's options, consume, the paced
// producer, concurrent durable producers, the broker process with both
// fetch paths, both implementations as processes, and `weir broker`
// processes alone and in a ZooKeeper cluster (one cycle of each failover,
// with a 1 s session timeout; skipped with -short).
func TestBenchSetups(t *testing.T) {
	for _, im := range impls {
		t.Run("impl="+im.name, func(t *testing.T) {
			t.Parallel()
			addr := im.start(t)
			createTopic(t, addr, 8, nil)
			n := 0
			for _, ack := range acks {
				c := produceConfig{size: 100, partitions: 8, acks: ack}
				produce(t, noTimer{}, addr, c, 500)
				n += 500
			}
			consume(t, noTimer{}, addr, n)
			lat := producePaced(t, noTimer{}, addr, produceConfig{size: 100, partitions: 8, acks: "all"}, pacedRate, 200)
			if len(lat.sorted) != 200 || lat.percentile(99) <= 0 {
				t.Errorf("paced run: %d latencies, p99 %.0f us", len(lat.sorted), lat.percentile(99))
			}
		})
	}
	for _, im := range impls {
		t.Run("txn/impl="+im.name, func(t *testing.T) {
			t.Parallel()
			addr := im.start(t)
			createTopic(t, addr, txnPartitions, nil)
			n := 0
			for _, commit := range txnCommits {
				_, txns := produceTransactions(t, noTimer{}, addr, commit, 2500)
				n += 2501 // with the warm-up record
				if want := map[string]bool{"none": false, "100ms": true, "1000records": true}[commit]; (txns > 0) != want {
					t.Errorf("commit=%s: %d transactions committed", commit, txns)
				}
			}
			consume(t, noTimer{}, addr, n)
			lat := lsoLag(t, noTimer{}, addr, 20)
			if len(lat.sorted) != 20 || lat.percentile(50) <= 0 {
				t.Errorf("LSO lag: %d latencies, p50 %.0f us", len(lat.sorted), lat.percentile(50))
			}
		})
	}
	t.Run("durable", func(t *testing.T) {
		t.Parallel()
		addr := startWeir(t)
		createTopic(t, addr, 1, map[string]string{"weir.durable.acks": "true"})
		r := produceConcurrently(t, noTimer{}, addr, 8, 64)
		if r.meanBatchBytes <= 0 {
			t.Errorf("no batches counted")
		}
	})
	for _, path := range []string{"sendfile", "copy"} {
		t.Run("fetch="+path, func(t *testing.T) {
			t.Parallel()
			// 4 MiB fetches of 16 MiB in franz-go batches of up to 1 MB: each
			// response holds at least 3 MiB (with 1 MiB fetches, two batches
			// of 500-600 KB made one response half the size it asks for).
			r := fetchCPU(t, noTimer{}, path == "copy", 16<<20, 4<<20, 4)
			if r.served < 4*(4<<20)/2 {
				t.Errorf("served %d bytes in 4 fetches of up to 4 MiB", r.served)
			}
			t.Logf("%s: %d bytes, broker cpu %v (stat %v), %d broker allocs", path, r.served, r.cpu, r.statCPU, r.mallocs)
		})
	}
	for _, im := range impls {
		t.Run("cpu/impl="+im.name, func(t *testing.T) {
			t.Parallel()
			c := produceConfig{size: 100, partitions: 1, acks: "all"}
			_, cpu := brokerCPU(t, noTimer{}, im.name, "consume", c, 1000)
			if cpu <= 0 {
				t.Errorf("broker process CPU time %v", cpu)
			}
		})
	}
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("-short: no `weir broker` processes")
		}
		const session = time.Second
		c := startZKCluster(t, clusterSize, session, "info")
		createTopic(t, c.addrs()[0], restartPartitions, nil)
		produce(t, noTimer{}, c.addrs()[0], produceConfig{size: 1024, partitions: restartPartitions, acks: "all"}, 500)
		metadataLoad(t, noTimer{}, c.addrs(), metadataWorkers, 100)
		f := controllerFailover(t, c, session, 0)
		if f.create < session/2 || f.elect < session/2 {
			t.Errorf("controller failover %+v: faster than the session timeout (%v) allows", f, session)
		}
		r := brokerRestart(t, c, session, 0)
		if r.leaderless < session/2 || r.serve <= 0 || r.down < r.leaderless+r.serve {
			t.Errorf("broker restart %+v: session timeout %v", r, session)
		}
		t.Logf("controller failover %+v, broker restart %+v", f, r)
	})
	t.Run("replication", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("-short: no `weir broker` processes")
		}
		s := startZKCluster(t, 3, *zkSession, "warn")
		addr := s.addrs()[0]
		createTopicRF(t, addr, clusterPartitions, 3, map[string]string{"min.insync.replicas": "2"})
		n0 := s.counters(t)
		produce(t, noTimer{}, addr, produceConfig{size: 100, partitions: clusterPartitions, acks: "all"}, 500)
		lat := producePaced(t, noTimer{}, addr, produceConfig{size: 100, partitions: clusterPartitions, acks: "1"}, replicationRate, 200)
		c := s.awaitCaughtUp(t).sub(n0)
		if c.fetches <= 0 || c.produces <= 0 || c.logBytes <= 0 || len(lat.sorted) != 200 {
			t.Errorf("counters %+v, %d latencies", c, len(lat.sorted))
		}
	})
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("-short: no `weir broker` processes")
		}
		s := startSingleBroker(t)
		createTopic(t, s.addrs()[0], clusterPartitions, nil)
		produce(t, noTimer{}, s.addrs()[0], produceConfig{size: 1024, partitions: clusterPartitions, acks: "1"}, 500)
		metadataLoad(t, noTimer{}, s.addrs(), metadataWorkers, 100)
	})
}
