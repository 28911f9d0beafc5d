package vfs

import (
	"os"
	"sync/atomic"
	"syscall"
)

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return openOS(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, false)
}

func (osFS) OpenReadWrite(name string) (File, error) {
	return openOS(name, os.O_RDWR|os.O_APPEND, false)
}

func (osFS) Open(name string) (File, error) {
	return openOS(name, os.O_RDONLY, true)
}

// openOS opens with open(2) and wraps the descriptor with os.NewFile,
// which leaves a blocking descriptor out of the runtime's poller: what
// os.OpenFile does for a regular file costs four more system calls (the
// poller's attempt to register it, fcntls), and a broker opening the files
// of 100,000 partitions at start-up makes over a million of them. Errors
// are os.OpenFile's (*os.PathError).
func openOS(name string, flag int, readOnly bool) (File, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(name, flag|syscall.O_CLOEXEC, 0o666)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return &osFile{f: os.NewFile(uintptr(fd), name), readOnly: readOnly}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(dir string) error                  { return os.RemoveAll(dir) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// osFile adapts *os.File to File: it adds Size, and reports ErrReadOnly for writes to read-only handles instead
// of the kernel's EBADF/EINVAL.
type osFile struct {
	f        *os.File
	readOnly bool
	closed   atomic.Bool
}

func (f *osFile) OSFile() *os.File { return f.f }
func (f *osFile) Name() string     { return f.f.Name() }

func (f *osFile) Write(p []byte) (int, error) {
	if f.readOnly {
		return 0, f.readOnlyErr("write")
	}
	return f.f.Write(p)
}

func (f *osFile) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }
func (f *osFile) Sync() error                             { return f.f.Sync() }

func (f *osFile) Truncate(size int64) error {
	if f.readOnly {
		return f.readOnlyErr("truncate")
	}
	return f.f.Truncate(size)
}

func (f *osFile) Size() (int64, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (f *osFile) Close() error {
	f.closed.Store(true)
	return f.f.Close()
}

func (f *osFile) readOnlyErr(op string) error {
	err := ErrReadOnly
	if f.closed.Load() {
		err = os.ErrClosed
	}
	return &os.PathError{Op: op, Path: f.f.Name(), Err: err}
}

var _ OSFiler = (*osFile)(nil)
