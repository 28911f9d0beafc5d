package tree

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/coord"
)

// persisted is the tree's persistent state with its data copied.
func persisted(tr *Tree) (int64, []Persisted) {
	zxid, nodes := tr.Persistent()
	nodes = slices.Clone(nodes)
	for i := range nodes {
		nodes[i].Data = slices.Clone(nodes[i].Data)
		if len(nodes[i].Data) == 0 {
			nodes[i].Data = nil
		}
	}
	return zxid, nodes
}

// randomOps draws a request of 1..3 operations on paths of a small tree, so
// that many succeed and some fail.
func randomOps(rng *rand.Rand) []coord.Op {
	paths := []string{"/a", "/a/b", "/a/c", "/a/b/d", "/e", "/e/f"}
	var ops []coord.Op
	for range 1 + rng.IntN(3) {
		p := paths[rng.IntN(len(paths))]
		switch rng.IntN(5) {
		case 0, 1:
			mode := coord.Persistent
			if rng.IntN(3) == 0 {
				mode = coord.Ephemeral
			}
			ops = append(ops, &coord.CreateOp{Path: p, Data: []byte(fmt.Sprint(rng.IntN(100))), Mode: mode})
		case 2:
			ops = append(ops, &coord.SetOp{Path: p, Data: []byte{byte(rng.IntN(256))}, Version: coord.AnyVersion})
		case 3:
			ops = append(ops, &coord.DeleteOp{Path: p, Version: coord.AnyVersion})
		default:
			ops = append(ops, &coord.CheckOp{Path: p, Version: int32(rng.IntN(2))})
		}
	}
	return ops
}

// TestRedoRebuildsPersistent applies random requests of several sessions
// (ending some), journals each step's zxid and changes, and checks that
// loading the persistent state at any point and redoing the rest rebuilds
// exactly the live tree's persistent state.
func TestRedoRebuildsPersistent(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		tr := New()
		type rec struct {
			zxid    int64
			changes []Change
		}
		var journal []rec
		type snap struct {
			zxid  int64
			nodes []Persisted
			next  int // journal records after it
		}
		var snaps []snap
		for i := range 300 {
			session := int64(1 + rng.IntN(3))
			switch {
			case i%50 == 49:
				tx := tr.EndSession(session)
				if tx.Changed() {
					journal = append(journal, rec{tr.Zxid(), nil})
				}
				tx.Commit()
			case rng.IntN(20) == 0:
				journal = append(journal, rec{tr.Bump(), nil})
			default:
				tx := tr.Begin()
				for range 1 + rng.IntN(3) {
					st, _, err := tx.Step(session, randomOps(rng))
					if err != nil {
						continue
					}
					if st.Zxid != 0 {
						ch := slices.Clone(st.Changes)
						for i := range ch {
							ch[i].Data = slices.Clone(ch[i].Data)
						}
						journal = append(journal, rec{st.Zxid, ch})
					} else if len(st.Changes) > 0 {
						t.Fatalf("seed %d: changes %+v without a zxid", seed, st.Changes)
					}
				}
				tx.Commit()
			}
			if rng.IntN(10) == 0 {
				z, nodes := persisted(tr)
				snaps = append(snaps, snap{z, nodes, len(journal)})
			}
		}
		wantZxid, want := persisted(tr)
		snaps = append(snaps, snap{0, []Persisted{{Path: "/"}}, 0})
		for _, s := range snaps {
			r, err := Load(s.zxid, slices.Clone(s.nodes))
			if err != nil {
				t.Fatal(err)
			}
			for _, rc := range journal[s.next:] {
				if err := r.Redo(rc.zxid, rc.changes); err != nil {
					t.Fatalf("seed %d: redo after the snapshot at %d: %v", seed, s.zxid, err)
				}
			}
			if z, got := persisted(r); z != wantZxid || !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d: from the snapshot at zxid %d, redo built zxid %d\n%+v\nwant zxid %d\n%+v", seed, s.zxid, z, got, wantZxid, want)
			}
		}
	}
}

func TestRedoRejects(t *testing.T) {
	base := func() *Tree {
		tr, err := Load(3, []Persisted{{Path: "/"}, {Path: "/a", Czxid: 1, Mzxid: 1}, {Path: "/a/b", Czxid: 2, Mzxid: 3}})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	tests := []struct {
		name    string
		zxid    int64
		changes []Change
		want    error
		detail  string
	}{
		{"zxid repeated", 3, nil, nil, "zxid 3 after 3"},
		{"zxid skipped", 5, nil, nil, "zxid 5 after 3"},
		{"create existing", 4, []Change{{Kind: ChangeCreate, Path: "/a"}}, coord.ErrNodeExists, "create /a"},
		{"create orphan", 4, []Change{{Kind: ChangeCreate, Path: "/x/y"}}, coord.ErrNoNode, "parent /x"},
		{"ephemeral over a node", 4, []Change{{Kind: ChangeEphemeral, Path: "/a/b"}}, coord.ErrNodeExists, "ephemeral /a/b"},
		{"set missing", 4, []Change{{Kind: ChangeSet, Path: "/x"}}, coord.ErrNoNode, "set /x"},
		{"delete missing", 4, []Change{{Kind: ChangeDelete, Path: "/x"}}, coord.ErrNoNode, "delete /x"},
		{"delete a parent", 4, []Change{{Kind: ChangeDelete, Path: "/a"}}, coord.ErrNotEmpty, "delete /a"},
		{"delete the root", 4, []Change{{Kind: ChangeDelete, Path: "/"}}, coord.ErrInvalidPath, "root cannot be deleted"},
		{"bad path", 4, []Change{{Kind: ChangeSet, Path: "a"}}, coord.ErrInvalidPath, "set a"},
		{"unknown kind", 4, []Change{{Kind: 9, Path: "/a"}}, nil, "unknown change change(9)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := base().Redo(tc.zxid, tc.changes)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("Redo: %v, want %v containing %q", err, tc.want, tc.detail)
			}
		})
	}
}

// TestSteps: a failed step changes nothing and leaves the earlier ones;
// steps take consecutive zxids; Commit fires every step's watches in order,
// Rollback undoes every step and fires none.
func TestSteps(t *testing.T) {
	for _, commit := range []bool{true, false} {
		tr := fixture(t)
		before := snapshot(tr)
		wa := tr.Watch(WatchNode, "/a/c", 1)
		wb := tr.Watch(WatchNode, "/a/b", 1)
		tx := tr.Begin()
		s1, _, err := tx.Step(1, []coord.Op{&coord.CreateOp{Path: "/a/c", Data: []byte("c")}})
		if err != nil || s1.Zxid != before.zxid+1 || len(s1.Changes) != 1 || s1.Changes[0].Kind != ChangeCreate {
			t.Fatalf("step 1: %+v, %v", s1, err)
		}
		mid := snapshot(tr)
		if _, i, err := tx.Step(1, []coord.Op{&coord.SetOp{Path: "/a/b", Version: coord.AnyVersion},
			&coord.CreateOp{Path: "/a/c"}}); i != 1 || !errors.Is(err, coord.ErrNodeExists) {
			t.Fatalf("step 2: index %d, %v; want 1, ErrNodeExists", i, err)
		}
		if got := snapshot(tr); !reflect.DeepEqual(got, mid) {
			t.Fatalf("a failed step changed the tree:\n%+v\nwant\n%+v", got, mid)
		}
		s3, _, err := tx.Step(2, []coord.Op{&coord.SetOp{Path: "/a/b", Data: []byte("x"), Version: 0},
			&coord.CreateOp{Path: "/a/e3", Mode: coord.Ephemeral}})
		if err != nil || s3.Zxid != s1.Zxid+1 || !reflect.DeepEqual(kinds(s3.Changes), []ChangeKind{ChangeSet, ChangeEphemeral}) {
			t.Fatalf("step 3: %+v, %v", s3, err)
		}
		if s, _, err := tx.Step(2, []coord.Op{&coord.CheckOp{Path: "/a", Version: 1}}); err != nil || s.Zxid != 0 || len(s.Changes) != 0 {
			t.Fatalf("a check step: %+v, %v; want no zxid, no changes", s, err)
		}
		if !tx.Changed() {
			t.Fatal("Changed is false after two changing steps")
		}
		if commit {
			tx.Commit()
			if ev := <-wa; ev.Type != coord.EventNodeCreated {
				t.Fatalf("watch of /a/c: %+v", ev)
			}
			if ev := <-wb; ev.Type != coord.EventNodeDataChanged {
				t.Fatalf("watch of /a/b: %+v", ev)
			}
			continue
		}
		tx.Rollback()
		if got := snapshot(tr); !reflect.DeepEqual(got, before) {
			t.Fatalf("after Rollback:\n%+v\nwant\n%+v", got, before)
		}
		select {
		case ev := <-wa:
			t.Fatalf("a watch fired on Rollback: %+v", ev)
		default:
		}
	}
}

func kinds(cs []Change) []ChangeKind {
	var out []ChangeKind
	for _, c := range cs {
		out = append(out, c.Kind)
	}
	return out
}
