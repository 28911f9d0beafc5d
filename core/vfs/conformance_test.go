package vfs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// impl is one FS under test with a fresh, existing directory to work in.
type impl struct {
	name  string
	setup func(t *testing.T) (FS, string)
}

func impls() []impl {
	return []impl{
		{"os", func(t *testing.T) (FS, string) { return Default, t.TempDir() }},
		{"mem", func(t *testing.T) (FS, string) {
			m := NewMem()
			if err := m.MkdirAll("/data/t-0", 0o755); err != nil {
				t.Fatal(err)
			}
			return m, "/data/t-0"
		}},
		{"power", func(t *testing.T) (FS, string) {
			m := NewMem()
			if err := m.MkdirAll("/data/t-0", 0o755); err != nil {
				t.Fatal(err)
			}
			return NewPower(m, PowerConfig{}), "/data/t-0"
		}},
		{"power-mirrored", func(t *testing.T) (FS, string) {
			dir := t.TempDir()
			m := NewMem()
			if err := m.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			return NewPower(m, PowerConfig{Mirror: Default}), dir
		}},
	}
}

// forEach runs body as a subtest against every implementation.
func forEach(t *testing.T, body func(t *testing.T, fs FS, dir string)) {
	t.Helper()
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			fs, dir := im.setup(t)
			body(t, fs, dir)
		})
	}
}

func mustCreate(t *testing.T, fs FS, name string, data string) File {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatalf("Create(%s): %v", name, err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatalf("Write(%s): %v", name, err)
	}
	return f
}

func readAll(t *testing.T, fs FS, name string) string {
	t.Helper()
	b, err := ReadFile(fs, name)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", name, err)
	}
	return string(b)
}

func closeFile(t *testing.T, f File) {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatalf("Close(%s): %v", f.Name(), err)
	}
}

func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		body func(t *testing.T, fs FS, dir string)
	}{
		{"CreateWriteRead", func(t *testing.T, fs FS, dir string) {
			name := filepath.Join(dir, "00000000000000000000.log")
			f := mustCreate(t, fs, name, "hello ")
			if _, err := f.Write([]byte("world")); err != nil {
				t.Fatal(err)
			}
			if f.Name() != name {
				t.Errorf("Name() = %q, want %q", f.Name(), name)
			}
			buf := make([]byte, 5)
			if n, err := f.ReadAt(buf, 6); n != 5 || err != nil || string(buf) != "world" {
				t.Errorf("ReadAt(6) = %d, %v, %q; want 5, nil, world", n, err, buf)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			if size, err := f.Size(); size != 11 || err != nil {
				t.Errorf("Size() = %d, %v; want 11", size, err)
			}
			closeFile(t, f)
			if got := readAll(t, fs, name); got != "hello world" {
				t.Errorf("contents %q", got)
			}
			// Create truncates an existing file.
			closeFile(t, mustCreate(t, fs, name, "x"))
			if got := readAll(t, fs, name); got != "x" {
				t.Errorf("after re-Create: %q, want x", got)
			}
		}},
		{"OpenReadWriteAppends", func(t *testing.T, fs FS, dir string) {
			name := filepath.Join(dir, "f")
			closeFile(t, mustCreate(t, fs, name, "abc"))
			f, err := fs.OpenReadWrite(name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("def")); err != nil {
				t.Fatal(err)
			}
			closeFile(t, f)
			if got := readAll(t, fs, name); got != "abcdef" {
				t.Errorf("got %q, want abcdef", got)
			}
			if _, err := fs.OpenReadWrite(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("OpenReadWrite(missing) = %v, want ErrNotExist", err)
			}
			if _, err := fs.Open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Open(missing) = %v, want ErrNotExist", err)
			}
		}},
		{"AppendAfterTruncate", func(t *testing.T, fs FS, dir string) {
			f := mustCreate(t, fs, filepath.Join(dir, "f"), "0123456789")
			defer f.Close()
			if err := f.Truncate(4); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("ab")); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, fs, f.Name()); got != "0123ab" {
				t.Errorf("got %q, want 0123ab", got)
			}
			if err := f.Truncate(8); err != nil { // growing pads with zeros
				t.Fatal(err)
			}
			if got := readAll(t, fs, f.Name()); got != "0123ab\x00\x00" {
				t.Errorf("after growing: %q", got)
			}
		}},
		{"RenameReplaces", func(t *testing.T, fs FS, dir string) {
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			closeFile(t, mustCreate(t, fs, a, "new"))
			old := mustCreate(t, fs, b, "old")
			defer old.Close()
			if err := fs.Rename(a, b); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, fs, b); got != "new" {
				t.Errorf("b = %q, want new", got)
			}
			if _, err := fs.Stat(a); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Stat(a) after rename = %v, want ErrNotExist", err)
			}
			// The replaced file's handle still reads the old node.
			buf := make([]byte, 3)
			if _, err := old.ReadAt(buf, 0); err != nil || string(buf) != "old" {
				t.Errorf("replaced handle reads %q, %v", buf, err)
			}
			if err := fs.Rename(filepath.Join(dir, "missing"), a); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Rename(missing) = %v, want ErrNotExist", err)
			}
		}},
		{"RemoveWhileOpen", func(t *testing.T, fs FS, dir string) {
			name := filepath.Join(dir, "f")
			f := mustCreate(t, fs, name, "still here")
			defer f.Close()
			if err := fs.Remove(name); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 10)
			if n, err := f.ReadAt(buf, 0); n != 10 || err != nil || string(buf) != "still here" {
				t.Errorf("ReadAt after Remove = %d, %v, %q", n, err, buf)
			}
			if _, err := f.Write([]byte("!")); err != nil {
				t.Errorf("Write after Remove: %v", err)
			}
			if _, err := fs.Open(name); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Open after Remove = %v, want ErrNotExist", err)
			}
			if err := fs.Remove(name); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("second Remove = %v, want ErrNotExist", err)
			}
		}},
		{"RenameWhileOpen", func(t *testing.T, fs FS, dir string) {
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			f := mustCreate(t, fs, a, "12")
			defer f.Close()
			if err := fs.Rename(a, b); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("34")); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, fs, b); got != "1234" {
				t.Errorf("b = %q, want 1234", got)
			}
		}},
		{"ListSorted", func(t *testing.T, fs FS, dir string) {
			for _, n := range []string{"c.log", "a.index", "b", "a.log"} {
				closeFile(t, mustCreate(t, fs, filepath.Join(dir, n), ""))
			}
			if err := fs.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755); err != nil {
				t.Fatal(err)
			}
			got, err := fs.List(dir)
			want := []string{"a.index", "a.log", "b", "c.log", "sub"}
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("List = %q, %v; want %q", got, err, want)
			}
			if _, err := fs.List(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("List(missing) = %v, want ErrNotExist", err)
			}
		}},
		{"ReadAtPastEOF", func(t *testing.T, fs FS, dir string) {
			f := mustCreate(t, fs, filepath.Join(dir, "f"), "abcdef")
			defer f.Close()
			buf := make([]byte, 4)
			if n, err := f.ReadAt(buf, 4); n != 2 || err != io.EOF || string(buf[:n]) != "ef" {
				t.Errorf("ReadAt(4) = %d, %v, %q; want 2, EOF, ef", n, err, buf[:n])
			}
			if n, err := f.ReadAt(buf, 6); n != 0 || err != io.EOF {
				t.Errorf("ReadAt(6) = %d, %v; want 0, EOF", n, err)
			}
			if n, err := f.ReadAt(buf, 100); n != 0 || err != io.EOF {
				t.Errorf("ReadAt(100) = %d, %v; want 0, EOF", n, err)
			}
			if n, err := f.ReadAt(buf, 2); n != 4 || err != nil {
				t.Errorf("ReadAt(2) exactly to the end = %d, %v; want 4, nil", n, err)
			}
			if _, err := f.ReadAt(buf, -1); err == nil {
				t.Error("ReadAt(-1) succeeded")
			}
		}},
		{"Stat", func(t *testing.T, fs FS, dir string) {
			name := filepath.Join(dir, "f")
			f := mustCreate(t, fs, name, "12345")
			defer f.Close()
			fi, err := fs.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Name() != "f" || fi.Size() != 5 || fi.IsDir() || fi.ModTime().IsZero() {
				t.Errorf("Stat = %q size %d dir %v mod %v", fi.Name(), fi.Size(), fi.IsDir(), fi.ModTime())
			}
			di, err := fs.Stat(dir)
			if err != nil || !di.IsDir() {
				t.Errorf("Stat(dir) = %v, %v; want a directory", di, err)
			}
			if _, err := fs.Stat(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Stat(missing) = %v, want ErrNotExist", err)
			}
		}},
		{"ReadOnlyRejectsWrite", func(t *testing.T, fs FS, dir string) {
			name := filepath.Join(dir, "f")
			closeFile(t, mustCreate(t, fs, name, "abc"))
			f, err := fs.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write([]byte("x")); !errors.Is(err, ErrReadOnly) {
				t.Errorf("Write on read-only = %v, want ErrReadOnly", err)
			}
			if err := f.Truncate(0); !errors.Is(err, ErrReadOnly) {
				t.Errorf("Truncate on read-only = %v, want ErrReadOnly", err)
			}
			if got := readAll(t, fs, name); got != "abc" {
				t.Errorf("contents changed to %q", got)
			}
		}},
		{"ClosedHandleErrors", func(t *testing.T, fs FS, dir string) {
			f := mustCreate(t, fs, filepath.Join(dir, "f"), "abc")
			closeFile(t, f)
			buf := make([]byte, 1)
			_, werr := f.Write([]byte("x"))
			_, rerr := f.ReadAt(buf, 0)
			_, serr := f.Size()
			for op, err := range map[string]error{
				"Write": werr, "ReadAt": rerr, "Size": serr, "Sync": f.Sync(), "Truncate": f.Truncate(0),
				"Close": f.Close(),
			} {
				if !errors.Is(err, os.ErrClosed) {
					t.Errorf("%s on closed file = %v, want ErrClosed", op, err)
				}
			}
			ro, err := fs.Open(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			closeFile(t, ro)
			if _, err := ro.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
				t.Errorf("Write on closed read-only file = %v, want ErrClosed", err)
			}
		}},
		{"RemoveAndRemoveAll", func(t *testing.T, fs FS, dir string) {
			sub := filepath.Join(dir, "t-1")
			if err := fs.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			closeFile(t, mustCreate(t, fs, filepath.Join(sub, "f"), "x"))
			if err := fs.Remove(sub); !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
				t.Errorf("Remove(non-empty dir) = %v, want ENOTEMPTY", err)
			}
			if err := fs.RemoveAll(sub); err != nil {
				t.Fatal(err)
			}
			if _, err := fs.Stat(sub); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Stat after RemoveAll = %v, want ErrNotExist", err)
			}
			if err := fs.RemoveAll(sub); err != nil {
				t.Errorf("RemoveAll(missing) = %v, want nil", err)
			}
			if err := fs.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := fs.Remove(sub); err != nil {
				t.Errorf("Remove(empty dir) = %v", err)
			}
		}},
		{"MkdirAllAndSyncDir", func(t *testing.T, fs FS, dir string) {
			sub := filepath.Join(dir, "a", "b")
			if err := fs.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := fs.MkdirAll(sub, 0o755); err != nil {
				t.Errorf("MkdirAll of an existing dir = %v", err)
			}
			closeFile(t, mustCreate(t, fs, filepath.Join(sub, "f"), ""))
			if err := fs.SyncDir(sub); err != nil {
				t.Errorf("SyncDir = %v", err)
			}
			if err := fs.SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("SyncDir(missing) = %v, want ErrNotExist", err)
			}
			if err := fs.MkdirAll(filepath.Join(sub, "f", "g"), 0o755); !errors.Is(err, syscall.ENOTDIR) {
				t.Errorf("MkdirAll under a file = %v, want ENOTDIR", err)
			}
			if _, err := fs.Create(filepath.Join(dir, "nodir", "f")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Create in a missing dir = %v, want ErrNotExist", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { forEach(t, tt.body) })
	}
}

func TestOSFiler(t *testing.T) {
	f, err := Default.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	of, ok := f.(OSFiler)
	if !ok {
		t.Fatal("OS file does not implement OSFiler")
	}
	if of.OSFile().Name() != f.Name() {
		t.Errorf("OSFile().Name() = %q, want %q", of.OSFile().Name(), f.Name())
	}
	m := NewMem()
	mf, err := m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mf.(OSFiler); ok {
		t.Error("MemFS file claims to be an OS file")
	}
}

func TestReadFile(t *testing.T) {
	forEach(t, func(t *testing.T, fs FS, dir string) {
		want := bytes.Repeat([]byte("0123456789"), 1000)
		closeFile(t, mustCreate(t, fs, filepath.Join(dir, "f"), string(want)))
		got, err := ReadFile(fs, filepath.Join(dir, "f"))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("ReadFile = %d bytes, %v; want %d bytes", len(got), err, len(want))
		}
	})
}
