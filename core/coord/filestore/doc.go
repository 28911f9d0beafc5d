// Package filestore is the coordination store of a single node, the
// default: the tree lives in one JSON file in the data directory, so a
// broker without ZooKeeper runs the same code as a cluster of one.
//
// # One session
//
// The broker is the file's only client, so a Store is one session and there
// is no server to share: Open loads the file and starts a new session, Close
// ends it. A restart is a new session, which is why ephemeral nodes are kept
// in memory only: after a restart they are gone, as they would be after the
// old session's expiry. For the same reason every watch is this session's.
// Two Stores must never be open on one directory at once (nothing stops
// them: the broker's data-directory lock is what keeps a second broker out).
//
// # Durability
//
// Every write that changes the tree (Create, Set, Delete, a Multi that is not
// only checks, ephemeral ones included) replaces the file before it returns:
// write weir-coord.json.tmp, fsync it, rename it over weir-coord.json, fsync
// the directory. A crash at any point leaves the old file or the new one,
// never a mix; a leftover .tmp is removed at Open. Ephemeral writes change
// the file too, because the file records the zxid, and zxids must grow
// across restarts: a broker's epoch is the czxid of its (ephemeral)
// registration, and a restarted broker must get a larger one. The session
// id is the zxid Open takes for the new session, so it grows too.
//
// A write whose file replacement fails before the rename applies nothing:
// memory is as before, the old file stands, and the error (wrapping the file
// system's) says so. A failed directory fsync after the rename is different:
// the new file is in place but perhaps not durable, so the write's outcome is
// unknown. It returns coord.ErrConnectionLoss (wrapping the file system's
// error), memory keeps the change (it matches the file in place), and the
// session reports Connecting until a later request has written the whole
// file again and synced it; until then every request fails with
// coord.ErrConnectionLoss. A caller resolves it as it would with ZooKeeper:
// read back once the session is Connected.
//
// A request with a done ctx fails before doing anything, with an error that
// wraps both coord.ErrConnectionLoss and ctx's error. A request that has
// started is not interrupted: a file replacement takes milliseconds.
//
// # File format
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
package filestore
