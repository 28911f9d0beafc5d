// Package vfs is the file-system seam: every disk operation of the log goes through an [FS], so tests can run the
// same code against memory, fail any operation, or cut the power at any point.
//
// # Implementations
//
//   - [Default] is the operating system's file system. Writable files are opened with O_APPEND; its files implement
//     [OSFiler], so the network layer can sendfile straight from a segment.
//   - [MemFS] ([NewMem]) keeps everything in memory. It is safe for concurrent use and models POSIX where the log
//     depends on it: a handle keeps working after its name is removed or renamed, Rename replaces atomically, ReadAt
//     past the end returns io.EOF. Above all it can produce a crash clone ([MemFS.CrashClone],
//     [MemFS.CrashCloneTorn]): the file system a machine would find after a power cut now.
//   - [PowerFS] ([NewPower]) is a MemFS whose power can be cut ([PowerFS.Cut]): the cut lands between operations,
//     returns the crash clone, and fails every operation after it with [ErrPowerCut]. With a mirror
//     ([PowerConfig.Mirror]) it makes every change on a real directory too, which then always holds what the page
//     cache would, so a process running on it can also be killed, stopped, or inspected from outside.
//   - Package errorfs wraps any FS and fails the k-th operation of chosen kinds (a bad sector, a full disk).
//
// [CopyTree] copies a directory tree between two FSs, durably: it loads a real directory into a MemFS (all of it
// durable there) and writes a crash clone back over the directory it came from.
//
// # Files
//
// A [File] is an append-only writer plus a random-access reader: Write always appends at the current end of the
// file, so after Truncate the next Write continues at the new end. The log has one writer and many readers, so
// ReadAt may run concurrently with Write and with other ReadAt calls on every implementation; a reader sees either
// none or all of a concurrent Write's bytes in the range it reads (MemFS), or whatever the kernel's page cache holds
// (OS), which for the log's readers — who never read past the end they were told about — is the same thing.
//
// # Crash model
//
// What survives a power cut in a MemFS crash clone:
//
//	directory entries   as of the directory's last SyncDir          (create/rename/remove without it are undone)
//	file contents       as of the file's last File.Sync              (later writes and truncations are undone)
//	directories         from MkdirAll are durable at once            (kept simple on purpose)
//
// So a file created, written and synced but whose directory was never synced is gone; a file created and its
// directory synced but never itself synced is empty; a rename not followed by SyncDir leaves the old name. This is
// stricter than most real file systems (ext4 in data=ordered mode usually persists a fsynced file's new directory
// entry too, and often flushes data within seconds without any fsync), which is the point: code that survives
// MemFS crashes relies only on what POSIX promises. [MemFS.CrashCloneTorn] adds torn writes: a file whose unsynced
// bytes only extend its synced contents keeps a random-length prefix of them, as after a partial page-cache flush.
//
// Edge cases of the model: a file renamed between two directories that were synced at different times can survive
// under both names (the clone shares one node, like a hard link); a directory reachable twice that way is cloned
// only at its first path in sorted order.
//
// # Test loops
//
// "Fail op k": run the workload once through errorfs.Wrap with an errorfs.FailAt whose K is -1 to count its N
// operations, then for k in 0..N-1 run it again on a fresh MemFS with K = k and check that the error is reported
// (not swallowed) and that reopening the directory recovers:
//
//	probe := &errorfs.FailAt{K: -1}
//	run(errorfs.Wrap(vfs.NewMem(), probe))
//	for k := range probe.Count() {
//		mem := vfs.NewMem()
//		err := run(errorfs.Wrap(mem, &errorfs.FailAt{K: k}))
//		// err must wrap errorfs.ErrInjected; reopen mem (or mem.CrashClone()) and verify.
//	}
//
// "Crash after write k": count the writes the same way (FailAt{K: -1, Ops: []errorfs.Op{errorfs.OpWrite}}), then
// for each k run the workload with an injector that, at write k, takes clone := mem.CrashClone() (or
// CrashCloneTorn with a seeded rng) and returns nil; after the run, reopen the log on clone and check that every
// acknowledged-as-durable record is there and nothing is corrupt.
package vfs
