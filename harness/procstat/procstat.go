// Package procstat reads what Linux's /proc says of a process the harness
// started: CPU time, open file descriptors, resident memory and its peak,
// threads, and the open-file limit it runs under. The scale experiment
// (package harness/scale) reads a broker subprocess's figures this way,
// from outside, so that measuring costs the broker nothing and works
// against any broker binary.
//
// The parsers take the files' text, so tests feed them fixed inputs.
package procstat

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ErrFormat: a /proc file did not read as expected.
var ErrFormat = errors.New("procstat: unexpected /proc format")

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const ClockTicks = 100

// CPUSeconds is the process's user+system CPU time so far.
func CPUSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("procstat: %w", err)
	}
	return ParseStatCPU(string(data))
}

// ParseStatCPU reads utime+stime (fields 14 and 15) of a /proc/<pid>/stat
// line, in seconds.
func ParseStatCPU(stat string) (float64, error) {
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after the last ')'.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: stat without a command name", ErrFormat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: stat has %d fields", ErrFormat, len(f)+2)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("%w: stat: %w", ErrFormat, err)
	}
	return float64(utime+stime) / ClockTicks, nil
}

// OpenFDs counts the process's open file descriptors (the entries of
// /proc/<pid>/fd): files, sockets, pipes, epoll and the rest, each once.
func OpenFDs(pid int) (int, error) {
	d, err := os.Open(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("procstat: %w", err)
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(4096)
		n += len(names)
		switch {
		case errors.Is(err, io.EOF):
			return n, nil
		case err != nil: // the process exited while listed
			return n, fmt.Errorf("procstat: %w", err)
		}
	}
}

// Memory is a process's memory from /proc/<pid>/status.
type Memory struct {
	RSS     int64 // VmRSS, bytes resident now
	HWM     int64 // VmHWM, the peak of RSS over the process's life
	Threads int   // OS threads
}

// ReadMemory reads the process's /proc/<pid>/status.
func ReadMemory(pid int) (Memory, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, fmt.Errorf("procstat: %w", err)
	}
	return ParseStatus(string(data))
}

// ParseStatus reads VmRSS, VmHWM (kB) and Threads from the text of
// /proc/<pid>/status; each must be present.
func ParseStatus(status string) (Memory, error) {
	var m Memory
	found := 0
	for line := range strings.SplitSeq(status, "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		switch name {
		case "VmRSS", "VmHWM", "Threads":
			if err != nil {
				return m, fmt.Errorf("%w: status: %s: %w", ErrFormat, name, err)
			}
			found++
		}
		switch name {
		case "VmRSS":
			m.RSS = n << 10
		case "VmHWM":
			m.HWM = n << 10
		case "Threads":
			m.Threads = int(n)
		}
	}
	if found != 3 {
		return m, fmt.Errorf("%w: status lacks VmRSS, VmHWM or Threads", ErrFormat)
	}
	return m, nil
}

// Unlimited is a limit's value when /proc says "unlimited".
const Unlimited = -1

// Limit is a soft and a hard resource limit.
type Limit struct{ Soft, Hard int64 }

// String is "soft S, hard H" ("unlimited" for Unlimited).
func (l Limit) String() string {
	f := func(v int64) string {
		if v == Unlimited {
			return "unlimited"
		}
		return strconv.FormatInt(v, 10)
	}
	return "soft " + f(l.Soft) + ", hard " + f(l.Hard)
}

// OpenFilesLimit reads the process's RLIMIT_NOFILE (`ulimit -n`) from
// /proc/<pid>/limits: what it was started with, or raised itself to (Go
// raises its soft limit to the hard one at start-up).
func OpenFilesLimit(pid int) (Limit, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return Limit{}, fmt.Errorf("procstat: %w", err)
	}
	return ParseOpenFilesLimit(string(data))
}

// ParseOpenFilesLimit reads the "Max open files" row of /proc/<pid>/limits.
func ParseOpenFilesLimit(limits string) (Limit, error) {
	for line := range strings.SplitSeq(limits, "\n") {
		rest, ok := strings.CutPrefix(line, "Max open files")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return Limit{}, fmt.Errorf("%w: limits: %q", ErrFormat, line)
		}
		var l Limit
		for i, p := range []*int64{&l.Soft, &l.Hard} {
			if f[i] == "unlimited" {
				*p = Unlimited
				continue
			}
			v, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return Limit{}, fmt.Errorf("%w: limits: %q: %w", ErrFormat, line, err)
			}
			*p = v
		}
		return l, nil
	}
	return Limit{}, fmt.Errorf("%w: limits has no Max open files row", ErrFormat)
}
