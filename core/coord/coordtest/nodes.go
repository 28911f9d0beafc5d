package coordtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/weir-broker/weir/core/coord"
)

func testPaths(t *testing.T, env Env) {
	s := env.Connect(t)
	ctx := t.Context()
	bad := []string{"", "a", "a/b", "/a/", "//", "//a", "/a//b", "/a/./b", "/a/.", "/.", "/..", "/a/../b", "/a\x00b", "/a\xffb"}
	type call struct {
		name string
		run  func(path string) error
	}
	calls := []call{
		{"Get", func(p string) error { _, _, err := s.Get(ctx, p); return err }},
		{"GetW", func(p string) error {
			_, _, ch, err := s.GetW(ctx, p)
			if ch != nil {
				t.Errorf("GetW(%q) set a watch with error %v", p, err)
			}
			return err
		}},
		{"Exists", func(p string) error { _, _, err := s.Exists(ctx, p); return err }},
		{"ExistsW", func(p string) error {
			_, _, ch, err := s.ExistsW(ctx, p)
			if ch != nil {
				t.Errorf("ExistsW(%q) set a watch with error %v", p, err)
			}
			return err
		}},
		{"Children", func(p string) error { _, _, err := s.Children(ctx, p); return err }},
		{"ChildrenW", func(p string) error { _, _, _, err := s.ChildrenW(ctx, p); return err }},
		{"Create", func(p string) error { return s.Create(ctx, p, nil, coord.Persistent) }},
		{"Set", func(p string) error { _, err := s.Set(ctx, p, nil, coord.AnyVersion); return err }},
		{"Delete", func(p string) error { return s.Delete(ctx, p, coord.AnyVersion) }},
		{"CreateAll", func(p string) error { return coord.CreateAll(ctx, s, p, nil, coord.Persistent) }},
		{"EnsurePath", func(p string) error { return coord.EnsurePath(ctx, s, p) }},
	}
	for _, op := range []func(string) coord.Op{
		func(p string) coord.Op { return &coord.CreateOp{Path: p} },
		func(p string) coord.Op { return &coord.SetOp{Path: p, Version: coord.AnyVersion} },
		func(p string) coord.Op { return &coord.DeleteOp{Path: p, Version: coord.AnyVersion} },
		func(p string) coord.Op { return &coord.CheckOp{Path: p, Version: coord.AnyVersion} },
	} {
		calls = append(calls, call{fmt.Sprintf("Multi(%T)", op("/")), func(p string) error {
			_, err := s.Multi(ctx, &coord.CheckOp{Path: "/", Version: coord.AnyVersion}, op(p))
			var me *coord.MultiError
			if !errors.As(err, &me) || me.Index != 1 {
				t.Errorf("Multi with %q at index 1: error %v, want a *coord.MultiError at index 1", p, err)
			}
			return err
		}})
	}
	for _, c := range calls {
		for _, p := range bad {
			if err := c.run(p); !errors.Is(err, coord.ErrInvalidPath) {
				t.Errorf("%s(%q): error %v, want ErrInvalidPath", c.name, p, err)
			}
		}
	}
	for _, p := range []string{"/a", "/a/b", "/a.b", "/..a", "/a b", "/a/b-c_d:e", "/a/é"} {
		if err := coord.CreateAll(ctx, s, p, nil, coord.Persistent); err != nil {
			t.Errorf("CreateAll(%q): %v", p, err)
		}
	}
}

func testCreate(t *testing.T, env Env) {
	s := env.Connect(t)
	ctx := t.Context()
	create(t, s, "/c", "x", coord.Persistent)
	create(t, s, "/c/e", "eph", coord.Ephemeral)
	create(t, s, "/c/nil", "", coord.Persistent)
	tests := []struct {
		name string
		path string
		mode coord.CreateMode
		want error
	}{
		{"exists", "/c", coord.Persistent, coord.ErrNodeExists},
		{"exists ephemeral", "/c/e", coord.Ephemeral, coord.ErrNodeExists},
		{"missing parent", "/missing/b", coord.Persistent, coord.ErrNoNode},
		{"missing grandparent", "/c/missing/b", coord.Ephemeral, coord.ErrNoNode},
		{"under ephemeral", "/c/e/child", coord.Persistent, coord.ErrNoChildrenForEphemerals},
		{"ephemeral under ephemeral", "/c/e/child", coord.Ephemeral, coord.ErrNoChildrenForEphemerals},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Create(ctx, tc.path, []byte("new"), tc.mode)
			is(t, err, tc.want, "create "+tc.path)
			if !strings.Contains(err.Error(), tc.path) && !strings.Contains(err.Error(), coord.Parent(tc.path)) {
				t.Errorf("error %q names neither the path nor its parent", err)
			}
		})
	}
	if d, _ := get(t, s, "/c"); d != "x" {
		t.Errorf("/c = %q after a failed create, want x", d)
	}
	if d, _ := get(t, s, "/c/e"); d != "eph" {
		t.Errorf("/c/e = %q after a failed create, want eph", d)
	}
	if d, st := get(t, s, "/c/nil"); d != "" || st.DataLength != 0 {
		t.Errorf("/c/nil = %q (length %d), want empty", d, st.DataLength)
	}
	for _, p := range []string{"/missing", "/missing/b", "/c/missing", "/c/e/child"} {
		if exists(t, s, p) {
			t.Errorf("%s exists after a failed create", p)
		}
	}
}

func testGetSetDelete(t *testing.T, env Env) {
	s := env.Connect(t)
	ctx := t.Context()
	_, _, err := s.Get(ctx, "/nope")
	is(t, err, coord.ErrNoNode, "get /nope")
	if !strings.Contains(err.Error(), "/nope") {
		t.Errorf("error %q does not name the path", err)
	}
	create(t, s, "/n", "v0", coord.Persistent)

	steps := []struct {
		name    string
		op      func() error
		want    error
		data    string // /n's data after the step ("-": deleted)
		version int32
	}{
		{"set v0", func() error { _, err := s.Set(ctx, "/n", []byte("v1"), 0); return err }, nil, "v1", 1},
		{"set stale v0", func() error { _, err := s.Set(ctx, "/n", []byte("x"), 0); return err }, coord.ErrBadVersion, "v1", 1},
		{"set future v5", func() error { _, err := s.Set(ctx, "/n", []byte("x"), 5); return err }, coord.ErrBadVersion, "v1", 1},
		{"set any", func() error { _, err := s.Set(ctx, "/n", []byte("v2"), coord.AnyVersion); return err }, nil, "v2", 2},
		{"set v2 empty", func() error { _, err := s.Set(ctx, "/n", nil, 2); return err }, nil, "", 3},
		{"set missing", func() error { _, err := s.Set(ctx, "/n/x", nil, coord.AnyVersion); return err }, coord.ErrNoNode, "", 3},
		{"delete stale", func() error { return s.Delete(ctx, "/n", 2) }, coord.ErrBadVersion, "", 3},
		{"delete missing", func() error { return s.Delete(ctx, "/n/x", coord.AnyVersion) }, coord.ErrNoNode, "", 3},
		{"delete v3", func() error { return s.Delete(ctx, "/n", 3) }, nil, "-", 0},
		{"delete again", func() error { return s.Delete(ctx, "/n", coord.AnyVersion) }, coord.ErrNoNode, "-", 0},
		{"set deleted", func() error { _, err := s.Set(ctx, "/n", nil, coord.AnyVersion); return err }, coord.ErrNoNode, "-", 0},
	}
	for _, st := range steps {
		err := st.op()
		if st.want == nil {
			ok(t, err, st.name)
		} else {
			is(t, err, st.want, st.name)
		}
		data, stat, err := s.Get(ctx, "/n")
		switch {
		case st.data == "-":
			is(t, err, coord.ErrNoNode, st.name+": get")
		case err != nil:
			t.Fatalf("%s: get: %v", st.name, err)
		case string(data) != st.data || stat.Version != st.version:
			t.Fatalf("%s: /n = %q version %d, want %q version %d", st.name, data, stat.Version, st.data, st.version)
		}
	}

	create(t, s, "/p", "", coord.Persistent)
	create(t, s, "/p/c", "", coord.Persistent)
	for _, v := range []int32{coord.AnyVersion, 0} {
		is(t, s.Delete(ctx, "/p", v), coord.ErrNotEmpty, "delete a parent")
	}
	ok(t, s.Delete(ctx, "/p/c", coord.AnyVersion), "delete the child")
	ok(t, s.Delete(ctx, "/p", 0), "delete the emptied parent")

	// Set returns the stat that Get then reports.
	create(t, s, "/s", "a", coord.Persistent)
	st, err := s.Set(ctx, "/s", []byte("abc"), 0)
	ok(t, err, "set /s")
	if _, g := get(t, s, "/s"); g != st {
		t.Errorf("Set returned %+v, Get says %+v", st, g)
	}
}

func testStat(t *testing.T, env Env) {
	s := env.Connect(t)
	ctx := t.Context()
	create(t, s, "/p", "hello", coord.Persistent)
	_, p0 := get(t, s, "/p")
	if p0.Version != 0 || p0.Cversion != 0 || p0.NumChildren != 0 || p0.DataLength != 5 || p0.EphemeralOwner != 0 {
		t.Errorf("fresh /p: %+v, want versions 0, no children, length 5, no owner", p0)
	}
	if p0.Czxid <= 0 || p0.Mzxid != p0.Czxid {
		t.Errorf("fresh /p: czxid %d, mzxid %d: want czxid > 0 and mzxid = czxid", p0.Czxid, p0.Mzxid)
	}
	create(t, s, "/p/c1", "", coord.Persistent)
	create(t, s, "/p/c2", "", coord.Persistent)
	_, c1 := get(t, s, "/p/c1")
	_, c2 := get(t, s, "/p/c2")
	if !(p0.Czxid < c1.Czxid && c1.Czxid < c2.Czxid) {
		t.Errorf("czxids /p %d, /p/c1 %d, /p/c2 %d: want increasing in creation order", p0.Czxid, c1.Czxid, c2.Czxid)
	}
	_, p1 := get(t, s, "/p")
	if p1.Cversion != 2 || p1.NumChildren != 2 || p1.Version != 0 || p1.Mzxid != p0.Mzxid {
		t.Errorf("/p after two children: %+v, want cversion 2, 2 children, version 0, mzxid %d", p1, p0.Mzxid)
	}

	c1b := set(t, s, "/p/c1", "xy")
	if c1b.Version != 1 || c1b.Czxid != c1.Czxid || c1b.Mzxid <= c2.Czxid || c1b.DataLength != 2 {
		t.Errorf("/p/c1 after a set: %+v, want version 1, czxid %d, mzxid > %d, length 2", c1b, c1.Czxid, c2.Czxid)
	}
	if _, p := get(t, s, "/p"); p.Cversion != 2 {
		t.Errorf("/p cversion %d after a child's set, want 2 (unchanged)", p.Cversion)
	}
	p2 := set(t, s, "/p", "")
	if p2.Version != 1 || p2.Cversion != 2 || p2.Mzxid <= c1b.Mzxid || p2.Czxid != p0.Czxid || p2.DataLength != 0 {
		t.Errorf("/p after a set: %+v, want version 1, cversion 2, mzxid > %d, czxid %d, length 0", p2, c1b.Mzxid, p0.Czxid)
	}
	ok(t, s.Delete(ctx, "/p/c2", coord.AnyVersion), "delete /p/c2")
	if _, p := get(t, s, "/p"); p.Cversion != 3 || p.NumChildren != 1 || p.Mzxid != p2.Mzxid {
		t.Errorf("/p after a child's delete: %+v, want cversion 3, 1 child, mzxid %d", p, p2.Mzxid)
	}

	create(t, s, "/p/e", "", coord.Ephemeral)
	id := s.Session().ID
	_, e := get(t, s, "/p/e")
	if id == 0 || e.EphemeralOwner != id {
		t.Errorf("ephemeral owner %d, session id %d: want equal, non-zero", e.EphemeralOwner, id)
	}

	// Exists, Children and Get agree on a node's stat.
	_, g := get(t, s, "/p")
	found, xs, err := s.Exists(ctx, "/p")
	ok(t, err, "exists /p")
	_, cs, err := s.Children(ctx, "/p")
	ok(t, err, "children /p")
	if !found || xs != g || cs != g {
		t.Errorf("stats of /p: Get %+v, Exists %+v (found %v), Children %+v", g, xs, found, cs)
	}
	if found, st, err := s.Exists(ctx, "/p/none"); err != nil || found || st != (coord.Stat{}) {
		t.Errorf("Exists(/p/none) = %v, %+v, %v: want false, zero stat, nil", found, st, err)
	}
}

func testChildren(t *testing.T, env Env) {
	s := env.Connect(t)
	ctx := t.Context()
	create(t, s, "/c", "", coord.Persistent)
	for _, n := range []string{"b", "a", "c", "a1", "B", "a-b", "10", "9"} {
		create(t, s, "/c/"+n, "", coord.Persistent)
	}
	create(t, s, "/c/a/deep", "", coord.Persistent)
	names, st, err := s.Children(ctx, "/c")
	ok(t, err, "children /c")
	want := []string{"10", "9", "B", "a", "a-b", "a1", "b", "c"}
	if !slices.Equal(names, want) || st.NumChildren != int32(len(want)) {
		t.Errorf("children of /c: %q (%d), want %q", names, st.NumChildren, want)
	}
	names, _, err = s.Children(ctx, "/c/b")
	if err != nil || len(names) != 0 {
		t.Errorf("children of a leaf: %q, %v; want none", names, err)
	}
	_, _, err = s.Children(ctx, "/c/none")
	is(t, err, coord.ErrNoNode, "children of a missing node")
}

func testCreateAll(t *testing.T, env Env) {
	s := env.Connect(t)
	ctx := t.Context()
	ok(t, coord.CreateAll(ctx, s, "/a/b/c", []byte("d"), coord.Persistent), "CreateAll /a/b/c")
	for _, p := range []string{"/a", "/a/b"} {
		if d, st := get(t, s, p); d != "" || st.EphemeralOwner != 0 {
			t.Errorf("ancestor %s = %q owner %d, want empty and persistent", p, d, st.EphemeralOwner)
		}
	}
	if d, _ := get(t, s, "/a/b/c"); d != "d" {
		t.Errorf("/a/b/c = %q, want d", d)
	}
	is(t, coord.CreateAll(ctx, s, "/a/b/c", nil, coord.Persistent), coord.ErrNodeExists, "CreateAll again")
	ok(t, coord.CreateAll(ctx, s, "/a/x/e", []byte("eph"), coord.Ephemeral), "CreateAll ephemeral")
	if _, st := get(t, s, "/a/x/e"); st.EphemeralOwner != s.Session().ID {
		t.Errorf("/a/x/e owner %d, want the session %d", st.EphemeralOwner, s.Session().ID)
	}
	if _, st := get(t, s, "/a/x"); st.EphemeralOwner != 0 {
		t.Errorf("ancestor /a/x is ephemeral")
	}
	is(t, coord.CreateAll(ctx, s, "/a/x/e/f/g", nil, coord.Persistent), coord.ErrNoChildrenForEphemerals, "CreateAll under an ephemeral")

	_, before := get(t, s, "/a/b/c")
	ok(t, coord.EnsurePath(ctx, s, "/a/b/c"), "EnsurePath of an existing node")
	if d, st := get(t, s, "/a/b/c"); d != "d" || st != before {
		t.Errorf("EnsurePath changed an existing node: %q %+v, was d %+v", d, st, before)
	}
	ok(t, coord.EnsurePath(ctx, s, "/a/b/y/z"), "EnsurePath /a/b/y/z")
	ok(t, coord.EnsurePath(ctx, s, "/a/b/y/z"), "EnsurePath again")
	if d, _ := get(t, s, "/a/b/y/z"); d != "" {
		t.Errorf("/a/b/y/z = %q, want empty", d)
	}
	ok(t, coord.EnsurePath(ctx, s, "/"), "EnsurePath /")

	// Racing creators of the same ancestors all succeed.
	const racers = 4
	stores := make([]coord.Store, racers)
	for i := range stores {
		stores[i] = s
	}
	if _, one := env.(OneSession); !one {
		for i := range stores {
			stores[i] = env.Connect(t)
		}
	}
	errs := make(chan error, racers)
	for i, st := range stores {
		go func() { errs <- coord.CreateAll(ctx, st, fmt.Sprintf("/r/x/y/%d", i), nil, coord.Persistent) }()
	}
	for range racers {
		ok(t, <-errs, "racing CreateAll")
	}
	names, _, err := s.Children(ctx, "/r/x/y")
	ok(t, err, "children /r/x/y")
	if len(names) != racers {
		t.Errorf("children after racing CreateAll: %q, want %d", names, racers)
	}
}

func testOwnership(t *testing.T, env Env) {
	s := env.Connect(t)
	ctx := t.Context()
	buf := []byte("abc")
	ok(t, s.Create(ctx, "/o", buf, coord.Persistent), "create /o")
	buf[0] = 'X'
	got, _, err := s.Get(ctx, "/o")
	ok(t, err, "get /o")
	if !eq(got, "abc") {
		t.Fatalf("/o = %q after the caller changed the slice it created with, want abc", got)
	}
	got[0] = 'Y'
	got2, _, ch, err := s.GetW(ctx, "/o")
	ok(t, err, "getw /o")
	if !eq(got2, "abc") {
		t.Fatalf("/o = %q after the caller changed a slice Get returned, want abc", got2)
	}
	got2[1] = 'Z'
	buf = []byte("def")
	_, err = s.Set(ctx, "/o", buf, coord.AnyVersion)
	ok(t, err, "set /o")
	expect(t, ch, coord.EventNodeDataChanged, "/o")
	buf[0] = 'X'
	if d, _ := get(t, s, "/o"); d != "def" {
		t.Fatalf("/o = %q after the caller changed the slice it set, want def", d)
	}
	cb, sb := []byte("multi"), []byte("set")
	_, err = s.Multi(ctx, &coord.CreateOp{Path: "/m", Data: cb}, &coord.SetOp{Path: "/o", Data: sb, Version: coord.AnyVersion})
	ok(t, err, "multi")
	cb[0], sb[0] = 'X', 'X'
	if d, _ := get(t, s, "/m"); d != "multi" {
		t.Errorf("/m = %q after the caller changed its CreateOp's data, want multi", d)
	}
	if d, _ := get(t, s, "/o"); d != "set" {
		t.Errorf("/o = %q after the caller changed its SetOp's data, want set", d)
	}
	create(t, s, "/m/a", "", coord.Persistent)
	create(t, s, "/m/b", "", coord.Persistent)
	names, _, err := s.Children(ctx, "/m")
	ok(t, err, "children /m")
	names[0] = "zzz"
	if names, _, _ := s.Children(ctx, "/m"); !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("children of /m = %q after the caller changed a returned slice", names)
	}
}

// testConcurrentCAS runs read-modify-write increments from several
// goroutines (several sessions where the store has them): versions make
// every lost update an ErrBadVersion, so the counter ends exactly at the
// number of increments.
func testConcurrentCAS(t *testing.T, env Env) {
	const workers, each = 4, 25
	s := env.Connect(t)
	create(t, s, "/counter", "0", coord.Persistent)
	stores := []coord.Store{s, s, s, s}
	if _, one := env.(OneSession); !one {
		for i := 1; i < workers; i++ {
			stores[i] = env.Connect(t)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for _, st := range stores {
		wg.Go(func() { errs <- increment(t.Context(), st, each) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		ok(t, err, "increment")
	}
	d, stat := get(t, s, "/counter")
	if d != strconv.Itoa(workers*each) || stat.Version != workers*each {
		t.Errorf("counter %s at version %d, want %d at version %d", d, stat.Version, workers*each, workers*each)
	}
}

func increment(ctx context.Context, s coord.Store, n int) error {
	for done := 0; done < n; {
		data, st, err := s.Get(ctx, "/counter")
		if err != nil {
			return err
		}
		v, err := strconv.Atoi(string(data))
		if err != nil {
			return err
		}
		_, err = s.Set(ctx, "/counter", []byte(strconv.Itoa(v+1)), st.Version)
		switch {
		case err == nil:
			done++
		case !errors.Is(err, coord.ErrBadVersion):
			return err
		}
	}
	return nil
}
