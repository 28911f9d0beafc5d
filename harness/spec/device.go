package spec

import (
	"github.com/weir-broker/weir/harness/device/model"
)

// Device runs a spec on an emulated disk (harness/device): the runner mounts a diskfs file system of Profile for
// the run's data directory (the brokers' data and the probes' files) and unmounts it after the run, also on
// Ctrl-C. Mounting needs root and /dev/fuse; without them the run is skipped, with the reason in its report.
//
//	device:
//	  profile: raid5-6xhdd-7200   # weir disk profiles; LAYOUT-NxDISK; or a .yaml of numbers
//	  backing: /var/tmp/weir-disk # where the files are stored (default: a directory of the run's, removed after)
//	  time: real                  # real (default: operations sleep) or simulated (accounted only)
//	  dirty_background_bytes: 64MiB # the modelled page cache's writeback thresholds (weir disk mount's flags)
//	  dirty_bytes: 256MiB
type Device struct {
	Profile string `yaml:"profile"`
	Backing string `yaml:"backing"`
	Time    string `yaml:"time"`
	// DirtyBackgroundBytes and DirtyBytes are diskfs.Options' (0: its
	// defaults, 64 MiB and 256 MiB).
	DirtyBackgroundBytes ByteSize `yaml:"dirty_background_bytes"`
	DirtyBytes           ByteSize `yaml:"dirty_bytes"`
}

// Device time modes.
const (
	DeviceTimeReal      = "real"
	DeviceTimeSimulated = "simulated"
)

func (s *Spec) validateDevice(p *problems) {
	d := s.Device
	if d == nil {
		return
	}
	if !s.Target.Managed() {
		p.add("device", "an emulated disk holds the brokers the runner starts: not for a bootstrap target")
	}
	if d.Profile == "" {
		p.add("device.profile", "required: a profile of weir disk profiles, LAYOUT-NxDISK or a .yaml file")
	} else if _, err := model.ParseProfile(d.Profile); err != nil {
		p.add("device.profile", "%v", err)
	}
	if d.DirtyBackgroundBytes < 0 || d.DirtyBytes < 0 || (d.DirtyBytes > 0 && d.DirtyBytes < d.DirtyBackgroundBytes) {
		p.add("device.dirty_bytes", "%d and dirty_background_bytes %d: want >= 0, dirty_bytes at least dirty_background_bytes", d.DirtyBytes, d.DirtyBackgroundBytes)
	}
	switch d.Time {
	case "":
		d.Time = DeviceTimeReal
	case DeviceTimeReal, DeviceTimeSimulated:
	default:
		p.add("device.time", "%q: %s or %s", d.Time, DeviceTimeReal, DeviceTimeSimulated)
	}
}
