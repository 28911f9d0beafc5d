package tree

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/coord"
)

// state is everything observable in a tree, for before/after comparisons.
type state struct {
	zxid       int64
	nodes      map[string]string // path -> data and stat
	ephemerals map[int64][]string
}

func snapshot(t *Tree) state {
	s := state{zxid: t.zxid, nodes: map[string]string{}, ephemerals: map[int64][]string{}}
	for p, n := range t.nodes {
		s.nodes[p] = fmt.Sprintf("%q %q %+v", n.data, slices.Sorted(maps.Keys(n.children)), statOf(n))
	}
	for id, ps := range t.ephemerals {
		s.ephemerals[id] = slices.Sorted(maps.Keys(ps))
	}
	return s
}

func mustApply(t *testing.T, tr *Tree, session int64, ops ...coord.Op) {
	t.Helper()
	tx, i, err := tr.Apply(session, ops)
	if err != nil {
		t.Fatalf("apply: op %d: %v", i, err)
	}
	tx.Commit()
}

func fixture(t *testing.T) *Tree {
	tr := New()
	mustApply(t, tr, 1,
		&coord.CreateOp{Path: "/a", Data: []byte("a")},
		&coord.CreateOp{Path: "/a/b", Data: []byte("b")},
		&coord.CreateOp{Path: "/a/e1", Mode: coord.Ephemeral},
	)
	mustApply(t, tr, 2, &coord.CreateOp{Path: "/a/e2", Mode: coord.Ephemeral})
	mustApply(t, tr, 1, &coord.SetOp{Path: "/a", Data: []byte("a1"), Version: 0})
	return tr
}

// TestRollback applies transactions of every kind of change and rolls them
// back: the tree is exactly as before, and no watch fired.
func TestRollback(t *testing.T) {
	txs := map[string][]coord.Op{
		"create":            {&coord.CreateOp{Path: "/a/c", Data: []byte("c")}},
		"create ephemeral":  {&coord.CreateOp{Path: "/a/e3", Mode: coord.Ephemeral}},
		"set":               {&coord.SetOp{Path: "/a/b", Data: []byte("x"), Version: coord.AnyVersion}},
		"delete":            {&coord.DeleteOp{Path: "/a/b", Version: 0}},
		"delete ephemeral":  {&coord.DeleteOp{Path: "/a/e1", Version: 0}},
		"delete last of 2":  {&coord.DeleteOp{Path: "/a/e2", Version: 0}},
		"create, set, del":  {&coord.CreateOp{Path: "/x"}, &coord.SetOp{Path: "/x", Version: 0}, &coord.DeleteOp{Path: "/x", Version: 1}},
		"delete, recreate":  {&coord.DeleteOp{Path: "/a/b", Version: 0}, &coord.CreateOp{Path: "/a/b", Data: []byte("new")}},
		"set twice, delete": {&coord.SetOp{Path: "/a/b", Version: 0}, &coord.SetOp{Path: "/a/b", Version: 1}, &coord.DeleteOp{Path: "/a/b", Version: 2}},
	}
	for name, ops := range txs {
		t.Run(name, func(t *testing.T) {
			tr := fixture(t)
			var chs []<-chan coord.Event
			for _, p := range []string{"/", "/a", "/a/b", "/a/c", "/a/e1", "/a/e2", "/a/e3", "/x"} {
				chs = append(chs, tr.Watch(WatchNode, p, 1), tr.Watch(WatchChildren, p, 2))
			}
			before := snapshot(tr)
			tx, i, err := tr.Apply(1, ops)
			if err != nil {
				t.Fatalf("apply: op %d: %v", i, err)
			}
			if !tx.Changed() {
				t.Fatal("a transaction that changed the tree says it did not")
			}
			if reflect.DeepEqual(snapshot(tr), before) {
				t.Fatal("the transaction changed nothing")
			}
			tx.Rollback()
			if got := snapshot(tr); !reflect.DeepEqual(got, before) {
				t.Fatalf("after rollback:\n%+v\nwant\n%+v", got, before)
			}
			for _, ch := range chs {
				select {
				case ev := <-ch:
					t.Fatalf("a watch fired for a rolled-back transaction: %+v", ev)
				default:
				}
			}
		})
	}
}

func TestFailedApplyChangesNothing(t *testing.T) {
	tr := fixture(t)
	before := snapshot(tr)
	_, i, err := tr.Apply(1, []coord.Op{
		&coord.CreateOp{Path: "/a/c"},
		&coord.DeleteOp{Path: "/a/b", Version: 0},
		&coord.DeleteOp{Path: "/a", Version: coord.AnyVersion},
	})
	if i != 2 || !errors.Is(err, coord.ErrNotEmpty) {
		t.Fatalf("apply: index %d, error %v; want 2, ErrNotEmpty", i, err)
	}
	if got := snapshot(tr); !reflect.DeepEqual(got, before) {
		t.Fatalf("after a failed apply:\n%+v\nwant\n%+v", got, before)
	}
}

// TestPersistentIsStateAfterSessionsEnd: what filestore writes is what the
// tree holds once every session has ended.
func TestPersistentIsStateAfterSessionsEnd(t *testing.T) {
	tr := fixture(t)
	_, saved := tr.Persistent()
	for _, p := range saved {
		if strings.Contains(p.Path, "/e") {
			t.Fatalf("ephemeral %s persisted", p.Path)
		}
	}
	for _, id := range []int64{1, 2} {
		tr.EndSession(id).Commit()
	}
	zxid, after := tr.Persistent()
	for i := range after {
		after[i].Data = slices.Clone(after[i].Data)
	}
	if !reflect.DeepEqual(saved, after) {
		t.Fatalf("persisted before the sessions ended:\n%+v\nafter:\n%+v", saved, after)
	}
	loaded, err := Load(zxid, after)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := snapshot(loaded), snapshot(tr); !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded:\n%+v\nwant\n%+v", got, want)
	}
}

func TestLoadRejects(t *testing.T) {
	root := Persisted{Path: "/"}
	tests := []struct {
		name  string
		zxid  int64
		nodes []Persisted
		want  string
	}{
		{"no root", 1, []Persisted{{Path: "/a"}}, "no root"},
		{"orphan", 5, []Persisted{root, {Path: "/a/b", Czxid: 1, Mzxid: 1}}, "parent /a missing"},
		{"twice", 5, []Persisted{root, {Path: "/a"}, {Path: "/a"}}, "twice"},
		{"bad path", 5, []Persisted{root, {Path: "/a/"}}, "invalid path"},
		{"czxid past zxid", 5, []Persisted{root, {Path: "/a", Czxid: 6, Mzxid: 6}}, "czxid 6"},
		{"mzxid before czxid", 5, []Persisted{root, {Path: "/a", Czxid: 3, Mzxid: 2}}, "czxid 3"},
		{"negative version", 5, []Persisted{root, {Path: "/a", Version: -1}}, "negative version"},
		{"negative cversion", 5, []Persisted{root, {Path: "/a", Cversion: -2}}, "negative version"},
		{"negative zxid", -1, []Persisted{root}, "negative zxid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.zxid, tc.nodes)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestPauseHoldsEvents(t *testing.T) {
	tr := fixture(t)
	set := tr.Watch(WatchNode, "/a/b", 1)
	kids := tr.Watch(WatchChildren, "/a", 1)
	other := tr.Watch(WatchNode, "/a/b", 2)
	tr.Pause(1)
	mustApply(t, tr, 2, &coord.SetOp{Path: "/a/b", Version: coord.AnyVersion}, &coord.CreateOp{Path: "/a/c"})
	if ev := <-other; ev.Type != coord.EventNodeDataChanged {
		t.Fatalf("unpaused session got %+v", ev)
	}
	for _, ch := range []<-chan coord.Event{set, kids} {
		select {
		case ev := <-ch:
			t.Fatalf("paused session got %+v", ev)
		default:
		}
	}
	tr.Resume(1)
	if ev := <-set; ev.Type != coord.EventNodeDataChanged || ev.Path != "/a/b" {
		t.Fatalf("after resume: %+v", ev)
	}
	if ev := <-kids; ev.Type != coord.EventNodeChildrenChanged || ev.Path != "/a" {
		t.Fatalf("after resume: %+v", ev)
	}

	// Held events of a session that then ends become NotWatching.
	held := tr.Watch(WatchNode, "/a/c", 1)
	live := tr.Watch(WatchNode, "/a/b", 1)
	tr.Pause(1)
	mustApply(t, tr, 2, &coord.DeleteOp{Path: "/a/c", Version: coord.AnyVersion})
	tr.DropWatches(1, coord.ErrSessionExpired)
	for _, ch := range []<-chan coord.Event{held, live} {
		ev, open := <-ch
		if !open || ev.Type != coord.EventNotWatching || !errors.Is(ev.Err, coord.ErrSessionExpired) {
			t.Fatalf("dropped watch: %+v (open %v)", ev, open)
		}
		if _, open := <-ch; open {
			t.Fatal("dropped watch channel not closed")
		}
	}
}
