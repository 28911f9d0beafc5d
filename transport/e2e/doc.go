// Package e2e holds only tests: weir's end-to-end suite, which starts whole
// brokers in-process (transport/broker, on 127.0.0.1:0 and a temporary data
// directory) and drives them with the real clients users will point at weir:
// franz-go (kgo), sarama, and kcat (librdkafka, run as the Debian binary).
//
// Why real clients: each negotiates versions, batches, compresses, joins
// groups and commits offsets its own way, and each has quirks that a
// hand-written client would not reproduce (librdkafka, for one, refuses to
// compress with gzip, snappy or lz4 unless the broker advertises Produce v0).
// Unit tests in transport check the protocol against its specification; these
// check it against the clients.
//
// What runs:
//
//	franz_test.go    every codec, acks 0/1/all, idempotent producer, a group of three with one leaving and
//	                 rejoining, committed offsets across a broker restart
//	sarama_test.go   produce (every codec, idempotent), partition consumers, a consumer group
//	kcat_test.go     -L metadata, a file of lines back byte for byte with every codec, -G groups
//	matrix_test.go   what each client produces with each codec, every client consumes intact
//	produce_test.go  duplicates, sequence gaps, corrupt and oversized batches, sent by hand over the wire
//	compaction_test.go  a compacted topic cleaned while the broker runs, read back by kcat, franz-go and sarama
//	readme_test.go   the README's table of served versions matches ApiVersions
//	interop/         (its own package) the admin surface through clients nobody here wrote: kafka-python,
//	                 confluent-kafka, KafkaJS, kafka-go and sarama's ClusterAdmin
//	cluster_test.go  three brokers on a real ZooKeeper (cluster/zk/zktest): every client against partitions
//	                 and a group coordinator spread over them; the controller killed; a `weir broker`
//	                 process SIGKILLed and restarted (also within its old session); a broker joining;
//	                 ZooKeeper stopped for 10 s, sessions expired; a broker id already in use
//	cluster_replication_test.go  the leader of 3-replica partitions SIGKILLed or stopped by SIGTERM under
//	                 idempotent acks=all producers of each client at once (franz-go, sarama, kcat; the loads in
//	                 cluster_failover_test.go): nothing lost, nothing twice; franz-go groups consuming meanwhile,
//	                 one coordinated by the stopped broker, re-read only what followed their last commit
//
// kcat comes from the Debian package (make deps and .ci/run install it). When
// it is missing the kcat tests skip with a message, except under CI=true,
// where they fail: CI must not pass by testing less.
//
// The cluster tests need Debian's zookeeper package as well; without it they
// skip, and under CI=true they fail, like the kcat tests. Their brokers ask
// for a 3 s ZooKeeper session, so a broker that dies without closing its
// session is forgotten within seconds.
//
// Groups rebalance without the initial delay and accept short session
// timeouts (broker.Config), and clients heartbeat every 100 ms, so the suite
// runs in well under a minute; every wait is a poll with a deadline, never a
// sleep.
package e2e
