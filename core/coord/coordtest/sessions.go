package coordtest

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-broker/weir/core/coord"
)

func testSession(t *testing.T, env Env) {
	s := env.Connect(t)
	ss := s.Session()
	if ss.State != coord.Connected || ss.ID == 0 || ss.Changed == nil {
		t.Fatalf("new session %+v: want Connected, a non-zero id, a Changed channel", ss)
	}
	select {
	case <-ss.Changed:
		if now := s.Session(); now.State != coord.Connected || now.ID != ss.ID {
			t.Fatalf("a fresh session changed to %+v", now)
		}
	default:
	}
	if _, one := env.(OneSession); one {
		return
	}
	if other := env.Connect(t).Session(); other.ID == ss.ID {
		t.Errorf("two sessions share id %d", ss.ID)
	}
}

// calls runs every method of s with ctx and reports each error, and whether
// a watch channel came back with it.
func calls(ctx context.Context, s coord.Store) map[string]error {
	errs := map[string]error{}
	watch := func(name string, ch <-chan coord.Event, err error) {
		if ch != nil && err != nil {
			errs[name+" (set a watch)"] = nil
		}
		errs[name] = err
	}
	_, _, errs["Get"] = s.Get(ctx, "/p")
	_, _, ch, err := s.GetW(ctx, "/p")
	watch("GetW", ch, err)
	_, _, errs["Exists"] = s.Exists(ctx, "/p")
	_, _, ch, err = s.ExistsW(ctx, "/p")
	watch("ExistsW", ch, err)
	_, _, errs["Children"] = s.Children(ctx, "/p")
	_, _, ch, err = s.ChildrenW(ctx, "/p")
	watch("ChildrenW", ch, err)
	errs["Create"] = s.Create(ctx, "/q", nil, coord.Persistent)
	_, errs["Set"] = s.Set(ctx, "/p", nil, coord.AnyVersion)
	errs["Delete"] = s.Delete(ctx, "/p/e", coord.AnyVersion)
	_, errs["Multi"] = s.Multi(ctx, &coord.CreateOp{Path: "/q"})
	return errs
}

func testClose(t *testing.T, env Env) {
	s := env.Connect(t)
	create(t, s, "/p", "keep", coord.Persistent)
	create(t, s, "/p/e", "", coord.Ephemeral)
	own := map[string]<-chan coord.Event{
		"/p":   getW("/p")(t, s),
		"/p/e": existsW("/p/e", true)(t, s),
	}
	ownChildren := childrenW("/p")(t, s)
	ss := s.Session()
	ok(t, s.Close(), "close")
	for path, ch := range own {
		expectNotWatching(t, ch, path, coord.ErrClosed)
	}
	expectNotWatching(t, ownChildren, "/p", coord.ErrClosed)
	waitSession(t, s, "closed", func(ss coord.Session) bool { return ss.State == coord.Closed })
	select {
	case <-ss.Changed:
	default:
		t.Error("Session().Changed taken before Close is still open after it")
	}
	for name, err := range calls(t.Context(), s) {
		if !errors.Is(err, coord.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	ok(t, s.Close(), "second close")

	s2 := env.Connect(t) // for a OneSession store, a restart
	if s2.Session().ID == ss.ID {
		t.Errorf("a new session after Close has the old id %d", ss.ID)
	}
	if exists(t, s2, "/p/e") {
		t.Error("the closed session's ephemeral node survived it")
	}
	if d, st := get(t, s2, "/p"); d != "keep" || st.NumChildren != 0 {
		t.Errorf("/p after Close: %q with %d children, want keep with none", d, st.NumChildren)
	}
}

func testCloseOthers(t *testing.T, env Env) {
	a, b := twoSessions(t, env)
	create(t, a, "/x", "", coord.Persistent)
	create(t, a, "/x/e", "", coord.Ephemeral)
	_, before := get(t, b, "/x")
	exW, getW, chW := existsW("/x/e", true)(t, b), getW("/x/e")(t, b), childrenW("/x")(t, b)
	ok(t, a.Close(), "close a")
	expect(t, exW, coord.EventNodeDeleted, "/x/e")
	expect(t, getW, coord.EventNodeDeleted, "/x/e")
	expect(t, chW, coord.EventNodeChildrenChanged, "/x")
	if exists(t, b, "/x/e") {
		t.Error("a's ephemeral node survived a's Close")
	}
	if _, st := get(t, b, "/x"); st.Cversion != before.Cversion+1 || st.NumChildren != 0 {
		t.Errorf("/x after the ephemeral went: %+v, want cversion %d and no children", st, before.Cversion+1)
	}
}

func testExpiry(t *testing.T, env Env) {
	ex, can := env.(Expirer)
	if !can {
		t.Skip("the store cannot expire a session (Expirer)")
	}
	a := env.Connect(t)
	var b coord.Store
	if _, one := env.(OneSession); !one {
		b = env.Connect(t)
	}
	create(t, a, "/x", "keep", coord.Persistent)
	create(t, a, "/x/e", "", coord.Ephemeral)
	own := getW("/x")(t, a)
	ownEph := existsW("/x/e", true)(t, a)
	var othersEph, othersChildren <-chan coord.Event
	if b != nil {
		othersEph, othersChildren = existsW("/x/e", true)(t, b), childrenW("/x")(t, b)
	}
	old := a.Session()
	ex.Expire(t, a)
	expectNotWatching(t, own, "/x", coord.ErrSessionExpired)
	expectNotWatching(t, ownEph, "/x/e", coord.ErrSessionExpired)
	if b != nil {
		expect(t, othersEph, coord.EventNodeDeleted, "/x/e")
		expect(t, othersChildren, coord.EventNodeChildrenChanged, "/x")
	}
	ns := waitSession(t, a, "re-established", func(ss coord.Session) bool {
		return ss.State == coord.Connected && ss.ID != old.ID
	})
	if exists(t, a, "/x/e") {
		t.Fatal("the expired session's ephemeral node survived it")
	}
	if d, _ := get(t, a, "/x"); d != "keep" {
		t.Errorf("/x = %q after expiry, want keep", d)
	}
	create(t, a, "/x/e", "", coord.Ephemeral)
	if _, st := get(t, a, "/x/e"); st.EphemeralOwner != ns.ID {
		t.Errorf("ephemeral of the new session: owner %d, want %d", st.EphemeralOwner, ns.ID)
	}
}

func testDoneContext(t *testing.T, env Env) {
	s := env.Connect(t)
	create(t, s, "/p", "", coord.Persistent)
	create(t, s, "/p/e", "", coord.Ephemeral)
	for name, err := range calls(done(t), s) {
		if !errors.Is(err, coord.ErrConnectionLoss) {
			t.Errorf("%s with a done ctx: %v, want ErrConnectionLoss", name, err)
		}
	}
	// The session outlives a request's ctx.
	if ss := s.Session(); ss.State != coord.Connected {
		t.Errorf("session %+v after requests with a done ctx, want Connected", ss)
	}
	get(t, s, "/p")
}
