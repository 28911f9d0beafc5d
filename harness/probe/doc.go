// Package probe measures the machine under a broker: what its disk does for
// sequential and random reads and writes, what an fsync costs, and how
// sequential disk reads compare with random memory reads.
//
// Why: Kafka's design, and weir's, rests on two published comparisons
// (DESIGN.md §8). Kafka's design doc measured 600 MB/s of linear writes
// against 100 KB/s of random writes on six 7200 rpm SATA disks in RAID-5,
// "over 6000X"; Jacobs (ACM Queue, 2009) measured sequential disk reads
// (53.2 M values/s) faster than random memory reads. A log broker that only
// appends and reads forward is built on those numbers. These probes
// reproduce both on the machine at hand, so a report can print this
// machine's figures beside the published ones (References) and a reader can
// see whether the premise holds here: on an NVMe drive random 4 KiB reads are
// far closer to sequential ones than on a 2009 disk array.
//
// # What each point measures
//
// Disk points (section "disk", factors op/pattern/io/block) use one file of
// DiskOptions.FileSize bytes written first with incompressible data, then
// overwritten or read in place, so they measure the device, not block
// allocation. Before every point the file is fdatasync'ed and dropped from
// the page cache (posix_fadvise DONTNEED), so each point starts from the same
// state: nothing dirty, nothing cached.
//
//   - io=direct opens the file with O_DIRECT and page-aligned buffers: every
//     operation reaches the device (its own write cache may still absorb
//     writes, until the point's closing fdatasync flushes it). File systems that refuse O_DIRECT, and memory file systems
//     (tmpfs accepts O_DIRECT since Linux 6.6 but has no device under it),
//     get these points recorded as skipped, with the reason, not as failures.
//   - Every write point, buffered or O_DIRECT, ends with an fdatasync inside
//     its measured window, so its MB/s is what reached the media, not what
//     the page cache or the device's write cache accepted.
//   - io=buffered goes through the page cache, as Kafka does. Buffered writes'
//     MB/s, with their closing fdatasync, is what reached the device, not memcpy speed; their per-operation
//     latencies are the write(2) calls only. Buffered random writes are sorted
//     by writeback before they reach the device, so they are not the
//     device's random-write speed: compare io=direct for that.
//   - Buffered random reads are off by default (DiskOptions.BufferedRandomReads):
//     once a block is cached, re-reading it measures memory. Random reads
//     default to O_DIRECT.
//   - Sequential points make one pass over the file at most; random points
//     read or write at offsets drawn from a PRNG seeded with Seed, at most
//     FileSize bytes. Both stop early after PointDuration.
//   - Random writes inside the probe file land in a small part of the device
//     (on an emulated disk, the file's region: seeks of about a millisecond).
//     DiskOptions.RandomWriteSpan draws the O_DIRECT random write points' offsets over
//     a second file of that size instead, preallocated with fallocate(2) and
//     never written in full, so they spread over that much of the device, as
//     Kafka's design doc's random writes over a whole RAID-5 array did
//     (seeks across the whole stroke, each small write a read-modify-write of data and
//     parity). The random read points and buffered random writes keep to
//     the probe file.
//   - op=append+fdatasync and op=append+fsync append FsyncBlock bytes to a
//     new file and sync after each append, FsyncOps times: the cost of a
//     durable ack without group commit. Their p50/p99/p99.9/max latency is
//     the write plus the sync.
//
// Memory points (section "memory", factors medium/access) count int64 values
// read per second: sequentially and at random indexes from an array of
// MemoryOptions.Bytes (far larger than the CPU caches by default), and
// sequentially (O_DIRECT, 1 MiB reads, values summed) and at random (one
// O_DIRECT 4 KiB read per value) from a file. Every pass checks the values it
// read against what was written, so a probe that read the wrong bytes fails
// rather than reporting a fast wrong figure.
//
// On a virtual machine "the device" is the virtual disk: the hypervisor may
// cache it in host memory, and its rotational flag is whatever the host
// chose. The env package records what the guest sees; the figures say what
// this guest gets.
//
// On an emulated disk (harness/device/diskfs; the runner passes
// DiskOptions.DeviceTime and MemoryOptions.DeviceTime) every disk point also
// reports its figures over the modelled device time the disk charged it
// (device-MB/s, device-ops/s, device-values/s, device-ms: the sum of the
// waits the model imposed, read from the mount before and after the
// point), beside the wall-clock figures. The probes issue one request at a
// time, so that sum is the time the modelled device would have taken; the
// wall clock adds the FUSE round trip and the copy into the backing
// directory, which on a small machine cap sequential writes below an
// array's modelled rate. DeviceReferences sets the published figures
// beside the device-time ones too.
//
// The probes use the operating system directly (os, x/sys/unix), not weir's
// vfs seam: they measure hardware, and fault injection has nothing to say
// about it.
//
// Cancelling ctx stops a probe between operations: it returns the points
// that finished (the interrupted one is dropped) and an error wrapping
// ctx.Err(), and removes its files.
package probe
