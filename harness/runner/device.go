package runner

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/weir-broker/weir/harness/device/diskfs"
	"github.com/weir-broker/weir/harness/device/model"
	"github.com/weir-broker/weir/harness/durability"
	"github.com/weir-broker/weir/harness/env"
	"github.com/weir-broker/weir/harness/probe"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/harness/stats"
)

// canMount is diskfs.CanMount; tests replace it to see the skip.
var canMount = diskfs.CanMount

// deviceMount is the spec's emulated disk, mounted for the run.
type deviceMount struct {
	m       *diskfs.Mount
	dir     string // the run's directory holding mnt/ (and backing/ unless the spec names one)
	profile model.Profile
	real    bool
	// backingRoot is the directory the mount was made under (not on the
	// mount): the disk-power faults' own disks keep their backing
	// directories in a directory of their own there.
	backingRoot string
}

// backing makes a new directory for the backing directories of the disks
// a durability repetition mounts itself (disk-power, disk-power-cut),
// beside the run's disk rather than on it; the caller removes it.
func (dm *deviceMount) backing() (string, error) {
	dir, err := os.MkdirTemp(dm.backingRoot, "weir-disks-")
	if err != nil {
		return "", fmt.Errorf("runner: device: %w", err)
	}
	return dir, nil
}

// durabilityDevice is the emulated disk of a durability repetition's own
// (disk-power: the broker's; a cluster: each broker's), of the spec's
// profile and time, backed under backing.
func (dm *deviceMount) durabilityDevice(backing string) *durability.Device {
	return &durability.Device{Profile: dm.profile, RealTime: dm.real, Backing: backing}
}

// mountDevice mounts the spec's emulated disk in a new directory under dataRoot: the run's data then goes to its
// mountpoint. A machine that cannot mount FUSE returns the reason as skip (and no error): the run is skipped.
func mountDevice(d *spec.Device, dataRoot string, logger *slog.Logger) (dm *deviceMount, skip string, err error) {
	if why := canMount(); why != nil {
		return nil, fmt.Sprintf("the spec runs on an emulated disk (device: %s), which cannot be mounted here: %v", d.Profile, why), nil
	}
	p, err := model.ParseProfile(d.Profile)
	if err != nil {
		return nil, "", fmt.Errorf("runner: device: %w", err)
	}
	dir, err := os.MkdirTemp(dataRoot, "weir-device-")
	if err != nil {
		return nil, "", fmt.Errorf("runner: device: %w", err)
	}
	backing := d.Backing
	if backing == "" {
		backing = filepath.Join(dir, "backing")
	}
	real := d.Time != spec.DeviceTimeSimulated
	m, err := diskfs.New(filepath.Join(dir, "mnt"), diskfs.Options{Profile: p, Backing: backing, RealTime: real, Logger: logger,
		DirtyBackgroundBytes: int64(d.DirtyBackgroundBytes), DirtyBytes: int64(d.DirtyBytes)})
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("runner: device: %w", err)
	}
	return &deviceMount{m: m, dir: dir, profile: p, real: real}, "", nil
}

// describe is the run environment's EmulatedDevice.
func (dm *deviceMount) describe() string {
	mode := "simulated time"
	if dm.real {
		mode = "real time"
	}
	return fmt.Sprintf("%s: %s; %s", dm.profile.Name, dm.profile.Summary(), mode)
}

// unmount unmounts the disk and removes the run's directory (with the backing files, unless the spec named the
// backing directory).
func (dm *deviceMount) unmount() error {
	err := dm.m.Unmount()
	if err == nil {
		err = os.RemoveAll(dm.dir)
	}
	return err
}

// judgeDisk gives the run's environment the disk probe's random 4 KiB O_DIRECT read latency and what it makes the
// device (env.Judge), when the run probed it.
func judgeDisk(run *result.Run) {
	for _, sec := range run.Sections {
		if sec.Name != probe.SectionDisk {
			continue
		}
		for i := range sec.Points {
			p := &sec.Points[i]
			op, _ := p.Factor(probe.FactorOp)
			pat, _ := p.Factor(probe.FactorPattern)
			io, _ := p.Factor(probe.FactorIO)
			block, _ := p.Factor(probe.FactorBlock)
			if op != probe.OpRead || pat != probe.PatternRand || io != probe.IODirect || block != "4K" {
				continue
			}
			if s, err := stats.Summarize(p.Values(result.LatP50)); err == nil {
				env.Judge(&run.Env, s.Median)
			}
		}
	}
}
