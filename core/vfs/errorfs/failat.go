package errorfs

import (
	"slices"
	"sync"
)

// FailAt is an Injector that counts the operations whose kind is in Ops (all kinds when Ops is empty) and fails
// the one with index K (0-based) — and, when Sticky, every selected operation after it (a disk that stays full).
// K < 0 never fails, so a first run with K = -1 learns from Count how many operations a workload does. Set the
// fields before use and share the *FailAt; it is safe for concurrent use.
type FailAt struct {
	K      int  // index of the first selected operation to fail; < 0: none
	Ops    []Op // kinds to count and fail; empty: all
	Sticky bool // fail every selected operation from the K-th on
	// Err is the error to inject; nil means ErrInjected. Tests of a full disk pass syscall.ENOSPC.
	Err error
	// PartialWrite makes a failing Write store the first half of its bytes before it fails.
	PartialWrite bool

	mu      sync.Mutex
	count   int
	fired   bool
	cleared bool
}

// MaybeError implements Injector.
func (f *FailAt) MaybeError(op Op, path string) error {
	if len(f.Ops) > 0 && !slices.Contains(f.Ops, op) {
		return nil
	}
	f.mu.Lock()
	i := f.count
	f.count++
	fail := !f.cleared && f.K >= 0 && (i == f.K || f.Sticky && i > f.K)
	if fail {
		f.fired = true
	}
	f.mu.Unlock()
	if !fail {
		return nil
	}
	err := f.Err
	if err == nil {
		err = ErrInjected
	}
	if f.PartialWrite && op == OpWrite {
		return WithPartialWrite(err)
	}
	return err
}

// Count reports how many selected operations have been seen, failed or not.
func (f *FailAt) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

// Fired reports whether an operation has been failed.
func (f *FailAt) Fired() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired
}

// Clear ends the fault: no operation fails from now on (the disk has room
// again), though Count goes on counting. Safe to call while operations run.
func (f *FailAt) Clear() {
	f.mu.Lock()
	f.cleared = true
	f.mu.Unlock()
}
