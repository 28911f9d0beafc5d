package env

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/weir-broker/weir/harness/result"
)

// Capture describes this machine and the storage under dataDir (which need
// not exist yet: its nearest existing ancestor is described). It never
// fails; fields it cannot determine say "unknown" (Rotational stays nil, RAID
// empty). An empty dataDir leaves the storage fields unknown, for runs
// against a remote broker. Target is left for the caller.
func Capture(dataDir string) result.Env {
	e, _ := CaptureWithWarnings(dataDir)
	return e
}

// CaptureWithWarnings is Capture, also returning why fields are unknown, for
// the runner to log.
func CaptureWithWarnings(dataDir string) (result.Env, []error) {
	var warns []error
	e := result.Env{
		Hostname: Unknown, CPUModel: Unknown, Kernel: Unknown, GoVersion: runtime.Version(),
		CPUs: runtime.NumCPU(), WeirCommit: Unknown, DataDir: dataDir,
		FileSystem: Unknown, MountOptions: Unknown, Device: Unknown, DeviceModel: Unknown, Scheduler: Unknown,
	}
	if h, err := os.Hostname(); err == nil {
		e.Hostname = h
	} else {
		warns = append(warns, fmt.Errorf("env: hostname: %w", err))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := ParseCPUModel(string(b)); m != "" {
			e.CPUModel = m
		} else {
			warns = append(warns, fmt.Errorf("%w: /proc/cpuinfo names no CPU model", ErrFormat))
		}
	} else {
		warns = append(warns, fmt.Errorf("env: %w", err))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		kib, err := ParseMemTotal(string(b))
		if err != nil {
			warns = append(warns, err)
		}
		e.MemoryMiB = kib / 1024
	} else {
		warns = append(warns, fmt.Errorf("env: %w", err))
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		e.Kernel = strings.Join([]string{unix.ByteSliceToString(u.Sysname[:]),
			unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Machine[:])}, " ")
	} else {
		warns = append(warns, fmt.Errorf("env: uname: %w", err))
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		e.WeirCommit = Commit(bi.Settings)
	}

	if dataDir == "" {
		return e, warns
	}
	dir, err := resolveDir(dataDir)
	if err != nil {
		return e, append(warns, err)
	}
	e.DataDir = dir
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return e, append(warns, fmt.Errorf("env: %w", err))
	}
	// /proc/mdstat exists only when the md driver is loaded: no file, no
	// arrays.
	mdstat, err := os.ReadFile("/proc/mdstat")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		warns = append(warns, fmt.Errorf("env: %w", err))
	}
	st, sw := DescribeStorage(string(mountinfo), string(mdstat), os.DirFS("/sys"), dir)
	e.FileSystem, e.MountOptions, e.Device, e.DeviceModel = st.FileSystem, st.MountOptions, st.Device, st.DeviceModel
	e.Rotational, e.Scheduler, e.RAID = st.Rotational, st.Scheduler, st.RAID
	return e, append(warns, sw...)
}

// resolveDir makes dir absolute and symlink-free. A directory that does not
// exist yet is replaced by its nearest existing ancestor, which is where it
// will be created.
func resolveDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("env: data dir %q: %w", dir, err)
	}
	for p := abs; ; p = filepath.Dir(p) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r, nil
		}
		if p == filepath.Dir(p) {
			return "", fmt.Errorf("%w: no existing ancestor of %s", ErrNotFound, abs)
		}
	}
}

// ParseCPUModel returns the CPU model named in the text of /proc/cpuinfo: the
// first "model name" (x86), else "Hardware", "Model", "cpu model" or "cpu"
// (ARM boards, MIPS, POWER). "" when none is present.
func ParseCPUModel(cpuinfo string) string {
	fields := make(map[string]string)
	for _, line := range strings.Split(cpuinfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if _, seen := fields[k]; !seen && v != "" {
			fields[k] = v
		}
	}
	for _, k := range []string{"model name", "Hardware", "Model", "cpu model", "cpu"} {
		if v := fields[k]; v != "" {
			return v
		}
	}
	return ""
}

// ParseMemTotal returns MemTotal, in KiB, from the text of /proc/meminfo.
func ParseMemTotal(meminfo string) (int64, error) {
	for _, line := range strings.Split(meminfo, "\n") {
		v, ok := strings.CutPrefix(line, "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 || (len(f) > 1 && f[1] != "kB") {
			return 0, fmt.Errorf("%w: meminfo line %q", ErrFormat, line)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%w: meminfo has no MemTotal", ErrFormat)
}

// Commit returns the VCS revision a binary was built from, with "-dirty"
// when the tree had uncommitted changes, or "unknown" when the build did not
// record one (go test, go run, -buildvcs=false).
func Commit(settings []debug.BuildSetting) string {
	var rev string
	var modified bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	switch {
	case rev == "":
		return Unknown
	case modified:
		return rev + "-dirty"
	}
	return rev
}
