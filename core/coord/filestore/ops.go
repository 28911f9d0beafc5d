package filestore

import (
	"context"

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
	err = s.read(ctx, &request{kind: "get", path: path}, func() error {
		var err error
		if data, st, err = s.tree.Get(path); err == nil && watch {
			ch = s.tree.Watch(tree.WatchNode, path, s.id)
		}
		return err
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
	err = s.read(ctx, &request{kind: "exists", path: path}, func() error {
		var err error
		if ok, st, err = s.tree.Exists(path); err == nil && watch {
			ch = s.tree.Watch(tree.WatchNode, path, s.id)
		}
		return err
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
	err = s.read(ctx, &request{kind: "children", path: path}, func() error {
		var err error
		if names, st, err = s.tree.Children(path); err == nil && watch {
			ch = s.tree.Watch(tree.WatchChildren, path, s.id)
		}
		return err
	})
	if err != nil {
		return nil, coord.Stat{}, nil, err
	}
	return names, st, ch, nil
}

// Create implements coord.Store.
func (s *Store) Create(ctx context.Context, path string, data []byte, mode coord.CreateMode) error {
	_, err := s.write(ctx, &request{kind: "create", path: path,
		ops: []coord.Op{&coord.CreateOp{Path: path, Data: data, Mode: mode}}})
	return err
}

// Set implements coord.Store.
func (s *Store) Set(ctx context.Context, path string, data []byte, version int32) (coord.Stat, error) {
	res, err := s.write(ctx, &request{kind: "set", path: path,
		ops: []coord.Op{&coord.SetOp{Path: path, Data: data, Version: version}}})
	if err != nil {
		return coord.Stat{}, err
	}
	return res[0].Stat, nil
}

// Delete implements coord.Store.
func (s *Store) Delete(ctx context.Context, path string, version int32) error {
	_, err := s.write(ctx, &request{kind: "delete", path: path,
		ops: []coord.Op{&coord.DeleteOp{Path: path, Version: version}}})
	return err
}

// Multi implements coord.Store. A failure is a *coord.MultiError (wrapped:
// use errors.As).
func (s *Store) Multi(ctx context.Context, ops ...coord.Op) ([]coord.OpResult, error) {
	return s.write(ctx, &request{kind: "multi", ops: ops})
}
