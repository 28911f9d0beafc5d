package diskfs

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is a loopback node whose changes are charged to the device model and recorded in the undo log.
type node struct {
	*fs.LoopbackNode
	m *Mount
}

var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
)

// WrapChild makes every node of the tree a *node.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	if ln, ok := ops.(*fs.LoopbackNode); ok {
		return &node{LoopbackNode: ln, m: n.m}
	}
	return ops
}

func (n *node) path() string { return filepath.Join(n.RootData.Path, n.Path(nil)) }

func (n *node) ino() uint64 { return n.StableAttr().Ino }

func (n *node) isRoot() bool { return n.EmbeddedInode() == n.Root() }

// parentIno is the directory the allocator places this file's blocks near.
func (n *node) parentIno() uint64 {
	if _, p := n.Parent(); p != nil && p != n.Root() {
		return p.StableAttr().Ino
	}
	return rootIno
}

// reserved refuses names weir keeps for itself in the root.
func (n *node) reserved(name string) bool { return n.isRoot() && name == stateDir }

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.reserved(name) {
		out.Attr.Mode = syscall.S_IFDIR | 0o700
		return n.m.controlDir(ctx, n), 0
	}
	return n.LoopbackNode.Lookup(ctx, name, out)
}

// stripFlags removes what the model implements from the flags the backing file is opened with.
func stripFlags(flags uint32) uint32 {
	return flags &^ (syscall.O_DIRECT | syscall.O_SYNC | syscall.O_DSYNC)
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.reserved(name) {
		return nil, nil, 0, syscall.EPERM
	}
	done, e := n.m.enter()
	if e != 0 {
		return nil, nil, 0, e
	}
	defer done()
	u := n.m.undo
	u.mu.Lock()
	if err := u.beforeDir(n.ino(), n.path()); err != nil {
		u.mu.Unlock()
		return nil, nil, 0, errno(err)
	}
	p := filepath.Join(n.path(), name)
	var st syscall.Stat_t
	trunc := flags&syscall.O_TRUNC != 0 && syscall.Lstat(p, &st) == nil
	if trunc {
		if err := u.beforeData(st.Ino, -1, p, 0, -1); err != nil {
			u.mu.Unlock()
			return nil, nil, 0, errno(err)
		}
	}
	ch, fh, fflags, e := n.LoopbackNode.Create(ctx, name, stripFlags(flags), mode, out)
	u.mu.Unlock()
	if e != 0 {
		return nil, nil, 0, e
	}
	n.m.engine.namespace()
	if trunc {
		n.m.engine.truncate(st.Ino, n.ino(), 0)
	}
	return ch, n.m.wrap(ch.Operations().(*node), fh, flags), fflags, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	trunc := flags&syscall.O_TRUNC != 0
	if trunc || flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		done, e := n.m.enter()
		if e != 0 {
			return nil, 0, e
		}
		defer done()
	}
	u := n.m.undo
	if trunc {
		u.mu.Lock()
		defer u.mu.Unlock()
		if err := u.beforeData(n.ino(), -1, n.path(), 0, -1); err != nil {
			return nil, 0, errno(err)
		}
	}
	fh, fflags, e := n.LoopbackNode.Open(ctx, stripFlags(flags))
	if e != 0 {
		return nil, 0, e
	}
	if trunc {
		n.m.engine.truncate(n.ino(), n.parentIno(), 0)
	}
	return n.m.wrap(n, fh, flags), fflags, 0
}

// dirChange runs op, a change of this directory's entries (and newParent's, if not nil), with their synced
// entries kept first and the replaced or removed file (at victim, if not "") kept in the trash.
func (n *node) dirChange(newParent *node, victim string, op func() syscall.Errno) syscall.Errno {
	done, e := n.m.enter()
	if e != 0 {
		return e
	}
	defer done()
	u := n.m.undo
	u.mu.Lock()
	err := u.beforeDir(n.ino(), n.path())
	if err == nil && newParent != nil {
		err = u.beforeDir(newParent.ino(), newParent.path())
	}
	if err == nil && victim != "" {
		err = u.keep(victim)
	}
	if err != nil {
		u.mu.Unlock()
		return errno(err)
	}
	e = op()
	u.mu.Unlock()
	if e == 0 {
		n.m.engine.namespace()
	}
	return e
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.reserved(name) {
		return syscall.EPERM
	}
	p := filepath.Join(n.path(), name)
	var st syscall.Stat_t
	known := syscall.Lstat(p, &st) == nil
	e := n.dirChange(nil, p, func() syscall.Errno { return n.LoopbackNode.Unlink(ctx, name) })
	if e == 0 && known && st.Nlink <= 1 {
		n.m.engine.forget(st.Ino)
	}
	return e
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if n.reserved(name) || np.reserved(newName) {
		return syscall.EPERM
	}
	victim := filepath.Join(np.path(), newName)
	if flags&unixRenameExchange != 0 {
		victim = "" // both names stay; the snapshots bring them back
	}
	return n.dirChange(np, victim, func() syscall.Errno {
		return n.LoopbackNode.Rename(ctx, name, np, newName, flags)
	})
}

const unixRenameExchange = 2 // RENAME_EXCHANGE

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.reserved(name) {
		return nil, syscall.EPERM
	}
	var ch *fs.Inode
	e := n.dirChange(nil, "", func() (e syscall.Errno) {
		ch, e = n.LoopbackNode.Link(ctx, target, name, out)
		return e
	})
	return ch, e
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.reserved(name) {
		return nil, syscall.EPERM
	}
	var ch *fs.Inode
	e := n.dirChange(nil, "", func() (e syscall.Errno) {
		ch, e = n.LoopbackNode.Symlink(ctx, target, name, out)
		return e
	})
	return ch, e
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.reserved(name) {
		return nil, syscall.EPERM
	}
	var ch *fs.Inode
	e := n.dirChange(nil, "", func() (e syscall.Errno) {
		ch, e = n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
		return e
	})
	return ch, e
}

// Mkdir and Rmdir are durable at once (see undo).
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.reserved(name) {
		return nil, syscall.EPERM
	}
	done, e := n.m.enter()
	if e != 0 {
		return nil, e
	}
	defer done()
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if n.reserved(name) {
		return syscall.EPERM
	}
	done, e := n.m.enter()
	if e != 0 {
		return e
	}
	defer done()
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	h, _ := f.(*handle)
	if h != nil {
		f = h.lf
	}
	sz, ok := in.GetSize()
	if !ok {
		return n.LoopbackNode.Setattr(ctx, f, in, out)
	}
	done, e := n.m.enter()
	if e != 0 {
		return e
	}
	defer done()
	u := n.m.undo
	u.mu.Lock()
	fd := -1
	if h != nil {
		fd = h.fd
	}
	if err := u.beforeData(n.ino(), fd, n.path(), int64(sz), -1); err != nil {
		u.mu.Unlock()
		return errno(err)
	}
	e = n.LoopbackNode.Setattr(ctx, f, in, out)
	u.mu.Unlock()
	if e == 0 {
		n.m.engine.truncate(n.ino(), n.parentIno(), int64(sz))
	}
	return e
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		f = h.lf
	}
	return n.LoopbackNode.Getattr(ctx, f, out)
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fflags, e := n.LoopbackNode.OpendirHandle(ctx, flags)
	if e != 0 {
		return nil, 0, e
	}
	return &dirHandle{inner: fh, n: n}, fflags, 0
}

// CopyFileRange is refused, so the kernel copies through reads and writes the model charges.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, len uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// Tmpfile (O_TMPFILE) is not supported.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

// dirHandle is a directory's open handle: fsync on it is the directory fsync that makes its entries durable.
type dirHandle struct {
	inner fs.FileHandle
	n     *node
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.inner.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.inner.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.inner.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	done, e := d.n.m.enter()
	if e != 0 {
		return e
	}
	defer done()
	d.n.m.engine.fsyncDir()
	d.n.m.undo.dirSynced(d.n.ino())
	return 0
}

// handle is an open file: reads and writes go to the backing file and are charged to the model.
type handle struct {
	lf     *fs.LoopbackFile
	fd     int
	n      *node
	direct bool // O_DIRECT
	sync   bool // O_SYNC or O_DSYNC
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
	_ fs.FileLseeker   = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
	_ fs.FileGetlker   = (*handle)(nil)
	_ fs.FileSetlker   = (*handle)(nil)
	_ fs.FileSetlkwer  = (*handle)(nil)
)

func (m *Mount) wrap(n *node, fh fs.FileHandle, flags uint32) fs.FileHandle {
	lf := fh.(*fs.LoopbackFile)
	fd, _ := lf.PassthroughFd()
	return &handle{lf: lf, fd: fd, n: n, direct: flags&syscall.O_DIRECT != 0,
		sync: flags&(syscall.O_SYNC|syscall.O_DSYNC) != 0}
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.n.m.engine.read(h.n.ino(), h.n.parentIno(), off, int64(len(dest)), h.direct)
	return h.lf.Read(ctx, dest, off)
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	done, e := h.n.m.enter()
	if e != 0 {
		return 0, e
	}
	defer done()
	u := h.n.m.undo
	u.mu.Lock()
	if err := u.beforeData(h.n.ino(), h.fd, "", off, int64(len(data))); err != nil {
		u.mu.Unlock()
		return 0, errno(err)
	}
	k, e := h.lf.Write(ctx, data, off)
	u.mu.Unlock()
	if e != 0 {
		return k, e
	}
	h.n.m.engine.write(h.n.ino(), h.n.parentIno(), off, int64(k), h.direct, h.sync)
	if h.sync {
		u.synced(h.n.ino())
	}
	return k, 0
}

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	done, e := h.n.m.enter()
	if e != 0 {
		return e
	}
	defer done()
	h.n.m.engine.fsync(h.n.ino(), h.n.parentIno(), flags&1 != 0)
	h.n.m.undo.synced(h.n.ino())
	return 0
}

func (h *handle) Flush(ctx context.Context) syscall.Errno { return h.lf.Flush(ctx) }

func (h *handle) Release(ctx context.Context) syscall.Errno { return h.lf.Release(ctx) }

func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.lf.Getattr(ctx, out)
}

func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.lf.Lseek(ctx, off, whence)
}

// Allocate is fallocate(2). Plain preallocation (mode 0, or FALLOC_FL_KEEP_SIZE) lays the range out on the
// modelled device (engine.preallocate: contiguous runs of its directory's region and the regions after it) and
// only extends the backing file's size (mode 0), leaving it sparse: the preallocated pages read as zeros, as a
// file system's unwritten extents do, and a file spanning most of a modelled 10 TB array costs the backing
// directory nothing. Other modes (punching holes, zeroing ranges) go to the backing file.
func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	done, e := h.n.m.enter()
	if e != 0 {
		return e
	}
	defer done()
	u := h.n.m.undo
	u.mu.Lock()
	defer u.mu.Unlock()
	if mode&^unix.FALLOC_FL_KEEP_SIZE == 0 {
		end := int64(off + size)
		if mode == 0 {
			// The size the last fsync covered is kept (a cut takes the extension back); no bytes change.
			if err := u.beforeData(h.n.ino(), h.fd, "", end, -1); err != nil {
				return errno(err)
			}
			var st unix.Stat_t
			if err := unix.Fstat(h.fd, &st); err != nil {
				return errno(err)
			}
			if end > st.Size {
				if err := unix.Ftruncate(h.fd, end); err != nil {
					return errno(err)
				}
			}
		}
		first, last := pagesOf(int64(off), int64(size))
		if _, ok := h.n.m.engine.preallocate(h.n.ino(), h.n.parentIno(), first, last-first+1); size > 0 && !ok {
			return syscall.ENOSPC
		}
		return 0
	}
	if err := u.beforeData(h.n.ino(), h.fd, "", int64(off), int64(size)); err != nil {
		return errno(err)
	}
	return h.lf.Allocate(ctx, off, size, mode)
}

func (h *handle) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return h.lf.Getlk(ctx, owner, lk, flags, out)
}

func (h *handle) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.lf.Setlk(ctx, owner, lk, flags)
}

func (h *handle) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.lf.Setlkw(ctx, owner, lk, flags)
}
