// Package harness runs reproducible experiments against weir (one broker, a
// cluster of brokers on ZooKeeper, or any Kafka bootstrap address): disk
// and memory probes, and produce/consume throughput and latency across
// codecs, partitioners, flush policies, replication factors, acks and the
// load's shape, with statistics, Markdown tables, SVG plots and Go
// benchmark lines written under results/.
//
// The harness exists because weir's users come to measure (DESIGN.md §1):
// swap a codec or partitioner and see the effect, plan capacity, research
// flush and ack trade-offs, on their own hardware. So a run must say what it
// ran on, be repeatable from its spec and seed, report spread rather than a
// single lucky figure, and never turn a failure (records lost, a consumer
// that fell behind) into a number.
//
// One concept per package:
//
//	spec      the experiment file (YAML, or an OpenMessaging Benchmark
//	          workload): parsing, validation naming each field, matrix expansion
//	presets   the specs weir ships (quick, kreps2014, probes, flush, hdd, durability,
//	          replication, chaos, scale, scale-quick, plan-profile, durability-disk), embedded
//	load      one repetition of a workload with franz-go: topics, paced
//	          producers, consumers, the measured window, the figures
//	probe     disk and memory probes (DESIGN.md §8's comparisons)
//	device    emulated disks: a timing model of HDDs, RAID arrays and SSDs
//	          (device/model) under a FUSE file system (device/diskfs); a
//	          spec's device: runs on one, mounted for the run
//	durability crash and power-cut runs: what each flush policy and ack mode
//	          loses, checked against its bound
//	scale     partition scale: N partitions on one broker process, what they
//	          cost (descriptors, memory, restarts, Metadata, fetch sessions)
//	procstat  a process's CPU, descriptors, memory and limits from /proc
//	env       the machine and storage a run measured
//	runner    a whole run: validate, probes, a broker subprocess or a cluster
//	          per point, repetitions, progress, Ctrl-C, the report
//	brokerproc a `weir broker` subprocess on free loopback ports
//	clusterproc a cluster as processes: ZooKeeper and N brokers on loopback,
//	          held as one value (brokers by id, processes, addresses, data)
//	result    the run schema every other package reads or writes
//	stats     medians, spreads, confidence intervals, significance tests
//	report    run.json, report.md, bench.txt and plots from a run
//	compare   `weir compare`: which differences between two runs are significant
//	plan      `weir plan`: the capacity planner, from a workload and a profile
//	          measured by a run (plan-profile), and its prediction of a
//	          measured cluster run
//
// `weir run` (cmd/weir) is the command line over runner; `make run` runs the
// quick preset.
package harness
