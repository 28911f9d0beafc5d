package vfs

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// A cut lands between operations, keeps what was fsynced, and fails
// everything after it.
func TestPowerFS(t *testing.T) {
	fs := NewPower(NewMem(), PowerConfig{})
	must(t, fs.MkdirAll("/d", 0o755))
	f, err := fs.Create("/d/a")
	must(t, err)
	must(t, fs.SyncDir("/d"))
	write(t, f, "synced")
	must(t, f.Sync())
	write(t, f, " lost")
	clone, at := fs.Cut(nil)
	if at.IsZero() {
		t.Error("no cut time")
	}
	if got := contents(t, clone, "/d/a"); got != "synced" {
		t.Errorf("clone holds %q; want the synced bytes only", got)
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, ErrPowerCut) {
		t.Errorf("write after the cut: %v, want ErrPowerCut", err)
	}
	if err := f.Sync(); !errors.Is(err, ErrPowerCut) {
		t.Errorf("sync after the cut: %v, want ErrPowerCut", err)
	}
	if _, err := fs.Create("/d/b"); !errors.Is(err, ErrPowerCut) {
		t.Errorf("create after the cut: %v, want ErrPowerCut", err)
	}
	if _, err := fs.List("/d"); !errors.Is(err, ErrPowerCut) {
		t.Errorf("list after the cut: %v, want ErrPowerCut", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("close after the cut: %v (it releases the handle)", err)
	}
	if fs.Syncs() != 2 {
		t.Errorf("%d fsyncs counted, want 2 (the directory and the file)", fs.Syncs())
	}
}

// An fsync in flight when the power goes (its simulated latency not yet
// paid) fails and covers nothing.
func TestPowerFSCutDuringSync(t *testing.T) {
	fs := NewPower(NewMem(), PowerConfig{SyncLatency: 50 * time.Millisecond})
	must(t, fs.MkdirAll("/d", 0o755))
	f, err := fs.Create("/d/a")
	must(t, err)
	write(t, f, "unsynced")
	done := make(chan error, 1)
	go func() { done <- f.Sync() }()
	// Whether the sync has started paying its 50 ms or not, it ends after
	// the cut, and so must fail.
	clone, _ := fs.Cut(nil)
	if err := <-done; !errors.Is(err, ErrPowerCut) {
		t.Fatalf("sync cut short: %v, want ErrPowerCut", err)
	}
	if _, err := clone.Stat("/d/a"); err == nil {
		t.Error("a file whose directory was never synced survived the cut")
	}
	if fs.MaxSync() != 0 {
		t.Errorf("MaxSync %v after no fsync succeeded", fs.MaxSync())
	}
}

// With a mirror, the real directory holds what the page cache would at
// every moment (everything written, synced or not, in its place), and
// after the cut, the crash clone written over it (CopyTree) leaves only
// what was fsynced.
func TestPowerFSMirror(t *testing.T) {
	dir := t.TempDir()
	mem := NewMem()
	must(t, mem.MkdirAll(dir, 0o755))
	fs := NewPower(mem, PowerConfig{Mirror: Default})
	sub := filepath.Join(dir, "t-0")
	must(t, fs.MkdirAll(sub, 0o755))
	log := mustCreate(t, fs, filepath.Join(sub, "log"), "synced")
	must(t, log.Sync())
	must(t, fs.SyncDir(sub))
	write(t, log, " unsynced")
	idx := mustCreate(t, fs, filepath.Join(sub, "index"), "12345678")
	must(t, idx.Sync())
	must(t, idx.Truncate(4)) // an unsynced truncation
	closeFile(t, mustCreate(t, fs, filepath.Join(sub, "tmp"), "x"))
	must(t, fs.Rename(filepath.Join(sub, "tmp"), filepath.Join(sub, "checkpoint")))
	must(t, fs.SyncDir(sub))
	closeFile(t, mustCreate(t, fs, filepath.Join(sub, "new"), "never synced into its directory"))
	gone := mustCreate(t, fs, filepath.Join(sub, "gone"), "")
	closeFile(t, gone)
	must(t, fs.Remove(filepath.Join(sub, "gone")))

	// The mirror is the page cache: it matches the MemFS's current state.
	for name, want := range map[string]string{
		"log": "synced unsynced", "index": "1234", "checkpoint": "x", "new": "never synced into its directory", "gone": "<missing>",
	} {
		if got := contents(t, Default, filepath.Join(sub, name)); got != want {
			t.Errorf("mirror's %s = %q, want %q", name, got, want)
		}
		if got := contents(t, mem, filepath.Join(sub, name)); got != want {
			t.Errorf("MemFS's %s = %q, want %q", name, got, want)
		}
	}
	if got, err := fs.List(sub); err != nil || len(got) != 4 {
		t.Errorf("List = %q, %v; want 4 entries", got, err)
	}

	clone, _ := fs.Cut(nil)
	size, err := CopyTree(Default, clone, dir)
	must(t, err)
	for name, want := range map[string]string{
		// checkpoint's entry was synced, its contents never were.
		"log": "synced", "index": "12345678", "checkpoint": "", "new": "<missing>", "gone": "<missing>",
	} {
		if got := contents(t, Default, filepath.Join(sub, name)); got != want {
			t.Errorf("after the cut, %s = %q, want %q", name, got, want)
		}
	}
	if size.Files != 3 || size.Dirs != 1 || size.Bytes != int64(len("synced")+len("12345678")) {
		t.Errorf("CopyTree counted %+v, want 3 files of 14 bytes in 1 directory", size)
	}
	// The cut file system writes nothing more to the mirror.
	if _, err := log.Write([]byte("late")); !errors.Is(err, ErrPowerCut) {
		t.Errorf("write after the cut: %v", err)
	}
	if got := contents(t, Default, filepath.Join(sub, "log")); got != "synced" {
		t.Errorf("a write after the cut reached the mirror: %q", got)
	}
	closeFile(t, log)
	closeFile(t, idx)
}
