package vfs

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"syscall"
)

// memFile is a handle on a MemFS file node.
type memFile struct {
	fs       *MemFS
	n        *memNode
	name     string
	writable bool
	closed   atomic.Bool
}

var errNegativeOffset = errors.New("negative offset")

func (f *memFile) Name() string { return f.name }

// check returns the error of op on this handle, if any, before it touches the node.
func (f *memFile) check(op string, write bool) error {
	switch {
	case f.closed.Load():
		return pathErr(op, f.name, os.ErrClosed)
	case write && !f.writable:
		return pathErr(op, f.name, ErrReadOnly)
	}
	return nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	now := f.fs.clock()
	n := f.n
	n.mu.Lock()
	n.data = append(n.data, p...)
	n.modTime = now
	n.mu.Unlock()
	return len(p), nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("readat", f.name, errNegativeOffset)
	}
	if len(p) == 0 {
		return 0, nil // as os.File: an empty read succeeds, even at or past the end or after Close
	}
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	n := f.n
	n.mu.RLock()
	defer n.mu.RUnlock()
	if off >= int64(len(n.data)) {
		return 0, io.EOF
	}
	c := copy(p, n.data[off:])
	if c < len(p) {
		return c, io.EOF
	}
	return c, nil
}

// Sync records the current contents as the ones a crash leaves. Like fsync it is allowed on read-only handles.
func (f *memFile) Sync() error {
	if err := f.check("sync", false); err != nil {
		return err
	}
	n := f.n
	n.mu.Lock()
	n.synced = n.data[:len(n.data):len(n.data)]
	n.syncedMod = n.modTime
	n.mu.Unlock()
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	now := f.fs.clock()
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	switch cur := int64(len(n.data)); {
	case size < int64(len(n.synced)):
		// Later appends would overwrite synced bytes in place: give data its own array.
		n.data = append(make([]byte, 0, size+size/4+64), n.data[:size]...)
	case size <= cur:
		n.data = n.data[:size]
	default:
		n.data = append(n.data, make([]byte, size-cur)...)
	}
	n.modTime = now
	return nil
}

func (f *memFile) Size() (int64, error) {
	if err := f.check("stat", false); err != nil {
		return 0, err
	}
	n := f.n
	n.mu.RLock()
	defer n.mu.RUnlock()
	return int64(len(n.data)), nil
}

func (f *memFile) Close() error {
	if f.closed.Swap(true) {
		return pathErr("close", f.name, os.ErrClosed)
	}
	return nil
}
