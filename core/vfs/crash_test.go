package vfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

// contents returns the file's contents in fs, or "<missing>".
func contents(t *testing.T, fs FS, name string) string {
	t.Helper()
	b, err := ReadFile(fs, name)
	if errors.Is(err, os.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", name, err)
	}
	return string(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, f File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func TestCrashClone(t *testing.T) {
	const dir, name = "/d", "/d/f"
	tests := []struct {
		name   string
		run    func(t *testing.T, m *MemFS)
		checks map[string]string // path -> contents after the crash
	}{
		{"unsynced write lost", func(t *testing.T, m *MemFS) {
			f := mustCreate(t, m, name, "a")
			must(t, f.Sync())
			must(t, m.SyncDir(dir))
			write(t, f, "b")
		}, map[string]string{name: "a"}},
		{"synced write kept", func(t *testing.T, m *MemFS) {
			f := mustCreate(t, m, name, "a")
			must(t, m.SyncDir(dir))
			write(t, f, "b")
			must(t, f.Sync())
		}, map[string]string{name: "ab"}},
		{"created but dir not synced lost", func(t *testing.T, m *MemFS) {
			f := mustCreate(t, m, name, "a")
			must(t, f.Sync())
		}, map[string]string{name: "<missing>"}},
		{"created and dir synced but data not synced is empty", func(t *testing.T, m *MemFS) {
			mustCreate(t, m, name, "abc")
			must(t, m.SyncDir(dir))
		}, map[string]string{name: ""}},
		{"rename not synced keeps old name", func(t *testing.T, m *MemFS) {
			f := mustCreate(t, m, "/d/tmp", "x")
			must(t, f.Sync())
			must(t, m.SyncDir(dir))
			must(t, m.Rename("/d/tmp", name))
		}, map[string]string{"/d/tmp": "x", name: "<missing>"}},
		{"rename synced moves", func(t *testing.T, m *MemFS) {
			f := mustCreate(t, m, "/d/tmp", "x")
			must(t, f.Sync())
			must(t, m.SyncDir(dir))
			must(t, m.Rename("/d/tmp", name))
			must(t, m.SyncDir(dir))
		}, map[string]string{"/d/tmp": "<missing>", name: "x"}},
		{"rename over existing not synced keeps the replaced file", func(t *testing.T, m *MemFS) {
			old := mustCreate(t, m, name, "old")
			must(t, old.Sync())
			f := mustCreate(t, m, "/d/tmp", "new")
			must(t, f.Sync())
			must(t, m.SyncDir(dir))
			must(t, m.Rename("/d/tmp", name))
		}, map[string]string{"/d/tmp": "new", name: "old"}},
		{"remove not synced survives", func(t *testing.T, m *MemFS) {
			f := mustCreate(t, m, name, "x")
			must(t, f.Sync())
			must(t, m.SyncDir(dir))
			must(t, m.Remove(name))
		}, map[string]string{name: "x"}},
		{"remove synced is gone", func(t *testing.T, m *MemFS) {
			mustCreate(t, m, name, "x")
			must(t, m.SyncDir(dir))
			must(t, m.Remove(name))
			must(t, m.SyncDir(dir))
		}, map[string]string{name: "<missing>"}},
		{"truncate after sync undone", func(t *testing.T, m *MemFS) {
			f := mustCreate(t, m, name, "abcdef")
			must(t, f.Sync())
			must(t, m.SyncDir(dir))
			must(t, f.Truncate(2))
			write(t, f, "XY")
		}, map[string]string{name: "abcdef"}},
		{"truncate synced kept", func(t *testing.T, m *MemFS) {
			f := mustCreate(t, m, name, "abcdef")
			must(t, f.Sync())
			must(t, m.SyncDir(dir))
			must(t, f.Truncate(2))
			write(t, f, "XY")
			must(t, f.Sync())
			write(t, f, "lost")
		}, map[string]string{name: "abXY"}},
		{"re-Create (O_TRUNC) not synced undone", func(t *testing.T, m *MemFS) {
			f := mustCreate(t, m, name, "abc")
			must(t, f.Sync())
			must(t, m.SyncDir(dir))
			mustCreate(t, m, name, "z")
		}, map[string]string{name: "abc"}},
		{"RemoveAll not synced comes back whole", func(t *testing.T, m *MemFS) {
			must(t, m.MkdirAll("/d/sub", 0o755))
			f := mustCreate(t, m, "/d/sub/f", "x")
			must(t, f.Sync())
			must(t, m.SyncDir("/d/sub"))
			must(t, m.RemoveAll("/d/sub"))
		}, map[string]string{"/d/sub/f": "x"}},
		{"RemoveAll synced is gone", func(t *testing.T, m *MemFS) {
			must(t, m.MkdirAll("/d/sub", 0o755))
			f := mustCreate(t, m, "/d/sub/f", "x")
			must(t, f.Sync())
			must(t, m.SyncDir("/d/sub"))
			must(t, m.RemoveAll("/d/sub"))
			must(t, m.SyncDir(dir))
		}, map[string]string{"/d/sub/f": "<missing>"}},
		{"MkdirAll durable without SyncDir", func(t *testing.T, m *MemFS) {
			must(t, m.MkdirAll("/d/a/b", 0o755))
			mustCreate(t, m, "/d/a/b/f", "x")
			must(t, m.SyncDir("/d/a/b"))
		}, map[string]string{"/d/a/b/f": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMem()
			must(t, m.MkdirAll(dir, 0o755))
			tt.run(t, m)
			c := m.CrashClone()
			for p, want := range tt.checks {
				if got := contents(t, c, p); got != want {
					t.Errorf("after crash %s = %q, want %q", p, got, want)
				}
			}
			// A torn crash keeps the same names, and at least the synced contents.
			for seed := range uint64(10) {
				torn := m.CrashCloneTorn(rand.New(rand.NewPCG(seed, 2)))
				for p, want := range tt.checks {
					got := contents(t, torn, p)
					if (want == "<missing>") != (got == "<missing>") || !strings.HasPrefix(got, want) {
						t.Errorf("after torn crash (seed %d) %s = %q, want %q plus maybe more", seed, p, got, want)
					}
				}
			}
		})
	}
}

func TestCrashCloneOfCloneIsStable(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d", 0o755))
	f := mustCreate(t, m, "/d/f", "abc")
	must(t, f.Sync())
	write(t, f, "def")
	must(t, m.SyncDir("/d"))
	c := m.CrashClone()
	// Everything in a clone is durable: crashing it again changes nothing.
	cc := c.CrashClone()
	if got := contents(t, cc, "/d/f"); got != "abc" {
		t.Errorf("clone of clone = %q, want abc", got)
	}
	names, err := cc.List("/d")
	if err != nil || !slices.Equal(names, []string{"f"}) {
		t.Errorf("List = %q, %v", names, err)
	}
}

func TestCrashCloneTorn(t *testing.T) {
	const synced, extra = "synced|", "0123456789"
	setup := func() *MemFS {
		m := NewMem()
		must(t, m.MkdirAll("/d", 0o755))
		f := mustCreate(t, m, "/d/f", synced)
		must(t, f.Sync())
		must(t, m.SyncDir("/d"))
		write(t, f, extra)
		return m
	}
	m := setup()
	seen := map[int]bool{}
	for seed := range uint64(200) {
		got := contents(t, m.CrashCloneTorn(rand.New(rand.NewPCG(seed, 0))), "/d/f")
		if !bytes.HasPrefix([]byte(synced+extra), []byte(got)) || len(got) < len(synced) {
			t.Fatalf("seed %d: torn contents %q are not synced plus a prefix of the unsynced bytes", seed, got)
		}
		seen[len(got)-len(synced)] = true
	}
	if !seen[0] || !seen[len(extra)] {
		t.Errorf("200 seeds never produced both extremes (kept 0 and all %d unsynced bytes): %v", len(extra), seen)
	}
	// Reproducible for a given seed.
	a := contents(t, m.CrashCloneTorn(rand.New(rand.NewPCG(7, 7))), "/d/f")
	b := contents(t, m.CrashCloneTorn(rand.New(rand.NewPCG(7, 7))), "/d/f")
	if a != b {
		t.Errorf("same seed gave %q and %q", a, b)
	}

	// A file whose current contents do not extend its synced ones keeps just the synced contents.
	f, err := m.OpenReadWrite("/d/f")
	must(t, err)
	must(t, f.Truncate(3))
	write(t, f, "XXXXXXXXXXXXXXXX")
	for seed := range uint64(20) {
		if got := contents(t, m.CrashCloneTorn(rand.New(rand.NewPCG(seed, 1))), "/d/f"); got != synced {
			t.Fatalf("seed %d: rewritten file torn to %q, want %q", seed, got, synced)
		}
	}
}

func TestCrashCloneIndependent(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d", 0o755))
	f := mustCreate(t, m, "/d/f", "abc")
	must(t, f.Sync())
	must(t, m.SyncDir("/d"))
	c := m.CrashClone()

	// Writes to the original do not reach the clone ...
	write(t, f, "orig")
	must(t, f.Sync())
	mustCreate(t, m, "/d/g", "orig")
	must(t, m.SyncDir("/d"))
	if got := contents(t, c, "/d/f"); got != "abc" {
		t.Errorf("clone sees original's write: %q", got)
	}
	if got := contents(t, c, "/d/g"); got != "<missing>" {
		t.Errorf("clone sees original's new file: %q", got)
	}

	// ... and writes to the clone do not reach the original, even after a truncation that reuses the array.
	cf, err := c.OpenReadWrite("/d/f")
	must(t, err)
	must(t, cf.Truncate(1))
	write(t, cf, "ZZ")
	must(t, cf.Sync())
	must(t, c.Remove("/d/f"))
	if got := contents(t, m, "/d/f"); got != "abcorig" {
		t.Errorf("original changed by clone: %q", got)
	}
	if got := contents(t, m.CrashClone(), "/d/f"); got != "abcorig" {
		t.Errorf("original's synced contents changed by clone: %q", got)
	}
}

// TestSyncedContentsNotAliased checks that sharing the synced array with the live data (which makes Sync O(1))
// never lets a later in-place write change what a crash leaves.
func TestSyncedContentsNotAliased(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d", 0o755))
	f := mustCreate(t, m, "/d/f", "0123456789")
	must(t, m.SyncDir("/d"))
	must(t, f.Sync())
	for _, size := range []int64{9, 5, 0} {
		must(t, f.Truncate(size))
		write(t, f, "X") // small enough to land in the shared array if Truncate kept it
		if got := contents(t, m.CrashClone(), "/d/f"); got != "0123456789" {
			t.Fatalf("after Truncate(%d)+Write, crash leaves %q", size, got)
		}
	}
	// Truncate above the synced length keeps the array; appends then land past the synced bytes.
	must(t, f.Truncate(0))
	write(t, f, "0123456789abc")
	must(t, f.Sync())
	must(t, f.Truncate(11))
	write(t, f, "ZZZZ")
	if got := contents(t, m.CrashClone(), "/d/f"); got != "0123456789abc" {
		t.Fatalf("crash leaves %q", got)
	}
}
