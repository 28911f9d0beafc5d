package zk

import (
	"bytes"
	"context"
	"fmt"

	gozk "github.com/go-zookeeper/zk"

	"github.com/weir-broker/weir/core/coord"
)

// Multi implements coord.Store.
//
// ZooKeeper answers a failed multi with a result per operation: ZOK for
// those before the failing one, its error for the failing one, and
// RUNTIMEINCONSISTENCY for the rest. go-zookeeper turns these into
// MultiResponse.Error (nil, the error, and an "unknown error: -2"), and
// returns the first error as Multi's own. The failing index is the first
// operation with an error.
//
// Operations are checked here first (paths, types, the root), so that a
// bad one is reported with its index without a round trip. An Ephemeral
// CreateOp whose outcome is unknown (ErrConnectionLoss) is not resolved
// here, unlike Create: read back.
func (s *Store) Multi(ctx context.Context, ops ...coord.Op) ([]coord.OpResult, error) {
	reqs := make([]any, len(ops))
	for i, op := range ops {
		req, err := s.toRequest(op)
		if err != nil {
			return nil, &coord.MultiError{Index: i, Op: op, Err: err}
		}
		reqs[i] = req
	}
	if len(ops) == 0 {
		if s.isClosed() {
			return nil, fmt.Errorf("zk: multi: %w", coord.ErrClosed)
		}
		return []coord.OpResult{}, nil
	}
	var resps []gozk.MultiResponse
	err := s.call(ctx, func() (err error) { resps, err = s.conn.Multi(reqs...); return err })
	if err != nil && completed(err) {
		for i, r := range resps {
			if i < len(ops) && r.Error != nil {
				return nil, &coord.MultiError{Index: i, Op: ops[i], Err: opErr(r.Error)}
			}
		}
	}
	if err != nil {
		return nil, s.mapErr("multi", ops[0].OpPath(), err)
	}
	if len(resps) != len(ops) {
		return nil, fmt.Errorf("zk: multi: %w: %d results for %d operations", coord.ErrConnectionLoss, len(resps), len(ops))
	}
	results := make([]coord.OpResult, len(ops))
	for i, r := range resps {
		if _, ok := ops[i].(*coord.SetOp); ok {
			results[i].Stat = toStat(r.Stat)
		}
	}
	return results, nil
}

// toRequest translates one operation, checking what the server would.
func (s *Store) toRequest(op coord.Op) (any, error) {
	if op == nil {
		return nil, fmt.Errorf("%w: nil operation", ErrUnsupported)
	}
	full, err := s.abs("multi", op.OpPath())
	if err != nil {
		return nil, err
	}
	switch o := op.(type) {
	case *coord.CreateOp:
		flags := int32(gozk.FlagPersistent)
		switch o.Mode {
		case coord.Persistent:
		case coord.Ephemeral:
			flags = gozk.FlagEphemeral
		default:
			return nil, fmt.Errorf("%w: mode %v", ErrUnsupported, o.Mode)
		}
		return &gozk.CreateRequest{Path: full, Data: bytes.Clone(o.Data), Acl: worldACL, Flags: flags}, nil
	case *coord.SetOp:
		return &gozk.SetDataRequest{Path: full, Data: bytes.Clone(o.Data), Version: o.Version}, nil
	case *coord.DeleteOp:
		if o.Path == "/" {
			return nil, fmt.Errorf("%w: the root always exists", coord.ErrInvalidPath)
		}
		return &gozk.DeleteRequest{Path: full, Version: o.Version}, nil
	case *coord.CheckOp:
		// Version -1 makes ZooKeeper check only that the node exists.
		return &gozk.CheckVersionRequest{Path: full, Version: o.Version}, nil
	}
	return nil, fmt.Errorf("%w: operation %T", ErrUnsupported, op)
}

// opErr maps the error of one operation of a failed multi to a coord
// sentinel (the MultiError names the operation and path).
func opErr(err error) error {
	if sentinel, ok := sentinels[err]; ok {
		return sentinel
	}
	return err
}
