package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// TreeSize counts what a directory tree holds.
type TreeSize struct {
	Files, Dirs int   // below the root, which is not counted
	Bytes       int64 // the files' contents
}

// copyChunk is how much of a file CopyTree reads at a time.
const copyChunk = 1 << 20

// CopyTree makes dir in dst hold, durably, what dir holds in src: entries of dst's that src lacks are removed,
// every directory and file of src's is created in dst (dir itself with MkdirAll, its parent not synced), every
// file's contents are made equal and fsynced, and every directory is fsynced once its entries are. A dst file
// that already holds src's contents is not rewritten, one that holds them and more is truncated (so writing a
// crash clone over the directory it was taken of rewrites little). It returns what the tree holds.
//
// It loads a directory into a MemFS with everything durable (CopyTree(mem, Default, dir)) and writes a crash
// clone back over the directory (CopyTree(Default, clone, dir)). Modification times are not copied. src must not
// change meanwhile. Errors name the path.
func CopyTree(dst, src FS, dir string) (TreeSize, error) {
	var size TreeSize
	err := copyDir(dst, src, filepath.Clean(dir), &size)
	return size, err
}

func copyErr(name string, err error) error { return fmt.Errorf("vfs: copy %s: %w", name, err) }

func copyDir(dst, src FS, dir string, size *TreeSize) error {
	fi, err := src.Stat(dir)
	if err != nil {
		return copyErr(dir, err)
	}
	if !fi.IsDir() {
		return copyErr(dir, fmt.Errorf("not a directory"))
	}
	names, err := src.List(dir)
	if err != nil {
		return copyErr(dir, err)
	}
	if err := dst.MkdirAll(dir, fi.Mode().Perm()); err != nil {
		return copyErr(dir, err)
	}
	have, err := dst.List(dir)
	if err != nil {
		return copyErr(dir, err)
	}
	for _, name := range have {
		if !slices.Contains(names, name) {
			if err := dst.RemoveAll(filepath.Join(dir, name)); err != nil {
				return copyErr(filepath.Join(dir, name), err)
			}
		}
	}
	for _, name := range names {
		p := filepath.Join(dir, name)
		fi, err := src.Stat(p)
		if err != nil {
			return copyErr(p, err)
		}
		// An entry of the other kind in dst goes first.
		if di, err := dst.Stat(p); err == nil && di.IsDir() != fi.IsDir() {
			if err := dst.RemoveAll(p); err != nil {
				return copyErr(p, err)
			}
		}
		if fi.IsDir() {
			size.Dirs++
			err = copyDir(dst, src, p, size)
		} else {
			size.Files++
			err = copyFile(dst, src, p, size)
		}
		if err != nil {
			return err
		}
	}
	if err := dst.SyncDir(dir); err != nil {
		return copyErr(dir, err)
	}
	return nil
}

func copyFile(dst, src FS, name string, size *TreeSize) error {
	in, err := src.Open(name)
	if err != nil {
		return copyErr(name, err)
	}
	defer in.Close()
	n, err := in.Size()
	if err != nil {
		return copyErr(name, err)
	}
	size.Bytes += n
	out, err := dst.OpenReadWrite(name)
	switch {
	case err == nil:
		var have int64
		var same bool
		if have, same, err = holds(out, in, n); err == nil {
			switch {
			case !same:
				err = rewrite(out, in)
			case have > n:
				err = out.Truncate(n)
			}
		}
	case errors.Is(err, os.ErrNotExist):
		if out, err = dst.Create(name); err == nil {
			err = rewrite(out, in)
		}
	}
	if err == nil {
		err = out.Sync()
	}
	if out != nil {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return copyErr(name, err)
	}
	return nil
}

// holds reports f's size and whether f begins with the n bytes of src.
func holds(f, src File, n int64) (have int64, same bool, err error) {
	if have, err = f.Size(); err != nil || have < n {
		return have, false, err
	}
	a, b := make([]byte, min(n, copyChunk)), make([]byte, min(n, copyChunk))
	for off := int64(0); off < n; off += int64(len(a)) {
		k := min(int64(len(a)), n-off)
		if _, err := src.ReadAt(a[:k], off); err != nil {
			return have, false, err
		}
		if _, err := f.ReadAt(b[:k], off); err != nil {
			return have, false, err
		}
		if !bytes.Equal(a[:k], b[:k]) {
			return have, false, nil
		}
	}
	return have, true, nil
}

// rewrite makes f's contents src's.
func rewrite(f, src File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	buf := make([]byte, copyChunk)
	for off := int64(0); ; {
		n, err := src.ReadAt(buf, off)
		if n > 0 {
			if _, werr := f.Write(buf[:n]); werr != nil {
				return werr
			}
			off += int64(n)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
