package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/memstore"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func data(t *testing.T, s *memstore.Store, path string) (string, coord.Stat) {
	t.Helper()
	d, st, err := s.Get(t.Context(), path)
	must(t, err)
	return string(d), st
}

func exists(t *testing.T, s *memstore.Store, path string) bool {
	t.Helper()
	ok, _, err := s.Exists(t.Context(), path)
	must(t, err)
	return ok
}

// event returns the watch's event if it has one now.
func event(ch <-chan coord.Event) (coord.Event, bool) {
	select {
	case ev, ok := <-ch:
		return ev, ok
	default:
		return coord.Event{}, false
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestDeterministicIDs: zxids and session ids are exact, so tests of the
// code above may assert them (a broker epoch is a czxid).
func TestDeterministicIDs(t *testing.T) {
	srv := memstore.NewServer()
	a, b := srv.Connect(), srv.Connect()
	if a.Session().ID != 1 || b.Session().ID != 2 {
		t.Fatalf("session ids %d, %d; want 1, 2", a.Session().ID, b.Session().ID)
	}
	ctx := t.Context()
	must(t, a.Create(ctx, "/a", nil, coord.Persistent))
	_, err := a.Multi(ctx, &coord.CreateOp{Path: "/b", Mode: coord.Ephemeral}, &coord.CreateOp{Path: "/c", Mode: coord.Ephemeral})
	must(t, err)
	_, err = a.Set(ctx, "/a", []byte("x"), 0)
	must(t, err)
	_, sa := data(t, a, "/a")
	_, sb := data(t, a, "/b")
	_, sc := data(t, a, "/c")
	if sa.Czxid != 1 || sa.Mzxid != 3 || sb.Czxid != 2 || sc.Czxid != 2 {
		t.Fatalf("zxids /a %d/%d, /b %d, /c %d; want 1/3, 2, 2 (one per transaction)", sa.Czxid, sa.Mzxid, sb.Czxid, sc.Czxid)
	}
	// Transactions that change nothing take no zxid.
	_, err = a.Multi(ctx, &coord.CheckOp{Path: "/a", Version: 1})
	must(t, err)
	_, err = a.Multi(ctx, &coord.CreateOp{Path: "/d"}, &coord.CheckOp{Path: "/a", Version: 0})
	if err == nil || srv.Zxid() != 3 {
		t.Fatalf("zxid %d after a check-only and a failed multi (err %v), want 3", srv.Zxid(), err)
	}
	srv.Expire(a) // both ephemerals go in one transaction
	if srv.Zxid() != 4 || exists(t, b, "/b") || exists(t, b, "/c") {
		t.Fatalf("zxid %d after expiry, want 4 and the ephemerals gone", srv.Zxid())
	}
	srv.Reconnect(a)
	if id := a.Session().ID; id != 3 {
		t.Fatalf("session id after expiry %d, want 3", id)
	}
}

func TestRoot(t *testing.T) {
	s := memstore.NewServer().Connect()
	ctx := t.Context()
	if err := s.Create(ctx, "/", nil, coord.Persistent); !errors.Is(err, coord.ErrNodeExists) {
		t.Errorf("create /: %v, want ErrNodeExists", err)
	}
	if err := s.Delete(ctx, "/", coord.AnyVersion); !errors.Is(err, coord.ErrInvalidPath) {
		t.Errorf("delete /: %v, want ErrInvalidPath", err)
	}
	st, err := s.Set(ctx, "/", []byte("r"), 0)
	if err != nil || st.Version != 1 {
		t.Errorf("set /: %+v %v", st, err)
	}
	if d, st := data(t, s, "/"); d != "r" || st.Czxid != 0 {
		t.Errorf("root %q %+v", d, st)
	}
}

func TestFaults(t *testing.T) {
	boom := errors.New("disk on fire")
	tests := []struct {
		name    string
		fault   memstore.Fault
		run     func(ctx context.Context, s *memstore.Store) error
		want    error // nil: success
		applied bool  // /n holds "new" afterwards
		struck  int
	}{
		{"lost on the way", memstore.Fault{Match: memstore.On(memstore.KindSet, "/n"), Err: coord.ErrConnectionLoss},
			setNew, coord.ErrConnectionLoss, false, 1},
		{"any error", memstore.Fault{Err: boom}, setNew, boom, false, 1},
		{"reply lost", memstore.Fault{Match: memstore.On(memstore.KindSet, ""), Lost: true},
			setNew, coord.ErrConnectionLoss, true, 1},
		{"multi reply lost", memstore.Fault{Match: memstore.On(memstore.KindMulti, "/n"), Lost: true},
			func(ctx context.Context, s *memstore.Store) error {
				_, err := s.Multi(ctx, &coord.CheckOp{Path: "/", Version: coord.AnyVersion},
					&coord.SetOp{Path: "/n", Data: []byte("new"), Version: coord.AnyVersion})
				return err
			}, coord.ErrConnectionLoss, true, 1},
		{"other path", memstore.Fault{Match: memstore.On(memstore.AnyKind, "/other"), Err: boom}, setNew, nil, true, 0},
		{"other kind", memstore.Fault{Match: memstore.On(memstore.KindCreate, "/n"), Err: boom}, setNew, nil, true, 0},
		{"twice", memstore.Fault{Times: 2, Err: boom},
			func(ctx context.Context, s *memstore.Store) error {
				if err := setNew(ctx, s); !errors.Is(err, boom) {
					return errors.New("first request not struck")
				}
				return setNew(ctx, s)
			}, boom, false, 2},
		{"spent after one", memstore.Fault{Err: boom},
			func(ctx context.Context, s *memstore.Store) error {
				if err := setNew(ctx, s); !errors.Is(err, boom) {
					return errors.New("first request not struck")
				}
				return setNew(ctx, s)
			}, nil, true, 1},
		{"lost read sets no watch", memstore.Fault{Match: memstore.On(memstore.KindGet, "/n"), Lost: true},
			func(ctx context.Context, s *memstore.Store) error {
				_, _, ch, err := s.GetW(ctx, "/n")
				if ch != nil {
					return errors.New("a watch came back with the error")
				}
				return err
			}, coord.ErrConnectionLoss, false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := memstore.NewServer()
			s := srv.Connect()
			must(t, s.Create(t.Context(), "/n", []byte("old"), coord.Persistent))
			inj := srv.Inject(tc.fault)
			err := tc.run(t.Context(), s)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if d, _ := data(t, s, "/n"); (d == "new") != tc.applied {
				t.Errorf("/n = %q, applied want %v", d, tc.applied)
			}
			if inj.Struck() != tc.struck {
				t.Errorf("struck %d times, want %d", inj.Struck(), tc.struck)
			}
		})
	}
}

func setNew(ctx context.Context, s *memstore.Store) error {
	_, err := s.Set(ctx, "/n", []byte("new"), coord.AnyVersion)
	return err
}

// TestUnknownOutcome is the case the interface's ErrConnectionLoss is for: a
// create whose reply was lost, retried, finds its own node.
func TestUnknownOutcome(t *testing.T) {
	srv := memstore.NewServer()
	s := srv.Connect()
	ctx := t.Context()
	srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindCreate, "/brokers"), Lost: true})
	if err := s.Create(ctx, "/brokers", nil, coord.Ephemeral); !errors.Is(err, coord.ErrConnectionLoss) {
		t.Fatalf("create: %v, want ErrConnectionLoss", err)
	}
	err := s.Create(ctx, "/brokers", nil, coord.Ephemeral)
	_, st := data(t, s, "/brokers")
	if !errors.Is(err, coord.ErrNodeExists) || st.EphemeralOwner != s.Session().ID {
		t.Fatalf("retry: %v, owner %d; want ErrNodeExists and our own node", err, st.EphemeralOwner)
	}
}

func TestBeforeMakesACASConflict(t *testing.T) {
	srv := memstore.NewServer()
	a, b := srv.Connect(), srv.Connect()
	ctx := t.Context()
	must(t, a.Create(ctx, "/ctl", []byte("a"), coord.Persistent))
	_, st := data(t, a, "/ctl")
	inj := srv.Inject(memstore.Fault{
		Match: func(r memstore.Request) bool { return r.Store == a && r.Kind == memstore.KindMulti },
		Before: func(r memstore.Request) {
			if _, err := b.Set(ctx, "/ctl", []byte("b"), coord.AnyVersion); err != nil {
				t.Errorf("conflicting write: %v", err)
			}
		},
	})
	_, err := a.Multi(ctx, &coord.CheckOp{Path: "/ctl", Version: st.Version}, &coord.CreateOp{Path: "/x"})
	var me *coord.MultiError
	if !errors.As(err, &me) || me.Index != 0 || !errors.Is(err, coord.ErrBadVersion) {
		t.Fatalf("fenced multi: %v, want ErrBadVersion at index 0", err)
	}
	if d, _ := data(t, a, "/ctl"); d != "b" || exists(t, a, "/x") || inj.Struck() != 1 {
		t.Fatalf("/ctl %q, /x exists %v, struck %d", d, exists(t, a, "/x"), inj.Struck())
	}
	// b's own write did not match (r.Store == a), and the fault is spent.
	_, err = a.Multi(ctx, &coord.CreateOp{Path: "/x"})
	must(t, err)
}

func TestBeforeCanDisconnect(t *testing.T) {
	srv := memstore.NewServer()
	s := srv.Connect()
	srv.Inject(memstore.Fault{Before: func(memstore.Request) { srv.Disconnect(s) }})
	if err := s.Create(t.Context(), "/x", nil, coord.Persistent); !errors.Is(err, coord.ErrConnectionLoss) {
		t.Fatalf("create: %v, want ErrConnectionLoss", err)
	}
	srv.Reconnect(s)
	if exists(t, s, "/x") {
		t.Fatal("a request whose session was cut off before it applied was applied")
	}
}

func TestFaultsNeedTheServer(t *testing.T) {
	srv := memstore.NewServer()
	s := srv.Connect()
	inj := srv.Inject(memstore.Fault{Times: -1, Err: errors.New("boom")})
	srv.Disconnect(s)
	if _, _, err := s.Get(t.Context(), "/"); !errors.Is(err, coord.ErrConnectionLoss) {
		t.Fatalf("get while disconnected: %v", err)
	}
	srv.Reconnect(s)
	if _, _, err := s.Get(t.Context(), "/a//b"); !errors.Is(err, coord.ErrInvalidPath) {
		t.Fatalf("get of an invalid path: %v", err)
	}
	if inj.Struck() != 0 {
		t.Fatalf("struck %d requests that never reached the server", inj.Struck())
	}
	for range 3 {
		if _, _, err := s.Get(t.Context(), "/"); err == nil {
			t.Fatal("a fault with Times -1 let a request through")
		}
	}
	inj.Cancel()
	if _, _, err := s.Get(t.Context(), "/"); err != nil || inj.Struck() != 3 {
		t.Fatalf("after Cancel: %v, struck %d", err, inj.Struck())
	}
	defer func() {
		if recover() == nil {
			t.Error("a Fault with Err and Lost was accepted")
		}
	}()
	srv.Inject(memstore.Fault{Err: coord.ErrConnectionLoss, Lost: true})
}

func TestDisconnect(t *testing.T) {
	srv := memstore.NewServer()
	a, b := srv.Connect(), srv.Connect()
	ctx := t.Context()
	must(t, a.Create(ctx, "/p", nil, coord.Persistent))
	must(t, a.Create(ctx, "/e", nil, coord.Ephemeral))
	_, _, watch, err := a.GetW(ctx, "/p")
	must(t, err)
	ss := a.Session()
	srv.Disconnect(a)
	now := a.Session()
	if !closed(ss.Changed) || now.State != coord.Connecting || now.ID != ss.ID {
		t.Fatalf("after Disconnect: %+v (Changed closed %v), want Connecting, same id", now, closed(ss.Changed))
	}
	if err := a.Create(ctx, "/q", nil, coord.Persistent); !errors.Is(err, coord.ErrConnectionLoss) {
		t.Fatalf("create while disconnected: %v", err)
	}
	if exists(t, b, "/q") {
		t.Fatal("a request of a disconnected session was applied")
	}
	if _, st := data(t, b, "/e"); st.EphemeralOwner != ss.ID {
		t.Fatalf("ephemeral of the disconnected session: owner %d, want %d (still alive)", st.EphemeralOwner, ss.ID)
	}
	_, err = b.Set(ctx, "/p", []byte("x"), coord.AnyVersion)
	must(t, err)
	if ev, ok := event(watch); ok {
		t.Fatalf("a disconnected session's watch fired: %+v", ev)
	}
	srv.Reconnect(a)
	if s := a.Session(); !closed(now.Changed) || s.State != coord.Connected || s.ID != ss.ID {
		t.Fatalf("after Reconnect: %+v, want Connected with the same id", s)
	}
	if ev, ok := event(watch); !ok || ev.Type != coord.EventNodeDataChanged {
		t.Fatalf("the held event after Reconnect: %+v (%v)", ev, ok)
	}
	if d, _ := data(t, a, "/p"); d != "x" {
		t.Fatalf("/p = %q", d)
	}
}

func TestExpireWhileDisconnected(t *testing.T) {
	srv := memstore.NewServer()
	a, b := srv.Connect(), srv.Connect()
	ctx := t.Context()
	must(t, a.Create(ctx, "/e", nil, coord.Ephemeral))
	_, _, own, err := a.GetW(ctx, "/e")
	must(t, err)
	_, _, theirs, err := b.ExistsW(ctx, "/e")
	must(t, err)
	srv.Disconnect(a)
	srv.Expire(a)
	if ev, ok := event(theirs); !ok || ev.Type != coord.EventNodeDeleted {
		t.Fatalf("other session's watch: %+v (%v), want deleted", ev, ok)
	}
	if exists(t, b, "/e") {
		t.Fatal("the expired session's ephemeral survived")
	}
	if s := a.Session(); s.State != coord.Connecting {
		t.Fatalf("a disconnected client learns of its expiry only when it reconnects: %+v", s)
	}
	if ev, ok := event(own); ok {
		t.Fatalf("own watch fired while disconnected: %+v", ev)
	}
	srv.Reconnect(a)
	if s := a.Session(); s.State != coord.Expired {
		t.Fatalf("after Reconnect: %+v, want Expired", s)
	}
	if ev, ok := event(own); !ok || ev.Type != coord.EventNotWatching || !errors.Is(ev.Err, coord.ErrSessionExpired) {
		t.Fatalf("own watch: %+v (%v), want not-watching/expired", ev, ok)
	}
	if _, _, err := a.Get(ctx, "/"); !errors.Is(err, coord.ErrSessionExpired) {
		t.Fatalf("get while expired: %v", err)
	}
	srv.Reconnect(a)
	if s := a.Session(); s.State != coord.Connected || s.ID != 3 {
		t.Fatalf("after the second Reconnect: %+v, want Connected with id 3", s)
	}
}

func TestExpireAndClose(t *testing.T) {
	srv := memstore.NewServer()
	a := srv.Connect()
	ss := a.Session()
	srv.Expire(a)
	if s := a.Session(); !closed(ss.Changed) || s.State != coord.Expired || s.ID != ss.ID {
		t.Fatalf("after Expire: %+v", s)
	}
	srv.Expire(a) // no-op
	srv.Disconnect(a)
	if s := a.Session(); s.State != coord.Expired {
		t.Fatalf("Disconnect of an expired session: %+v", s)
	}
	must(t, a.Close())
	if _, _, err := a.Get(t.Context(), "/"); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("get after close: %v", err)
	}
	srv.Reconnect(a) // no-op
	if s := a.Session(); s.State != coord.Closed {
		t.Fatalf("Reconnect of a closed store: %+v", s)
	}

	// Close of a disconnected session ends it at once.
	b, c := srv.Connect(), srv.Connect()
	must(t, b.Create(t.Context(), "/e", nil, coord.Ephemeral))
	srv.Disconnect(b)
	must(t, b.Close())
	if exists(t, c, "/e") {
		t.Fatal("ephemeral of a closed, disconnected session survived")
	}
}

func TestDoneContextAppliesNothing(t *testing.T) {
	s := memstore.NewServer().Connect()
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Unix(1, 0))
	defer cancel2()
	for _, tc := range []struct {
		ctx  context.Context
		want error
	}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		err := s.Create(tc.ctx, "/x", nil, coord.Persistent)
		if !errors.Is(err, coord.ErrConnectionLoss) || !errors.Is(err, tc.want) {
			t.Errorf("create: %v, want ErrConnectionLoss and %v", err, tc.want)
		}
		if _, err := s.Multi(tc.ctx, &coord.CreateOp{Path: "/x"}); !errors.Is(err, coord.ErrConnectionLoss) {
			t.Errorf("multi: %v", err)
		}
	}
	if exists(t, s, "/x") {
		t.Fatal("a request with a done ctx was applied")
	}
}
