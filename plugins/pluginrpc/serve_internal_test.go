package pluginrpc

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestWatchParentNoticesReparenting(t *testing.T) {
	var calls atomic.Int32
	getppid := func() int {
		if calls.Add(1) < 3 {
			return 42
		}
		return 1 // re-parented to init
	}
	gone := make(chan struct{})
	go watchParent(42, time.Millisecond, getppid, func() { close(gone) })
	<-gone
	if n := calls.Load(); n != 3 {
		t.Fatalf("gone after %d checks, want 3 (two with the parent, one without)", n)
	}
}

type closer struct{ closed int }

func (c *closer) Close() error { c.closed++; return nil }

func TestInstances(t *testing.T) {
	var r Instances[*closer]
	a, b := &closer{}, &closer{}
	ida, idb := r.Add(a), r.Add(b)
	if ida == 0 || idb == 0 || ida == idb {
		t.Fatalf("ids %d and %d: want distinct and non-zero", ida, idb)
	}
	if got, err := r.Get(idb); err != nil || got != b {
		t.Fatalf("Get(%d) = %v, %v", idb, got, err)
	}
	if _, err := r.Get(99); !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("Get(99): %v, want ErrUnknownInstance", err)
	}
	if err := r.Remove(ida); err != nil || a.closed != 1 {
		t.Fatalf("Remove: %v, closed %d times", err, a.closed)
	}
	if err := r.Remove(ida); err != nil || a.closed != 1 {
		t.Fatalf("second Remove: %v, closed %d times", err, a.closed)
	}
	if r.Len() != 1 {
		t.Fatalf("Len = %d, want 1", r.Len())
	}
}
