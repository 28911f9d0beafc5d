// Package partitionertest is the conformance suite for partitioner.Partitioner:
// one body of checks that every implementation runs, the built-ins in
// process and external partitioners through the go-plugin shim, so an
// implementation is held to the interface's documented contract rather than
// to whatever its own tests thought of.
//
// What Run checks (each a subtest):
//
//	responses        Check passes for 1, 2, 7 and 1000 partitions and batches of 0, 1, 100 and
//	                 10000 keys (nil, empty and non-empty, some repeated); keys are not modified;
//	                 a response is not reused by a later call (it belongs to the caller)
//	key-consistency  for partitioners that declare partitioner.KeyConsistent (or with
//	                 AssumeKeyConsistent): each non-empty key maps to one partition across batch
//	                 positions, batch sizes, calls, topics and fresh instances
//	large-batch      100000 keys (about 2 MB) in one call, repeated keys mapped alike when
//	                 key-consistent; a shim must carry it (gRPC's default message limit is 4 MB)
//	context-done     a call with an already cancelled or expired ctx fails with an error
//	                 wrapping ctx.Err(), or succeeds with a valid response; the next call works
//	bad-request      0, -1 and MinInt32 partitions: an error, never a panic
//
// The rule for a done ctx is the interface's: either answer is allowed,
// because an in-process partitioner may finish before it would look at ctx
// and an external one may fail on the way out, but an error must say why
// (errors.Is(err, context.Canceled)) and must not break the partitioner.
package partitionertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weir-broker/weir/plugins/partitioner"
)

// Option adjusts Run.
type Option func(*options)

type options struct{ keyConsistent bool }

// AssumeKeyConsistent makes Run check key consistency even when the
// partitioner does not implement partitioner.KeyConsistent, for wrappers
// (an RPC client, middleware) around a partitioner known to be consistent.
func AssumeKeyConsistent() Option { return func(o *options) { o.keyConsistent = true } }

// Run runs the conformance suite. newPartitioner must return a fresh,
// independent partitioner each time it is called (the suite builds several,
// and compares fresh instances); it may register cleanups on t.
func Run(t *testing.T, newPartitioner func(t *testing.T) partitioner.Partitioner, opts ...Option) {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(t, newPartitioner, o); err != nil {
				t.Error(err)
			}
		})
	}
}

type check struct {
	name string
	run  func(t *testing.T, newP func(*testing.T) partitioner.Partitioner, o options) error
}

var checks = []check{
	{"responses", checkResponses},
	{"key-consistency", checkKeyConsistency},
	{"large-batch", checkLargeBatch},
	{"context-done", checkContextDone},
	{"bad-request", checkBadRequest},
}

const topic = "conformance"

// mixedKeys returns n keys: about a tenth nil, a tenth empty, the rest 1 to
// 40 bytes of any value, a fifth of those repeating an earlier key.
func mixedKeys(rng *rand.Rand, n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		switch r := rng.IntN(10); {
		case r == 0:
			keys[i] = nil
		case r == 1:
			keys[i] = []byte{}
		case r < 4 && i > 0:
			keys[i] = slices.Clone(keys[rng.IntN(i)])
		default:
			k := make([]byte, 1+rng.IntN(40))
			for j := range k {
				k[j] = byte(rng.Uint32())
			}
			keys[i] = k
		}
	}
	return keys
}

// distinctKeys returns n distinct non-empty keys.
func distinctKeys(rng *rand.Rand, n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d-%x", i, rng.Uint32()>>uint(rng.IntN(32)))
	}
	return keys
}

// partition makes one call and verifies the answer: no panic, no error,
// Check passes, the keys are unchanged.
func partition(ctx context.Context, p partitioner.Partitioner, req partitioner.Request) (parts []int32, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("Partition(%d keys, %d partitions) panicked: %v", len(req.Keys), req.Partitions, r)
		}
	}()
	before := make([][]byte, len(req.Keys))
	for i, k := range req.Keys {
		before[i] = slices.Clone(k)
	}
	resp, err := p.Partition(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("Partition(%d keys, %d partitions): %w", len(req.Keys), req.Partitions, err)
	}
	if err := partitioner.Check(req, resp); err != nil {
		return nil, fmt.Errorf("Partition(%d keys, %d partitions): %w", len(req.Keys), req.Partitions, err)
	}
	for i, k := range req.Keys {
		if !slices.Equal(k, before[i]) || (k == nil) != (before[i] == nil) {
			return nil, fmt.Errorf("Partition(%d keys, %d partitions) modified key %d: %q, was %q", len(req.Keys), req.Partitions, i, k, before[i])
		}
	}
	return resp.Partitions, nil
}

func checkResponses(t *testing.T, newP func(*testing.T) partitioner.Partitioner, _ options) error {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int32{1, 2, 7, 1000} {
		p := newP(t)
		type answer struct {
			got, copy []int32
		}
		var answers []answer
		for _, size := range []int{0, 1, 100, 10000, 1, 0, 100} {
			got, err := partition(context.Background(), p, partitioner.Request{Topic: topic, Partitions: n, Keys: mixedKeys(rng, size)})
			if err != nil {
				return err
			}
			answers = append(answers, answer{got, slices.Clone(got)})
		}
		for i, a := range answers {
			if !slices.Equal(a.got, a.copy) {
				return fmt.Errorf("%d partitions: the response to call %d changed after later calls: the partitioner reused a slice it gave away", n, i)
			}
		}
	}
	return nil
}

func keyConsistent(p partitioner.Partitioner, o options) bool {
	kc, ok := p.(partitioner.KeyConsistent)
	return o.keyConsistent || ok && kc.KeyConsistent()
}

func checkKeyConsistency(t *testing.T, newP func(*testing.T) partitioner.Partitioner, o options) error {
	if p := newP(t); !keyConsistent(p, o) {
		t.Skipf("%T does not declare partitioner.KeyConsistent: no key affinity to check", p)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int32{1, 2, 7, 1000} {
		keys := distinctKeys(rng, 3000)
		p := newP(t)
		want, err := partition(context.Background(), p, partitioner.Request{Topic: topic, Partitions: n, Keys: keys})
		if err != nil {
			return err
		}
		// The same keys in another order, in batches of 1 to 500 mixed with
		// keyless records, to two topics.
		order := rng.Perm(len(keys))
		for len(order) > 0 {
			size := min(len(order), 1+rng.IntN(500))
			var batch [][]byte
			var idx []int
			for _, i := range order[:size] {
				if rng.IntN(4) == 0 {
					batch = append(batch, nil, []byte{})
					idx = append(idx, -1, -1)
				}
				batch = append(batch, keys[i])
				idx = append(idx, i)
			}
			order = order[size:]
			tp := []string{topic, "another-topic"}[rng.IntN(2)]
			got, err := partition(context.Background(), p, partitioner.Request{Topic: tp, Partitions: n, Keys: batch})
			if err != nil {
				return err
			}
			for j, i := range idx {
				if i >= 0 && got[j] != want[i] {
					return fmt.Errorf("%d partitions: key %q went to partition %d, earlier to %d (it declares itself key-consistent)", n, keys[i], got[j], want[i])
				}
			}
		}
		// A fresh instance agrees.
		fresh, err := partition(context.Background(), newP(t), partitioner.Request{Topic: topic, Partitions: n, Keys: keys})
		if err != nil {
			return err
		}
		for i := range keys {
			if fresh[i] != want[i] {
				return fmt.Errorf("%d partitions: key %q went to partition %d in a fresh instance, %d in the first", n, keys[i], fresh[i], want[i])
			}
		}
	}
	return nil
}

func checkLargeBatch(t *testing.T, newP func(*testing.T) partitioner.Partitioner, o options) error {
	rng := rand.New(rand.NewPCG(5, 6))
	p := newP(t)
	keys := mixedKeys(rng, 100_000)
	got, err := partition(context.Background(), p, partitioner.Request{Topic: topic, Partitions: 12, Keys: keys})
	if err != nil {
		return err
	}
	if !keyConsistent(p, o) {
		return nil
	}
	first := make(map[string]int32)
	for i, k := range keys {
		if len(k) == 0 {
			continue
		}
		if f, ok := first[string(k)]; !ok {
			first[string(k)] = got[i]
		} else if f != got[i] {
			return fmt.Errorf("key %q went to partitions %d and %d within one batch", k, f, got[i])
		}
	}
	return nil
}

func checkContextDone(t *testing.T, newP func(*testing.T) partitioner.Partitioner, _ options) error {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	rng := rand.New(rand.NewPCG(7, 8))
	for _, ctx := range []context.Context{cancelled, expired} {
		p := newP(t)
		req := partitioner.Request{Topic: topic, Partitions: 7, Keys: mixedKeys(rng, 100)}
		_, err := partition(ctx, p, req)
		if err != nil && !errors.Is(err, ctx.Err()) {
			return fmt.Errorf("with ctx done (%v): %w; want success or an error wrapping %v", ctx.Err(), err, ctx.Err())
		}
		if _, err := partition(context.Background(), p, req); err != nil {
			return fmt.Errorf("after a call with ctx done (%v): %w", ctx.Err(), err)
		}
	}
	return nil
}

func checkBadRequest(t *testing.T, newP func(*testing.T) partitioner.Partitioner, _ options) error {
	p := newP(t)
	for _, n := range []int32{0, -1, math.MinInt32} {
		req := partitioner.Request{Topic: topic, Partitions: n, Keys: [][]byte{[]byte("k"), nil, {}}}
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("Partition with %d partitions panicked: %v; want an error", n, r)
				}
			}()
			if resp, err := p.Partition(context.Background(), req); err == nil {
				return fmt.Errorf("Partition with %d partitions = %v, nil; want an error (partitioner.ErrBadRequest)", n, resp.Partitions)
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	// Still usable.
	_, err := partition(context.Background(), p, partitioner.Request{Topic: topic, Partitions: 3, Keys: [][]byte{[]byte("k")}})
	return err
}
