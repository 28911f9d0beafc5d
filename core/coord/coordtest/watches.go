package coordtest

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-broker/weir/core/coord"
)

// A watchCase sets a watch, makes changes the watch must ignore (noise),
// then the change that fires it. Ignoring is checked by the first event
// being the trigger's: no sleeping to prove a negative.
type watchCase struct {
	name    string
	watch   func(t *testing.T, s coord.Store) <-chan coord.Event
	noise   func(t *testing.T, s coord.Store)
	trigger func(t *testing.T, s coord.Store)
	typ     coord.EventType
	path    string
}

func getW(path string) func(*testing.T, coord.Store) <-chan coord.Event {
	return func(t *testing.T, s coord.Store) <-chan coord.Event {
		t.Helper()
		_, _, ch, err := s.GetW(t.Context(), path)
		ok(t, err, "getw "+path)
		return ch
	}
}

func existsW(path string, want bool) func(*testing.T, coord.Store) <-chan coord.Event {
	return func(t *testing.T, s coord.Store) <-chan coord.Event {
		t.Helper()
		found, _, ch, err := s.ExistsW(t.Context(), path)
		ok(t, err, "existsw "+path)
		if found != want {
			t.Fatalf("existsw %s: %v, want %v", path, found, want)
		}
		return ch
	}
}

func childrenW(path string) func(*testing.T, coord.Store) <-chan coord.Event {
	return func(t *testing.T, s coord.Store) <-chan coord.Event {
		t.Helper()
		_, _, ch, err := s.ChildrenW(t.Context(), path)
		ok(t, err, "childrenw "+path)
		return ch
	}
}

func doCreate(path string) func(*testing.T, coord.Store) {
	return func(t *testing.T, s coord.Store) { t.Helper(); create(t, s, path, "", coord.Persistent) }
}

func doSet(path string) func(*testing.T, coord.Store) {
	return func(t *testing.T, s coord.Store) { t.Helper(); set(t, s, path, "changed") }
}

func doDelete(path string) func(*testing.T, coord.Store) {
	return func(t *testing.T, s coord.Store) {
		t.Helper()
		ok(t, s.Delete(t.Context(), path, coord.AnyVersion), "delete "+path)
	}
}

func steps(fs ...func(*testing.T, coord.Store)) func(*testing.T, coord.Store) {
	return func(t *testing.T, s coord.Store) {
		t.Helper()
		for _, f := range fs {
			f(t, s)
		}
	}
}

func noop(*testing.T, coord.Store) {}

// Every case starts from /w (data "w") with children /w/n (data "n") and
// /w/n/c0, and /w/other.
var watchCases = []watchCase{
	{"GetW sees a set", getW("/w/n"),
		steps(doCreate("/w/n/c1"), doDelete("/w/n/c0"), doSet("/w/other"), doSet("/w")),
		doSet("/w/n"), coord.EventNodeDataChanged, "/w/n"},
	{"GetW sees a set in a multi", getW("/w/n"), noop,
		func(t *testing.T, s coord.Store) {
			_, err := s.Multi(t.Context(), &coord.CreateOp{Path: "/w/x"}, &coord.SetOp{Path: "/w/n", Version: 0})
			ok(t, err, "multi")
		}, coord.EventNodeDataChanged, "/w/n"},
	{"GetW sees a deletion", getW("/w/other"), doCreate("/w/other2"),
		doDelete("/w/other"), coord.EventNodeDeleted, "/w/other"},
	{"ExistsW of a node sees a set", existsW("/w/n", true), steps(doCreate("/w/n/c1"), doSet("/w/n/c0")),
		doSet("/w/n"), coord.EventNodeDataChanged, "/w/n"},
	{"ExistsW of a node sees a deletion", existsW("/w/other", true), doSet("/w"),
		doDelete("/w/other"), coord.EventNodeDeleted, "/w/other"},
	{"ExistsW of a missing node sees its creation", existsW("/w/m", false),
		steps(doCreate("/w/m2"), doSet("/w"), doCreate("/w/n/m")),
		doCreate("/w/m"), coord.EventNodeCreated, "/w/m"},
	{"ExistsW sees an ephemeral's creation", existsW("/w/e", false), noop,
		func(t *testing.T, s coord.Store) { create(t, s, "/w/e", "", coord.Ephemeral) }, coord.EventNodeCreated, "/w/e"},
	{"ChildrenW sees a child created", childrenW("/w/n"),
		steps(doSet("/w/n"), doSet("/w/n/c0"), doCreate("/w/n/c0/g"), doDelete("/w/n/c0/g"), doCreate("/w/n2")),
		doCreate("/w/n/c1"), coord.EventNodeChildrenChanged, "/w/n"},
	{"ChildrenW sees a child deleted", childrenW("/w/n"), steps(doSet("/w/n"), doSet("/w/n/c0")),
		doDelete("/w/n/c0"), coord.EventNodeChildrenChanged, "/w/n"},
	{"ChildrenW sees the node deleted", childrenW("/w/other"), doSet("/w/other"),
		doDelete("/w/other"), coord.EventNodeDeleted, "/w/other"},
	{"ChildrenW of the root", childrenW("/"), steps(doSet("/w"), doCreate("/w/x")),
		doCreate("/top"), coord.EventNodeChildrenChanged, "/"},
}

func watchSetup(t *testing.T, s coord.Store) {
	t.Helper()
	create(t, s, "/w", "w", coord.Persistent)
	create(t, s, "/w/n", "n", coord.Persistent)
	create(t, s, "/w/n/c0", "", coord.Persistent)
	create(t, s, "/w/other", "", coord.Persistent)
}

// runWatchCases runs every case with watcher watching and writer
// changing; each case cleans the tree up after itself.
func runWatchCases(t *testing.T, watcher, writer coord.Store) {
	for _, tc := range watchCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { removeAll(t, writer, "/w"); removeAll(t, writer, "/top") })
			watchSetup(t, writer)
			ch := tc.watch(t, watcher)
			tc.noise(t, writer)
			tc.trigger(t, writer)
			expect(t, ch, tc.typ, tc.path)
		})
	}
}

func testWatches(t *testing.T, env Env) {
	s := env.Connect(t)
	runWatchCases(t, s, s)

	// Several watches on one node each fire once.
	watchSetup(t, s)
	chs := []<-chan coord.Event{
		getW("/w/n")(t, s), getW("/w/n")(t, s), existsW("/w/n", true)(t, s), childrenW("/w/n")(t, s),
	}
	ok(t, s.Delete(t.Context(), "/w/n/c0", coord.AnyVersion), "delete /w/n/c0")
	expect(t, chs[3], coord.EventNodeChildrenChanged, "/w/n")
	ok(t, s.Delete(t.Context(), "/w/n", coord.AnyVersion), "delete /w/n")
	for _, ch := range chs[:3] {
		expect(t, ch, coord.EventNodeDeleted, "/w/n")
	}
	// A fired watch is gone: a new one is needed to see the next change.
	ch := existsW("/w/n", false)(t, s)
	create(t, s, "/w/n", "", coord.Persistent)
	expect(t, ch, coord.EventNodeCreated, "/w/n")
}

func testWatchesOtherSession(t *testing.T, env Env) {
	a, b := twoSessions(t, env)
	runWatchCases(t, a, b)
}

func testWatchErrors(t *testing.T, env Env) {
	s := env.Connect(t)
	ctx := t.Context()
	if _, _, ch, err := s.GetW(ctx, "/none"); err == nil || ch != nil {
		t.Errorf("GetW of a missing node: watch %v, error %v; want no watch and ErrNoNode", ch, err)
	}
	if _, _, ch, err := s.ChildrenW(ctx, "/none"); err == nil || ch != nil {
		t.Errorf("ChildrenW of a missing node: watch %v, error %v; want no watch and ErrNoNode", ch, err)
	}
	found, st, ch, err := s.ExistsW(ctx, "/none")
	if err != nil || found || st != (coord.Stat{}) || ch == nil {
		t.Fatalf("ExistsW of a missing node: %v %+v watch %v error %v; want false, zero, a watch", found, st, ch, err)
	}
	pending(t, ch, "nothing changed")
	create(t, s, "/none", "", coord.Persistent)
	expect(t, ch, coord.EventNodeCreated, "/none")
}

// removeAll deletes the subtree at path, if any. It runs in t.Cleanup,
// when t.Context() has ended.
func removeAll(t *testing.T, s coord.Store, path string) {
	t.Helper()
	ctx := context.Background()
	names, _, err := s.Children(ctx, path)
	if errors.Is(err, coord.ErrNoNode) {
		return
	}
	if err != nil {
		t.Errorf("cleanup: children %s: %v", path, err)
		return
	}
	for _, n := range names {
		removeAll(t, s, coord.Join(path, n))
	}
	if err := s.Delete(ctx, path, coord.AnyVersion); err != nil {
		t.Errorf("cleanup: delete %s: %v", path, err)
	}
}
