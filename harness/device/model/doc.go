// Package model is a deterministic timing model of storage devices: a 7200 rpm hard disk, arrays of such disks
// (JBOD, RAID-0, RAID-5) and an SSD for contrast. A [Device] is a value: [Device.Serve] answers "how long does this
// request (read, write or cache flush of a byte range) take, arriving at time now, from this state" and returns the
// new state, so the same sequence of requests always gives the same times. Nothing here sleeps, reads a clock or
// does I/O; package diskfs puts the model under a FUSE file system, and [Clock] is the thin loop that serves a
// Device in simulated (virtual) or real (sleeping) time.
//
// # Hard disk
//
// A request's service time on one disk is
//
//		command overhead + seek(distance) + rotational wait + length / zone rate
//
//	  - Seek: the three-point fit of a data sheet's track-to-track, average and full-stroke seek times, refitted to the
//	    vendors' definition of "average" (uniform random endpoints, so triangular distances): with x the distance as a
//	    fraction of the stroke, F = full − track and V = average − track,
//	    seek = track + A·x + B·√x, B = 5V − 5F/3, A = F − B. It is √-shaped at short distances like Ruemmler and
//	    Wilkes' model ("An introduction to disk drive modeling", IEEE Computer 27(3), 1994) and reproduces the data
//	    sheet's average exactly (TestSeekAverage). The fit and its derivation: shared/research/devices.md §1.1; the
//	    form follows Seagate/cortx-motr desim/chs.c.
//	  - Rotation: the platter turns continuously from time 0, so the wait is the angle from where the head lands to
//	    where the request's first byte is, which averages half a revolution (4.17 ms at 7200 rpm) over random requests
//	    and is zero for a transfer that continues the previous one back to back. A cache-off write that follows the
//	    previous one after the command overhead misses its sector and waits almost a whole turn, as real disks do
//	    ("no single client can commit more than 120 transactions/second" at 7200 rpm: Greg Smith, PostgreSQL 9.0 High
//	    Performance).
//	  - Zones: the disk is cut into equal-cylinder zones whose sustained rate falls linearly from the outer diameter
//	    (offset 0) to the inner one; a track holds rate × revolution bytes, so the cylinder count follows from the
//	    capacity. Track and head switches are inside the sustained rate, as data sheets measure it.
//	  - Write cache (on by default, as drives ship): a write is acknowledged after the command overhead once there is
//	    room in the cache; the media writes cached data first in, first out, behind the reads and writes before it.
//	    A flush (fsync's FLUSH CACHE) completes when the media has written everything cached. With the cache off a
//	    write completes when it is on the media, and a flush costs only its overhead. Simplification: the cache does
//	    not reorder writes (real drives schedule queued writes by rotational position, which helps random writes by
//	    a small factor), and reads wait behind queued media writes.
//	  - Read-ahead: a read that starts where the previous read ended is served from the disk's read-ahead buffer at
//	    the media rate, with no seek or rotational wait.
//
// # Arrays
//
// Each member disk has its own head, cache and queue (its state in the Device value); a request to the array is
// split into member commands (contiguous pieces on one member merged into one command), which run in parallel,
// and the request completes when the last one does.
//
//   - jbod: members concatenated; a request goes to the member holding its range.
//   - raid0: stripe unit K; chunk c lives on member c mod N.
//   - raid5: N members, N−1 of data per stripe, left-symmetric parity (stripe s has parity on member N−1−(s mod N),
//     data chunk i on member (parity+1+i) mod N, as Linux md's default). A write covering a whole stripe writes its
//     N chunks with no reads (a full-stripe write). A smaller write reads first, then writes: read-modify-write
//     (old data of the touched chunks and old parity, then new data and new parity: 4 I/Os for a write within one
//     chunk, TestRAID5SmallWrite) or reconstruct-write (the untouched data chunks, then the touched ones and parity),
//     whichever reads less, as md chooses. The writes start when all reads are done; on the same disk a write to
//     the sector just read waits about a revolution, which gives the "two disk revolutions" per small write of
//     array manuals. A flush flushes every member. No array-level (battery-backed) cache is modelled.
//
// # SSD
//
// One queue: overhead-free latency per command (read or write) plus length / rate, and a flush latency. Enough to
// show that random and sequential differ little, which is the contrast the HDD profiles exist to show.
//
// # Profiles and their sources
//
// [Profiles] are the named ones (`weir disk profiles` lists them with their numbers); [ParseProfile] reads a name,
// an array name of the form LAYOUT-NxDISK (raid5-4xhdd-7200, raid0-2xssd, jbod-3xhdd-7200), or a YAML file of
// numbers ([Profile]).
//
//	hdd-7200 rotation        7200 rpm: 8.33 ms a turn, 4.17 ms average wait (Hitachi Travelstar 7K320 spec table 8;
//	                         Seagate Barracuda XT data sheet "4.16 ms")
//	hdd-7200 seek            0.8 / 8.5 / 16 ms track / average / full stroke (Seagate Barracuda ES.2 ST31000640SS,
//	                         the struct in Seagate/cortx-motr desim; HGST Ultrastar 7K4000 spec §4.4.1.1 gives 8.2
//	                         ms average)
//	hdd-7200 transfer        138 MB/s at the outer diameter (Seagate Barracuda XT 2 TB data sheet), inner = outer /
//	                         2.1 (the OD/ID ratio of Hitachi Deskstar 7K500 spec table 10, 64.8 → 31.0 MB/s) = 66
//	                         MB/s; whole-disk average ≈ 102 MB/s against 108 measured (Maximum PC, Barracuda XT)
//	hdd-7200 capacity, cache 2 TB, 64 MB write-back cache on (Barracuda XT; makers' figures assume the cache on)
//	hdd-7200 overhead        0.1 ms per command [our assumption; R&W's 1994 disk had 2.2 ms]
//	random 4 KiB at QD1      8.5 + 4.17 + 0.03 + 0.1 ≈ 12.8 ms ≈ 78 IOPS (the OSTEP sum; devices.md §1)
//	raid5 stripe unit        64 KiB (Gateway 840 manual: 64–256 KiB; btrfs raid56 stripe_len 65536)
//	raid5 small write        4 I/Os (HP Surestore Disk Array 12h/FC60 manual p.56)
//	ssd                      SATA flash: 550 / 520 MB/s sequential read / write, 10,000 / 42,000 IOPS random 4 KiB
//	                         read / write at QD1 (Samsung 860 EVO data sheet) [figures from the data sheet as
//	                         remembered, not a stored copy]; flush 0.5 ms [our assumption]
//
// The Kafka design doc's claim this model is built to reproduce: six 7200 rpm SATA disks in RAID-5 write about
// 600 MB/s sequentially and about 100 KB/s randomly, "a difference of over 6000X" (kafka docs/design.html §4.2).
package model
