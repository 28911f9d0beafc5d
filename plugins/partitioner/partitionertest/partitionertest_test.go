package partitionertest

import (
	"context"
	"strings"
	"testing"

	"github.com/weir-broker/weir/plugins/partitioner"
)

// TestBuiltins runs the suite against every registered partitioner, built
// from its bare name (so each instance draws its own seed: the suite must
// hold for any seed).
func TestBuiltins(t *testing.T) {
	for _, name := range partitioner.Names() {
		t.Run(name, func(t *testing.T) {
			Run(t, func(t *testing.T) partitioner.Partitioner {
				p, err := partitioner.New(name)
				if err != nil {
					t.Fatal(err)
				}
				return p
			})
		})
	}
}

// broken partitioners, each breaking one rule, to show the suite catches it.
type (
	outOfRange    struct{}
	fickle        struct{ calls int32 }
	keyMutator    struct{}
	sliceReuser   struct{ buf []int32 }
	panicsOnZero  struct{}
	ignoresCancel struct{ failed bool }
	perInstance   struct{ offset int32 }
)

func (outOfRange) Partition(_ context.Context, req partitioner.Request) (partitioner.Response, error) {
	out := make([]int32, len(req.Keys))
	for i := range out {
		out[i] = int32(i) % (req.Partitions + 1) // reaches n
	}
	return partitioner.Response{Partitions: out}, nil
}

func (p *fickle) Partition(_ context.Context, req partitioner.Request) (partitioner.Response, error) {
	p.calls++
	out := make([]int32, len(req.Keys))
	for i := range out {
		out[i] = p.calls % req.Partitions
	}
	return partitioner.Response{Partitions: out}, nil
}
func (*fickle) KeyConsistent() bool { return true }

func (keyMutator) Partition(_ context.Context, req partitioner.Request) (partitioner.Response, error) {
	for _, k := range req.Keys {
		if len(k) > 0 {
			k[0] ^= 1
		}
	}
	return partitioner.Response{Partitions: make([]int32, len(req.Keys))}, nil
}

func (p *sliceReuser) Partition(_ context.Context, req partitioner.Request) (partitioner.Response, error) {
	if cap(p.buf) < len(req.Keys) {
		p.buf = make([]int32, len(req.Keys))
	}
	out := p.buf[:len(req.Keys)]
	for i := range out {
		out[i] = int32(len(req.Keys)+i) % req.Partitions
	}
	return partitioner.Response{Partitions: out}, nil
}

func (panicsOnZero) Partition(_ context.Context, req partitioner.Request) (partitioner.Response, error) {
	out := make([]int32, len(req.Keys))
	for i := range out {
		out[i] = int32(i) % req.Partitions // divides by zero
	}
	return partitioner.Response{Partitions: out}, nil
}

func (p *ignoresCancel) Partition(ctx context.Context, req partitioner.Request) (partitioner.Response, error) {
	if ctx.Err() != nil {
		return partitioner.Response{}, context.DeadlineExceeded // the wrong reason
	}
	return partitioner.Response{Partitions: make([]int32, len(req.Keys))}, nil
}

func (p *perInstance) Partition(_ context.Context, req partitioner.Request) (partitioner.Response, error) {
	out := make([]int32, len(req.Keys))
	for i, k := range req.Keys {
		out[i] = (int32(len(k)) + p.offset) % req.Partitions
	}
	return partitioner.Response{Partitions: out}, nil
}
func (*perInstance) KeyConsistent() bool { return true }

// TestSuiteCatches: each broken partitioner fails the check it breaks, with
// a message that says what broke.
func TestSuiteCatches(t *testing.T) {
	instances := int32(0)
	tests := []struct {
		check string
		newP  func(*testing.T) partitioner.Partitioner
		want  string
	}{
		{"responses", func(*testing.T) partitioner.Partitioner { return outOfRange{} }, "out of range"},
		{"responses", func(*testing.T) partitioner.Partitioner { return keyMutator{} }, "modified key"},
		{"responses", func(*testing.T) partitioner.Partitioner { return &sliceReuser{} }, "reused a slice"},
		{"key-consistency", func(*testing.T) partitioner.Partitioner { return &fickle{} }, "earlier to"},
		{"key-consistency", func(*testing.T) partitioner.Partitioner {
			instances++
			return &perInstance{offset: instances}
		}, "fresh instance"},
		{"large-batch", func(*testing.T) partitioner.Partitioner { return outOfRange{} }, "out of range"},
		{"context-done", func(*testing.T) partitioner.Partitioner { return &ignoresCancel{} }, "want success or an error wrapping context canceled"},
		{"bad-request", func(*testing.T) partitioner.Partitioner { return panicsOnZero{} }, "panicked"},
		{"bad-request", func(*testing.T) partitioner.Partitioner { return keyMutator{} }, "want an error"},
	}
	for _, tc := range tests {
		t.Run(tc.check+"/"+tc.want, func(t *testing.T) {
			for _, c := range checks {
				if c.name != tc.check {
					continue
				}
				err := c.run(t, tc.newP, options{})
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("check %s: %v, want an error containing %q", c.name, err, tc.want)
				}
				return
			}
			t.Fatalf("no check %q", tc.check)
		})
	}
}

// TestAssumeKeyConsistent: the option turns the key check on for a
// partitioner that does not declare it.
func TestAssumeKeyConsistent(t *testing.T) {
	newP := func(*testing.T) partitioner.Partitioner { return &sliceReuser{} }
	var o options
	AssumeKeyConsistent()(&o)
	if err := checkKeyConsistency(t, newP, o); err == nil {
		t.Error("key-consistency passed a partitioner whose answers depend on the batch size")
	}
}
