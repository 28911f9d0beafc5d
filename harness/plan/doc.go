// Package plan is weir's capacity planner: from a workload (ingress,
// record size, retention, replication, consumer groups) and a hardware
// profile (what one broker measured on the machine in question), it works
// out how many brokers, disks, partitions, network and page cache a cluster
// needs, and which input bound each answer.
//
// Everything here is arithmetic over values: Make and Predict read no
// files and start nothing, so tests check them against hand-computed cases.
// ProfileFromRun reads a harness run (result.Run) that the caller loaded;
// `weir plan` (cmd/weir) is the command line over the package.
//
// # The formulas
//
// W is the peak ingress (average × peak factor) in MB/s of record
// key+value bytes (MB = 2^20 bytes, as the harness's figures), R the
// replication factor, G the consumer groups, N the brokers.
//
//	stored bytes   S = W_avg × retention × R × e × (1 + i)
//	               e = (record + 10 + 61/records-per-batch) / record: the
//	               v2 record format's per-record (~10 B of varints and
//	               attributes) and per-batch (61 B header) overhead, with
//	               batches of 16 KiB (the Java producer's batch.size);
//	               i = 20/4096: an 8-byte offset-index and a 12-byte
//	               time-index entry per 4 KiB of log (index.interval.bytes).
//	               With retention.bytes (per partition, as Kafka's), S is
//	               at most retention.bytes × partitions × R.
//	disk per broker S / N, provisioned at S / N / 0.8 (Cruise Control's
//	               disk.capacity.threshold), split over the broker's disks
//	network in     W × R / N per broker (producers, then followers' fetches)
//	network out    W × (G + R − 1) / N per broker (consumers, then followers)
//	NIC            max(in, out) × 1.4 (Netflix's service-capacity-modeling
//	               keeps 40% for node recovery)
//	partitions     max(⌈W/p⌉, ⌈W/c⌉) for per-partition producer rate p and
//	               consumer rate c (Jun Rao, Confluent blog 2015), or as given
//	page cache     W_avg / N × tail window per broker: each leader's newest
//	               records, so consumers within the window read memory
//
// Brokers are the most any constraint needs, each a ceiling:
//
//	replication    N ≥ R
//	broker produce W × R / P, P the MB/s one broker was measured to absorb
//	               (each broker writes its share of every replica)
//	broker consume W × G / C, C the MB/s one broker was measured to serve
//	disk write     W × R × e / (disks × D × 0.8), D a disk's sequential MB/s
//	network        max(W × R, W × (G + R − 1)) × 1.4 / NIC
//	CPU            W × (k_l + (R−1)(k_l + k_s) + G × k_s) / (cores × 0.7):
//	               k_l CPU seconds per MB a leader appends, k_s per MB it
//	               serves to a fetcher; a follower's copy costs an append
//	               and the leader's serving of its fetch
//	storage        S / (disks × disk size × 0.8), when the disk size is given
//	partitions     partitions × R / max replicas per broker (4000)
//
// Each answer carries its formula, the formula with the numbers put in,
// and the constraint that bound it (Answer.BoundBy), so a reader can check
// the sum and see which input to change.
//
// # Predicting a measured cluster
//
// Predict answers the question the harness can check on one machine: how
// much will N brokers at replication factor R sustain when they share the
// machine with each other and with the load generator, as the harness's
// clusters do? Then the machine's CPU, as the profile run used it (its
// brokers' and its clients' CPU seconds over the window), is split
// between the clients (k_c per MB produced, k_cc per MB consumed) and
// the brokers' work above, so W = B / (k_c + k_l + (R−1)(k_l + k_s) +
// G × (k_s + k_cc)); and the disk the run writes is W × R × e. Compare
// sets those beside a measured run's medians, and beside them the cores
// the run kept busy against B: not a prediction but the assumption the
// throughput rests on (Comparison.Assumption, never judged). On a shared
// machine it holds only when both runs get the same CPU budget, which is
// why scripts/plan-validate.sh runs them in one cgroup of one core.
package plan
