// Package bench holds weir's end-to-end benchmarks: a real Kafka client
// (franz-go's kgo) against a whole broker, and against franz-go's fake
// cluster kfake in its on-disk mode (kfake.DataDir) as the baseline measured
// in the same run. There is no code here besides this comment; everything is
// in the package's _test.go files, and `make test` only runs the quick
// TestBenchSetups, which drives every setup once with tiny sizes (the
// cluster ones need ZooKeeper, as cluster/zk's tests, and skip without it).
//
// # What is measured
//
// Sub-benchmark names carry config keys, so benchstat and scripts/benchratio
// can slice them; impl= is weir or kfake. Each sub-benchmark starts a fresh
// broker on a fresh b.TempDir and creates its topic through CreateTopics.
//
//	BenchmarkProduce/size=100B/partitions=8/acks=all/impl=weir
//	    kgo producing as fast as it can; one op is 1 MiB of record values
//	    (10,485 records of 100 B, 1,024 of 1 KiB). MB/s counts values only;
//	    also records/s, and the mean batch size the client sent (B/batch):
//	    a broker that answers sooner gets smaller batches. acks=all is the
//	    client's default (idempotent); acks=1 turns idempotence off, as kgo
//	    requires. No compression and random values, so the brokers move the
//	    bytes the client measures.
//	BenchmarkConsume/size=100B/partitions=8/impl=weir
//	    a kgo consumer (no group) reading from the start a topic filled
//	    beforehand with b.N MiB of records; MB/s and records/s.
//	BenchmarkProduceLatency/rate=100k/size=100B/partitions=1/acks=all/impl=weir
//	    a producer paced at 100,000 records/s (one op is one record; with
//	    ProducerLinger 0, so the client sends whenever it can) against a
//	    broker in a process of its own (see below); the latency of each
//	    record from the Produce call to its acknowledgement: p50-us, p99-us,
//	    p999-us, and the rate achieved (records/s) to show that the pace was
//	    kept. In one process the tail would measure the heap more than the
//	    broker: the garbage collector paces itself on the whole process's
//	    live heap, and kfake keeps more of it live (measured once: a 17 MB
//	    heap goal against weir's 6 MB, so 90 collections against 149 in a
//	    3 s run, although weir allocates less per record), so the client's
//	    stalls would depend on which broker sits beside it.
//	BenchmarkDurableAcks/batch=1MiB/producers=8/partitions=1/durable=true
//	    eight kgo clients (and, for reference, one) producing 1 KiB records
//	    in batches of up to 1 MiB (ProducerBatchMaxBytes) to one partition,
//	    where group commit can share fsyncs; weir only, with
//	    weir.durable.acks=false (acks mean "in the page cache") and true
//	    (acks wait for the covering fsync, which group commit shares between
//	    the producers). One op is 1 MiB; MB/s, and the mean batch size the
//	    client sent (B/batch) to show the batches were full.
//	BenchmarkBrokerCPU/op=produce/size=1KiB/partitions=8/impl=weir
//	    the broker's own CPU seconds per GB of record values produced or
//	    consumed (acks=all), weir and kfake each running in a process of
//	    its own (see below). In-process, franz-go takes most of the two
//	    cores, so the throughput ratios above are damped; this figure says
//	    what each broker costs.
//	BenchmarkTransactionalProduce/size=1KiB/partitions=8/commit=100ms/impl=weir
//	    one franz-go producer as fast as it goes: idempotent (commit=none,
//	    the baseline) or transactional, committing every 100 ms or every
//	    1,000 records (Flush, then EndTransaction); one op is 1 MiB; MB/s,
//	    records/s and records/txn. Goal: commit=100ms at least 0.9x none.
//	BenchmarkTransactionalRatio
//	    the comparison, interleaved against one in-process weir
//	    broker: each op runs, for -txn-run-time (3s) each and the first
//	    rotating from op to op, the idempotent producer (none), the same
//	    producer flushing every 100 ms (flush100ms: the client's commit
//	    barrier without a transaction), and transactions committed every
//	    100 ms and every 1,000 records, each on a topic of its own (8
//	    partitions, 1 KiB records) deleted, and gone from the disk, before
//	    the next run. Reported: each mode's median MB/s, the median of the
//	    per-op ratios to none (<mode>-ratio; goal 100ms-ratio >= 0.9), the
//	    process's CPU seconds per GB, and per commit the Flush and
//	    EndTransaction calls, the EndTxn and AddPartitionsToTxn requests,
//	    and the barrier split at the Produce requests the client wrote:
//	    tail (the last one before Flush returned to that return) and gap
//	    (from it to the first one after), with the gap's part before the
//	    AddPartitionsToTxn request and after it. -txn-linger sets every
//	    mode's ProducerLinger (default franz-go's 10ms). Run with
//	    -benchtime 5x (one op is one round of the four runs, ~17 s).
//	BenchmarkLSOLag/impl=weir
//	    one-record transactions on one partition; p50-us and p99-us from the
//	    EndTransaction call to a read_committed consumer receiving the record.
//	BenchmarkFetchCPU/path=sendfile and path=copy
//	    the broker's CPU seconds per GB of Fetch responses served, with
//	    sendfile and with the copy path (broker.Config.DisableSendfile),
//	    weir in a process of its own; the client sends Fetch v11 requests
//	    for 8 MiB over one TCP connection and discards the responses. Also
//	    reported: the broker's heap allocations per fetch
//	    (broker-allocs/op), which must not grow with the bytes served, and
//	    the CPU time as /proc/<pid>/stat counts it (stat-cpu-s/GB), as a
//	    check.
//	BenchmarkClusterProduce/size=1KiB/partitions=6/acks=all/cluster=3
//	    BenchmarkProduce's producer (1 KiB records, acks=1 and acks=all,
//	    6 partitions) against one `weir broker` alone (cluster=1: a single
//	    node on its file store) and against three of a ZooKeeper cluster
//	    (cluster=3, replication factor 1, so two partitions per broker),
//	    every broker a process of its own; MB/s, and the CPU seconds of all
//	    the broker processes per GB (broker-cpu-s/GB, /proc/<pid>/stat).
//	BenchmarkClusterMetadata/partitions=6/cluster=3
//	    Metadata requests for the 6-partition topic from 8 clients at once
//	    (client i asks broker i mod n, each on its own connection, the next
//	    request when the previous is answered), one op per request; req/s
//	    and broker-cpu-us/req.
//	BenchmarkReplication/size=100B/partitions=6/setup=rf3-acksall
//	    BenchmarkProduce's producer (100-byte records, 6 partitions)
//	    against a 3-broker ZooKeeper cluster, with replication factor 1
//	    (setup=rf1-acks1), 3 with acks=1 (rf3-acks1), and 3 with acks=all
//	    and min.insync.replicas=2 (rf3-acksall); followers fetch from the
//	    leaders as Kafka's do. MB/s and B/batch as above; the CPU seconds
//	    of the broker processes per GB at the producer's last
//	    acknowledgement (broker-cpu-s/GB) and once every follower has
//	    caught up (repl-cpu-s/GB: with acks=1 the tail is still being
//	    fetched, lag-MB says how much), and the MB/s counted until then
//	    (repl-MB/s: with acks=1, what the followers sustained; MB/s is what
//	    the producer saw); the benchmark process's own CPU
//	    (client-cpu-s/GB, mostly franz-go's producer); and from the
//	    brokers' /metrics, scraped before and after: produce requests per
//	    second (produces/s) and, with 3 replicas, follower fetches per
//	    second (fetches/s), the record bytes each brought (B/fetch: the
//	    followers' share of the logs' growth over the fetches) and the
//	    mean time a fetch spent in the leader, long poll included
//	    (ms/fetch).
//	BenchmarkReplicationLatency/rate=100k/size=100B/partitions=6/setup=rf3-acksall
//	    the same cluster and setups with BenchmarkProduceLatency's paced
//	    producer (100,000 records/s, linger 0; one op is one record):
//	    p50-us, p99-us, p999-us from Produce to acknowledgement, the rate
//	    achieved, and broker-cpu-s/GB.
//	BenchmarkControllerFailover/brokers=3/session=4s
//	    a ZooKeeper server (cluster/zk/zktest) and three `weir broker`
//	    processes (harness/brokerproc) with the session timeout of
//	    -zk-session (default 4s); one op is one cycle: SIGKILL the
//	    controller (Metadata's ControllerID), then the time until a
//	    CreateTopics sent to a survivor returns with the new topic led
//	    (create-s; the topic's one replica is that survivor), until another
//	    survivor's Metadata names a new controller (elect-s) and stops
//	    listing the dead broker (gone-s); then restart the killed broker and
//	    wait until every broker's Metadata shows all three. Reported as
//	    median-<x>, min-<x> and max-<x> over the cycles, with session-s;
//	    each cycle's times are logged (the log of a benchmark is cut after
//	    10 lines). ns/op is a whole cycle. Run with -benchtime 10x (cycles,
//	    not a duration).
//	BenchmarkBrokerRestart/brokers=3/session=4s
//	    the same cluster with a 6-partition topic; one op is one cycle:
//	    SIGKILL a broker that is not the controller (the two take turns),
//	    poll a bystander's Metadata until all its partitions are leaderless
//	    (leaderless-s, from the SIGKILL: its session expired and the
//	    controller moved them to leader -1), restart it on its data
//	    directory and poll until a produce of one record (acks=1) to each
//	    of them, sent where the bystander's Metadata says the leader is,
//	    succeeds (serve-s, from the restart; down-s from the SIGKILL).
//
// Two flags serve comparisons and profiles of the cluster benchmarks:
// -weir BINARY runs that build of `weir broker` instead of building
// cmd/weir from this tree, and -weir a=BINARY,b=BINARY has the replication
// benchmarks run every setup on each build in turn (a weir=a or weir=b key
// in the names, for benchratio -key weir), so that two builds are compared
// within each run, setup by setup; -broker-pprof DIR has BenchmarkReplication start its brokers
// with --pprof-listen and write each one's CPU profile, taken for
// -broker-pprof-time from the producer's start, and its allocation profile
// to DIR (use a -benchtime that produces for longer than the profile).
//
// The failover benchmarks poll every 10 ms (each poll a request or two), so
// their times are good to ~10-20 ms; they never sleep a guessed time. With
// -cluster-logs DIR, the end of every broker's log after each cycle is
// written to DIR, to explain a slow cycle. The brokers are `weir broker`
// itself (cmd/weir, built once per test binary with go build), on fresh
// ports at every start.
//
// The in-process figures (produce, consume, durable) run the client and the
// broker in one process on the same cores, for weir and kfake alike; the
// throughput there is mostly the client's, which is why BenchmarkBrokerCPU
// also measures each broker alone.
//
// # Broker processes
//
// For the CPU and latency figures the broker runs as this test binary
// started again with WEIR_BENCH_BROKER_DIR (and _IMPL, _SENDFILE) set:
// TestMain then calls broker.Start (or kfake.NewCluster) instead of running
// tests, logs its address like `weir broker` does ("listen=" in the start
// line), and serves until its standard input ends. `weir broker` itself would do for weir but
// has no flag for DisableSendfile, and kfake has no binary. The process
// answers a "stats" line on stdin with its CPU time (getrusage RUSAGE_SELF:
// user+system, all threads, microsecond resolution) and its heap allocation
// count; the client's CPU time is in another process and not counted. With
// WEIR_BENCH_BROKER_CPUPROFILE=/tmp/broker set, each broker process writes a
// CPU profile to /tmp/broker.<pid>.
//
// # How to run
//
// The machines are shared and noisy, and what one sub-benchmark leaves in
// the page cache changes the next one's cost: run several times, interleaved,
// alternating which side goes first (-reverse), and compare medians with
// scripts/benchratio:
//
//	go test -c -o /tmp/bench.test ./transport/bench
//	for i in 1 2 3 4 5 6; do
//	    rev=$([ $((i % 2)) = 0 ] && echo true || echo false)
//	    /tmp/bench.test -test.run '^$' -test.bench '^Benchmark(Produce|Consume)$' -test.benchtime 300x -reverse=$rev
//	    /tmp/bench.test -test.run '^$' -test.bench '^BenchmarkProduceLatency$' -test.benchtime 500000x -reverse=$rev
//	    /tmp/bench.test -test.run '^$' -test.bench '^BenchmarkBrokerCPU$' -test.benchtime 300x -reverse=$rev
//	    /tmp/bench.test -test.run '^$' -test.bench '^BenchmarkDurableAcks$' -test.benchtime 300x -reverse=$rev
//	    /tmp/bench.test -test.run '^$' -test.bench '^BenchmarkFetchCPU$' -test.benchtime 300x -reverse=$rev
//	done > /tmp/kafka.txt
//	go run ./scripts/benchratio -key impl -base kfake -metric MB/s -goal 1 -match '^(Produce|Consume)/' /tmp/kafka.txt
//	go run ./scripts/benchratio -key impl -base kfake -metric p99-us -lower -goal 1 /tmp/kafka.txt
//	go run ./scripts/benchratio -key impl -base kfake -metric cpu-s/GB -lower /tmp/kafka.txt
//	go run ./scripts/benchratio -key durable -base false -metric MB/s -goal 0.5 /tmp/kafka.txt
//	go run ./scripts/benchratio -key path -base copy -metric cpu-s/GB -lower /tmp/kafka.txt
//
// That takes about 15 minutes on a 2-core machine. With -test.benchtime Nx the sizes are fixed; with a duration instead,
// every ramp-up round starts a fresh cluster and refills it, which is correct
// but slower. The allocation side of the fetch path is also covered in
// package transport: TestFetchWriterAllocsIndependentOfSize and
// BenchmarkFetchPath (-benchmem).
//
// The cluster figures (see the README's Figures, Cluster; about 8 minutes,
// and ZooKeeper installed):
//
//	/tmp/bench.test -test.run '^$' -test.bench '^Benchmark(ControllerFailover|BrokerRestart)$' -test.benchtime 10x
//	for i in $(seq 12); do
//	    rev=$([ $((i % 2)) = 0 ] && echo true || echo false)
//	    /tmp/bench.test -test.run '^$' -test.bench '^BenchmarkClusterProduce$' -test.benchtime 1000x -reverse=$rev
//	    /tmp/bench.test -test.run '^$' -test.bench '^BenchmarkClusterMetadata$' -test.benchtime 20000x -reverse=$rev
//	done > /tmp/cluster.txt
//	go run ./scripts/benchratio -key cluster -base 1 -metric MB/s -match '^ClusterProduce/' /tmp/cluster.txt
//	go run ./scripts/benchratio -key cluster -base 1 -metric req/s /tmp/cluster.txt
//
// Replication (about 4 minutes):
//
//	for i in 1 2 3 4 5 6 7 8; do
//	    rev=$([ $((i % 2)) = 0 ] && echo true || echo false)
//	    /tmp/bench.test -test.run '^$' -test.bench '^BenchmarkReplication$' -test.benchtime 100x -reverse=$rev
//	    /tmp/bench.test -test.run '^$' -test.bench '^BenchmarkReplicationLatency$' -test.benchtime 200000x -reverse=$rev
//	done > /tmp/repl.txt
//	go run ./scripts/benchratio -key setup -base rf1-acks1 -metric MB/s -match '^Replication/' /tmp/repl.txt
//	go run ./scripts/benchratio -key setup -base rf1-acks1 -metric broker-cpu-s/GB -lower -match '^Replication/' /tmp/repl.txt
//	go run ./scripts/benchratio -key setup -base rf1-acks1 -metric p99-us -lower /tmp/repl.txt
package bench
