// Package durability is the durability lab: it crashes a broker under
// load and counts what the crash cost, so the flush and ack trade-offs of
// DESIGN.md §5 are measured rather than asserted. Users research exactly
// that (DESIGN.md §1, job 3): what does each flush policy and ack mode
// cost in throughput and latency, and how much acknowledged data does a
// process crash or a power cut really lose?
//
// # One run
//
// [Run] starts a fresh broker, creates the topics with the workload's
// flush policy (weir.flush.policy) and durable-ack mode (weir.durable.acks),
// and starts franz-go producers. Every record is entered in its producer's
// ledger before it is handed to the client (topic, partition, size,
// checksum, send time) and resolved by its promise (acknowledged at an
// offset, or failed). A fault strikes at a seeded random moment of
// [warmup, warmup+duration) after the first acknowledgement; the producers
// stop and their clients close, which fails every record still pending, so
// the ledgers are final. The broker restarts; recovery is timed from the
// restart until every partition answers a fetch. A few records per
// partition are then produced (acks=all) to see where offsets continue,
// and every partition is read back from its log start to its high
// watermark with raw Fetch requests, checking each batch's CRC-32C and
// each record's own checksum (franz-go's consumer checks neither).
//
// # Faults
//
// kill sends SIGKILL to a `weir broker` subprocess and starts a new one on
// the same data directory. The process dies; the kernel and its page cache
// do not, so everything the broker appended survives, whatever the flush
// policy: a kill may lose no acknowledged record.
//
// power cuts the power of an in-process broker (transport/broker) whose
// file system is a vfs.PowerFS (a vfs.MemFS behind a lock), and starts a
// new broker on the crash clone, which holds only what was fsynced
// (core/vfs's crash model: file contents as of their last fsync,
// directory entries as of their directory's last fsync), or with torn
// writes a random prefix of each file's unsynced tail. The cut takes the lock's write side, so it lands
// between file operations, never inside one: an fsync that reported
// success happened before the clone and is in it, and every operation
// after the cut fails with ErrPowerCut, so the old broker can neither make
// anything durable nor acknowledge an append it writes afterwards. An
// fsync can be given a simulated duration (Config.SyncLatency), paid
// before the lock is taken, so a cut can strike an fsync in flight, which
// then fails.
//
// disk-power cuts the power of a real `weir broker` process whose data
// directory is an emulated disk (harness/device/diskfs, Config.Device):
// SIGKILL of the process, then the disk loses every write no fsync
// covered (diskfs.Mount.PowerCycle: file data as of its last fsync,
// directory entries as of their directory's last fsync, unsynced bytes
// dropped whole, no torn writes), is unmounted and mounted again over the
// same backing directory (the machine powers on: a new clock, an empty
// page cache), and a new process starts on it. Unlike power, the broker is
// the real binary with its real file system calls, its fsyncs cost what
// the modelled device charges (in real or simulated time), and the page
// cache that loses the writes is the emulated disk's, below the kernel's.
// The same bounds apply; the age slack takes the disk's longest fsync
// (device time) in place of the in-process run's measured timer lateness.
// Needs root and /dev/fuse (diskfs.CanMount).
//
// Acknowledgements can still arrive after the cut, for appends written
// before it whose answers were on their way; they count as acknowledged.
// That is sound for every check below: with durable acks such an answer
// means its fsync succeeded before the cut; without, a flush policy's
// bound holds at the moment each append returns, whenever the client
// hears of it.
//
// # What is checked
//
// [Outcome] holds the findings and [Outcome.Verify] judges them:
//
//   - acknowledged records lost: acknowledged, not served after the
//     restart (per partition, with their value bytes and the age of the
//     oldest: how long before the fault it was acknowledged);
//   - corrupt records served: batches failing their CRC or not decoding,
//     records failing their checksum, unknown, or unlike what was
//     produced; must be zero;
//   - duplicates: a record served twice; must be zero;
//   - offsets: from the log start to the high watermark every offset is
//     served once (no gap, no reuse), every acknowledged record that
//     survived is served at the offset it was acknowledged at, and the
//     records produced after recovery land right after the recovered end.
//     After a power cut without durable acks the offsets of lost records
//     are given to new records: that is the loss, counted once, not reuse;
//   - unacknowledged records that survived: legal (the broker appended
//     them and the answer was lost), counted for the report.
//
// The loss allowed depends on the setting ([ExpectedBound]):
//
//	setting                              acknowledged records a fault may lose
//	kill, any policy                     none (the page cache survives)
//	power, durable acks, any policy      none (the ack waited for its fsync)
//	power, every-batch                   none
//	power, messages:n=N                  fewer than N per partition
//	power, bytes:n=N                     fewer than N bytes per partition (checked on value bytes,
//	                                     which are fewer than the batch bytes the policy counts)
//	power, interval:ms=D                 only records acknowledged less than D + slack before the cut
//	power, adaptive:max=M                only records acknowledged less than M + slack before the cut
//	power, never or the default          unbounded, but still no corruption, duplicates or offset reuse
//	disk-power                           as power
//
// The slack of an age bound is measured where it can be: the run's longest
// fsync, and the worst lateness of a timer in the broker's process before
// the cut (a watch timer set every 2 ms beside the logs' flush timers:
// when producers at full speed share the process and two cores with the
// broker, timers fire tens of milliseconds late, occasionally over a
// hundred). On top comes DefaultAgeSlack (25 ms, the spec's
// durability.age_slack) for the flushing goroutine's own run. The policy
// only promises to ask for the fsync by the time the oldest unflushed
// append is D old; flushpolicy.Bound says the log's scheduling comes on top.
//
// # Figures
//
// [Outcome.Metrics] gives a result.Rep's metrics: the counts above, the
// recovery time, when the fault struck, and the figures before the fault
// over the window from the warm-up's end (counted from the first
// acknowledgement, so the burst of records that piled up while the clients
// connected stays out) to the fault: produce-msgs/s and produce-MB/s
// (records acknowledged in it) and ack-p50/p99/max-us (their send to
// promise, queueing in the client included). [Summarize] turns a
// section of runs into a loss section (per setting: loss median, maximum,
// share of runs with loss, oldest lost, beside the median throughput and
// ack p99), and [WriteReport] adds to a report the plots report.Write
// cannot draw: loss window against throughput, per fault, one series per
// ack mode, each point labelled with its flush policy.
//
// Power runs measure an in-memory file system, whose fsyncs are free
// unless SyncLatency says otherwise; their throughput is that of the
// broker and the clients, not of a disk. Kill runs measure the disk under
// the data directory.
//
// # The cluster fault lab
//
// [RunCluster] asks the same of a cluster: a fresh one per run
// (harness/clusterproc: ZooKeeper and `weir broker` processes, in network
// namespaces of their own with netns networking, with fault proxies on
// the links between them when a fault needs them, with a tmpfs data
// directory each when one may be filled), topics with the workload's
// replication factor, min.insync.replicas and unclean election, the same
// producers and ledgers, a consumer reading along, and a schedule of
// faults ([Plan]: seeded moments, one after the other; [ClusterFaults]:
// process, network, ZooKeeper, disk and power faults) injected while the
// load runs, each healed after its hold. The cluster is sampled throughout
// (leaders and ISRs from Metadata, replica lag and ISR counters from the
// brokers' /metrics). After the last fault the producers stop, the
// cluster heals (every partition led with a full ISR), records are
// produced after healing, everything is read back from the leaders and
// checked as above, and then, with nothing written any more, every
// replica's log is compared with the others batch by batch, byte for
// byte, before the cluster stops.
//
// A power cut strikes one broker, the highest id, which a run whose
// schedule has one starts with `weir broker --power-cut-fs`: it runs on a
// vfs.PowerFS whose MemFS starts as a copy of its data directory and
// whose mirror is the directory itself, so the directory holds what the
// page cache would at every moment (every other fault, a SIGKILL, a full
// disk, the comparison of replicas, finds it as on any broker); SIGUSR1
// cuts the power, writes the crash clone (torn) over the directory and
// ends the process at once, and the broker is restarted on what
// survived after the hold. The one cut broker loses what it did not
// fsync; with acks=all its in-sync replicas still hold every
// acknowledged record, so the bound is unchanged.
//
// With Device set every broker runs on an emulated disk of its own
// (clusterproc.Config.Disk, backed under DiskBacking), and disk-power-cut
// cuts the power of any of them as disk-power does one broker's
// (clusterproc.Cluster.DiskPowerCut), restarted after the hold. Mixed then
// draws disk-power-cut and leaves disk-full out (an emulated disk is not
// filled). ClusterBound's "one power loss at a time" counts until the cut
// broker is back in sync, not until its process restarts: a broker
// restarted before ZooKeeper expired its old session waits that session
// out before it registers (node's register), so cuts of two brokers a
// hold of 0.5 s apart, with a 2 s session, overlap. Under flush policy
// never two of three replicas then lose everything; a lab run of two such
// overlapping cuts (acks=all, RF 3, min.insync.replicas 2) lost
// acknowledged records, outside the bound. Analysed (README, The cluster
// fault lab): the third replica held them, but the cut leader came back
// with an empty log while the controller was the other cut broker, so no
// election moved its leadership; it led again at the same epoch and the
// third replica truncated to it. TestClusterDiskPowerCut spaces its cuts
// 5 s apart with a 3 s hold and loses nothing.
//
// Besides the checks above, a cluster run fails when a consumer was
// served a record the final log does not hold at that offset (it read
// above the high watermark), or when replicas differ after healing.
// Duplicates are legal only without idempotence (acks=1, whose producers
// retry blindly). Lost records are charged to the first fault that struck
// after they were acknowledged, and reported per fault. [ClusterBound]:
// acks=all with clean elections may lose nothing; acks=1 and unclean
// election are measured, not bounded.
package durability
