// Package topics is the broker's topic registry: which topics exist, with
// which configs (package topicconfig) and partitions (package logs opens
// them), and the producer-id counter. It owns the data directory's metadata
// file; it knows nothing of the network and nothing of files beyond the vfs
// seam.
//
// # Data directory
//
//	<Dir>/
//	    weir-meta.json            topics and the producer-id counter (below)
//	    <topic>-<partition>/      one partition log (see package partlog)
//	        partition.metadata    "version: 1\ntopic_id: <hex>": marks the directory as weir's
//	        00000000000000000000.log .index .timeindex recovery-point ...
//
// weir-meta.json is the embedded single-node metadata store:
//
//	{"version": 1,
//	 "topics": [{"name": "orders", "id": "<32 hex digits>", "partitions": 3,
//	             "configs": {"retention.ms": "86400000"}}],
//	 "nextProducerID": 2000,
//	 "deleting": [{"name": "old", "id": "<32 hex digits>", "partitions": 1}]}
//
// It is replaced atomically (write weir-meta.json.tmp, fsync, rename, fsync
// the directory), so a crash leaves the old or the new version, never a mix.
// Every change writes the metadata first and the directories second, so that
// what a crash leaves behind is always something Open can finish:
//
//	Create  metadata with the topic, then each partition directory (marker, log)
//	        -> a crash leaves a topic with missing partitions: Open creates them.
//	Delete  metadata without the topic and with it under "deleting", then close
//	        the logs, remove the directories, then drop the "deleting" entry
//	        -> a crash leaves the entry: Open removes the directories it names.
//
// Nothing deletes data because something is missing; only an explicit
// instruction (a Delete, recorded under "deleting") removes a partition's
// directory, and only if its partition.metadata names the deleted topic's id.
// A partition directory that no topic owns (the metadata lost it) is set
// aside, renamed <dir>.<topic id>-stray with its data, and logged; empty ones
// are removed. A data directory with partition directories but no
// weir-meta.json is refused (ErrMissingMetadata, naming them): restoring the
// file, or moving the directories away, is the operator's call. Directories
// without the marker are never touched, so a data directory shared with other
// stores never loses their files; and a directory whose marker names another
// topic id is refused (ErrCorruptMetadata) rather than served as the wrong
// topic's data.
package topics
