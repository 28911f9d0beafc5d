package vfs

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tree returns what dir holds in fs: every path below it, relative, with
// its contents, or "/" for a directory.
func tree(t *testing.T, fs FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(rel string)
	walk = func(rel string) {
		names, err := fs.List(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			r := filepath.Join(rel, n)
			fi, err := fs.Stat(filepath.Join(dir, r))
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				out[r] = "/"
				walk(r)
			} else {
				out[r] = contents(t, fs, filepath.Join(dir, r))
			}
		}
	}
	walk("")
	return out
}

// makeTree creates what tree returns under dir.
func makeTree(t *testing.T, fs FS, dir string, want map[string]string) {
	t.Helper()
	for rel, c := range want {
		p := filepath.Join(dir, rel)
		if c == "/" {
			must(t, fs.MkdirAll(p, 0o755))
			continue
		}
		must(t, fs.MkdirAll(filepath.Dir(p), 0o755))
		must(t, WriteFileSynced(fs, p, []byte(c)))
	}
}

// sample is a data directory in small: nested directories, an empty one,
// empty files, and a file of several copy chunks.
func sample() map[string]string {
	return map[string]string{
		"meta.properties":                    "broker.id=3\n",
		"t-0":                                "/",
		"t-0/00000000000000000000.log":       strings.Repeat("batch", copyChunk/2+17),
		"t-0/00000000000000000000.index":     "",
		"t-0/recovery-point":                 "v1 0",
		"t-1":                                "/",
		"t-1/leader-epoch-checkpoint":        "0\n1\n0 0\n",
		"t-1/sub":                            "/",
		"t-1/sub/deeper":                     "/",
		"t-1/sub/deeper/00000000000000.log":  "x",
		"empty-dir":                          "/",
		"__consumer_offsets-0":               "/",
		"__consumer_offsets-0/00000000.snap": "",
	}
}

// A real directory loaded into a MemFS is all durable there (a crash
// clone holds all of it), and written back over a directory that has
// since changed in every way, makes it what it was.
func TestCopyTreeRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	want := sample()
	makeTree(t, Default, dir, want)

	mem := NewMem()
	size, err := CopyTree(mem, Default, dir)
	must(t, err)
	if got := tree(t, mem.CrashClone(), dir); !maps.Equal(got, want) {
		t.Errorf("a crash clone of the loaded MemFS holds\n%v\nwant\n%v", keys(got), keys(want))
	}
	files, dirs, n := 0, 0, int64(0)
	for _, c := range want {
		if c == "/" {
			dirs++
		} else {
			files++
			n += int64(len(c))
		}
	}
	if size != (TreeSize{Files: files, Dirs: dirs, Bytes: n}) {
		t.Errorf("CopyTree counted %+v, want %d files, %d dirs, %d bytes", size, files, dirs, n)
	}

	// The directory changes: files grow, shrink, change, appear and go;
	// directories appear and go; a file becomes a directory and back.
	must(t, os.WriteFile(filepath.Join(dir, "t-0/00000000000000000000.log"), []byte(want["t-0/00000000000000000000.log"]+"tail"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "t-0/recovery-point"), []byte("v1"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "meta.properties"), []byte("broker.id=4\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "t-0/new.log"), []byte("new"), 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "t-2/a"), 0o755))
	must(t, os.RemoveAll(filepath.Join(dir, "t-1/sub")))
	must(t, os.WriteFile(filepath.Join(dir, "t-1/sub"), []byte("a file now"), 0o644))
	must(t, os.Remove(filepath.Join(dir, "t-0/00000000000000000000.index")))
	must(t, os.MkdirAll(filepath.Join(dir, "t-0/00000000000000000000.index/x"), 0o755))
	must(t, os.RemoveAll(filepath.Join(dir, "empty-dir")))

	if _, err := CopyTree(Default, mem, dir); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, Default, dir); !maps.Equal(got, want) {
		t.Errorf("written back, the directory holds\n%v\nwant\n%v", keys(got), keys(want))
	}
}

func keys(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		c := m[k]
		if len(c) > 20 {
			c = c[:20] + "..."
		}
		b.WriteString(k + " = " + c + "\n")
	}
	return b.String()
}

// Into a MemFS, what CopyTree wrote is durable even over files that were
// there, unsynced, before: a crash clone taken right after holds the copy.
func TestCopyTreeDurable(t *testing.T) {
	src := NewMem()
	want := sample()
	makeTree(t, src, "/data", want)
	dst := NewMem()
	must(t, dst.MkdirAll("/data/t-0", 0o755))
	f := mustCreate(t, dst, "/data/t-0/00000000000000000000.log", "batch") // a prefix, never synced
	closeFile(t, f)
	closeFile(t, mustCreate(t, dst, "/data/stray", "never synced"))
	if _, err := CopyTree(dst, src, "/data"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, dst.CrashClone(), "/data"); !maps.Equal(got, want) {
		t.Errorf("crash clone after CopyTree:\n%v\nwant\n%v", keys(got), keys(want))
	}
}

// What is missing or of the wrong kind is named.
func TestCopyTreeErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	if _, err := CopyTree(NewMem(), Default, missing); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("CopyTree of a missing directory: %v, want ErrNotExist naming %s", err, missing)
	}
	file := filepath.Join(dir, "file")
	must(t, os.WriteFile(file, []byte("x"), 0o644))
	if _, err := CopyTree(NewMem(), Default, file); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("CopyTree of a file: %v, want an error naming %s", err, file)
	}
	// A destination that cannot hold the tree: a file where a directory
	// must go.
	src := NewMem()
	makeTree(t, src, "/data", map[string]string{"t-0": "/", "t-0/a.log": "abc"})
	dst := NewMem()
	closeFile(t, mustCreate(t, dst, "/data", "a file"))
	if _, err := CopyTree(dst, src, "/data"); !errors.Is(err, syscall.ENOTDIR) || !strings.Contains(err.Error(), "/data") {
		t.Errorf("CopyTree over a file: %v, want ENOTDIR naming /data", err)
	}
}

// A file that already holds the contents is left as it is: only what
// differs is written (a crash clone written over its directory truncates
// the unsynced tails and rewrites little else).
func TestCopyTreeKeepsEqualFiles(t *testing.T) {
	src := NewMem()
	makeTree(t, src, "/d", map[string]string{"same": "abc", "longer": "abc", "other": "abc"})
	dst := NewMem()
	var now int64
	dst.SetNow(func() time.Time { now++; return time.Unix(now, 0) }) // every change a new time
	makeTree(t, dst, "/d", map[string]string{"same": "abc", "longer": "abcdef", "other": "abd"})
	same, err := dst.Open("/d/same")
	must(t, err)
	defer same.Close()
	before, _ := dst.Stat("/d/same")
	if _, err := CopyTree(dst, src, "/d"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, dst, "/d"); !maps.Equal(got, map[string]string{"same": "abc", "longer": "abc", "other": "abc"}) {
		t.Errorf("got %v", got)
	}
	after, _ := dst.Stat("/d/same")
	if !after.ModTime().Equal(before.ModTime()) {
		t.Error("an equal file was rewritten")
	}
	buf := make([]byte, 3)
	if _, err := same.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, []byte("abc")) {
		t.Errorf("an open handle of the equal file reads %q, %v", buf, err)
	}
}
