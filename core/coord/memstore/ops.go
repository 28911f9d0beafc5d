package memstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/internal/tree"
)

// Get implements coord.Store.
func (s *Store) Get(ctx context.Context, path string) ([]byte, coord.Stat, error) {
	data, st, _, err := s.get(ctx, path, false)
	return data, st, err
}

// GetW implements coord.Store.
func (s *Store) GetW(ctx context.Context, path string) ([]byte, coord.Stat, <-chan coord.Event, error) {
	return s.get(ctx, path, true)
}

func (s *Store) get(ctx context.Context, path string, watch bool) (data []byte, st coord.Stat, ch <-chan coord.Event, err error) {
	req := &Request{Kind: KindGet, Path: path, Watch: watch}
	err = s.do(ctx, req, func(t *tree.Tree) error {
		var err error
		if data, st, err = t.Get(path); err != nil {
			return req.errorf(err)
		}
		if watch {
			ch = t.Watch(tree.WatchNode, path, s.id)
		}
		return nil
	})
	if err != nil {
		return nil, coord.Stat{}, nil, err
	}
	return data, st, ch, nil
}

// Exists implements coord.Store.
func (s *Store) Exists(ctx context.Context, path string) (bool, coord.Stat, error) {
	ok, st, _, err := s.exists(ctx, path, false)
	return ok, st, err
}

// ExistsW implements coord.Store.
func (s *Store) ExistsW(ctx context.Context, path string) (bool, coord.Stat, <-chan coord.Event, error) {
	return s.exists(ctx, path, true)
}

func (s *Store) exists(ctx context.Context, path string, watch bool) (ok bool, st coord.Stat, ch <-chan coord.Event, err error) {
	req := &Request{Kind: KindExists, Path: path, Watch: watch}
	err = s.do(ctx, req, func(t *tree.Tree) error {
		var err error
		if ok, st, err = t.Exists(path); err != nil {
			return req.errorf(err)
		}
		if watch {
			ch = t.Watch(tree.WatchNode, path, s.id)
		}
		return nil
	})
	if err != nil {
		return false, coord.Stat{}, nil, err
	}
	return ok, st, ch, nil
}

// Children implements coord.Store.
func (s *Store) Children(ctx context.Context, path string) ([]string, coord.Stat, error) {
	names, st, _, err := s.children(ctx, path, false)
	return names, st, err
}

// ChildrenW implements coord.Store.
func (s *Store) ChildrenW(ctx context.Context, path string) ([]string, coord.Stat, <-chan coord.Event, error) {
	return s.children(ctx, path, true)
}

func (s *Store) children(ctx context.Context, path string, watch bool) (names []string, st coord.Stat, ch <-chan coord.Event, err error) {
	req := &Request{Kind: KindChildren, Path: path, Watch: watch}
	err = s.do(ctx, req, func(t *tree.Tree) error {
		var err error
		if names, st, err = t.Children(path); err != nil {
			return req.errorf(err)
		}
		if watch {
			ch = t.Watch(tree.WatchChildren, path, s.id)
		}
		return nil
	})
	if err != nil {
		return nil, coord.Stat{}, nil, err
	}
	return names, st, ch, nil
}

// Create implements coord.Store.
func (s *Store) Create(ctx context.Context, path string, data []byte, mode coord.CreateMode) error {
	_, err := s.write(ctx, &Request{Kind: KindCreate, Path: path,
		Ops: []coord.Op{&coord.CreateOp{Path: path, Data: data, Mode: mode}}})
	return err
}

// Set implements coord.Store.
func (s *Store) Set(ctx context.Context, path string, data []byte, version int32) (coord.Stat, error) {
	res, err := s.write(ctx, &Request{Kind: KindSet, Path: path,
		Ops: []coord.Op{&coord.SetOp{Path: path, Data: data, Version: version}}})
	if err != nil {
		return coord.Stat{}, err
	}
	return res[0].Stat, nil
}

// Delete implements coord.Store.
func (s *Store) Delete(ctx context.Context, path string, version int32) error {
	_, err := s.write(ctx, &Request{Kind: KindDelete, Path: path,
		Ops: []coord.Op{&coord.DeleteOp{Path: path, Version: version}}})
	return err
}

// Multi implements coord.Store. A failure is a *coord.MultiError (wrapped:
// use errors.As).
func (s *Store) Multi(ctx context.Context, ops ...coord.Op) ([]coord.OpResult, error) {
	return s.write(ctx, &Request{Kind: KindMulti, Ops: ops})
}

func (s *Store) write(ctx context.Context, req *Request) (res []coord.OpResult, err error) {
	err = s.do(ctx, req, func(t *tree.Tree) error {
		tx, i, err := t.Apply(s.id, req.Ops)
		if err != nil {
			if req.Kind == KindMulti {
				return req.errorf(&coord.MultiError{Index: i, Op: req.Ops[i], Err: err})
			}
			return req.errorf(err)
		}
		tx.Commit()
		res = tx.Results
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// validate checks the request's paths before it goes anywhere, as a
// ZooKeeper client does.
func (r *Request) validate() error {
	if r.Kind != KindMulti {
		if err := coord.ValidatePath(r.Path); err != nil {
			return r.errorf(err)
		}
		return nil
	}
	for i, op := range r.Ops {
		if err := coord.ValidatePath(op.OpPath()); err != nil {
			return r.errorf(&coord.MultiError{Index: i, Op: op, Err: err})
		}
	}
	return nil
}

// errorf wraps err with the package, the request and its path.
func (r *Request) errorf(err error) error {
	var me *coord.MultiError
	if r.Kind == KindMulti && errors.As(err, &me) {
		return fmt.Errorf("memstore: %w", err)
	}
	if r.Kind == KindMulti {
		return fmt.Errorf("memstore: multi: %w", err)
	}
	return fmt.Errorf("memstore: %s %s: %w", r.Kind, r.Path, err)
}
