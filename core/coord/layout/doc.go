// Package layout is Kafka's ZooKeeper-mode layout (Kafka 2.x/3.x,
// ZkData.scala) over any coord.Store: the paths, the JSON in each node
// (Kafka's exact keys and versions), and the operations brokers and the
// controller perform on them (registration, controller election and
// fencing, topic creation, partition states, deletion, producer id blocks,
// the cluster id). It does no I/O of its own: every operation is a few
// requests on the store it is given, so it runs the same on filestore (one
// node), memstore (tests) and cluster/zk (a real ensemble), and a Kafka
// tool pointed at weir's ZooKeeper reads what it expects.
//
// # The nodes
//
//	/brokers/ids/<id>             ephemeral; the broker, at start-up (RegisterBroker)
//	  {"version":5,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092"],"jmx_port":-1,
//	   "timestamp":"<ms>","rack":"r","listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"features":{}}
//	  "rack" only when the broker has one. The node's czxid is the broker epoch (KIP-380).
//	  "endpoints" lists every advertised listener, NAME://host:port, with its protocol in the
//	  map ({"INTERNAL":"SASL_PLAINTEXT","EXTERNAL":"SASL_SSL"}); "host" and "port" are the first
//	  PLAINTEXT one's, null and -1 without one (as Kafka writes them, for older readers).
//	  Versions 1-4 are read too (version 1: one PLAINTEXT listener at "host":"port"); where
//	  "host" is null, the address comes from "endpoints".
//	/controller                   ephemeral; the elected controller (Elect), deleted by Resign
//	  {"version":2,"brokerid":1,"timestamp":"<ms>","kraftControllerEpoch":-1}   (version 1 read too)
//	/controller_epoch             persistent; created "0" by the first Elect, +1 by each winner
//	  7                           (a plain decimal, not JSON)
//	/brokers/topics/<t>           persistent; any broker handling CreateTopics (CreateTopic)
//	  {"version":3,"partitions":{"0":[1,2],"1":[2,3]},"adding_replicas":{},"removing_replicas":{},
//	   "topic_id":"<22 chars of base64url>"}                    (versions 1 and 2 read too)
//	  The first replica of each list is the preferred leader.
//	/brokers/topics/<t>/partitions, …/partitions/<p>      persistent, empty; the controller (WriteState)
//	/brokers/topics/<t>/partitions/<p>/state              persistent; the controller (WriteState)
//	  {"version":1,"leader":2,"leader_epoch":5,"controller_epoch":7,"isr":[2,3]}
//	  The node's version is the partition epoch (zkVersion): every write is a CAS on it.
//	/config/topics/<t>            persistent; with the topic (CreateTopic), replaced by AlterConfigs (WriteTopicConfig)
//	  {"version":1,"config":{"min.insync.replicas":"2"}}
//	/config/brokers/<default>     persistent; AlterConfigs of the cluster-wide broker defaults (WriteBrokerConfig)
//	/config/brokers/<id>          persistent; AlterConfigs of one broker
//	  {"version":1,"config":{"log.retention.ms":"86400000"}}            (Kafka's broker config names)
//	/admin/delete_topics/<t>      persistent, empty; any broker handling DeleteTopics (RequestDeletion)
//	/admin/delete_topics/<t>/<b>  persistent, empty; WEIR'S OWN: replica broker b removed its logs (AckDeletion)
//	/latest_producer_id_block     persistent; a broker taking a block of producer ids (AllocateProducerIDs)
//	  {"version":1,"broker":1,"block_start":"1000","block_end":"1999"}
//	/cluster/id                   persistent; the first broker to start (ClusterID)
//	  {"version":"1","id":"<id>"}
//	/weir/controlled_shutdown/<b> ephemeral, empty; WEIR'S OWN: broker b is stopping (AnnounceShutdown)
//	/weir/resigned/<b>:<t>:<p>:<e> ephemeral, empty; WEIR'S OWN: broker b's log of t-p failed while it
//	                              was in the ISR of leader epoch e (ResignReplica, WithdrawResignation)
//
// The controller deletes a topic's nodes (DeleteTopic) once every replica
// acked its deletion. Kafka keeps those acks in the controller's memory
// (StopReplica answers); weir keeps them in the store, under the request,
// so a new controller knows which replicas still hold logs. A Kafka
// controller would not understand them (its delete of the request would
// fail with children): the acks are the one thing here Kafka does not
// write; nor are the nodes under /weir, which stand in for requests a
// Kafka broker sends its controller (ControlledShutdown, and the offline
// replicas of a failed log directory). Kafka's /isr_change_notification, /config/changes,
// /admin/reassign_partitions and /admin/preferred_replica_election are
// not used.
//
// # Codecs
//
// Encoders write the keys in the order shown, with no HTML escaping, so
// their bytes are golden-testable (Kafka writes a HashMap's order; readers
// do not care). Decoders are strict where weir relies on the value: the
// JSON must be one object, valid UTF-8, without duplicate keys or trailing
// data; required keys present with their exact types (integers without a
// fraction, in range); ids canonical decimals; partitions 0..n-1 each once,
// replicas and ISR distinct. Unknown keys are ignored (newer Kafka versions
// add some). Everything else is ErrMalformed, naming the path and what is
// wrong; no input makes a decoder panic (each has a Fuzz target).
//
// # Fencing
//
// Elect is Kafka's election: one Multi creates /controller and moves
// /controller_epoch from e to e+1 at the version read, so two brokers
// never both win, and each term's epoch is larger than every earlier
// one. The winner's Controllership carries the version it left on
// /controller_epoch; every controller write (WriteState, DeleteTopic,
// Resign) is a Multi that starts with c.Fence(), a check of that version,
// so once another controller is elected, a deposed one (paused, isolated,
// its session expired while it did not notice) can write nothing: its
// writes fail with ErrFenced. CreateTopic, RequestDeletion and AckDeletion
// are not fenced: any broker calls them, as in Kafka.
//
// # Unknown outcomes
//
// coord.ErrConnectionLoss means a write may or may not have applied.
// RegisterBroker and Elect resolve it by reading back the ephemeral node's
// owner (Kafka's CheckedEphemeral), CreateTopic by comparing the topic
// node with what it wrote; the others are safe to call again
// (RequestDeletion, AckDeletion, DeleteTopic, ClusterID are idempotent;
// WriteState's CAS fails with coord.ErrBadVersion or coord.ErrNodeExists if
// the first attempt applied; AllocateProducerIDs skips a block rather than
// risk handing one out twice).
//
// Errors are prefixed "layout:", name the operation and the path, and wrap
// the store's sentinels (errors.Is(err, coord.ErrNoNode) and the like).
package layout
