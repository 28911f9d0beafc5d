package vfs

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MemFS is an in-memory FS, safe for concurrent use, that can produce crash clones (see the package doc for the
// crash model). Paths are cleaned and taken relative to its root, so "d/f" and "/d/f" name the same file. Unlike
// the OS, Open of a directory fails with syscall.EISDIR, and SyncDir of a file with syscall.ENOTDIR.
type MemFS struct {
	mu   sync.Mutex // guards the namespace: every directory node's children, durable and dirMod
	root *memNode
	now  atomic.Pointer[func() time.Time]
}

// memNode is a directory or a file. A file node lives on while any handle refers to it, whatever happens to its
// names.
type memNode struct {
	isDir bool
	mode  os.FileMode

	// Directories, guarded by MemFS.mu.
	children map[string]*memNode
	durable  map[string]*memNode // entries as of the last SyncDir: what a crash leaves
	dirMod   time.Time

	// Files, guarded by mu. Bytes of data below len(synced) are never modified in place: Write only appends and
	// Truncate reallocates when it cuts into them, so synced can share data's array and Sync costs O(1).
	mu        sync.RWMutex
	data      []byte
	synced    []byte
	modTime   time.Time
	syncedMod time.Time
}

// NewMem returns an empty MemFS whose root directory exists.
func NewMem() *MemFS {
	m := &MemFS{}
	now := time.Now
	m.now.Store(&now)
	m.root = newDirNode(0o755, now())
	return m
}

// SetNow replaces the clock that stamps modification times (time.Now by default), so tests of age-based
// retention need not sleep. Crash clones inherit it.
func (m *MemFS) SetNow(now func() time.Time) { m.now.Store(&now) }

func (m *MemFS) clock() time.Time { return (*m.now.Load())() }

func newDirNode(perm os.FileMode, now time.Time) *memNode {
	return &memNode{isDir: true, mode: os.ModeDir | perm.Perm(), children: map[string]*memNode{}, dirMod: now}
}

func newFileNode(now time.Time) *memNode {
	return &memNode{mode: 0o644, modTime: now, syncedMod: now}
}

func pathErr(op, name string, err error) error { return &os.PathError{Op: op, Path: name, Err: err} }

// split cleans name against the root and returns its components; the root itself has none.
func split(name string) []string {
	p := filepath.Join(string(filepath.Separator), name)
	if p == string(filepath.Separator) {
		return nil
	}
	return strings.Split(p[1:], string(filepath.Separator))
}

// walk returns the node at parts. Callers hold m.mu.
func (m *MemFS) walk(op, name string, parts []string) (*memNode, error) {
	n := m.root
	for _, c := range parts {
		if !n.isDir {
			return nil, pathErr(op, name, syscall.ENOTDIR)
		}
		next := n.children[c]
		if next == nil {
			return nil, pathErr(op, name, syscall.ENOENT)
		}
		n = next
	}
	return n, nil
}

// parent returns the directory that holds name and name's base. Callers hold m.mu.
func (m *MemFS) parent(op, name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", pathErr(op, name, syscall.EINVAL)
	}
	dir, err := m.walk(op, name, parts[:len(parts)-1])
	if err != nil {
		return nil, "", err
	}
	if !dir.isDir {
		return nil, "", pathErr(op, name, syscall.ENOTDIR)
	}
	return dir, parts[len(parts)-1], nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent("open", name)
	if err != nil {
		return nil, err
	}
	now := m.clock()
	n := dir.children[base]
	switch {
	case n == nil:
		n = newFileNode(now)
		dir.children[base] = n
		dir.dirMod = now
	case n.isDir:
		return nil, pathErr("open", name, syscall.EISDIR)
	default: // O_TRUNC: the same node, emptied; its synced contents stay until the next Sync
		n.mu.Lock()
		n.data = nil
		n.modTime = now
		n.mu.Unlock()
	}
	return &memFile{fs: m, n: n, name: name, writable: true}, nil
}

// OpenReadWrite implements FS.
func (m *MemFS) OpenReadWrite(name string) (File, error) { return m.open(name, true) }

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) { return m.open(name, false) }

func (m *MemFS) open(name string, writable bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk("open", name, split(name))
	if err != nil {
		return nil, err
	}
	if n.isDir {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	return &memFile{fs: m, n: n, name: name, writable: writable}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent("remove", name)
	if err != nil {
		return err
	}
	n := dir.children[base]
	switch {
	case n == nil:
		return pathErr("remove", name, syscall.ENOENT)
	case n.isDir && len(n.children) > 0:
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(dir.children, base)
	dir.dirMod = m.clock()
	return nil
}

// RemoveAll implements FS. Like a sequence of unlinks, it is undone by a crash until SyncDir of dir's parent; the
// removed directories keep their own synced entries, so a crash brings them back whole.
func (m *MemFS) RemoveAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, base, err := m.parent("unlinkat", dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if parent.children[base] != nil {
		delete(parent.children, base)
		parent.dirMod = m.clock()
	}
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	linkErr := func(err error) error {
		if pe, ok := err.(*os.PathError); ok {
			err = pe.Err
		}
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	od, ob, err := m.parent("rename", oldname)
	if err != nil {
		return linkErr(err)
	}
	n := od.children[ob]
	if n == nil {
		return linkErr(syscall.ENOENT)
	}
	nd, nb, err := m.parent("rename", newname)
	if err != nil {
		return linkErr(err)
	}
	t := nd.children[nb]
	if t == n {
		return nil // same file: POSIX says do nothing
	}
	if n.isDir {
		oldParts, newParts := split(oldname), split(newname)
		if len(newParts) > len(oldParts) && slices.Equal(newParts[:len(oldParts)], oldParts) {
			return linkErr(syscall.EINVAL) // into its own subtree
		}
	}
	if t != nil {
		switch {
		case t.isDir && !n.isDir:
			return linkErr(syscall.EISDIR)
		case !t.isDir && n.isDir:
			return linkErr(syscall.ENOTDIR)
		case t.isDir && len(t.children) > 0:
			return linkErr(syscall.ENOTEMPTY)
		}
	}
	now := m.clock()
	delete(od.children, ob)
	nd.children[nb] = n
	od.dirMod, nd.dirMod = now, now
	return nil
}

// MkdirAll implements FS. The directories it creates are durable at once (see the crash model).
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, c := range split(dir) {
		if !n.isDir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		next := n.children[c]
		if next == nil {
			now := m.clock()
			next = newDirNode(perm, now)
			n.children[c] = next
			if n.durable == nil {
				n.durable = map[string]*memNode{}
			}
			n.durable[c] = next
			n.dirMod = now
		}
		n = next
	}
	if !n.isDir {
		return pathErr("mkdir", dir, syscall.ENOTDIR)
	}
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk("open", dir, split(dir))
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, pathErr("readdirent", dir, syscall.ENOTDIR)
	}
	return slices.Sorted(maps.Keys(n.children)), nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := split(name)
	n, err := m.walk("stat", name, parts)
	if err != nil {
		return nil, err
	}
	base := string(filepath.Separator)
	if len(parts) > 0 {
		base = parts[len(parts)-1]
	}
	if n.isDir {
		return &memInfo{name: base, mode: n.mode, mod: n.dirMod}, nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return &memInfo{name: base, size: int64(len(n.data)), mode: n.mode, mod: n.modTime}, nil
}

// SyncDir implements FS: it records dir's current entries as the ones a crash leaves.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk("sync", dir, split(dir))
	if err != nil {
		return err
	}
	if !n.isDir {
		return pathErr("sync", dir, syscall.ENOTDIR)
	}
	n.durable = maps.Clone(n.children)
	return nil
}

type memInfo struct {
	name string
	size int64
	mode os.FileMode
	mod  time.Time
}

func (i *memInfo) Name() string       { return i.name }
func (i *memInfo) Size() int64        { return i.size }
func (i *memInfo) Mode() os.FileMode  { return i.mode }
func (i *memInfo) ModTime() time.Time { return i.mod }
func (i *memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i *memInfo) Sys() any           { return nil }
