// Package filestore is the coordination store of a single node, the
// default: the tree lives in the data directory, in a JSON snapshot and a
// journal of the changes since, so a broker without ZooKeeper runs the same
// code as a cluster of one.
//
// # One session
//
// The broker is the files' only client, so a Store is one session and there
// is no server to share: Open loads the files and starts a new session, Close
// ends it. A restart is a new session, which is why ephemeral nodes are kept
// in memory only: after a restart they are gone, as they would be after the
// old session's expiry. For the same reason every watch is this session's.
// Two Stores must never be open on one directory at once (nothing stops
// them: the broker's data-directory lock is what keeps a second broker out).
//
// # Durability
//
// The tree is kept as ZooKeeper keeps it: a snapshot, weir-coord.json, and
// a journal beside it, weir-coord.log, of the transactions since. Every
// write that changes the tree (Create, Set, Delete, a Multi that is not only
// checks, ephemeral ones included) appends one record to the journal and
// fsyncs it before it returns, so a write costs what it changes, not what
// the tree holds. Ephemeral writes are journaled too, because zxids must
// grow across restarts: a broker's epoch is the czxid of its (ephemeral)
// registration, and a restarted broker must get a larger one. The session id
// is the zxid Open takes for the new session, journaled before it is used,
// so it grows too.
//
// Open loads the snapshot (a missing one is the empty tree at zxid 0),
// replays the journal's records after the snapshot's zxid, and appends the
// new session's. A directory that has only a snapshot (written by weirs
// before the journal) opens as it is and gets a journal. A torn tail of the
// journal (its last record incomplete or failing its checksum, with no intact
// record after it: a crash during an append, whose request never returned)
// is cut off. Anything else that is wrong is refused (below).
//
// # Group commit
//
// Requests that change the tree queue; the first to find no batch under way
// leads one with every request queued. It applies them in order under the
// store's lock to learn their records, rolls them back, and appends and
// fsyncs the records with the lock released: reads go on meanwhile and see
// only what is durable, and the requests that arrive queue for the next
// batch, so one fsync serves them all. Then it applies them again under the
// lock (only a leader changes the tree, so they do the same), commits, which
// fires their watches, and answers them.
//
// # Compaction
//
// A write that leaves the journal larger than max(Options.CompactBytes,
// default 4 MiB, the snapshot's size) compacts, once its batch is answered:
// it writes the tree as the new snapshot (weir-coord.json.tmp, fsync, rename,
// fsync the directory), then starts a new journal the same way
// (weir-coord.log.tmp holding only the magic line). A crash leaves the old
// snapshot and the old journal, or the new snapshot and the old journal
// (whose records are all at or below its zxid, so skipped), or the new
// snapshot and the new journal; leftover .tmp files are removed at Open.
// Since the snapshot's size bounds it from below, the journal grows by at
// least as many bytes as a compaction writes, and a write's cost stays in
// proportion to its change. A compaction that fails loses nothing (the
// journal still holds everything) and is tried again once the journal has
// grown by another bound. Close compacts too, when the journal holds any
// record or the session's end took a zxid (deleting ephemeral nodes): a
// store closed cleanly is all in its snapshot, so Open has nothing to replay
// and a weir from before the journal reads everything. That costs one
// snapshot per Close, as every write did before the journal.
//
// # Failures
//
// A write whose append fails (the write or the fsync) is cut off again:
// truncated to the journal's size before, and fsynced. Then it applied
// nothing: memory is as before, and the error (wrapping the file system's)
// says so. So does every other request of its batch, whose answers may have
// depended on it. If cutting it off fails too, the outcome is unknown:
// every request of the batch returns coord.ErrConnectionLoss (wrapping the
// file system's error), memory keeps the changes (the journal may hold them),
// and the session reports Connecting until a later request has written a
// snapshot of memory and synced it; until then every request fails with
// coord.ErrConnectionLoss. A caller resolves it as it would with ZooKeeper:
// read back once the session is Connected. A compaction that fails after
// the batch's fsync does not fail the batch: its records are durable.
//
// A request with a done ctx fails before doing anything, with an error that
// wraps both coord.ErrConnectionLoss and ctx's error. A request that has
// started is not interrupted: an append takes an fsync.
//
// # Snapshot format
//
// weir-coord.json, version 1, one node per line, paths sorted:
//
//	{
//	  "version": 1,
//	  "zxid": 7,
//	  "nodes": {
//	    "/": {"czxid":0,"mzxid":0,"version":0,"cversion":2},
//	    "/brokers": {"czxid":2,"mzxid":2,"version":0,"cversion":0},
//	    "/controller_epoch": {"czxid":3,"mzxid":5,"version":1,"cversion":0,"data":"2"},
//	    "/raw": {"czxid":6,"mzxid":6,"version":0,"cversion":0,"data64":"AP8="}
//	  }
//	}
//
// zxid is the last zxid taken. Each node has its stat (DataLength and
// NumChildren follow from the rest) and its data: "data" when the bytes are
// valid UTF-8 (ZooKeeper data in Kafka's layout is JSON text, readable here
// as it is), "data64" (standard base64) otherwise, neither when empty. A
// node's cversion counts the deletion of any ephemeral children it had when
// the file was written, since by the time the file is read again their
// session has ended. Open refuses a file that is not exactly this (unknown
// fields, trailing bytes, a node without its parent, zxids out of order)
// with an error wrapping ErrCorrupt that names the file: it never guesses,
// and never overwrites what it could not read.
//
// # Journal format
//
// weir-coord.log is a magic line, then one record per transaction, each one
// line: the length of its payload and the payload's CRC-32C (Castagnoli),
// each 8 lowercase hex digits followed by a space, then the payload, a JSON
// object without newlines, then a newline:
//
//	weir-coord journal 1\n
//	0000000a d70f34ca {"zxid":8}\n
//	00000034 47f65320 {"zxid":9,"ops":[{"op":"create","path":"/brokers"}]}\n
//	00000046 1d763714 {"zxid":10,"ops":[{"op":"set","path":"/controller_epoch","data":"3"}]}\n
//
// zxid is the zxid the transaction took (a Multi takes one for all its
// operations); zxids grow by one from record to record after the snapshot's.
// ops are its effects on the persistent tree, in order: "create" (a
// persistent node, with its data), "set" (a persistent node's data),
// "delete" (a persistent node), "ephemeral" (an ephemeral node was created:
// its parent's cversion counts the creation and, as in the snapshot, the
// deletion that ends its session). Data is written as in the snapshot:
// "data" for valid UTF-8, "data64" otherwise, neither when empty. A record
// without ops took a zxid and changed nothing persistent: a session's
// creation, or a Set or Delete of an ephemeral node. Replaying a record
// sets stats as the transaction did (a created node gets the zxid as czxid
// and mzxid, a set one as mzxid and one more version, a created or deleted
// one counts in its parent's cversion).
//
// Open refuses, with an error wrapping ErrCorrupt that names the journal and
// the record's offset: a wrong magic line; a damaged record followed by an
// intact one (damage before the tail, never guessed over); a record that
// passes its checksum but is not exactly this; zxids that do not follow the
// snapshot's; a change that cannot apply (a node created twice, or under a
// missing parent, a missing node set or deleted). It changes neither file.
package filestore
