package errorfs_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// Clear ends a sticky fault (the disk has room again): later operations run,
// and Count goes on counting.
func TestFailAtClear(t *testing.T) {
	inj := &errorfs.FailAt{K: 1, Ops: []errorfs.Op{errorfs.OpWrite}, Sticky: true, Err: syscall.ENOSPC}
	fs := errorfs.Wrap(vfs.NewMem(), inj)
	f, err := fs.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write := func() error { _, err := f.Write([]byte("x")); return err }
	if err := write(); err != nil {
		t.Fatalf("write 0: %v", err)
	}
	for i := 1; i < 4; i++ {
		if err := write(); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write %d on a full disk: %v", i, err)
		}
	}
	inj.Clear()
	if err := write(); err != nil {
		t.Fatalf("write after Clear: %v", err)
	}
	if inj.Count() != 5 || !inj.Fired() {
		t.Fatalf("count %d, fired %v; want 5, true", inj.Count(), inj.Fired())
	}
	if size, _ := f.Size(); size != 2 {
		t.Fatalf("file holds %d bytes, want the 2 writes that ran", size)
	}
}
