package partlog

import (
	"errors"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// workload drives a log through two sessions of appends (single and
// multi-batch, of varied sizes) with rolls, an explicit durable flush and a
// clean close and reopen between them, recording in m what was acknowledged.
// It stops at the first error and returns it.
func workload(t testing.TB, fs vfs.FS, m *model, policy func() flushpolicy.Policy, onOpen func(*Log)) error {
	cfg := Config{SegmentBytes: 3000, IndexIntervalBytes: 400, RetentionBytes: -1, RetentionAge: -1}
	var l *Log
	for i := 0; i < 24; i++ {
		if i == 0 || i == 12 {
			if l != nil {
				if err := l.Close(); err != nil {
					return err
				}
			}
			cfg.FlushPolicy = policy()
			var err error
			if l, _, err = Open(fs, dir, cfg); err != nil {
				return err
			}
			onOpen(l)
		}
		var bs [][]byte
		for j := 0; j <= i%3; j++ {
			bs = append(bs, batch(i*10+j, 1+(i+j)%4, 40+(i*37)%300))
		}
		if _, err := m.append(t, l, bs...); err != nil {
			return err
		}
		if i == 8 {
			if err := l.Flush(l.EndOffset()); err != nil { // a durable ack
				return err
			}
		}
	}
	return l.Close()
}

type crashCase struct {
	name   string
	policy func() flushpolicy.Policy
}

var crashPolicies = []crashCase{
	{"every-batch", flushpolicy.EveryBatch},
	{"messages-5", func() flushpolicy.Policy { return flushpolicy.EveryMessages(5) }},
	{"never", flushpolicy.Never},
}

// TestCrashLoop simulates a power cut before every file-system operation of a
// workload, in turn: the crash clone keeps only what was fsynced (and, in the
// torn variant, a random prefix of what was not). After each cut the log must
// open, hold every batch that was flushed before the cut, serve nothing corrupt
// or foreign, and continue appending at its end offset.
func TestCrashLoop(t *testing.T) {
	for _, pc := range crashPolicies {
		for _, torn := range []bool{false, true} {
			name := pc.name
			if torn {
				name += "/torn"
			}
			t.Run(name, func(t *testing.T) {
				total := countOps(t, pc.policy)
				if total < 100 {
					t.Fatalf("workload made only %d operations", total)
				}
				step := 1
				if testing.Short() {
					step = 7
				}
				for k := 0; k < total; k += step {
					crashAt(t, k, torn, pc.policy)
				}
			})
		}
	}
}

func countOps(t *testing.T, policy func() flushpolicy.Policy) int {
	inj := &errorfs.FailAt{K: -1}
	if err := workload(t, errorfs.Wrap(memFS(t), inj), newModel(), policy, func(*Log) {}); err != nil {
		t.Fatal(err)
	}
	return inj.Count()
}

// crasher wraps a MemFS so that just before file-system operation k it takes
// a crash clone (strict, or torn with a seeded rng) and calls onCrash, which
// captures what the test knew to be durable at that moment.
type crasher struct {
	mu      sync.Mutex
	n, k    int
	torn    bool
	seed    uint64
	mem     *vfs.MemFS
	clone   *vfs.MemFS
	onCrash func()
}

func newCrasher(mem *vfs.MemFS, k int, torn bool, seed uint64, onCrash func()) (*crasher, vfs.FS) {
	c := &crasher{k: k, torn: torn, seed: seed, mem: mem, onCrash: onCrash}
	return c, errorfs.Wrap(mem, errorfs.InjectorFunc(c.maybeCrash))
}

func (c *crasher) maybeCrash(errorfs.Op, string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == c.k {
		if c.torn {
			c.clone = c.mem.CrashCloneTorn(rand.New(rand.NewPCG(uint64(c.k), c.seed)))
		} else {
			c.clone = c.mem.CrashClone()
		}
		c.onCrash()
	}
	c.n++
	return nil
}

func crashAt(t *testing.T, k int, torn bool, policy func() flushpolicy.Policy) {
	t.Helper()
	var (
		mu      sync.Mutex
		log     *Log
		durable int64 // the log's flushed offset when the power went
	)
	c, fs := newCrasher(memFS(t), k, torn, 42, func() {
		mu.Lock()
		defer mu.Unlock()
		if log != nil {
			durable = log.FlushedOffset()
		}
	})
	m := newModel()
	m.torn = torn
	if err := workload(t, fs, m, policy, func(l *Log) { mu.Lock(); log = l; mu.Unlock() }); err != nil {
		t.Fatalf("crash %d: workload: %v", k, err)
	}
	if c.clone == nil {
		t.Fatalf("crash %d: never reached", k)
	}
	l, rep, err := Open(c.clone, dir, Config{SegmentBytes: 3000, IndexIntervalBytes: 400, RetentionAge: -1})
	if err != nil {
		t.Fatalf("crash before op %d: reopen: %v", k, err)
	}
	defer l.Close()
	func() {
		defer func() {
			if t.Failed() {
				t.Logf("crash before op %d: durable %d, report %+v, segments %s", k, durable, rep, segNames(l))
			}
		}()
		m.check(t, l, 0, durable)
		end := l.EndOffset()
		res, err := m.append(t, l, batch(999, 2, 50))
		if err != nil || res.BaseOffset != end {
			t.Fatalf("crash before op %d: append after recovery at %d: %+v, %v", k, end, res, err)
		}
		m.check(t, l, 0, res.NextOffset)
	}()
}

// TestErrorLoop fails each file-system operation of the workload in turn (the
// page cache survives: no crash). The error must surface from the call that
// met it, and a reopen must find every acknowledged batch, nothing corrupt, and
// continue appending.
func TestErrorLoop(t *testing.T) {
	for _, pc := range crashPolicies {
		for _, mode := range []string{"once", "partial-write", "disk-full"} {
			t.Run(pc.name+"/"+mode, func(t *testing.T) {
				total := countOps(t, pc.policy)
				for k := 0; k < total; k++ {
					errorAt(t, k, mode, pc.policy)
				}
			})
		}
	}
}

func errorAt(t *testing.T, k int, mode string, policy func() flushpolicy.Policy) {
	t.Helper()
	mem := memFS(t)
	inj := &errorfs.FailAt{K: k}
	switch mode {
	case "partial-write":
		inj.PartialWrite = true
	case "disk-full":
		inj.Sticky, inj.Err = true, syscall.ENOSPC
	}
	m := newModel()
	var failed *Log
	err := workload(t, errorfs.Wrap(mem, inj), m, policy, func(l *Log) { failed = l })
	if !inj.Fired() {
		t.Fatalf("op %d: not reached", k)
	}
	if err != nil && !errors.Is(err, errorfs.ErrInjected) && !errors.Is(err, ErrFailed) {
		t.Fatalf("op %d: error does not carry its cause: %v", k, err)
	}
	if failed != nil && err != nil {
		_ = failed.Close() // releases files; a failed log gets no clean marker
	}
	// Space returns (the injector is gone): the log recovers.
	l, rep, oerr := Open(mem, dir, Config{SegmentBytes: 3000, IndexIntervalBytes: 400, RetentionAge: -1})
	if oerr != nil {
		t.Fatalf("op %d (%v): reopen: %v", k, err, oerr)
	}
	defer l.Close()
	defer func() {
		if t.Failed() {
			t.Logf("error at op %d (%v); report %+v; segments %s", k, err, rep, segNames(l))
		}
	}()
	m.check(t, l, 0, m.acked)
	end := l.EndOffset()
	if res, aerr := m.append(t, l, batch(999, 1, 10)); aerr != nil || res.BaseOffset != end {
		t.Fatalf("op %d: append after recovery: %+v, %v", k, res, aerr)
	}
}

// Opening itself fails cleanly at every operation, and a retry succeeds.
func TestOpenErrors(t *testing.T) {
	base := memFS(t)
	m := newModel()
	if err := workload(t, base, m, flushpolicy.Never, func(*Log) {}); err != nil {
		t.Fatal(err)
	}
	inj := &errorfs.FailAt{K: -1}
	l, _ := mustOpen(t, errorfs.Wrap(base.CrashClone(), inj), Config{RetentionAge: -1})
	l.Close()
	total := inj.Count()
	for k := 0; k < total; k++ {
		fs := base.CrashClone()
		if _, _, err := Open(errorfs.Wrap(fs, &errorfs.FailAt{K: k}), dir, Config{RetentionAge: -1}); err == nil {
			continue // a failure Open can tolerate (e.g. a leftover file it could not remove is retried later)
		} else if !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("op %d: %v", k, err)
		}
		l, _, err := Open(fs, dir, Config{RetentionAge: -1})
		if err != nil {
			t.Fatalf("op %d: retry: %v", k, err)
		}
		m.check(t, l, 0, m.acked)
		l.Close()
	}
}
