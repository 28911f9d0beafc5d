package filestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/internal/tree"
	"github.com/weir-broker/weir/core/vfs"
)

// Options configure Open.
type Options struct {
	// FS is the file system; nil means vfs.Default.
	FS vfs.FS
	// Dir is the directory of the file (created if missing); required.
	Dir string
}

func (o *Options) validate() error {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Dir == "" {
		return errors.New("filestore: Options.Dir is empty")
	}
	return nil
}

// Store is the one session on a file; it implements coord.Store.
type Store struct {
	fs   vfs.FS
	dir  string
	file string // the file's path

	mu      sync.Mutex
	tree    *tree.Tree
	id      int64
	state   coord.SessionState
	changed chan struct{}
	// unsynced: a replacement of the file renamed it into place but its
	// directory fsync failed, so the file may not be durable; the next
	// request writes it again before anything else.
	unsynced bool
}

var _ coord.Store = (*Store)(nil)

// Open loads the tree from the file in o.Dir (a missing file is an empty
// tree; a corrupt one an error wrapping ErrCorrupt) and starts a session.
func Open(o Options) (*Store, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Store{fs: o.FS, dir: o.Dir, file: filepath.Join(o.Dir, FileName), changed: make(chan struct{})}
	if err := s.fs.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("filestore: open: %w", err)
	}
	if err := s.fs.Remove(filepath.Join(s.dir, tmpFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("filestore: open: remove the leftover %s: %w", tmpFileName, err)
	}
	t, err := readTree(s.fs, s.file)
	if err != nil {
		return nil, err
	}
	s.tree = t
	s.id = t.Bump() // the new session's creation, recorded before it is used
	if _, err := s.persist(); err != nil {
		return nil, fmt.Errorf("filestore: open: %w", err)
	}
	s.state = coord.Connected
	return s, nil
}

// persist replaces the file with the tree's persistent state. renamed says
// whether the new file took the old one's place (then only the directory
// fsync failed).
func (s *Store) persist() (renamed bool, err error) {
	zxid, nodes := s.tree.Persistent()
	tmp := filepath.Join(s.dir, tmpFileName)
	if err := vfs.WriteFileSynced(s.fs, tmp, encode(zxid, nodes)); err != nil {
		_ = s.fs.Remove(tmp)
		return false, fmt.Errorf("write %s: %w", tmpFileName, err)
	}
	if err := s.fs.Rename(tmp, s.file); err != nil {
		_ = s.fs.Remove(tmp)
		return false, fmt.Errorf("replace %s: %w", FileName, err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return true, fmt.Errorf("replace %s: sync %s: %w", FileName, s.dir, err)
	}
	return true, nil
}

func (s *Store) setState(st coord.SessionState) {
	if s.state == st {
		return
	}
	s.state = st
	close(s.changed)
	s.changed = make(chan struct{})
}

// Session implements coord.Store: Connected, or Connecting while the file
// may not be durable, or Closed.
func (s *Store) Session() coord.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return coord.Session{ID: s.id, State: s.state, Changed: s.changed}
}

// Close implements coord.Store. It writes the file only if it may not be
// durable yet: ending the session deletes only ephemeral nodes, which the
// file never held.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == coord.Closed {
		return nil
	}
	s.tree.DropWatches(s.id, coord.ErrClosed)
	s.tree.EndSession(s.id).Commit()
	var err error
	if s.unsynced {
		if _, perr := s.persist(); perr != nil {
			err = fmt.Errorf("filestore: close: %w", perr)
		}
	}
	s.setState(coord.Closed)
	return err
}

// ready is the error for a request now, if any; the caller holds s.mu.
func (s *Store) ready(ctx context.Context, r *request) error {
	if s.state == coord.Closed {
		return r.errorf(coord.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return r.errorf(fmt.Errorf("%w (%w)", coord.ErrConnectionLoss, err))
	}
	if s.unsynced {
		if _, err := s.persist(); err != nil {
			return r.errorf(fmt.Errorf("%w: %w", coord.ErrConnectionLoss, err))
		}
		s.unsynced = false
		s.setState(coord.Connected)
	}
	return nil
}

type request struct {
	kind string
	path string // "" for a Multi
	ops  []coord.Op
}

func (r *request) validate() error {
	if r.kind != "multi" {
		if err := coord.ValidatePath(r.path); err != nil {
			return r.errorf(err)
		}
		return nil
	}
	for i, op := range r.ops {
		if err := coord.ValidatePath(op.OpPath()); err != nil {
			return r.errorf(&coord.MultiError{Index: i, Op: op, Err: err})
		}
	}
	return nil
}

func (r *request) errorf(err error) error {
	if r.kind == "multi" {
		var me *coord.MultiError
		if errors.As(err, &me) {
			return fmt.Errorf("filestore: %w", err)
		}
		return fmt.Errorf("filestore: multi: %w", err)
	}
	return fmt.Errorf("filestore: %s %s: %w", r.kind, r.path, err)
}

// read runs fn on the tree under the lock once the request may go ahead.
func (s *Store) read(ctx context.Context, r *request, fn func() error) error {
	if err := r.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(ctx, r); err != nil {
		return err
	}
	if err := fn(); err != nil {
		return r.errorf(err)
	}
	return nil
}

// write applies the request's operations and replaces the file, or changes
// nothing.
func (s *Store) write(ctx context.Context, r *request) ([]coord.OpResult, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(ctx, r); err != nil {
		return nil, err
	}
	tx, i, err := s.tree.Apply(s.id, r.ops)
	if err != nil {
		if r.kind == "multi" {
			err = &coord.MultiError{Index: i, Op: r.ops[i], Err: err}
		}
		return nil, r.errorf(err)
	}
	if tx.Changed() {
		renamed, err := s.persist()
		switch {
		case err != nil && renamed:
			tx.Commit()
			s.unsynced = true
			s.setState(coord.Connecting)
			return nil, r.errorf(fmt.Errorf("%w: %w", coord.ErrConnectionLoss, err))
		case err != nil:
			tx.Rollback()
			return nil, r.errorf(err)
		}
	}
	tx.Commit()
	return tx.Results, nil
}
