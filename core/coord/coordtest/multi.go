package coordtest

import (
	"errors"
	"testing"

	"github.com/weir-broker/weir/core/coord"
)

func testMulti(t *testing.T, env Env) {
	s := env.Connect(t)
	ctx := t.Context()
	create(t, s, "/m", "", coord.Persistent)
	create(t, s, "/m/old", "o", coord.Persistent)
	ops := []coord.Op{
		&coord.CheckOp{Path: "/m", Version: 0},
		&coord.CreateOp{Path: "/m/a", Data: []byte("a0")},
		&coord.SetOp{Path: "/m/a", Data: []byte("a1"), Version: 0}, // sees the create before it
		&coord.SetOp{Path: "/m/a", Data: []byte("a2"), Version: 1}, // and the set
		&coord.CreateOp{Path: "/m/a/child", Mode: coord.Ephemeral},
		&coord.DeleteOp{Path: "/m/old", Version: 0},
		&coord.CheckOp{Path: "/m/a", Version: coord.AnyVersion},
	}
	res, err := s.Multi(ctx, ops...)
	ok(t, err, "multi")
	if len(res) != len(ops) {
		t.Fatalf("%d results for %d operations", len(res), len(ops))
	}
	if res[2].Stat.Version != 1 || res[3].Stat.Version != 2 || res[3].Stat.DataLength != 2 {
		t.Errorf("SetOp results: %+v, %+v; want versions 1 and 2", res[2].Stat, res[3].Stat)
	}
	// A result is the stat as of its operation: the child created after it
	// is not counted.
	if d, st := get(t, s, "/m/a"); d != "a2" || st.Version != 2 || st.Mzxid != res[3].Stat.Mzxid || st.Czxid != res[3].Stat.Czxid {
		t.Errorf("/m/a = %q %+v, want a2 with the last SetOp's version and zxids %+v", d, st, res[3].Stat)
	}
	if _, st := get(t, s, "/m/a/child"); st.EphemeralOwner != s.Session().ID {
		t.Errorf("ephemeral created in a multi: owner %d, want %d", st.EphemeralOwner, s.Session().ID)
	}
	if exists(t, s, "/m/old") {
		t.Error("/m/old survived the multi that deleted it")
	}
	_, a := get(t, s, "/m/a")
	_, m := get(t, s, "/m")
	if a.Czxid < m.Czxid || a.Mzxid < a.Czxid {
		t.Errorf("zxids: /m czxid %d, /m/a czxid %d mzxid %d", m.Czxid, a.Czxid, a.Mzxid)
	}

	// A multi of checks only changes nothing.
	before := dump(t, s, "/m")
	_, err = s.Multi(ctx, &coord.CheckOp{Path: "/m/a", Version: 2}, &coord.CheckOp{Path: "/m", Version: coord.AnyVersion})
	ok(t, err, "checks only")
	sameDump(t, dump(t, s, "/m"), before, "after a multi of checks")
}

func testMultiFailure(t *testing.T, env Env) {
	s := env.Connect(t)
	ctx := t.Context()
	create(t, s, "/m", "", coord.Persistent)
	create(t, s, "/m/a", "a", coord.Persistent)
	create(t, s, "/m/p", "", coord.Persistent)
	create(t, s, "/m/p/c", "", coord.Persistent)
	_ = set(t, s, "/m/a", "a1") // version 1
	tests := []struct {
		name string
		ops  []coord.Op
		idx  int
		want error
	}{
		{"stale set after changes", []coord.Op{
			&coord.CreateOp{Path: "/m/new"},
			&coord.SetOp{Path: "/m/a", Data: []byte("x"), Version: 1},
			&coord.SetOp{Path: "/m/a", Data: []byte("y"), Version: 1},
		}, 2, coord.ErrBadVersion},
		{"check of a missing node", []coord.Op{
			&coord.SetOp{Path: "/m/a", Data: []byte("x"), Version: coord.AnyVersion},
			&coord.CheckOp{Path: "/m/none", Version: coord.AnyVersion},
		}, 1, coord.ErrNoNode},
		{"check of a stale version (a fence)", []coord.Op{
			&coord.CheckOp{Path: "/m/a", Version: 0},
			&coord.CreateOp{Path: "/m/new"},
		}, 0, coord.ErrBadVersion},
		{"create existing", []coord.Op{
			&coord.DeleteOp{Path: "/m/p/c", Version: 0},
			&coord.CreateOp{Path: "/m/a"},
		}, 1, coord.ErrNodeExists},
		{"create twice", []coord.Op{
			&coord.CreateOp{Path: "/m/new"},
			&coord.CreateOp{Path: "/m/new"},
		}, 1, coord.ErrNodeExists},
		{"create under missing", []coord.Op{
			&coord.CreateOp{Path: "/m/new"},
			&coord.CreateOp{Path: "/m/x/y"},
		}, 1, coord.ErrNoNode},
		{"create under ephemeral", []coord.Op{
			&coord.CreateOp{Path: "/m/e", Mode: coord.Ephemeral},
			&coord.CreateOp{Path: "/m/e/c"},
		}, 1, coord.ErrNoChildrenForEphemerals},
		{"delete non-empty", []coord.Op{
			&coord.SetOp{Path: "/m/p", Data: []byte("x"), Version: 0},
			&coord.DeleteOp{Path: "/m/p", Version: coord.AnyVersion},
		}, 1, coord.ErrNotEmpty},
		{"delete stale", []coord.Op{
			&coord.DeleteOp{Path: "/m/p/c", Version: 3},
		}, 0, coord.ErrBadVersion},
		{"check after delete", []coord.Op{
			&coord.DeleteOp{Path: "/m/p/c", Version: coord.AnyVersion},
			&coord.CheckOp{Path: "/m/p/c", Version: coord.AnyVersion},
		}, 1, coord.ErrNoNode},
		{"set of a node created and deleted", []coord.Op{
			&coord.CreateOp{Path: "/m/new"},
			&coord.DeleteOp{Path: "/m/new", Version: 0},
			&coord.SetOp{Path: "/m/new", Version: coord.AnyVersion},
		}, 2, coord.ErrNoNode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := dump(t, s, "/m")
			// A watch on /m/a must not see the failed multi: the first
			// event it gets is the deletion after it.
			_, _, ch, err := s.GetW(ctx, "/m/a")
			ok(t, err, "getw /m/a")
			_, err = s.Multi(ctx, tc.ops...)
			var me *coord.MultiError
			if !errors.As(err, &me) {
				t.Fatalf("error %v, want a *coord.MultiError", err)
			}
			if me.Index != tc.idx || me.Op != tc.ops[tc.idx] || !errors.Is(err, tc.want) {
				t.Fatalf("MultiError index %d op %v err %v, want index %d (%v) %v", me.Index, me.Op, me.Err, tc.idx, tc.ops[tc.idx], tc.want)
			}
			sameDump(t, dump(t, s, "/m"), before, "after the failed multi")
			for _, p := range []string{"/m/new", "/m/e"} {
				if exists(t, s, p) {
					t.Fatalf("%s exists after the failed multi", p)
				}
			}
			pending(t, ch, "after a failed multi")
			data, st := get(t, s, "/m/a")
			ok(t, s.Delete(ctx, "/m/a", st.Version), "delete /m/a")
			expect(t, ch, coord.EventNodeDeleted, "/m/a")
			create(t, s, "/m/a", data, coord.Persistent)
			for range st.Version {
				set(t, s, "/m/a", data)
			}
		})
	}
}
