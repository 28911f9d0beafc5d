package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestConcurrentReadWhileAppend runs readers against one appending writer (run with -race). Every byte at position
// i is byte(i), so a reader can check any range it reads.
func TestConcurrentReadWhileAppend(t *testing.T) {
	forEach(t, func(t *testing.T, fs FS, dir string) {
		w, err := fs.Create(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		const chunks, chunk = 300, 100
		done := make(chan struct{})
		errc := make(chan error, 4)
		var wg, ready sync.WaitGroup
		for r := range 4 {
			wg.Add(1)
			ready.Add(1)
			go func() {
				defer wg.Done()
				f, err := fs.Open(w.Name())
				ready.Done() // the writer starts once every reader is about to read
				if err != nil {
					errc <- err
					return
				}
				defer f.Close()
				rng := rand.New(rand.NewPCG(uint64(r), 0))
				buf := make([]byte, 3*chunk)
				for {
					select {
					case <-done:
						return
					default:
					}
					size, err := f.Size()
					if err != nil {
						errc <- err
						return
					}
					if size == 0 {
						continue
					}
					off := rng.Int64N(size)
					n, err := f.ReadAt(buf, off)
					if err != nil && err != io.EOF {
						errc <- err
						return
					}
					for i, b := range buf[:n] {
						if b != byte(off+int64(i)) {
							errc <- fmt.Errorf("byte %d = %d, want %d", off+int64(i), b, byte(off+int64(i)))
							return
						}
					}
				}
			}()
		}
		ready.Wait()
		p := make([]byte, chunk)
		for c := range chunks {
			for i := range p {
				p[i] = byte(c*chunk + i)
			}
			if _, err := w.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		close(done)
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		if size, err := w.Size(); size != chunks*chunk || err != nil {
			t.Errorf("Size = %d, %v; want %d", size, err, chunks*chunk)
		}
	})
}

func TestMemPaths(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("d/e", 0o755))
	closeFile(t, mustCreate(t, m, "d/e/../e/./f", "x"))
	if got := contents(t, m, "/d/e/f"); got != "x" {
		t.Errorf("relative and unclean paths: %q", got)
	}
	names, err := m.List("/")
	if err != nil || !slices.Equal(names, []string{"d"}) {
		t.Errorf("List(/) = %q, %v", names, err)
	}
	if fi, err := m.Stat("/d/e"); err != nil || fi.Name() != "e" || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
		t.Errorf("Stat(/d/e) = %v, %v", fi, err)
	}
	if _, err := m.List("/d/e/f"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("List(file) = %v, want ENOTDIR", err)
	}
	if _, err := m.Open("/d/e"); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("Open(dir) = %v, want EISDIR", err)
	}
	if _, err := m.Create("/d/e"); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("Create(dir) = %v, want EISDIR", err)
	}
	if _, err := m.Create("/d/e/f/g"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("Create under a file = %v, want ENOTDIR", err)
	}
}

func TestMemRenameDirs(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     error
	}{
		{"dir into itself", "/a", "/a/b/c", syscall.EINVAL},
		{"file over dir", "/a/b/f", "/x", syscall.EISDIR},
		{"dir over file", "/a", "/y", syscall.ENOTDIR},
		{"dir over non-empty dir", "/x", "/a", syscall.ENOTEMPTY},
		{"dir over empty dir", "/a", "/x", nil},
		{"missing parent", "/y", "/nope/y", syscall.ENOENT},
		{"onto itself", "/y", "/y", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMem()
			must(t, m.MkdirAll("/a/b", 0o755))
			must(t, m.MkdirAll("/x", 0o755))
			closeFile(t, mustCreate(t, m, "/a/b/f", "f"))
			closeFile(t, mustCreate(t, m, "/y", "y"))
			err := m.Rename(tt.old, tt.new)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Rename = %v", err)
				}
			} else if !errors.Is(err, tt.want) {
				t.Fatalf("Rename = %v, want %v", err, tt.want)
			}
			var le *os.LinkError
			if err != nil && !errors.As(err, &le) {
				t.Errorf("error %T is not an *os.LinkError", err)
			}
		})
	}
	m := NewMem()
	must(t, m.MkdirAll("/a/b", 0o755))
	closeFile(t, mustCreate(t, m, "/a/b/f", "f"))
	must(t, m.Rename("/a", "/z"))
	if got := contents(t, m, "/z/b/f"); got != "f" {
		t.Errorf("after renaming the directory: %q", got)
	}
}

func TestMemSetNow(t *testing.T) {
	m := NewMem()
	now := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	m.SetNow(func() time.Time { return now })
	f := mustCreate(t, m, "/f", "x")
	defer f.Close()
	fi, err := m.Stat("/f")
	if err != nil || !fi.ModTime().Equal(now) {
		t.Fatalf("ModTime = %v, %v; want %v", fi.ModTime(), err, now)
	}
	now = now.Add(time.Hour)
	write(t, f, "y")
	if fi, _ := m.Stat("/f"); !fi.ModTime().Equal(now) {
		t.Errorf("ModTime after write = %v, want %v", fi.ModTime(), now)
	}
}

// TestMemMatchesOS runs the same random operations against the OS and MemFS and compares every result: contents
// read, sizes, listings, and which operations fail and how.
func TestMemMatchesOS(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			osDir := t.TempDir()
			mem := NewMem()
			must(t, mem.MkdirAll("/m", 0o755))
			fss := [2]FS{Default, mem}
			dirs := [2]string{osDir, "/m"}
			names := []string{"a", "b", "c"}
			var handles [2][]File
			defer func() {
				for _, hs := range handles {
					for _, h := range hs {
						h.Close()
					}
				}
			}()
			kind := func(err error) string {
				switch {
				case err == nil:
					return "ok"
				case err == io.EOF:
					return "EOF"
				case errors.Is(err, os.ErrNotExist):
					return "notexist"
				case errors.Is(err, os.ErrClosed):
					return "closed"
				case errors.Is(err, ErrReadOnly):
					return "readonly"
				}
				return "other: " + err.Error()
			}
			for step := range 400 {
				op := rng.IntN(9)
				name := names[rng.IntN(len(names))]
				other := names[rng.IntN(len(names))]
				h := -1
				if len(handles[0]) > 0 {
					h = rng.IntN(len(handles[0]))
				}
				data := bytes.Repeat([]byte{byte('a' + step%26)}, rng.IntN(20))
				off, size := rng.Int64N(40), rng.Int64N(30)
				var res [2]string
				for i, fs := range fss {
					p := filepath.Join(dirs[i], name)
					var r string
					switch op {
					case 0, 1: // open a handle
						var f File
						var err error
						switch rng := step % 3; {
						case op == 0:
							f, err = fs.Create(p)
						case rng == 0:
							f, err = fs.Open(p)
						default:
							f, err = fs.OpenReadWrite(p)
						}
						if err == nil {
							handles[i] = append(handles[i], f)
						}
						r = kind(err)
					case 2:
						if h < 0 {
							continue
						}
						n, err := handles[i][h].Write(data)
						r = fmt.Sprint(n, kind(err))
					case 3:
						if h < 0 {
							continue
						}
						buf := make([]byte, size)
						n, err := handles[i][h].ReadAt(buf, off)
						r = fmt.Sprintf("%q %s", buf[:n], kind(err))
					case 4:
						if h < 0 {
							continue
						}
						err := handles[i][h].Truncate(size)
						sz, serr := handles[i][h].Size()
						r = fmt.Sprint(kind(err), sz, kind(serr))
					case 5:
						if h < 0 {
							continue
						}
						r = kind(handles[i][h].Close())
					case 6:
						r = kind(fs.Rename(p, filepath.Join(dirs[i], other)))
					case 7:
						r = kind(fs.Remove(p))
					case 8:
						fi, err := fs.Stat(p)
						if err == nil {
							r = fmt.Sprint(fi.Name(), fi.Size())
						} else {
							r = kind(err)
						}
						l, err := fs.List(dirs[i])
						r += fmt.Sprint(l, kind(err))
					}
					res[i] = r
				}
				if res[0] != res[1] {
					t.Fatalf("step %d op %d on %s: os %q, mem %q", step, op, name, res[0], res[1])
				}
			}
		})
	}
}
