package vfs

import (
	"path/filepath"
	"testing"
)

// benchWrite appends 4 KiB per iteration, truncating every 4 MiB so the file (and the disk) stays small.
func benchWrite(b *testing.B, fs FS, name string) {
	f, err := fs.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, 4<<10)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%1024 == 1023 {
			if err := f.Truncate(0); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := f.Write(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWrite4K(b *testing.B) {
	b.Run("fs=mem", func(b *testing.B) { benchWrite(b, NewMem(), "/f") })
	b.Run("fs=os", func(b *testing.B) { benchWrite(b, Default, filepath.Join(b.TempDir(), "f")) })
}

func BenchmarkReadAt4K(b *testing.B) {
	for _, im := range []struct {
		name string
		fs   FS
		dir  func() string
	}{{"mem", NewMem(), func() string { return "/" }}, {"os", Default, b.TempDir}} {
		b.Run("fs="+im.name, func(b *testing.B) {
			f, err := im.fs.Create(filepath.Join(im.dir(), "f"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			p := make([]byte, 4<<10)
			for range 256 {
				if _, err := f.Write(p); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := f.ReadAt(p, int64(i%256)*int64(len(p))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendSync is what a PowerFS's lock costs a broker: a 4 KiB write and an fsync on a bare MemFS and on a
// PowerFS around one. The file restarts every MiB, as a segment would roll, so the figure does not grow with the
// file (a MemFS fsync keeps the bytes it covers apart).
func BenchmarkAppendSync(b *testing.B) {
	for _, fs := range []struct {
		name string
		fs   FS
	}{{"memfs", NewMem()}, {"powerfs", NewPower(NewMem(), PowerConfig{})}} {
		b.Run(fs.name, func(b *testing.B) {
			if err := fs.fs.MkdirAll("/d", 0o755); err != nil {
				b.Fatal(err)
			}
			f, err := fs.fs.Create("/d/log")
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 4096)
			b.SetBytes(int64(len(buf)))
			n := 0
			for b.Loop() {
				if n++; n%256 == 0 {
					if err := f.Truncate(0); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := f.Write(buf); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
