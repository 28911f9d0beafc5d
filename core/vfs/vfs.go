package vfs

import (
	"errors"
	"io"
	"os"
)

// ErrReadOnly is returned (inside an *os.PathError) by Write and Truncate on a file opened with [FS.Open].
var ErrReadOnly = errors.New("vfs: file opened read-only")

// File is an open file.
//
// Write always appends at the current end of the file (the OS implementation opens writable files with
// O_APPEND), so after Truncate the next Write continues at the new end. ReadAt may run concurrently with Write and
// with other ReadAt calls (the log has one writer and many readers); the other methods need no more than that one
// writer. ReadAt behaves like os.File.ReadAt: when it returns n < len(p) the error says why, io.EOF at the end of
// the file. After Close every method returns an error for which errors.Is(err, os.ErrClosed) holds.
type File interface {
	io.Writer
	io.ReaderAt
	io.Closer
	// Sync makes the file's data (and the metadata needed to read it back) durable. It does not make the file's
	// directory entry durable: that takes FS.SyncDir of its directory.
	Sync() error
	// Truncate changes the size of the file; growing it appends zero bytes.
	Truncate(size int64) error
	// Size returns the current size of the file, including writes not yet synced.
	Size() (int64, error)
	// Name returns the path the file was opened with.
	Name() string
}

// FS is the file-system seam. Paths are slash-separated; implementations clean them with path/filepath.
// Errors are those of package os (or compatible): errors.Is(err, os.ErrNotExist) for a missing name,
// os.ErrExist, syscall.ENOTDIR, syscall.EISDIR, syscall.ENOTEMPTY where os would return them.
type FS interface {
	// Create creates the named file, or truncates it if it exists, and opens it read-write for appending.
	Create(name string) (File, error)
	// OpenReadWrite opens an existing file read-write for appending.
	OpenReadWrite(name string) (File, error)
	// Open opens an existing file read-only; Write and Truncate on it fail with ErrReadOnly.
	Open(name string) (File, error)
	// Remove removes a file or an empty directory. Open handles keep working.
	Remove(name string) error
	// RemoveAll removes dir and everything below it; a missing dir is not an error.
	RemoveAll(dir string) error
	// Rename renames oldname to newname, atomically replacing newname if it exists, like os.Rename.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the base names of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes the named file or directory (at least Name, Size, IsDir and ModTime).
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes durable the entries created, removed or renamed in dir.
	SyncDir(dir string) error
}

// OSFiler is implemented by files of the OS file system (and by errorfs wrappers of them); the network layer uses
// it to sendfile from a segment. The *os.File is owned by the File: do not close it, and note that I/O through it
// bypasses any wrapper.
type OSFiler interface {
	OSFile() *os.File
}

// ReadFile returns the whole contents of the named file.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return buf[:n], nil
}

// WriteFileSynced creates (or truncates) name with contents b and fsyncs it;
// not its directory, which the caller fsyncs once it has made all its
// entries.
func WriteFileSynced(fs FS, name string, b []byte) error {
	f, err := fs.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
