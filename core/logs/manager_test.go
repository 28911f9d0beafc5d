package logs

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/vfs"
)

func openAppend(t *testing.T, m *Manager, topic string, p int32, id [16]byte) {
	t.Helper()
	part, err := m.Open(topic, p, id, PartitionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := part.Append(ctx, testbatch.Tagged(topic, 2)); err != nil {
		t.Fatal(err)
	}
	if err := part.Close(); err != nil {
		t.Fatal(err)
	}
}

// A directory is opened only for the topic id its marker names; a torn
// marker (no log data can exist without one) is written again.
func TestManagerMarkers(t *testing.T) {
	mem := vfs.NewMem()
	m := newManager(t, mem, nil)
	a, b := [16]byte{1}, [16]byte{2}
	openAppend(t, m, "t", 0, a)
	if _, err := m.Open("t", 0, b, PartitionConfig{}); !errors.Is(err, ErrForeignPartition) {
		t.Fatalf("open for another topic id: %v, want ErrForeignPartition", err)
	}
	if err := mem.MkdirAll("/d/t-1", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileSynced(mem, "/d/t-1/"+MarkerFile, []byte("vers")); err != nil {
		t.Fatal(err)
	}
	p, err := m.Open("t", 1, a, PartitionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if id, ok, err := ReadMarker(mem, "/d/t-1"); err != nil || !ok || id != a {
		t.Fatalf("marker after reopening a torn one: %x %v %v", id, ok, err)
	}
	if dirs, err := m.PartitionDirs(); err != nil || !slices.Equal(dirs, []string{"t-0", "t-1"}) {
		t.Fatalf("PartitionDirs = %v, %v", dirs, err)
	}
}

// Remove deletes only directories whose marker names the topic id asked for
// (or that hold nothing); another incarnation's are left for SetAside.
func TestManagerRemove(t *testing.T) {
	mem := vfs.NewMem()
	m := newManager(t, mem, nil)
	old, cur := [16]byte{1}, [16]byte{2}
	openAppend(t, m, "t", 0, old)
	openAppend(t, m, "t", 1, cur)
	if err := mem.MkdirAll("/d/t-2", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("t", cur, 3); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{"t-0": true, "t-1": false, "t-2": false} {
		ok, err := m.Exists("t", int32(dir[2]-'0'))
		if err != nil || ok != want {
			t.Errorf("%s exists %v (%v) after Remove of the current incarnation, want %v", dir, ok, err, want)
		}
	}
}

// SetAside renames marked directories nobody owns to <dir>.<id>-stray with
// their data, removes empty ones, and never touches unmarked ones.
func TestManagerSetAside(t *testing.T) {
	mem := vfs.NewMem()
	m := newManager(t, mem, nil)
	id := [16]byte{9}
	openAppend(t, m, "gone", 0, id)
	openAppend(t, m, "kept", 0, [16]byte{8})
	for _, dir := range []string{"/d/empty-0", "/d/foreign-0"} {
		if err := mem.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := vfs.WriteFileSynced(mem, "/d/foreign-0/data", []byte("not weir's")); err != nil {
		t.Fatal(err)
	}
	if err := m.SetAside(func(dir string) bool { return dir != "kept-0" }); err != nil {
		t.Fatal(err)
	}
	stray := "/d/gone-0." + hex.EncodeToString(id[:]) + "-stray"
	if names, err := mem.List(stray); err != nil || len(names) < 2 {
		t.Fatalf("set-aside directory %s: %v, %v", stray, names, err)
	}
	for dir, want := range map[string]bool{"/d/gone-0": false, "/d/empty-0": false, "/d/kept-0": true, "/d/foreign-0/data": true} {
		_, err := mem.Stat(dir)
		if got := err == nil; got != want || (err != nil && !errors.Is(err, fs.ErrNotExist)) {
			t.Errorf("%s exists %v (%v), want %v", dir, got, err, want)
		}
	}
	// A second stray of the same name and id gets a name of its own.
	openAppend(t, m, "gone", 0, id)
	if err := m.SetAside(func(dir string) bool { return dir == "gone-0" }); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat(filepath.Clean(stray + "1")); err != nil {
		t.Errorf("second stray: %v", err)
	}
	if _, _, ok := ParseDirName(filepath.Base(stray)); ok {
		t.Errorf("%s parses as a partition directory", stray)
	}
}

// OpenedAs tells a new directory, a log closed cleanly and one that was
// not (a crash: its clean-shutdown marker never written) apart.
func TestManagerOpenedAs(t *testing.T) {
	mem := vfs.NewMem()
	m := newManager(t, mem, nil)
	id := [16]byte{7}
	p, err := m.Open("t", 0, id, PartitionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.OpenedAs(); got != OpenedNew {
		t.Fatalf("a new partition opened as %v", got)
	}
	if _, err := p.Append(ctx, testbatch.Tagged("t", 2)); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p, err = m.Open("t", 0, id, PartitionConfig{}); err != nil {
		t.Fatal(err)
	}
	if got := p.OpenedAs(); got != OpenedClean {
		t.Fatalf("a partition closed cleanly opened as %v", got)
	}
	if _, err := p.Append(ctx, testbatch.Tagged("t", 2)); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone() // the process dies here, the log open
	p.Close()
	m2 := newManager(t, crashed, nil)
	p2, err := m2.Open("t", 0, id, PartitionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if got := p2.OpenedAs(); got != OpenedUnclean {
		t.Fatalf("a partition after a crash opened as %v", got)
	}
}
