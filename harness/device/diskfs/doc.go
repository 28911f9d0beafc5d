// Package diskfs is an emulated disk: a FUSE file system (github.com/hanwen/go-fuse/v2) that stores its files in
// a backing directory, like a loopback, and makes every operation take the time a modelled device
// (package model: a 7200 rpm disk, a RAID-5 array of them, an SSD) would give it, in simulated or real time. It
// also cuts the power on command: every write no fsync covered is taken back, file data and directory entries,
// like Jepsen's LazyFS. `weir disk mount` is its command line.
//
// Why: weir's users run experiments on HDDs and RAID arrays, and Kafka's design rests on the gap between
// sequential and random access on them (about 6000x on six 7200 rpm disks in RAID-5). A virtual machine's disk is
// an SSD underneath, whatever its rotational flag says, and this kernel has no device-mapper, md or nbd to slow one
// down (shared/research/devices.md §3). A FUSE file system is what it can run, as root, without fusermount.
//
// # From file operations to device requests
//
//	write(2) ──► page cache (dirty pages) ──writeback / fsync──► allocator ──► device requests ──► model
//	read(2)  ──► page cache hit: free │ miss ───────────────────► allocator ──► device requests ──► model
//
// In detail:
//
//   - Page cache. Buffered writes mark 4 KiB pages dirty and cost nothing; the device pays when they are written
//     back: by fsync/fdatasync (the file's dirty pages, then a journal commit, then a cache flush, all waited for),
//     by age (pages dirty longer than Options.DirtyExpire, 30 s), or when more than DirtyBackgroundBytes (64 MiB)
//     are dirty (oldest files first, in the background: the device queue fills, the writer does not wait). Writers
//     wait only when dirty plus in-flight pages exceed DirtyBytes (256 MiB), as Linux's balance_dirty_pages makes
//     them. So a flush policy that fsyncs every message pays a device round trip per message, one that never
//     fsyncs pays nothing until writeback turns its appends into a few large sequential writes — the real trade-off
//     of weir's flush policies, including what a power cut takes from the second.
//   - Reads of pages written or read recently (dirty, or among the CacheBytes most recently used, 1 GiB) are free:
//     the page cache serves them. Others are read from the device. (The kernel's own page cache above FUSE also
//     serves repeated reads of an open file without asking; both agree that cached reads cost no device time.)
//   - O_DIRECT writes go to the device at once and the caller waits, O_DIRECT reads always read the device, and
//     O_SYNC/O_DSYNC writes are buffered and then fsynced. The backing files are opened without these flags: the
//     model implements them.
//   - Allocation is delayed to writeback, as ext4 and xfs do. Every directory gets a 1 GiB region of the device,
//     spread over the whole device by a golden-ratio sequence (the root at the start, where the disk is fastest),
//     as ext4's Orlov allocator spreads top-level directories; a file's pages go to its directory's region, right
//     after its previous page when that is the region's next free page. So one file appended to is sequential on
//     the device, files in one directory written in turn interleave, and files in different directories (Kafka's
//     partitions) are a long seek apart. Freed pages are not reused (the device is large). fallocate(2) (plain, or
//     FALLOC_FL_KEEP_SIZE) places a range at once in runs of whole regions, from the directory's region on, leaving
//     the backing file sparse: so a preallocated file can span most of a 10 TB array, and the disk probe's random
//     writes over such a file seek as random writes over the whole device do. A journal commit (one
//     4 KiB write per fsync that changed a file's size or allocation, per fdatasync that did, per directory fsync)
//     goes to a 128 MiB region in the middle of the device, where mke2fs puts ext4's journal.
//   - Every member disk of the model has its own head and queue; one mutex orders requests into the model, and
//     in real time each caller then sleeps until its request's completion, so concurrent callers queue as on the
//     real device. Metadata operations (lookup, getattr, readdir, create) cost no device time: only their journal
//     commits do.
//
// Limits: the kernel's FUSE client holds a file's inode lock while its fsync is served, so writes to a file being
// fsynced wait for it (ext4 lets them proceed), which makes ack latency under timed flush policies pessimistic; in
// real time the FUSE round trip and the copy into the backing directory cap throughput (about 150-260 MB/s of
// sequential writes on a 2-core VM), below what the arrays model.
//
// # Losing unsynced writes
//
// Every change reaches the backing directory at once, so readers, listings and other processes see what the page
// cache would. An undo log remembers what no fsync covered (see undo): per file, its size at its last fsync and the
// synced bytes later writes overwrote; per directory, its entries (name → inode) at its last fsync, with files
// unlinked or replaced since kept as hard links in the backing directory's .weirdisk/trash. A cut
// (Mount.LoseUnsynced, the control file, or SIGUSR1 to `weir disk mount`) puts back exactly the synced state:
//
//	file data           as of the file's last fsync/fdatasync (or O_SYNC write)
//	directory entries   as of the directory's last fsync: creates, renames, links, unlinks since are undone
//	directories         mkdir, rmdir and directory renames are durable at once (kept simple on purpose)
//
// This is vfs.MemFS's crash model (a file fsynced in a directory never fsynced is gone; a rename not followed by
// a directory fsync is undone), stricter than ext4 in practice, and LazyFS's "clear-cache" semantics. No torn
// writes: unsynced bytes are dropped whole. After a cut every operation that would change the file system fails
// with EIO (the machine is off) until the mount is unmounted; mount again to power on (Mount.PowerCycle does the
// cut, the unmount and the new mount over the same backing directory). Kill the processes that use the mount
// before cutting, as the durability lab's disk-power and disk-power-cut faults do (harness/durability).
//
// # Control
//
// The mount shows a directory .weirdisk (the backing directory's own .weirdisk holds the trash and is hidden
// behind it) with one file, control ([ControlFile]): reading it prints the device's counters and the unsynced
// state ([Status]: waited_ns is the modelled time callers waited for the device, summed, which the disk probes
// report their figures over as device time); writing "lose-unsynced" cuts the power, "sync" writes back and flushes everything.
package diskfs
