package pluginrpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// OpenFunc opens an instance in a plugin process through the kind's stub and
// returns the plugin's id for it. It runs at the first call and again in
// every new process after a restart, with the same parameters. When it
// rejects the plugin's answer after the plugin opened an instance, it
// returns that instance's id with the error, and the instance is closed in
// the plugin; an error wrapping ErrIncompatible fails the Instance for good.
type OpenFunc[T any] func(ctx context.Context, stub T) (id uint64, err error)

// CallFunc runs one of the kind's calls for the instance id.
type CallFunc[T any] func(ctx context.Context, stub T, id uint64) error

// Instance is one opened plugin instance of a kind: a codec, a partitioner or
// a flush policy living in the supervised process. T is the kind's generated
// gRPC client stub. Calls may run concurrently; whether the plugin copes is
// the kind's contract.
type Instance[T any] struct {
	sup   *Supervisor
	kind  Kind
	open  OpenFunc[T]
	close CallFunc[T]

	mu     sync.Mutex
	gen    uint64 // process generation the instance is open in; 0: none
	id     uint64
	closed bool
	broken error // why the instance fails for good (ErrIncompatible)
}

// Open opens an instance of kind in sup's process (starting the process if
// the last one failed) by running open, which calls the kind's Open RPC.
// closeFn calls the kind's Close RPC. Errors wrap kind.ErrFailed, or
// kind.ErrInvalid when the plugin rejects the parameters.
func Open[T any](ctx context.Context, sup *Supervisor, kind Kind, open OpenFunc[T], closeFn CallFunc[T]) (*Instance[T], error) {
	in := &Instance[T]{sup: sup, kind: kind, open: open, close: closeFn}
	if _, _, _, err := in.ready(ctx); err != nil {
		return nil, err
	}
	return in, nil
}

// Name returns the plugin's path, for messages.
func (in *Instance[T]) Name() string { return in.sup.cfg.Path }

// Call runs fn, the kind's call op, on the instance: restarting the process
// and re-opening the instance first if the process failed since, with the
// call deadline, and with every failure turned into an error that wraps
// kind.ErrFailed and names the plugin (see Supervisor). An error fn makes
// itself (not a gRPC status) is returned as is.
func (in *Instance[T]) Call(ctx context.Context, op string, fn CallFunc[T]) error {
	p, stub, id, err := in.ready(ctx)
	if err != nil {
		return err
	}
	return in.sup.do(ctx, p, in.kind, op, func(ctx context.Context) error { return fn(ctx, stub, id) })
}

// ready returns the live process, the kind's stub and the instance's id in
// it, opening the instance there if needed.
func (in *Instance[T]) ready(ctx context.Context) (*process, T, uint64, error) {
	var zero T
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil, zero, 0, fmt.Errorf("%w: %w: %s %s instance", in.kind.ErrFailed, ErrClosed, in.sup.cfg.Path, in.kind.Name)
	}
	if in.broken != nil {
		return nil, zero, 0, in.broken
	}
	p, err := in.sup.acquire()
	if err != nil {
		return nil, zero, 0, fmt.Errorf("%w: %w", in.kind.ErrFailed, err)
	}
	raw, err := p.dispense(in.kind.Name)
	if err != nil {
		return nil, zero, 0, fmt.Errorf("%w: %w: %s: %w", in.kind.ErrFailed, ErrNotServed, in.sup.cfg.Path, err)
	}
	stub, ok := raw.(T)
	if !ok {
		return nil, zero, 0, fmt.Errorf("%w: %w: %s: the host's %s plugin dispenses %T", in.kind.ErrFailed, ErrNotServed, in.sup.cfg.Path, in.kind.Name, raw)
	}
	if in.gen == p.gen {
		return p, stub, in.id, nil
	}
	var id uint64
	err = in.sup.do(ctx, p, in.kind, "Open", func(ctx context.Context) error {
		var err error
		id, err = in.open(ctx, stub)
		return err
	})
	if err != nil {
		if id != 0 && in.close != nil && !p.exited() {
			// The plugin opened an instance the OpenFunc rejected:
			// close it there, or it leaks in the process.
			_ = in.sup.do(ctx, p, in.kind, "Close", func(ctx context.Context) error { return in.close(ctx, stub, id) })
		}
		if errors.Is(err, ErrIncompatible) {
			in.broken = err
		}
		return nil, zero, 0, err
	}
	in.gen, in.id = p.gen, id
	return p, stub, id, nil
}

// Close closes the instance in the plugin, if its process still runs (a
// closed instance needs no restart). Later calls fail with ErrClosed. It is
// idempotent.
func (in *Instance[T]) Close(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil
	}
	in.closed = true
	s := in.sup
	s.mu.Lock()
	p := s.cur
	s.mu.Unlock()
	if p == nil || p.gen != in.gen || p.exited() || in.close == nil {
		return nil
	}
	raw, err := p.dispense(in.kind.Name)
	if err != nil {
		return nil
	}
	stub, _ := raw.(T)
	return s.do(ctx, p, in.kind, "Close", func(ctx context.Context) error { return in.close(ctx, stub, in.id) })
}
