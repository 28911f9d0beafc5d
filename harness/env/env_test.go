package env

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"testing/fstest"
)

// The testdata trees are cut-down copies of what these machines show: only
// the files the capture reads. Each scenario directory holds mountinfo,
// optionally mdstat, and sys/ (a tree rooted like /sys).

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ""
		}
		t.Fatal(err)
	}
	return string(b)
}

func TestDescribeStorage(t *testing.T) {
	yes, no := new(true), new(false)
	tests := []struct {
		name      string
		scenario  string // testdata directory
		mountinfo string // file in it; default "mountinfo"
		path      string
		want      Storage
	}{
		{
			name: "virtio disk", scenario: "virtio", path: "/work/data",
			want: Storage{MountPoint: "/", FileSystem: "ext4",
				MountOptions: "rw,relatime,discard,resv_strict,resuid=65534,resgid=65534",
				Device:       "/dev/vda", DeviceModel: "virtio_blk (vendor 0x1af4)", Rotational: yes, Scheduler: "mq-deadline"},
		},
		{
			name: "nvme partition", scenario: "nvme", path: "/var/lib/weir/data",
			want: Storage{MountPoint: "/var/lib/weir", FileSystem: "xfs",
				MountOptions: "rw,noatime,attr2,inode64,logbufs=8,logbsize=32k,noquota",
				Device:       "/dev/nvme0n1p3", DeviceModel: "Samsung SSD 980 PRO 1TB", Rotational: no, Scheduler: "none"},
		},
		{
			// The path shares a prefix with /var/lib/weir but is not under it.
			name: "path-component prefix", scenario: "nvme", path: "/var/lib/weirdo",
			want: Storage{MountPoint: "/", FileSystem: "ext4", MountOptions: "rw,relatime,errors=remount-ro",
				Device: "/dev/nvme0n1p2", DeviceModel: "Samsung SSD 980 PRO 1TB", Rotational: no, Scheduler: "none"},
		},
		{
			name: "btrfs by source", scenario: "nvme", path: "/home/alice",
			want: Storage{MountPoint: "/home", FileSystem: "btrfs",
				MountOptions: "rw,relatime,ssd,space_cache=v2,subvolid=256,subvol=/@home",
				Device:       "/dev/nvme0n1p4", DeviceModel: "Samsung SSD 980 PRO 1TB", Rotational: no, Scheduler: "none"},
		},
		{
			name: "escaped mount point, vendor prefix", scenario: "nvme", path: "/mnt/usb backup/x",
			want: Storage{MountPoint: "/mnt/usb backup", FileSystem: "ext4", MountOptions: "rw,nosuid,nodev,relatime",
				Device: "/dev/sda1", DeviceModel: "WD Elements 25A2", Rotational: yes, Scheduler: "bfq"},
		},
		{
			name: "md raid5 over SATA HDDs", scenario: "mdraid5", path: "/srv/kafka/data",
			want: Storage{MountPoint: "/srv/kafka", FileSystem: "xfs",
				MountOptions: "rw,noatime,attr2,inode64,logbufs=8,logbsize=32k,sunit=1024,swidth=2048,noquota",
				Device:       "/dev/md0", DeviceModel: "md raid5 over sdb1 sdc1 sdd1 (3 × ST4000DM004-2CV1)",
				Rotational: yes, Scheduler: "none", RAID: "raid5"},
		},
		{
			name: "lvm over md raid5", scenario: "mdraid5", path: "/srv/logs",
			want: Storage{MountPoint: "/srv/logs", FileSystem: "ext4", MountOptions: "rw,relatime,stripe=256",
				Device:      "/dev/mapper/vg0-logs",
				DeviceModel: "device-mapper vg0-logs over md0 (md raid5 over sdb1 sdc1 sdd1 (3 × ST4000DM004-2CV1))",
				Rotational:  yes, Scheduler: "none", RAID: "raid5"},
		},
		{
			name: "md level from mdstat only", scenario: "mdraid5", path: "/srv/mirror",
			want: Storage{MountPoint: "/srv/mirror", FileSystem: "ext4", MountOptions: "rw,relatime",
				Device: "/dev/md1", DeviceModel: "md raid1 over sdc2 sdb2 (2 × ST4000DM004-2CV1)",
				Rotational: yes, Scheduler: "none", RAID: "raid1"},
		},
		{
			name: "SSD next to the array", scenario: "mdraid5", path: "/etc",
			want: Storage{MountPoint: "/", FileSystem: "ext4", MountOptions: "rw,relatime,errors=remount-ro",
				Device: "/dev/sda2", DeviceModel: "Samsung SSD 870", Rotational: no, Scheduler: "mq-deadline"},
		},
		{
			name: "tmpfs, the later of two mounts wins", scenario: "tmpfs", path: "/dev/shm/weir",
			want: Storage{MountPoint: "/dev/shm", FileSystem: "tmpfs", MountOptions: "rw,relatime,size=24683652k,inode64",
				Device: "tmpfs", DeviceModel: "memory (tmpfs: no block device)", Rotational: no, Scheduler: "none"},
		},
		{
			name: "overlay seen from the host", scenario: "overlay", path: "/var/lib/docker/overlay2/3f1c/merged/data",
			want: Storage{MountPoint: "/var/lib/docker/overlay2/3f1c/merged", FileSystem: "overlay",
				MountOptions: "rw,relatime,lowerdir=/var/lib/docker/overlay2/l/ABC:/var/lib/docker/overlay2/l/DEF," +
					"upperdir=/var/lib/docker/overlay2/3f1c/diff,workdir=/var/lib/docker/overlay2/3f1c/work,nouserxattr",
				Device: "/dev/sda2", DeviceModel: "INTEL SSDSC2KB480G8 (overlay upper dir on ext4 at /)",
				Rotational: no, Scheduler: "mq-deadline"},
		},
		{
			name: "overlay seen from inside the container", scenario: "overlay", mountinfo: "mountinfo-container", path: "/data",
			want: Storage{MountPoint: "/", FileSystem: "overlay",
				MountOptions: "rw,relatime,lowerdir=/var/lib/docker/overlay2/l/ABC:/var/lib/docker/overlay2/l/DEF," +
					"upperdir=/var/lib/docker/overlay2/3f1c/diff,workdir=/var/lib/docker/overlay2/3f1c/work,nouserxattr",
				Device: "overlay", DeviceModel: "unknown (overlay upper dir not visible in this mount namespace)",
				Scheduler: "unknown"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mi := tt.mountinfo
			if mi == "" {
				mi = "mountinfo"
			}
			mountinfo := readTestdata(t, filepath.Join(tt.scenario, mi))
			mdstat := readTestdata(t, filepath.Join(tt.scenario, "mdstat"))
			sysfs := os.DirFS(filepath.Join("testdata", tt.scenario, "sys"))
			got, warns := DescribeStorage(mountinfo, mdstat, sysfs, tt.path)
			for _, w := range warns {
				t.Logf("warning: %v", w)
			}
			tt.want.Path = tt.path
			if !sameStorage(got, tt.want) {
				t.Errorf("DescribeStorage(%s) =\n %s\nwant\n %s", tt.path, showStorage(got), showStorage(tt.want))
			}
		})
	}
}

func sameStorage(a, b Storage) bool {
	ra, rb := a.Rotational, b.Rotational
	a.Rotational, b.Rotational = nil, nil
	if a != b || (ra == nil) != (rb == nil) {
		return false
	}
	return ra == nil || *ra == *rb
}

func showStorage(s Storage) string {
	rot := "nil"
	if s.Rotational != nil {
		rot = map[bool]string{true: "true", false: "false"}[*s.Rotational]
	}
	return strings.Join([]string{"mount=" + s.MountPoint, "fs=" + s.FileSystem, "opts=" + s.MountOptions,
		"dev=" + s.Device, "model=" + s.DeviceModel, "rot=" + rot, "sched=" + s.Scheduler, "raid=" + s.RAID}, "\n ")
}

func TestDescribeStorageDegrades(t *testing.T) {
	// No mountinfo at all: everything unknown, one warning, no panic.
	st, warns := DescribeStorage("", "", fstest.MapFS{}, "/data")
	if st.FileSystem != Unknown || st.Device != Unknown || st.Rotational != nil || len(warns) == 0 {
		t.Errorf("empty mountinfo: got %+v, warnings %v", st, warns)
	}
	// A mount whose device sysfs does not know: file system known, device
	// named by its source and number, a not-found warning.
	mi := "1 0 8:3 / / rw - ext4 /dev/sdz3 rw\nthis line is garbage\n"
	st, warns = DescribeStorage(mi, "", fstest.MapFS{}, "/data")
	if st.FileSystem != "ext4" || st.Device != "/dev/sdz3 (8:3)" || st.DeviceModel != Unknown {
		t.Errorf("unknown device: got %+v", st)
	}
	var notFound, format bool
	for _, w := range warns {
		notFound = notFound || errors.Is(w, ErrNotFound)
		format = format || errors.Is(w, ErrFormat)
	}
	if !notFound || !format {
		t.Errorf("warnings %v: want ErrNotFound (device) and ErrFormat (garbage line)", warns)
	}
	// A network file system has no local device.
	st, _ = DescribeStorage("1 0 0:50 / /mnt rw - nfs4 srv:/export rw,vers=4.2\n", "", fstest.MapFS{}, "/mnt/x")
	if st.Device != "srv:/export" || st.DeviceModel != "unknown (nfs4: not a local block device)" {
		t.Errorf("nfs: got %+v", st)
	}
}

func TestParseMountInfo(t *testing.T) {
	mounts, err := ParseMountInfo(readTestdata(t, "nvme/mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 5 {
		t.Fatalf("got %d mounts, want 5", len(mounts))
	}
	m := mounts[3]
	if m.ID != 28 || m.ParentID != 25 || m.Major != 0 || m.Minor != 35 || m.Root != "/@home" ||
		m.MountPoint != "/home" || m.FSType != "btrfs" || m.Source != "/dev/nvme0n1p4" {
		t.Errorf("btrfs line parsed as %+v", m)
	}
	if mounts[4].MountPoint != "/mnt/usb backup" {
		t.Errorf("escaped mount point = %q", mounts[4].MountPoint)
	}
	for _, bad := range []string{
		"1 0 8:1 / / rw",                       // no separator
		"1 0 8:1 / / rw - ext4",                // no source
		"x 0 8:1 / / rw - ext4 /dev/sda1 rw",   // id
		"1 0 8-1 / / rw - ext4 /dev/sda1 rw",   // device number
		"1 0 8:1 / rel rw - ext4 /dev/sda1 rw", // relative mount point
	} {
		if ms, err := ParseMountInfo(bad); !errors.Is(err, ErrFormat) || len(ms) != 0 {
			t.Errorf("ParseMountInfo(%q) = %v, %v; want no mounts and ErrFormat", bad, ms, err)
		}
	}
}

func TestParseScheduler(t *testing.T) {
	for in, want := range map[string]string{
		"none [mq-deadline] kyber bfq\n": "mq-deadline",
		"[none] mq-deadline":             "none",
		"none":                           "none",
		"none mq-deadline":               "",
		"":                               "",
		"[broken":                        "",
	} {
		if got := ParseScheduler(in); got != want {
			t.Errorf("ParseScheduler(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseMDStat(t *testing.T) {
	arrays := ParseMDStat(readTestdata(t, "mdraid5/mdstat") + "md127 : inactive sde[0](S)\n")
	md0 := arrays["md0"]
	if md0.State != "active" || md0.Level != "raid5" || strings.Join(md0.Members, ",") != "sdd1,sdc1,sdb1" {
		t.Errorf("md0 = %+v", md0)
	}
	md1 := arrays["md1"]
	if md1.Level != "raid1" || strings.Join(md1.Members, ",") != "sdc2,sdb2" {
		t.Errorf("md1 (auto-read-only) = %+v", md1)
	}
	if md127 := arrays["md127"]; md127.State != "inactive" || md127.Level != "" || len(md127.Members) != 1 {
		t.Errorf("md127 (inactive) = %+v", md127)
	}
	if len(arrays) != 3 {
		t.Errorf("got %d arrays, want 3: %v", len(arrays), arrays)
	}
}

func TestParseCPUAndMemory(t *testing.T) {
	if got := ParseCPUModel(readTestdata(t, "cpuinfo-x86")); got != "AMD EPYC 7763 64-Core Processor" {
		t.Errorf("x86 model = %q", got)
	}
	if got := ParseCPUModel(readTestdata(t, "cpuinfo-rpi")); got != "BCM2835" {
		t.Errorf("Raspberry Pi model = %q", got)
	}
	if got := ParseCPUModel("processor : 0\n"); got != "" {
		t.Errorf("no model = %q", got)
	}
	kib, err := ParseMemTotal(readTestdata(t, "meminfo"))
	if err != nil || kib != 24683652 {
		t.Errorf("ParseMemTotal = %d, %v", kib, err)
	}
	for _, bad := range []string{"", "MemFree: 1 kB", "MemTotal: lots kB", "MemTotal: 12 MB", "MemTotal:"} {
		if _, err := ParseMemTotal(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseMemTotal(%q) error = %v, want ErrFormat", bad, err)
		}
	}
}

func TestCommit(t *testing.T) {
	s := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tt := range []struct {
		in   []debug.BuildSetting
		want string
	}{
		{nil, "unknown"},
		{s("vcs", "git", "vcs.revision", "abc123", "vcs.modified", "false"), "abc123"},
		{s("vcs.revision", "abc123", "vcs.modified", "true"), "abc123-dirty"},
		{s("vcs.modified", "true"), "unknown"},
	} {
		if got := Commit(tt.in); got != tt.want {
			t.Errorf("Commit(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestCaptureHere runs the real capture on this machine.
func TestCaptureHere(t *testing.T) {
	e, warns := CaptureWithWarnings(os.TempDir())
	for _, w := range warns {
		t.Logf("warning: %v", w)
	}
	t.Logf("%+v", e)
	if e.CPUModel == "" || e.CPUModel == Unknown {
		t.Errorf("CPUModel = %q", e.CPUModel)
	}
	if e.CPUs <= 0 || e.MemoryMiB <= 0 {
		t.Errorf("CPUs = %d, MemoryMiB = %d", e.CPUs, e.MemoryMiB)
	}
	if e.Kernel == "" || e.Kernel == Unknown || e.GoVersion == "" {
		t.Errorf("Kernel = %q, GoVersion = %q", e.Kernel, e.GoVersion)
	}
	if e.FileSystem == "" || e.FileSystem == Unknown {
		t.Errorf("FileSystem of %s = %q", os.TempDir(), e.FileSystem)
	}
	if e.WeirCommit == "" {
		t.Error("WeirCommit is empty; want a revision or \"unknown\"")
	}

	// A data directory that does not exist yet is described by its parent.
	missing := filepath.Join(t.TempDir(), "not", "yet")
	e2 := Capture(missing)
	if e2.FileSystem != e.FileSystem || !strings.HasPrefix(missing, e2.DataDir) {
		t.Errorf("missing dir: FileSystem %q (want %q), DataDir %q", e2.FileSystem, e.FileSystem, e2.DataDir)
	}
	if e3 := Capture(""); e3.FileSystem != Unknown || e3.CPUs != e.CPUs {
		t.Errorf("empty dataDir: %+v", e3)
	}
}

func FuzzParseMountInfo(f *testing.F) {
	for _, s := range []string{"", "1 0 8:1 / / rw - ext4 /dev/sda1 rw", `1 0 8:1 / /a\040b\ rw - x y`,
		"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\x00garbage - - -"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mounts, _ := ParseMountInfo(s)
		for _, m := range mounts {
			if !strings.HasPrefix(m.MountPoint, "/") || m.FSType == "" {
				t.Fatalf("accepted %+v", m)
			}
		}
		if m, ok := FindMount(mounts, "/a/b"); ok && !underMountPoint("/a/b", m.MountPoint) {
			t.Fatalf("FindMount picked %q for /a/b", m.MountPoint)
		}
		ParseMDStat(s)
		ParseScheduler(s)
	})
}
