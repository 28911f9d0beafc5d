package filestore_test

import (
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/coordtest"
	"github.com/weir-broker/weir/core/coord/filestore"
	"github.com/weir-broker/weir/core/vfs"
)

type harness struct {
	fs func(t *testing.T) (vfs.FS, string)
}

func (h harness) New(t *testing.T) coordtest.Env {
	fsys, dir := h.fs(t)
	return &env{fs: fsys, dir: dir}
}

// env opens the store on one directory; Connect after Close is a restart.
type env struct {
	fs   vfs.FS
	dir  string
	open *filestore.Store
}

func (e *env) OneSession() {}

func (e *env) Connect(t *testing.T) coord.Store {
	t.Helper()
	if e.open != nil && e.open.Session().State != coord.Closed {
		t.Fatal("filestore: a second session while one is open")
	}
	s, err := filestore.Open(filestore.Options{FS: e.fs, Dir: e.dir})
	if err != nil {
		t.Fatal(err)
	}
	e.open = s
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	coordtest.Run(t, harness{func(*testing.T) (vfs.FS, string) { return vfs.NewMem(), "/data" }})
}

// TestConformanceOS runs the suite on the real file system, fsyncs and all.
func TestConformanceOS(t *testing.T) {
	if testing.Short() {
		t.Skip("fsyncs")
	}
	coordtest.Run(t, harness{func(t *testing.T) (vfs.FS, string) { return vfs.Default, t.TempDir() }})
}
