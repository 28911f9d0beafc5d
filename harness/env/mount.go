package env

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrFormat: a /proc or /sys file does not have the expected format. The
// message names the file or line.
var ErrFormat = errors.New("env: malformed input")

// Mount is one line of /proc/self/mountinfo (see proc(5)).
type Mount struct {
	ID           int
	ParentID     int
	Major, Minor uint32 // st_dev of files on this mount; 0:N means no block device
	Root         string // the directory of the file system mounted here ("/" unless a bind mount)
	MountPoint   string // unescaped
	Options      string // per-mount options: rw,relatime,...
	FSType       string // ext4, xfs, tmpfs, overlay, fuse.sshfs, ...
	Source       string // /dev/vda1, tmpfs, overlay, server:/export, ...
	SuperOptions string // per-super-block options: rw,discard,upperdir=...
}

// AllOptions returns the mount options followed by the super-block options
// that add something (a key already given by the mount options is not
// repeated): "rw,relatime,discard,errors=remount-ro". Both matter: noatime is
// per mount, data=ordered or discard per file system.
func (m Mount) AllOptions() string {
	var out []string
	seen := make(map[string]bool)
	for _, list := range []string{m.Options, m.SuperOptions} {
		for _, o := range strings.Split(list, ",") {
			if o == "" {
				continue
			}
			key, _, _ := strings.Cut(o, "=")
			if key == "ro" || key == "rw" {
				key = "rw/ro"
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, o)
		}
	}
	return strings.Join(out, ",")
}

// ParseMountInfo parses the text of /proc/self/mountinfo. Malformed lines are
// skipped; the error (wrapping ErrFormat) names the first one, and the mounts
// that did parse are returned with it.
func ParseMountInfo(s string) ([]Mount, error) {
	var mounts []Mount
	var firstErr error
	for i, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseMountLine(line)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%w: mountinfo line %d: %v", ErrFormat, i+1, err)
			}
			continue
		}
		mounts = append(mounts, m)
	}
	return mounts, firstErr
}

func parseMountLine(line string) (Mount, error) {
	f := strings.Fields(line)
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if len(f) < 7 || sep < 0 || len(f) < sep+3 {
		return Mount{}, fmt.Errorf("want at least 10 fields with a \"-\" separator, got %q", line)
	}
	var m Mount
	var err error
	if m.ID, err = strconv.Atoi(f[0]); err != nil {
		return Mount{}, fmt.Errorf("mount id %q", f[0])
	}
	if m.ParentID, err = strconv.Atoi(f[1]); err != nil {
		return Mount{}, fmt.Errorf("parent id %q", f[1])
	}
	if m.Major, m.Minor, err = parseDevNumber(f[2]); err != nil {
		return Mount{}, err
	}
	m.Root = unescapeMount(f[3])
	m.MountPoint = unescapeMount(f[4])
	m.Options = f[5]
	m.FSType = f[sep+1]
	m.Source = unescapeMount(f[sep+2])
	if len(f) > sep+3 {
		m.SuperOptions = f[sep+3]
	}
	if !strings.HasPrefix(m.MountPoint, "/") {
		return Mount{}, fmt.Errorf("mount point %q is not absolute", m.MountPoint)
	}
	return m, nil
}

// parseDevNumber parses "major:minor".
func parseDevNumber(s string) (major, minor uint32, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), ":")
	ma, err1 := strconv.ParseUint(a, 10, 32)
	mi, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("device number %q is not major:minor", s)
	}
	return uint32(ma), uint32(mi), nil
}

// unescapeMount undoes the octal escapes the kernel writes for space, tab,
// newline and backslash in mountinfo paths (\040, \011, \012, \134).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// FindMount returns the mount that holds path: the one whose mount point is
// the longest path-prefix of path. Of several mounts at the same point, the
// last listed wins, because it hides the earlier ones. path must be absolute,
// clean and free of symlinks (filepath.EvalSymlinks); ok is false only when
// no mount matches (no "/" in the list).
func FindMount(mounts []Mount, path string) (m Mount, ok bool) {
	best := -1
	for i, c := range mounts {
		if !underMountPoint(path, c.MountPoint) {
			continue
		}
		if best < 0 || len(c.MountPoint) >= len(mounts[best].MountPoint) {
			best = i
		}
	}
	if best < 0 {
		return Mount{}, false
	}
	return mounts[best], true
}

func underMountPoint(path, mp string) bool {
	switch {
	case mp == "/":
		return strings.HasPrefix(path, "/")
	case path == mp:
		return true
	default:
		return strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/")
	}
}
