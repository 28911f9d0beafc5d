// Package spec reads experiment specs: YAML files that say what to measure
// (the target, the workload, the factors to vary), so that a run can be
// repeated by someone else from the file and its seed alone.
//
// A spec is parsed strictly: an unknown field is an error that names the
// field and its line, because a misspelt factor that is silently ignored
// produces a run that measures something other than what its author meant.
// Everything is validated before any load starts (Validate, CheckTarget),
// and every error names the field it is about, in the form
// `workload.rate: must be >= 0` or `factors.codec[2]: ...`.
//
// # Format
//
//	name: codec-sweep            # names the run and its results directory
//	seed: 1                      # seeds payloads, keys and sizes (default 0)
//	repetitions: 5               # reps per matrix point (default 5)
//	interleave: false            # true: reps in rounds, one of every point per round (brokers all up)
//	target:                      # one of embedded (the default), bootstrap or cluster
//	  embedded:                  # a `weir broker` subprocess per point
//	    data_dir: /mnt/nvme/weir # where its data directories go (default: a temp dir)
//	    broker_flags: [--disable-sendfile]
//	    broker_env: [GOGC=200]   # added to the broker's environment (load and scale)
//	    open_files_limit: 20000  # the broker's RLIMIT_NOFILE, soft and hard (default: the runner's)
//	  # bootstrap: 10.0.0.5:9092 # or any Kafka-compatible cluster
//	  # cluster:                 # or a fresh cluster per point (package harness/clusterproc)
//	  #   brokers: 3             # broker ids 1..N (default 3)
//	  #   zookeeper: embedded    # (default) Debian's ZooKeeper per point, or "host:port[/chroot]":
//	  #                          #   then each point under a fresh chroot below it
//	  #   data_dir: /mnt/nvme    # as embedded's (default: a temp dir)
//	  #   broker_flags: []       # for every broker
//	  #   session_timeout: 0s    # --zookeeper-session-timeout; 0: the broker's (18s)
//	  #   networking: loopback   # (default) all on 127.0.0.1; netns: a namespace and address per
//	  #                          #   broker on a bridge (root); auto: netns if it can be had
//	workload:
//	  topics: 1
//	  partitions: 4
//	  message_size: 1KiB         # or {distribution: uniform, min: 100, max: 2KiB}
//	                             #    {distribution: normal, mean: 1KiB, stddev: 256, min: 64, max: 4KiB}
//	                             #    {distribution: exponential, mean: 1KiB, min: 64, max: 16KiB}
//	  payload: json              # random | json | text (or payload_file: path)
//	  keys: {kind: zipf, count: 1000}  # none | uniform | zipf | sequential
//	  producers: 1
//	  consumers: 1               # 0: produce only
//	  consume: live              # live (with the producers) | backlog (after them)
//	  rate: 0                    # records/s over all producers; 0: as fast as possible
//	  warmup: 1s
//	  duration: 10s
//	  acks: all                  # 0 | 1 | all
//	  codec: none                # a codec spec (weir codecs), or a plugin path
//	  partitioner: ""            # a partitioner spec; "": the client's default
//	  flush_policy: ""           # embedded and cluster only; "": the broker's default
//	  durable_acks: false        # embedded and cluster only
//	  replication_factor: 1      # the topics'; at most the brokers (1 when embedded)
//	  min_insync: 1              # the topics' min.insync.replicas; 1..replication_factor
//	  batch_max_bytes: 1000012   # franz-go's default
//	  linger: 10ms               # franz-go's default
//	  topic_config: {segment.bytes: "1073741824"}
//	  security_protocol: PLAINTEXT  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL: the listener the load
//	                             #   uses; others than PLAINTEXT on brokers the runner starts only (a
//	                             #   throwaway CA and certificate per point, a SCRAM-SHA-512 user for SASL)
//	factors:                     # each a list of levels; the matrix is their product
//	  codec: [none, zstd]
//	  flush_policy: [never, every-batch]
//	# points:                    # or, instead of factors, the points one by one
//	#   - {replication_factor: 1, acks: "1"}
//	#   - {replication_factor: 3, min_insync: 2, acks: all}
//	baseline: ""                 # a point's ID: the report sets the others against it
//	probes:                      # optional disk and memory probes, run before the load
//	  disk: {file_size: 256MiB, block_sizes: [4KiB, 1MiB]}
//	  memory: {bytes: 256MiB}
//	no_load: false               # true: run the probes only
//	references: []               # published figures to print beside this machine's
//	durability:                  # optional: a durability experiment instead of a load one
//	  faults: [kill, power]      # SIGKILL of the broker | simulated power cut (default both)
//	  torn: 0.5                  # fraction of power cuts keeping torn writes
//	  sync_latency: 0s           # simulated fsync duration on the power cut's in-memory FS
//	  recovery_timeout: 30s      # restart until every partition serves a fetch
//	  verify_records: 10         # produced per partition after recovery: offsets must continue
//	  age_slack: 25ms            # slack on a policy's age bound (besides measured timer lateness)
//	scale:                       # optional: a partition-scale experiment (embedded target)
//	  partitions: [1000, 10000]  # the partition counts N, a point and a fresh broker each
//	  partitions_per_topic: 100  # N is made of topics this size
//	  create_batch: 10           # topics per CreateTopics request
//	  metadata_requests: 20      # Metadata for every topic, timed this many times
//	  restarts: 2                # clean restarts, then as many unclean ones (0: none)
//	  restart_timeout: 5m        # exec until a record is fetched
//	  step_timeout: 10m          # each of create, Metadata, produce+consume N records
//	  request_timeout: 2m        # each CreateTopics batch and Metadata request
//	  session_partitions: 10000  # fetch sessions on/off: a consumer of min(N, this) (0: skip)
//	  session_window: 5s         # measured per mode
//	  session_rate: 100          # records/s written meanwhile ...
//	  session_hot: 4             # ... to this many of the consumer's partitions
//	  hot_rounds: 3              # the workload beside the N idle partitions vs alone (0: skip)
//
// A durability block (see Durability) turns each load section into a
// durability section: the fault is one more factor, varying fastest, and
// each repetition runs the workload until the fault strikes at a random
// moment of [warmup, warmup+duration), restarts the broker and reads
// everything back (package harness/durability).
//
// A scale block (see Scale) makes the run one scale section, a point per
// partition count (factor total_partitions), each against a fresh broker
// that is filled, timed, restarted cleanly and uncleanly, read with and
// without fetch sessions, and finally loaded with the workload beside its
// idle partitions (package harness/scale).
//
// A spec may instead list experiments, each a load section of the run with
// its own workload overrides (applied over the top-level workload),
// factors (or points) and baseline; the kreps2014 preset does this to
// reproduce several tables, the replication preset to measure the same
// settings unpaced and paced.
//
// # Points and baselines
//
// Factors make a full product. Some comparisons are not one: min_insync 2
// means nothing at replication factor 1, so "RF 1 acks=1, RF 3 acks=1,
// RF 3 acks=all min_insync 2" is a list of points (Levels), each naming
// one level of the factors it sets; the section's factors are all those
// any point names, and a point that leaves one out takes the workload's
// value, so every ID names them all. A baseline names one point of its
// section by ID; the report then adds a table of each point's medians
// over the baseline's (throughput, latency percentiles, broker CPU), both
// measured in the same run on the same machine.
//
// # Targets and replication
//
// Validation knows the target's brokers: replication_factor must be 1 on
// an embedded broker and at most target.cluster.brokers on a cluster
// (unchecked on a bootstrap address), and min_insync at most the
// replication factor at every point (the error names the point).
// flush_policy and durable_acks are broker and topic configs the runner
// sets, so they need a target it starts (embedded or cluster). Topics are
// created with the point's replication factor and min.insync.replicas,
// and its load starts once every partition has a leader and its full ISR.
//
// security_protocol (a workload field and a factor) picks the listener the
// load's clients use on an embedded broker or a cluster: for SSL,
// SASL_PLAINTEXT and SASL_SSL the runner makes a throwaway CA and server
// certificate per point, starts the broker (every broker of the cluster)
// with that listener beside a PLAINTEXT one for its own setup and a
// cluster's replication, creates a SCRAM-SHA-512 user for SASL, and
// connects the clients with the matching settings. A bootstrap target's
// listeners are what they are (target.security says how to reach them).
//
// # Matrix order
//
// Factors expand as a full matrix in a fixed order, the first factor varying
// slowest: security_protocol, codec, partitioner, flush_policy,
// durable_acks, replication_factor, min_insync, unclean_election, acks,
// batch_max_bytes, linger, partitions, message_size, producers, consumers
// (what changes the broker,
// the topics or the client's encoding first, the load's shape last).
// Levels keep the order the spec lists them in. A point's ID joins the
// factor levels in that order ("codec=zstd/flush_policy=never"), the form of
// Go sub-benchmark names, so benchstat can slice the results.
//
// # OpenMessaging Benchmark workloads
//
// A file with OMB's workload fields (partitionsPerTopic, messageSize,
// producerRate, ...) is read as an OMB workload where the fields overlap;
// fields weir does not support are listed in Spec.Warnings, never silently
// dropped.
package spec
