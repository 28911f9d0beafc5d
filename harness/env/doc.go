// Package env captures the environment an experiment ran in: CPU, memory,
// kernel, Go version, weir's commit, and what the data directory sits on
// (file system, mount options, block device, its model, whether it rotates,
// its I/O scheduler and any RAID level).
//
// Why: a throughput figure means nothing without the hardware under it. The
// same broker does 600 MB/s on one disk and 60 MB/s on another, and fsync
// costs 0.05 ms on an NVMe drive with a power-loss-protected cache and 10 ms
// on a 7200 rpm disk. DESIGN.md §8 requires every run to say where it ran so
// that someone else can repeat it, or see why their figures differ.
//
// Capture never fails: a field it cannot determine reads "unknown" (or nil
// for Rotational), and CaptureWithWarnings says why. Containers, VMs and
// unusual stacks (overlay, LVM on md RAID, btrfs) hide parts of the picture;
// a run must still start.
//
// # How the data directory is traced to a device
//
//  1. The directory is made absolute and its symlinks resolved (a missing
//     directory is described by its nearest existing ancestor).
//  2. /proc/self/mountinfo: the mount whose mount point is the longest
//     path-prefix of the directory (the last one listed wins a tie, since a
//     later mount hides an earlier one at the same point) gives the file
//     system type, the mount and super-block options, the source and the
//     device number major:minor.
//  3. The device number is looked up under /sys/block: whole disks are
//     /sys/block/X (with X/dev = "major:minor"), partitions are
//     /sys/block/X/Y. A partition is walked up to its disk X, because model,
//     rotational and scheduler belong to the disk (X/device/model,
//     X/queue/rotational, X/queue/scheduler with the active one in brackets).
//  4. Stacked devices are followed through X/slaves: an md array reports
//     X/md/level ("raid5", confirmed or supplied by /proc/mdstat), a
//     device-mapper device its name (X/dm/name, shown as /dev/mapper/NAME).
//     Members decide the model and rotational: one rotating member makes the
//     array rotational.
//  5. Device number 0 has no block device: tmpfs and ramfs are memory, overlay
//     is followed to its upper directory's mount when that is visible, btrfs
//     (whose super block has an anonymous device number) by its source
//     /dev/NAME.
//
// The parsers are pure functions over strings and an fs.FS rooted at /sys,
// so tests feed them fixture trees (testdata/) for a virtio disk, an NVMe
// partition, md RAID-5 over SATA disks, LVM over md, tmpfs and overlay.
//
// A VM's virtio disk reports what the hypervisor chooses (often rotational=1
// whatever the host has) and no model; the capture says what the guest sees,
// which is all a guest can know.
package env
