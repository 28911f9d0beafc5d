// Package errorfs wraps a vfs.FS so tests can fail any of its operations: the k-th write (a bad sector), every
// write from the k-th on (a full disk), the k-th fsync (the error that loses page-cache data).
//
// [Wrap] asks an [Injector] before every operation of the FS and of the files it opens; a non-nil answer is
// returned, wrapped in an [*Error] naming the operation and path, instead of performing the operation. Two
// operations still touch the underlying FS when they fail: Close closes the underlying file anyway (as close(2)
// releases the descriptor even when it reports an error), and a Write whose injected error was made with
// [WithPartialWrite] first writes half of its bytes (a short write).
//
// [FailAt] is the injector for loops: count a workload's operations with K = -1, then fail each index in turn:
//
//	probe := &errorfs.FailAt{K: -1, Ops: []errorfs.Op{errorfs.OpWrite, errorfs.OpSync}}
//	run(errorfs.Wrap(vfs.NewMem(), probe))
//	for k := range probe.Count() {
//		inj := &errorfs.FailAt{K: k, Ops: probe.Ops}
//		err := run(errorfs.Wrap(vfs.NewMem(), inj))
//		// inj.Fired() is true; err must wrap errorfs.ErrInjected.
//	}
package errorfs

import (
	"errors"
	"os"
	"strconv"

	"github.com/weir-broker/weir/core/vfs"
)

// ErrInjected is the default injected error; every error made by Wrap's FS for an injection wraps it.
var ErrInjected = errors.New("errorfs: injected error")

// Op is a kind of operation.
type Op int

// The operations an Injector is asked about.
const (
	OpCreate   Op = iota // FS.Create
	OpOpen               // FS.Open and FS.OpenReadWrite
	OpRead               // File.ReadAt
	OpWrite              // File.Write
	OpSync               // File.Sync
	OpTruncate           // File.Truncate
	OpSize               // File.Size
	OpClose              // File.Close
	OpRemove             // FS.Remove and FS.RemoveAll
	OpRename             // FS.Rename (the path is the old name)
	OpMkdir              // FS.MkdirAll
	OpList               // FS.List
	OpStat               // FS.Stat
	OpSyncDir            // FS.SyncDir
	numOps
)

var opNames = [numOps]string{"create", "open", "read", "write", "sync", "truncate", "size", "close", "remove",
	"rename", "mkdir", "list", "stat", "syncdir"}

func (o Op) String() string {
	if o < 0 || o >= numOps {
		return "op(" + strconv.Itoa(int(o)) + ")"
	}
	return opNames[o]
}

// Injector decides, for each operation, whether it fails: a nil answer lets it run. It must be safe for concurrent
// use. path is the name the FS method was called with, or the file's Name() for file methods.
type Injector interface {
	MaybeError(op Op, path string) error
}

// InjectorFunc adapts a function to Injector; it is also a convenient hook to act at the k-th operation (say, take
// a MemFS crash clone) without failing it.
type InjectorFunc func(op Op, path string) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op, path string) error { return f(op, path) }

// Error is what Wrap's FS returns for an injected failure. errors.Is(err, ErrInjected) always holds, and so does
// errors.Is(err, e.Err), so a test that injects syscall.ENOSPC sees ENOSPC.
type Error struct {
	Op   Op
	Path string
	Err  error // the injector's error (ErrInjected by default)
}

func (e *Error) Error() string {
	s := ErrInjected.Error() + ": " + e.Op.String() + " " + e.Path
	if e.Err != ErrInjected {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the injector's error and ErrInjected.
func (e *Error) Unwrap() []error {
	if e.Err == ErrInjected {
		return []error{e.Err}
	}
	return []error{e.Err, ErrInjected}
}

type partialWrite struct{ err error }

func (p *partialWrite) Error() string { return p.err.Error() }
func (p *partialWrite) Unwrap() error { return p.err }

// WithPartialWrite marks an injector's error for OpWrite: the write stores the first half of its bytes before
// failing with err. For other operations the mark is ignored.
func WithPartialWrite(err error) error { return &partialWrite{err: err} }

// Wrap returns an FS that asks inj before every operation of fs and of the files it opens. Files of fs that
// implement vfs.OSFiler are wrapped in files that do too; I/O through the *os.File bypasses inj.
func Wrap(fs vfs.FS, inj Injector) vfs.FS { return &errFS{fs: fs, inj: inj} }

type errFS struct {
	fs  vfs.FS
	inj Injector
}

// check asks the injector about op; a non-nil result is the error to return.
func check(inj Injector, op Op, path string) error {
	err := inj.MaybeError(op, path)
	if err == nil {
		return nil
	}
	var pw *partialWrite
	if errors.As(err, &pw) {
		err = pw.err
	}
	return &Error{Op: op, Path: path, Err: err}
}

func (e *errFS) wrapFile(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	ef := &file{f: f, inj: e.inj}
	if of, ok := f.(vfs.OSFiler); ok {
		return &osFile{file: ef, of: of}, nil
	}
	return ef, nil
}

func (e *errFS) Create(name string) (vfs.File, error) {
	if err := check(e.inj, OpCreate, name); err != nil {
		return nil, err
	}
	return e.wrapFile(e.fs.Create(name))
}

func (e *errFS) OpenReadWrite(name string) (vfs.File, error) {
	if err := check(e.inj, OpOpen, name); err != nil {
		return nil, err
	}
	return e.wrapFile(e.fs.OpenReadWrite(name))
}

func (e *errFS) Open(name string) (vfs.File, error) {
	if err := check(e.inj, OpOpen, name); err != nil {
		return nil, err
	}
	return e.wrapFile(e.fs.Open(name))
}

func (e *errFS) Remove(name string) error {
	if err := check(e.inj, OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

func (e *errFS) RemoveAll(dir string) error {
	if err := check(e.inj, OpRemove, dir); err != nil {
		return err
	}
	return e.fs.RemoveAll(dir)
}

func (e *errFS) Rename(oldname, newname string) error {
	if err := check(e.inj, OpRename, oldname); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

func (e *errFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := check(e.inj, OpMkdir, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir, perm)
}

func (e *errFS) List(dir string) ([]string, error) {
	if err := check(e.inj, OpList, dir); err != nil {
		return nil, err
	}
	return e.fs.List(dir)
}

func (e *errFS) Stat(name string) (os.FileInfo, error) {
	if err := check(e.inj, OpStat, name); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

func (e *errFS) SyncDir(dir string) error {
	if err := check(e.inj, OpSyncDir, dir); err != nil {
		return err
	}
	return e.fs.SyncDir(dir)
}

type file struct {
	f   vfs.File
	inj Injector
}

func (f *file) Name() string { return f.f.Name() }

func (f *file) Write(p []byte) (int, error) {
	err := f.inj.MaybeError(OpWrite, f.f.Name())
	if err == nil {
		return f.f.Write(p)
	}
	n := 0
	var pw *partialWrite
	if errors.As(err, &pw) {
		n, _ = f.f.Write(p[:len(p)/2])
		err = pw.err
	}
	return n, &Error{Op: OpWrite, Path: f.f.Name(), Err: err}
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := check(f.inj, OpRead, f.f.Name()); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *file) Sync() error {
	if err := check(f.inj, OpSync, f.f.Name()); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *file) Truncate(size int64) error {
	if err := check(f.inj, OpTruncate, f.f.Name()); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *file) Size() (int64, error) {
	if err := check(f.inj, OpSize, f.f.Name()); err != nil {
		return 0, err
	}
	return f.f.Size()
}

// Close closes the underlying file even when the injector fails it.
func (f *file) Close() error {
	if err := check(f.inj, OpClose, f.f.Name()); err != nil {
		f.f.Close()
		return err
	}
	return f.f.Close()
}

// osFile is a file whose underlying file is an OS file, so the network layer can still sendfile from it.
type osFile struct {
	*file
	of vfs.OSFiler
}

func (f *osFile) OSFile() *os.File { return f.of.OSFile() }
