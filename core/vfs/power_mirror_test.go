package vfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// A change the mirror refuses (a full disk under it) is refused to the
// PowerFS's user and not made on its MemFS; a short write is short on
// both, so the two never disagree.
func TestPowerFSMirrorRefuses(t *testing.T) {
	dir := t.TempDir()
	mem := vfs.NewMem()
	if err := mem.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	full := &errorfs.FailAt{K: -1, Ops: []errorfs.Op{errorfs.OpWrite, errorfs.OpRemove}, Err: syscall.ENOSPC, PartialWrite: true}
	fs := vfs.NewPower(mem, vfs.PowerConfig{Mirror: errorfs.Wrap(vfs.Default, full)})
	name := filepath.Join(dir, "log")
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("12345678")); err != nil {
		t.Fatal(err)
	}
	full.K = full.Count() // the next write fails, after storing half
	n, err := f.Write([]byte("abcdefgh"))
	if !errors.Is(err, syscall.ENOSPC) || n != 4 {
		t.Errorf("write on a full disk = %d, %v; want 4, ENOSPC", n, err)
	}
	for what, fsys := range map[string]vfs.FS{"mirror": vfs.Default, "MemFS": mem} {
		if b, err := vfs.ReadFile(fsys, name); err != nil || string(b) != "12345678abcd" {
			t.Errorf("%s holds %q, %v; want the short write's 4 bytes after the first 8", what, b, err)
		}
	}
	full.K = full.Count()
	if err := fs.Remove(name); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Remove refused by the mirror = %v", err)
	}
	if _, err := mem.Stat(name); err != nil {
		t.Errorf("the MemFS removed what the mirror did not: %v", err)
	}
	if _, err := os.Stat(name); err != nil {
		t.Error(err)
	}
}
