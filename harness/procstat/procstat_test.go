package procstat

import (
	"errors"
	"os"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a ')' of its own.
	stat := "4242 (weir (x) y) S 1 4242 4242 0 -1 4194560 2000 0 0 0 250 75 0 0 20 0 12 0 100 0 0"
	got, err := ParseStatCPU(stat)
	if err != nil || got != 3.25 {
		t.Fatalf("ParseStatCPU = %v, %v; want 3.25", got, err)
	}
	for _, bad := range []string{"", "4242 weir S", "4242 (weir) S 1 2", "4242 (weir) S 1 4242 4242 0 -1 4194560 2000 0 0 0 x 75"} {
		if _, err := ParseStatCPU(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseStatCPU(%q) = %v, want ErrFormat", bad, err)
		}
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tweir\nVmPeak:\t 900000 kB\nVmHWM:\t  524288 kB\nVmRSS:\t  262144 kB\nThreads:\t17\n"
	m, err := ParseStatus(status)
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS != 256<<20 || m.HWM != 512<<20 || m.Threads != 17 {
		t.Errorf("ParseStatus = %+v", m)
	}
	if _, err := ParseStatus("Name:\tweir\nVmRSS:\t 1 kB\n"); !errors.Is(err, ErrFormat) {
		t.Errorf("a status without VmHWM: %v, want ErrFormat", err)
	}
	if _, err := ParseStatus("VmHWM:\tx kB\nVmRSS:\t1 kB\nThreads:\t1\n"); !errors.Is(err, ErrFormat) {
		t.Errorf("a bad VmHWM: %v, want ErrFormat", err)
	}
}

func TestParseOpenFilesLimit(t *testing.T) {
	limits := "Limit                     Soft Limit           Hard Limit           Units     \n" +
		"Max cpu time              unlimited            unlimited            seconds   \n" +
		"Max open files            20000                20000                files     \n"
	l, err := ParseOpenFilesLimit(limits)
	if err != nil || l != (Limit{20000, 20000}) || l.String() != "soft 20000, hard 20000" {
		t.Fatalf("ParseOpenFilesLimit = %+v (%s), %v", l, l, err)
	}
	l, err = ParseOpenFilesLimit("Max open files            1024                 unlimited            files\n")
	if err != nil || l != (Limit{1024, Unlimited}) || l.String() != "soft 1024, hard unlimited" {
		t.Fatalf("ParseOpenFilesLimit = %+v, %v", l, err)
	}
	for _, bad := range []string{"", "Max open files 12\n", "Max open files  x  y files\n"} {
		if _, err := ParseOpenFilesLimit(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseOpenFilesLimit(%q) = %v, want ErrFormat", bad, err)
		}
	}
}

// The readers against this test process: the descriptors it opens are
// counted, and its own figures are positive.
func TestReadSelf(t *testing.T) {
	pid := os.Getpid()
	before, err := OpenFDs(pid)
	if err != nil || before < 3 {
		t.Fatalf("OpenFDs = %d, %v", before, err)
	}
	var files []*os.File
	for range 10 {
		f, err := os.Open(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	after, err := OpenFDs(pid)
	for _, f := range files {
		f.Close()
	}
	if err != nil || after != before+10 {
		t.Errorf("OpenFDs after opening 10 files = %d, %v; want %d", after, err, before+10)
	}
	m, err := ReadMemory(pid)
	if err != nil || m.RSS <= 0 || m.HWM < m.RSS || m.Threads < 1 {
		t.Errorf("ReadMemory = %+v, %v", m, err)
	}
	l, err := OpenFilesLimit(pid)
	if err != nil || l.Soft <= 0 {
		t.Errorf("OpenFilesLimit = %+v, %v", l, err)
	}
	if _, err := CPUSeconds(pid); err != nil {
		t.Error(err)
	}
	if _, err := OpenFDs(1 << 30); err == nil {
		t.Error("OpenFDs of no process: no error")
	}
}
