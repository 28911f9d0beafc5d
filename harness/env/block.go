package env

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// ErrNotFound: sysfs has no block device with the number or name asked for.
var ErrNotFound = errors.New("env: not found")

// maxStackDepth bounds the walk through slaves (dm over md over partitions is
// depth 3), so a cyclic or corrupt sysfs cannot loop.
const maxStackDepth = 8

// BlockDevice is a block device as sysfs describes it.
type BlockDevice struct {
	Name string // vda, nvme0n1p1, md0, dm-0
	Path string // /dev/vda, /dev/nvme0n1p1, /dev/mapper/vg0-data
	// Disk is the whole device a partition belongs to (nvme0n1 for
	// nvme0n1p1), Name itself for a whole device.
	Disk       string
	Model      string // "unknown" when sysfs does not say
	Rotational *bool  // nil when unknown
	Scheduler  string // the active I/O scheduler of Disk, "unknown" when sysfs does not say
	RAID       string // md level (raid5, raid1, linear...) of this device or one under it; "" when none
}

// ParseScheduler returns the active scheduler from the text of
// /sys/block/X/queue/scheduler ("none [mq-deadline] kyber" -> "mq-deadline").
// A file listing a single scheduler without brackets names it; "" means the
// text names none.
func ParseScheduler(s string) string {
	if i := strings.IndexByte(s, '['); i >= 0 {
		if j := strings.IndexByte(s[i:], ']'); j > 0 {
			return s[i+1 : i+j]
		}
	}
	if f := strings.Fields(s); len(f) == 1 && !strings.Contains(s, "[") {
		return f[0]
	}
	return ""
}

// MDArray is one md array in /proc/mdstat.
type MDArray struct {
	Name    string   // md0
	State   string   // active, inactive
	Level   string   // raid5, raid1, linear...; "" for an inactive array
	Members []string // member devices as listed (sdb1, sdc1...), without role and flags
}

// ParseMDStat parses /proc/mdstat into its arrays, by name. Lines that are
// not array lines (Personalities, block counts, resync progress) are ignored,
// so any text parses.
func ParseMDStat(s string) map[string]MDArray {
	arrays := make(map[string]MDArray)
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(line, " : ")
		name = strings.TrimSpace(name)
		if !ok || !strings.HasPrefix(name, "md") || strings.ContainsAny(name, " \t") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		a := MDArray{Name: name, State: f[0]}
		for _, tok := range f[1:] {
			switch {
			case strings.HasPrefix(tok, "("): // (auto-read-only), (read-only)
			case strings.Contains(tok, "["): // sdb1[0], sdc1[2](F)
				a.Members = append(a.Members, tok[:strings.IndexByte(tok, '[')])
			case a.Level == "" && len(a.Members) == 0:
				a.Level = tok
			}
		}
		arrays[name] = a
	}
	return arrays
}

// sysBlock looks up block devices in a sysfs tree (an fs.FS rooted at /sys:
// os.DirFS("/sys") or a testdata directory).
type sysBlock struct {
	fsys  fs.FS
	md    map[string]MDArray // from /proc/mdstat; may be empty
	warns []error
}

func (s *sysBlock) read(name string) (string, bool) {
	b, err := fs.ReadFile(s.fsys, name)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// disks lists /sys/block: every whole device (disks, md, dm, loop, nvme
// namespaces). Partitions are subdirectories of their disk there.
func (s *sysBlock) disks() []string {
	ents, err := fs.ReadDir(s.fsys, "block")
	if err != nil {
		s.warns = append(s.warns, fmt.Errorf("%w: sysfs block directory: %w", ErrNotFound, err))
		return nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// partitions lists the partitions of disk: subdirectories named after it
// (sda1, nvme0n1p1, mmcblk0p2) that have a dev file.
func (s *sysBlock) partitions(disk string) []string {
	ents, err := fs.ReadDir(s.fsys, path.Join("block", disk))
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if n == disk || !strings.HasPrefix(n, disk) {
			continue
		}
		if _, ok := s.read(path.Join("block", disk, n, "dev")); ok {
			names = append(names, n)
		}
	}
	return names
}

// byNumber finds the device with number major:minor: a disk (part "") or a
// partition of disk.
func (s *sysBlock) byNumber(major, minor uint32) (disk, part string, err error) {
	want := fmt.Sprintf("%d:%d", major, minor)
	disks := s.disks()
	for _, d := range disks {
		if v, _ := s.read(path.Join("block", d, "dev")); v == want {
			return d, "", nil
		}
	}
	for _, d := range disks {
		for _, p := range s.partitions(d) {
			if v, _ := s.read(path.Join("block", d, p, "dev")); v == want {
				return d, p, nil
			}
		}
	}
	return "", "", fmt.Errorf("%w: block device %s in sysfs", ErrNotFound, want)
}

// byName finds a device by its kernel name (sda2, md0, dm-0) or by a /dev
// path (/dev/sda2, /dev/mapper/vg0-data).
func (s *sysBlock) byName(name string) (disk, part string, err error) {
	if dm, ok := strings.CutPrefix(name, "/dev/mapper/"); ok {
		for _, d := range s.disks() {
			if v, _ := s.read(path.Join("block", d, "dm", "name")); v == dm {
				return d, "", nil
			}
		}
		return "", "", fmt.Errorf("%w: device-mapper device %q in sysfs", ErrNotFound, dm)
	}
	name = strings.TrimPrefix(name, "/dev/")
	disks := s.disks()
	if slices.Contains(disks, name) {
		return name, "", nil
	}
	for _, d := range disks {
		if slices.Contains(s.partitions(d), name) {
			return d, name, nil
		}
	}
	return "", "", fmt.Errorf("%w: block device %q in sysfs", ErrNotFound, name)
}

// describe describes disk, or its partition part when part is not "".
func (s *sysBlock) describe(disk, part string, depth int) BlockDevice {
	name := disk
	if part != "" {
		name = part
	}
	d := BlockDevice{Name: name, Path: "/dev/" + name, Disk: disk, Model: "unknown", Scheduler: "unknown"}
	dir := path.Join("block", disk)
	if v, ok := s.read(path.Join(dir, "queue", "scheduler")); ok {
		if sch := ParseScheduler(v); sch != "" {
			d.Scheduler = sch
		}
	}
	if v, ok := s.read(path.Join(dir, "queue", "rotational")); ok {
		switch v {
		case "0":
			d.Rotational = new(false)
		case "1":
			d.Rotational = new(true)
		}
	}

	if depth >= maxStackDepth {
		s.warns = append(s.warns, fmt.Errorf("%w: device stack under %s deeper than %d", ErrFormat, disk, maxStackDepth))
		return d
	}
	level, isMD := s.read(path.Join(dir, "md", "level"))
	arr, inMDStat := s.md[disk]
	if isMD || inMDStat {
		if level == "" {
			level = arr.Level
		}
		if level == "" {
			level = "md"
		}
		d.RAID = level
		members := s.slaves(disk)
		if len(members) == 0 {
			members = arr.Members
		}
		d.Model = fmt.Sprintf("md %s over %s", level, s.membersSummary(members, &d, depth))
		return d
	}
	if dmName, ok := s.read(path.Join(dir, "dm", "name")); ok {
		if dmName != "" {
			d.Path = "/dev/mapper/" + dmName
		}
		members := s.slaves(disk)
		d.Model = fmt.Sprintf("device-mapper %s over %s", dmName, s.membersSummary(members, &d, depth))
		return d
	}
	d.Model = s.model(disk)
	return d
}

// slaves lists the devices a stacked device is built on.
func (s *sysBlock) slaves(disk string) []string {
	ents, err := fs.ReadDir(s.fsys, path.Join("block", disk, "slaves"))
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// membersSummary describes the members of a stacked device d
// ("sdb1 sdc1 sdd1: 3 × ST4000DM004-2CV1") and folds their rotational flag
// and RAID level into d: one rotating member makes d rotational.
func (s *sysBlock) membersSummary(members []string, d *BlockDevice, depth int) string {
	if len(members) == 0 {
		return "unknown members"
	}
	var models []string
	counts := make(map[string]int)
	anyRot, allKnown := false, true
	for _, m := range members {
		md, mp, err := s.byName(m)
		if err != nil {
			s.warns = append(s.warns, err)
			allKnown = false
			continue
		}
		sub := s.describe(md, mp, depth+1)
		if counts[sub.Model] == 0 {
			models = append(models, sub.Model)
		}
		counts[sub.Model]++
		if d.RAID == "" {
			d.RAID = sub.RAID
		}
		switch {
		case sub.Rotational == nil:
			allKnown = false
		case *sub.Rotational:
			anyRot = true
		}
	}
	switch {
	case anyRot:
		d.Rotational = new(true)
	case allKnown:
		d.Rotational = new(false)
	}
	parts := make([]string, len(models))
	for i, m := range models {
		parts[i] = m
		if counts[m] > 1 {
			parts[i] = strconv.Itoa(counts[m]) + " × " + m
		}
	}
	return strings.Join(members, " ") + " (" + strings.Join(parts, ", ") + ")"
}

// model names a whole device: its model string, or what kind of device it is
// when it has none (virtio, loop, zram).
func (s *sysBlock) model(disk string) string {
	dir := path.Join("block", disk)
	model, _ := s.read(path.Join(dir, "device", "model"))
	vendor, _ := s.read(path.Join(dir, "device", "vendor"))
	// SCSI-attached SATA disks all say "ATA"; a hex vendor id (virtio's
	// 0x1af4) is not a name either.
	informative := vendor != "" && vendor != "ATA" && !strings.HasPrefix(vendor, "0x")
	switch {
	case model != "" && informative && !strings.HasPrefix(model, vendor):
		return vendor + " " + model
	case model != "":
		return model
	}
	uevent, _ := s.read(path.Join(dir, "device", "uevent"))
	driver := ueventValue(uevent, "DRIVER")
	switch {
	case driver != "" && vendor != "":
		return driver + " (vendor " + vendor + ")"
	case driver != "":
		return driver
	case vendor != "":
		return vendor
	}
	if backing, ok := s.read(path.Join(dir, "loop", "backing_file")); ok {
		return "loop device over " + backing
	}
	if strings.HasPrefix(disk, "zram") {
		return "zram (compressed memory)"
	}
	return "unknown"
}

func ueventValue(uevent, key string) string {
	for _, line := range strings.Split(uevent, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
