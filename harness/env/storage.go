package env

import (
	"fmt"
	"io/fs"
	"strings"
)

// Unknown is what a field says when it could not be determined.
const Unknown = "unknown"

// Storage is what a directory's data sits on.
type Storage struct {
	Path         string // the directory described
	MountPoint   string
	FileSystem   string // ext4, xfs, tmpfs, overlay, ...
	MountOptions string // mount then super-block options (Mount.AllOptions)
	Device       string // /dev/vda, /dev/mapper/vg0-data, tmpfs, ...
	DeviceModel  string
	Rotational   *bool // nil when unknown
	Scheduler    string
	RAID         string // "" when none
}

// DescribeStorage traces path to the device under it (see the package doc),
// from the text of /proc/self/mountinfo and /proc/mdstat (may be empty) and a
// sysfs tree rooted at /sys. path must be absolute, clean and free of
// symlinks. It always returns a Storage, with "unknown" where it could not
// tell; the errors say why and are warnings, not failures.
func DescribeStorage(mountinfo, mdstat string, sysfs fs.FS, path string) (Storage, []error) {
	st := Storage{Path: path, MountPoint: Unknown, FileSystem: Unknown, MountOptions: Unknown,
		Device: Unknown, DeviceModel: Unknown, Scheduler: Unknown}
	var warns []error
	mounts, err := ParseMountInfo(mountinfo)
	if err != nil {
		warns = append(warns, err)
	}
	m, ok := FindMount(mounts, path)
	if !ok {
		return st, append(warns, fmt.Errorf("%w: no mount holds %s", ErrNotFound, path))
	}
	st.MountPoint, st.FileSystem, st.MountOptions = m.MountPoint, m.FSType, m.AllOptions()
	sb := &sysBlock{fsys: sysfs, md: ParseMDStat(mdstat)}
	describeDevice(&st, mounts, m, sb, 0)
	return st, append(warns, sb.warns...)
}

// describeDevice fills st's device fields for the file system mounted at m.
func describeDevice(st *Storage, mounts []Mount, m Mount, sb *sysBlock, depth int) {
	setBlock := func(disk, part string) {
		d := sb.describe(disk, part, 0)
		st.Device, st.DeviceModel, st.Rotational, st.Scheduler, st.RAID = d.Path, d.Model, d.Rotational, d.Scheduler, d.RAID
	}
	switch {
	case m.Major != 0:
		disk, part, err := sb.byNumber(m.Major, m.Minor)
		if err != nil {
			sb.warns = append(sb.warns, err)
			st.Device = fmt.Sprintf("%s (%d:%d)", m.Source, m.Major, m.Minor)
			return
		}
		setBlock(disk, part)
	case m.FSType == "tmpfs" || m.FSType == "ramfs":
		st.Device = m.Source
		st.DeviceModel = "memory (" + m.FSType + ": no block device)"
		st.Rotational = new(false)
		st.Scheduler = "none"
	case m.FSType == "overlay":
		upper := superOption(m.SuperOptions, "upperdir")
		um, ok := FindMount(mounts, upper)
		if upper == "" || !ok || um.ID == m.ID || um.FSType == "overlay" || depth > 0 {
			st.Device = m.Source
			st.DeviceModel = "unknown (overlay upper dir not visible in this mount namespace)"
			if upper == "" {
				st.DeviceModel = "unknown (overlay without an upper dir)"
			}
			return
		}
		inner := Storage{Device: Unknown, DeviceModel: Unknown, Scheduler: Unknown}
		describeDevice(&inner, mounts, um, sb, depth+1)
		st.Device, st.Rotational, st.Scheduler, st.RAID = inner.Device, inner.Rotational, inner.Scheduler, inner.RAID
		st.DeviceModel = fmt.Sprintf("%s (overlay upper dir on %s at %s)", inner.DeviceModel, um.FSType, um.MountPoint)
	case strings.HasPrefix(m.Source, "/dev/"):
		// btrfs and others report an anonymous device number; the source
		// names the real device.
		disk, part, err := sb.byName(m.Source)
		if err != nil {
			sb.warns = append(sb.warns, err)
			st.Device = m.Source
			return
		}
		setBlock(disk, part)
	default:
		st.Device = m.Source
		st.DeviceModel = "unknown (" + m.FSType + ": not a local block device)"
	}
}

// superOption returns the value of key=value in a comma-separated option
// list, "" when absent.
func superOption(opts, key string) string {
	for _, o := range strings.Split(opts, ",") {
		if v, ok := strings.CutPrefix(o, key+"="); ok {
			return v
		}
	}
	return ""
}
