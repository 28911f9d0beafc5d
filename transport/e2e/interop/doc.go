// Package interop holds only tests: weir's admin surface driven by clients
// and tools nobody here wrote, as a new user would point them at it. Where
// transport/e2e checks the data path against franz-go, sarama and kcat, this
// suite checks what admin tools assume besides: configs read and changed,
// partitions added, records deleted, compacted topics, internal topics,
// consumer groups as tools list them.
//
// Every client runs the same operations against its own broker (one broker
// per client test, restarted once before the last operation, the operations
// as subtests one after another, each on its own topic named
// <client>-<operation>), and the client itself asserts what it
// sees; the Go test then checks the broker's side of each with franz-go's kmsg
// (a config the client altered reads back altered, the start offset the
// client moved is moved, ...), so a client that silently did nothing fails.
//
//	smoke          create a 3-partition topic, produce 20 keyed records with the client's defaults,
//	               consume them all as a consumer group
//	configs        AlterConfigs retention.ms=7200000, DescribeConfigs reads it back
//	incremental    IncrementalAlterConfigs SET retention.ms=7200000 and segment.ms=3600000, then
//	               DELETE segment.ms: retention.ms reads back set, segment.ms back at its default;
//	               APPEND cleanup.policy compact (delete,compact), SUBTRACT delete (compact)
//	brokerconfigs  DescribeConfigs of broker 0 lists num.partitions with a value
//	partitions     CreatePartitions 1 -> 3, a record written to partition 2 and read back from it
//	deleterecords  10 records, DeleteRecords below offset 5: ListOffsets earliest is 5 and reading
//	               from the beginning starts at offset 5
//	compaction     cleanup.policy=compact, segment.bytes=1024, segment.ms=100,
//	               min.cleanable.dirty.ratio=0.01; five rounds over ten keys, then (polling, with a
//	               deadline) one more record of a filler key until reading the topic from the start
//	               shows every key once, with its last value
//	internal       after a group commits, __consumer_offsets is listed (as internal, where the client
//	               shows the flag) and a produce to it fails
//	groups         while a member consumes, the group is listed with protocol type "consumer" and
//	               described with protocol type "consumer", a protocol and its member
//	offsetdelete   a committed offset deleted with OffsetDelete is gone from OffsetFetch
//	logdirs        10 records; DescribeLogDirs of every broker (DescribeCluster) gives the partition's
//	               directory and a size above zero
//	transactions   a transactional producer writes three transactions of five records to partition 0:
//	               committed, aborted, committed; read_committed reads the 10 committed records,
//	               read_uncommitted all 15
//	restart        after the broker restarts (same data, same address), the groups operation's group,
//	               now empty, still lists and describes as a consumer group, with its committed offset
//
// security_test.go runs two more operations, for KafkaJS and confluent-kafka,
// against a broker with a SASL_SSL listener (its certificate signed by a
// test CA the client is given) and SCRAM users: scram (five records
// produced to partition 0 and read back as a group, once with
// SCRAM-SHA-256 and once with SCRAM-SHA-512) and scram-refused (a wrong
// password: the client's own SASL authentication error, after which the
// broker serves the next client).
//
// The clients (versions pinned; README.md, "Interoperability", has the table
// of the operations each one lacks, which the tests skip naming why, and
// readme_test.go keeps that table and lacks in helpers_test.go the same):
//
//	python_test.go   kafka-python 2.0.2, Debian python3-kafka: testdata/python/kafka_python_ops.py;
//	                 confluent-kafka 1.7.0 (librdkafka), Debian python3-confluent-kafka:
//	                 testdata/python/confluent_ops.py
//	kafkajs_test.go  KafkaJS 2.2.4 from npm: testdata/kafkajs (package.json and its committed
//	                 package-lock.json; the test runs `npm ci` there when node_modules is missing)
//	kafkago_test.go  segmentio/kafka-go v0.4.51 through the module proxy, in this module
//	sarama_test.go   sarama's ClusterAdmin (IBM/sarama, in this module), with kaf's own two calls
//
// kaf (github.com/birdayz/kaf, the sarama-based CLI) is not here: the module
// proxy refuses it (403, "This module version is not available", for every
// version), so it cannot be built; sarama's ClusterAdmin, which the issue's
// kaf calls, stands in for it.
//
// The Python packages and node/npm come from Debian (make deps and .ci/run
// install them). When one is missing its test skips with a message, except
// under CI=true, where it fails: CI must not pass by testing less. Debian's
// Python packages are importable from /usr/bin/python3, which the tests try
// before the python3 on PATH (a pyenv or venv python3 does not see them).
package interop
