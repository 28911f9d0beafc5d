// Package device is weir's emulated storage: disks that behave like 7200 rpm hard disks, RAID arrays of them or an
// SSD, on any machine, so experiments about sequential versus random access, fsync cost and power cuts can run
// where that hardware is missing (the build machines' virtual disks, and CI).
//
//	model    a deterministic timing model: seek curve, rotation, zoned transfer, write cache, JBOD / RAID-0 /
//	         RAID-5 arrays, an SSD; named profiles with data-sheet defaults; simulated or real time
//	diskfs   a FUSE file system over a backing directory that charges each operation the model's time, with a
//	         modelled page cache, an allocator and a lose-unsynced (power cut) mode
//
// `weir disk mount|unmount|profiles` (cmd/weir) is the command line.
package device
