// Package coordtest is the conformance suite of coord.Store: one body of
// tests that every implementation passes (memstore, filestore, cluster/zk), so
// the code above the store can rely on the interface's documentation rather
// than on whichever store it was tested with.
//
//	func TestConformance(t *testing.T) { coordtest.Run(t, myHarness{}) }
//
// The suite asserts only what coord's documentation promises, and what a real
// ZooKeeper server does: zxids are compared for order, never for value;
// session ids only for being non-zero, distinct, and equal to an ephemeral
// node's owner; watches are awaited on their channel with a generous
// deadline (WaitTimeout), never by sleeping; nothing looks at the root's
// children (a ZooKeeper server has /zookeeper there), every test works
// below nodes it created itself.
//
// Capabilities beyond the interface are optional interfaces of the Env: an
// Env that serves one session at a time says so with OneSession, and the
// subtests that need two sessions at once skip (they say why); one that can
// expire a session implements Expirer, or the expiry subtests skip.
package coordtest

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/coord"
)

// WaitTimeout bounds every wait of the suite for a watch event or a session
// change; a conforming store delivers long before. Raise it for a slow
// ZooKeeper in CI.
var WaitTimeout = 10 * time.Second

// Harness gives the suite fresh stores.
type Harness interface {
	// New returns a fresh, empty store (only the root, and whatever a real
	// server keeps below it) for one subtest, released at t.Cleanup.
	New(t *testing.T) Env
}

// Env is one store, on which sessions are opened.
type Env interface {
	// Connect opens a new session on the store and returns it Connected.
	// The suite usually closes it; the Env closes it at t.Cleanup if not.
	Connect(t *testing.T) coord.Store
}

// OneSession is implemented by an Env that serves one session at a time
// (filestore: the broker is its only client). Connect is then called only
// when the previous session is closed, and opens the store again: a restart.
type OneSession interface {
	Env
	OneSession()
}

// Expirer is implemented by an Env that can expire a session, as the
// server does when a client is silent for its session timeout.
type Expirer interface {
	Env
	// Expire ends s's session on the server and returns once the server
	// has ended it (its ephemeral nodes deleted). s is expected to go on
	// with a new session on its own, as the coord.Store contract says; an
	// Env whose store reconnects only when told (memstore) tells it here.
	Expire(t *testing.T, s coord.Store)
}

// Run runs the suite, each test a subtest on a fresh store from h.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, env Env)
	}{
		{"Paths", testPaths},
		{"Create", testCreate},
		{"GetSetDelete", testGetSetDelete},
		{"Stat", testStat},
		{"Children", testChildren},
		{"Multi", testMulti},
		{"MultiFailureAppliesNothing", testMultiFailure},
		{"CreateAll", testCreateAll},
		{"Ownership", testOwnership},
		{"ConcurrentCAS", testConcurrentCAS},
		{"Watches", testWatches},
		{"WatchesOfAnotherSession", testWatchesOtherSession},
		{"WatchErrors", testWatchErrors},
		{"Session", testSession},
		{"CloseEndsSession", testClose},
		{"CloseFiresOthersWatches", testCloseOthers},
		{"Expiry", testExpiry},
		{"DoneContext", testDoneContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h.New(t)) })
	}
}

// twoSessions opens two sessions at once, or skips.
func twoSessions(t *testing.T, env Env) (coord.Store, coord.Store) {
	t.Helper()
	if _, ok := env.(OneSession); ok {
		t.Skip("the store serves one session at a time (OneSession)")
	}
	return env.Connect(t), env.Connect(t)
}

// next waits for the watch's one event, then for the channel to close.
func next(t *testing.T, ch <-chan coord.Event) coord.Event {
	t.Helper()
	if ch == nil {
		t.Fatal("nil watch channel")
	}
	timer := time.NewTimer(WaitTimeout)
	defer timer.Stop()
	var ev coord.Event
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed without an event")
		}
		ev = e
	case <-timer.C:
		t.Fatalf("no watch event within %v", WaitTimeout)
	}
	select {
	case e, ok := <-ch:
		if ok {
			t.Fatalf("second event %+v after %+v: watches are one-shot", e, ev)
		}
	case <-timer.C:
		t.Fatalf("watch channel not closed within %v of its event %+v", WaitTimeout, ev)
	}
	return ev
}

// expect waits for the watch's event and checks its type and path.
func expect(t *testing.T, ch <-chan coord.Event, typ coord.EventType, path string) {
	t.Helper()
	ev := next(t, ch)
	if ev.Type != typ || ev.Path != path || ev.Err != nil {
		t.Fatalf("event %v %s (err %v), want %v %s", ev.Type, ev.Path, ev.Err, typ, path)
	}
}

// expectNotWatching waits for the watch's EventNotWatching with err.
func expectNotWatching(t *testing.T, ch <-chan coord.Event, path string, err error) {
	t.Helper()
	ev := next(t, ch)
	if ev.Type != coord.EventNotWatching || ev.Path != path || !errors.Is(ev.Err, err) {
		t.Fatalf("event %v %s (err %v), want %v %s (%v)", ev.Type, ev.Path, ev.Err, coord.EventNotWatching, path, err)
	}
}

// pending fails if the watch has delivered anything yet.
func pending(t *testing.T, ch <-chan coord.Event, why string) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		t.Fatalf("%s: watch delivered %+v (open %v), want nothing yet", why, ev, ok)
	default:
	}
}

// waitSession waits until s's session satisfies ok.
func waitSession(t *testing.T, s coord.Store, what string, ok func(coord.Session) bool) coord.Session {
	t.Helper()
	timer := time.NewTimer(WaitTimeout)
	defer timer.Stop()
	for {
		ss := s.Session()
		if ok(ss) {
			return ss
		}
		select {
		case <-ss.Changed:
		case <-timer.C:
			t.Fatalf("session not %s within %v: %+v", what, WaitTimeout, ss)
		}
	}
}

func is(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func ok(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func create(t *testing.T, s coord.Store, path, data string, mode coord.CreateMode) {
	t.Helper()
	ok(t, s.Create(t.Context(), path, []byte(data), mode), "create "+path)
}

func get(t *testing.T, s coord.Store, path string) (string, coord.Stat) {
	t.Helper()
	data, st, err := s.Get(t.Context(), path)
	ok(t, err, "get "+path)
	return string(data), st
}

func set(t *testing.T, s coord.Store, path, data string) coord.Stat {
	t.Helper()
	st, err := s.Set(t.Context(), path, []byte(data), coord.AnyVersion)
	ok(t, err, "set "+path)
	return st
}

func exists(t *testing.T, s coord.Store, path string) bool {
	t.Helper()
	e, _, err := s.Exists(t.Context(), path)
	ok(t, err, "exists "+path)
	return e
}

// entry is one node of a dump.
type entry struct {
	data string
	stat coord.Stat
}

// dump reads the subtree at root (nil when root does not exist).
func dump(t *testing.T, s coord.Store, root string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	var walk func(path string)
	walk = func(path string) {
		data, st, err := s.Get(t.Context(), path)
		if errors.Is(err, coord.ErrNoNode) {
			return
		}
		ok(t, err, "dump: get "+path)
		out[path] = entry{string(data), st}
		names, _, err := s.Children(t.Context(), path)
		ok(t, err, "dump: children "+path)
		for _, n := range names {
			walk(coord.Join(path, n))
		}
	}
	walk(root)
	return out
}

func sameDump(t *testing.T, got, want map[string]entry, what string) {
	t.Helper()
	if !maps.Equal(got, want) {
		for _, p := range slices.Sorted(maps.Keys(want)) {
			if g, ok := got[p]; !ok || g != want[p] {
				t.Errorf("%s: %s: %+v (present %v), want %+v", what, p, g, ok, want[p])
			}
		}
		for _, p := range slices.Sorted(maps.Keys(got)) {
			if _, ok := want[p]; !ok {
				t.Errorf("%s: %s present, want absent", what, p)
			}
		}
		t.FailNow()
	}
}

// done returns a context that has ended.
func done(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

func eq(a []byte, b string) bool { return bytes.Equal(a, []byte(b)) }
