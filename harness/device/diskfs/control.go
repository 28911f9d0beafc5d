package diskfs

import (
	"context"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// ControlFile is the control file's path inside a mount. Reading it gives the mount's Status; writing a command
// to it runs the command:
//
//	lose-unsynced   cut the power (Mount.LoseUnsynced); "cut" is the same
//	sync            write back everything and flush the device (Mount.Sync)
const ControlFile = stateDir + "/control"

// Inode numbers of the control directory and file, far from a backing file system's.
const (
	controlDirIno  = 1<<63 | 1
	controlFileIno = 1<<63 | 2
)

func (m *Mount) controlDir(ctx context.Context, root *node) *fs.Inode {
	m.ctlMu.Lock()
	defer m.ctlMu.Unlock()
	if m.ctl == nil {
		dir := root.NewPersistentInode(ctx, &fs.Inode{}, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: controlDirIno})
		file := root.NewPersistentInode(ctx, &controlNode{m: m}, fs.StableAttr{Mode: syscall.S_IFREG, Ino: controlFileIno})
		dir.AddChild("control", file, false)
		m.ctl = dir
	}
	return m.ctl
}

// controlNode is the control file.
type controlNode struct {
	fs.Inode
	m *Mount
}

var (
	_ fs.NodeOpener    = (*controlNode)(nil)
	_ fs.NodeReader    = (*controlNode)(nil)
	_ fs.NodeWriter    = (*controlNode)(nil)
	_ fs.NodeGetattrer = (*controlNode)(nil)
	_ fs.NodeSetattrer = (*controlNode)(nil)
)

func (c *controlNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (c *controlNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	b := []byte(c.m.Status().String())
	if off >= int64(len(b)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(b[off:min(int64(len(b)), off+int64(len(dest)))]), 0
}

func (c *controlNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	switch strings.TrimSpace(string(data)) {
	case "lose-unsynced", "cut":
		if _, err := c.m.LoseUnsynced(); err != nil {
			return 0, syscall.EIO
		}
	case "sync":
		if c.m.cut.Load() {
			return 0, syscall.EIO
		}
		c.m.Sync()
	default:
		return 0, syscall.EINVAL
	}
	return uint32(len(data)), 0
}

func (c *controlNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o600
	return 0
}

func (c *controlNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o600
	return 0
}
