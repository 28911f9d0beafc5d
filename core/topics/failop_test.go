package topics

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// TestFailEveryOp fails each file operation of a workload in turn (a bad
// sector, a full disk for one call): the operation that hit it must report the
// error, the registry in memory must agree with what a reopen finds, and a
// failed Create must leave no topic behind.
func TestFailEveryOp(t *testing.T) {
	type result struct {
		topics map[string]int32 // in memory, after the workload stopped
		failed string           // the step that returned the error
		err    error
	}
	run := func(fsys vfs.FS) result {
		res := result{topics: map[string]int32{}}
		r, err := Open(Options{FS: fsys, Dir: "/d", Clock: newClock()})
		if err != nil {
			return result{failed: "open", err: err}
		}
		closed := false
		defer func() {
			if !closed {
				r.Close()
			}
		}()
		steps := []struct {
			name string
			f    func() error
		}{
			{"create a", func() error { _, err := r.Create("a", 2, nil); return err }},
			{"create b", func() error {
				_, err := r.Create("b", 1, map[string]string{"weir.durable.acks": "true"})
				return err
			}},
			{"append b", func() error {
				p, err := r.Partition("b", 0)
				if err == nil {
					_, err = p.Append(ctx, idem(t, 1, 0, 0, 2))
				}
				return err
			}},
			{"producer id", func() error { _, _, err := r.InitProducerID(); return err }},
			{"delete a", func() error { return r.Delete("a") }},
			{"create c", func() error { _, err := r.Create("c", 3, nil); return err }},
			{"close", func() error {
				for _, tp := range r.Topics() {
					res.topics[tp.Name] = int32(len(tp.Partitions))
				}
				closed = true
				return r.Close()
			}},
		}
		for _, s := range steps {
			if err := s.f(); err != nil {
				res.failed, res.err = s.name, err
				break
			}
		}
		if !closed {
			for _, tp := range r.Topics() {
				res.topics[tp.Name] = int32(len(tp.Partitions))
			}
		}
		return res
	}
	probe := &errorfs.FailAt{K: -1}
	if res := run(errorfs.Wrap(vfs.NewMem(), probe)); res.err != nil {
		t.Fatalf("workload without failures: %s: %v", res.failed, res.err)
	}
	t.Logf("%d operations", probe.Count())
	for k := range probe.Count() {
		mem := vfs.NewMem()
		inj := &errorfs.FailAt{K: k}
		var firedOp errorfs.Op
		var firedPath string
		res := run(errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
			err := inj.MaybeError(op, path)
			if err != nil {
				firedOp, firedPath = op, path
			}
			return err
		})))
		if !inj.Fired() {
			t.Fatalf("op %d: never reached", k)
		}
		if res.err == nil {
			// Failures that may be shrugged off, all inside partlog: an
			// unreadable recovery-point file only means a slower recovery,
			// and a failed close of a deleted segment loses nothing.
			if !(firedOp == errorfs.OpOpen && strings.HasSuffix(firedPath, "/recovery-point")) && firedOp != errorfs.OpClose {
				t.Errorf("op %d (%v %s): failure swallowed", k, firedOp, firedPath)
			}
			continue
		}
		if !errors.Is(res.err, errorfs.ErrInjected) {
			t.Errorf("op %d: %s failed with %v, which hides the injected error", k, res.failed, res.err)
		}
		if res.failed == "open" {
			continue
		}
		r, err := Open(Options{FS: mem, Dir: "/d", Clock: newClock()})
		if err != nil {
			t.Fatalf("op %d (%s): reopen: %v", k, res.failed, err)
		}
		got := map[string]int32{}
		for _, tp := range r.Topics() {
			got[tp.Name] = int32(len(tp.Partitions))
		}
		if !maps.Equal(got, res.topics) {
			t.Errorf("op %d (%s failed: %v): reopened topics %v, in memory %v", k, res.failed, res.err, got, res.topics)
		}
		if err := r.Close(); err != nil {
			t.Errorf("op %d: close: %v", k, err)
		}
	}
}
