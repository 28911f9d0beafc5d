package filestore

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/internal/tree"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// randomOps draws a request of 1..3 operations on the paths of a small
// tree, so that many succeed and some fail.
func randomOps(rng *rand.Rand) []coord.Op {
	paths := []string{"/a", "/a/b", "/a/c", "/a/b/d", "/e", "/e/f"}
	var ops []coord.Op
	for range 1 + rng.IntN(3) {
		p := paths[rng.IntN(len(paths))]
		switch rng.IntN(6) {
		case 0, 1:
			mode := coord.Persistent
			if rng.IntN(3) == 0 {
				mode = coord.Ephemeral
			}
			data := []byte(fmt.Sprint(rng.IntN(1000)))
			if rng.IntN(4) == 0 {
				data = []byte{0xff, byte(rng.IntN(256))}
			}
			ops = append(ops, &coord.CreateOp{Path: p, Data: data, Mode: mode})
		case 2, 3:
			ops = append(ops, &coord.SetOp{Path: p, Data: []byte(fmt.Sprint(rng.IntN(1000))), Version: coord.AnyVersion})
		case 4:
			ops = append(ops, &coord.DeleteOp{Path: p, Version: coord.AnyVersion})
		default:
			ops = append(ops, &coord.CheckOp{Path: p, Version: int32(rng.IntN(2))})
		}
	}
	return ops
}

// TestRandomCrashes runs random requests against a store with random
// compaction bounds and random crashes (between requests, and at a random
// file operation during one, torn or not), and against a model: a tree that
// applies the same requests. Between crashes the store's persistent state is
// the model's after every request. A store reopened after a crash holds the
// model's state after the requests acknowledged, or after the one in flight,
// and goes on from there.
func TestRandomCrashes(t *testing.T) {
	seeds := uint64(40)
	if testing.Short() {
		seeds = 8
	}
	var crashes, inFlight int
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c, f := randomCrashes(t, seed)
			crashes, inFlight = crashes+c, inFlight+f
		})
	}
	if crashes < 5*int(seeds) || inFlight == 0 {
		t.Fatalf("%d crashes, %d of them keeping the request in flight: too few to test anything", crashes, inFlight)
	}
}

// randomCrashes runs one seed and returns how many crashes it reopened
// from, and how many of them kept the request in flight.
func randomCrashes(t *testing.T, seed uint64) (crashes, inFlight int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	opts := Options{CompactBytes: []int64{1, 600, 4000, 0}[seed%4]}
	ctx := t.Context()
	cur := vfs.NewMem()
	fileOps, crashAt := 0, -1
	var crashed *vfs.MemFS
	hook := errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		fileOps++
		if fileOps == crashAt {
			if rng.IntN(2) == 0 {
				crashed = cur.CrashClone()
			} else {
				crashed = cur.CrashCloneTorn(rng)
			}
		}
		return nil
	})
	s, err := Open(opts.on(errorfs.Wrap(cur, hook)))
	must(t, err)
	m := tree.New()
	m.Bump()

	// reopen opens fsys after a crash and makes it the store and the model,
	// from one of the states the crash may have left.
	reopen := func(fsys *vfs.MemFS, candidates ...state) {
		t.Helper()
		s.Close() // on the old file system, which is left behind
		crashAt, crashed = -1, nil
		cur = fsys
		var err error
		s, err = Open(opts.on(errorfs.Wrap(cur, hook)))
		if err != nil {
			t.Fatalf("reopen after crash %d: %v", crashes, err)
		}
		got := s.snap()
		for i, c := range candidates {
			if c.zxid+1 == got.zxid && reflect.DeepEqual(c.nodes, got.nodes) {
				m, err = tree.Load(c.zxid, slices.Clone(c.nodes))
				must(t, err)
				m.Bump()
				if i > 0 {
					inFlight++
				}
				return
			}
		}
		t.Fatalf("crash %d: reopened to zxid %d\n%+v\nwant one of %+v", crashes, got.zxid, got.nodes, candidates)
	}

	for step := range 200 {
		if rng.IntN(25) == 0 {
			crashes++
			reopen(cur.CrashCloneTorn(rng), snap(m))
			continue
		}
		if rng.IntN(6) == 0 {
			crashAt = fileOps + 1 + rng.IntN(12)
		}
		ops := randomOps(rng)
		before := snap(m)
		res, err := s.Multi(ctx, ops...)
		tx, _, merr := m.Apply(s.Session().ID, ops)
		if (err == nil) != (merr == nil) {
			t.Fatalf("step %d: %v, the model %v", step, err, merr)
		}
		if merr == nil {
			if got, want := stats(res), stats(tx.Results); !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d: results %+v, the model %+v", step, got, want)
			}
			tx.Commit()
		}
		if crashed != nil {
			crashes++
			reopen(crashed, before, snap(m))
			continue
		}
		if got, want := s.snap(), snap(m); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: store\n%+v\nmodel\n%+v", step, got, want)
		}
	}
	must(t, s.Close())
	m.EndSession(s.Session().ID).Commit()
	crashes++
	reopen(cur, snap(m))
	return crashes, inFlight
}

func stats(rs []coord.OpResult) []coord.Stat {
	var out []coord.Stat
	for _, r := range rs {
		out = append(out, r.Stat)
	}
	return out
}
