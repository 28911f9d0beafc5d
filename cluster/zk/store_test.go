package zk_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/cluster/zk"
	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/core/coord"
)

// TestStore runs the store's own tests against one standalone server, each
// in a chroot of its own.
func TestStore(t *testing.T) {
	c := zktest.Start(t, zktest.Options{})
	t.Run("CreateGetSetDelete", func(t *testing.T) { testCRUD(t, c) })
	t.Run("ErrorsNameThePath", func(t *testing.T) { testErrors(t, c) })
	t.Run("Watches", func(t *testing.T) { testWatches(t, c) })
	t.Run("Multi", func(t *testing.T) { testMulti(t, c) })
	t.Run("Chroot", func(t *testing.T) { testChroot(t, c) })
	t.Run("Close", func(t *testing.T) { testClose(t, c) })
	t.Run("CloseDuringRequests", func(t *testing.T) { testCloseDuringRequests(t, c) })
	t.Run("LibraryLogsAtDebug", func(t *testing.T) { testLogging(t, c) })
	t.Run("SessionExpiry", func(t *testing.T) { testExpiry(t, c) })
	t.Run("EphemeralUnknownOutcome", func(t *testing.T) { testUnknownOutcome(t, c) })
}

func testCRUD(t *testing.T, c *zktest.Cluster) {
	s := open(t, c, nil)
	ctx := ctxT(t)
	if err := s.Create(ctx, "/a", []byte("one"), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	data, st, err := s.Get(ctx, "/a")
	if err != nil || string(data) != "one" || st.Version != 0 || st.DataLength != 3 || st.EphemeralOwner != 0 || st.Czxid == 0 {
		t.Fatalf("Get = %q, %+v, %v", data, st, err)
	}
	st2, err := s.Set(ctx, "/a", []byte("two"), st.Version)
	if err != nil || st2.Version != 1 || st2.Mzxid <= st.Mzxid || st2.Czxid != st.Czxid {
		t.Fatalf("Set = %+v, %v (was %+v)", st2, err, st)
	}
	if _, err := s.Set(ctx, "/a", []byte("stale"), st.Version); !errors.Is(err, coord.ErrBadVersion) {
		t.Fatalf("Set with a stale version: %v", err)
	}
	if _, err := s.Set(ctx, "/a", []byte("any"), coord.AnyVersion); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"c", "a", "b"} {
		if err := s.Create(ctx, "/a/"+name, nil, coord.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	names, st, err := s.Children(ctx, "/a")
	if err != nil || !slices.Equal(names, []string{"a", "b", "c"}) || st.NumChildren != 3 || st.Cversion != 3 {
		t.Fatalf("Children = %v, %+v, %v", names, st, err)
	}
	if ok, st, err := s.Exists(ctx, "/a/b"); !ok || err != nil || st.Czxid == 0 {
		t.Fatalf("Exists(/a/b) = %v, %+v, %v", ok, st, err)
	}
	if ok, st, err := s.Exists(ctx, "/nope"); ok || err != nil || st != (coord.Stat{}) {
		t.Fatalf("Exists(/nope) = %v, %+v, %v", ok, st, err)
	}
	if err := s.Create(ctx, "/eph", nil, coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := s.Get(ctx, "/eph"); st.EphemeralOwner != s.Session().ID || st.EphemeralOwner == 0 {
		t.Fatalf("ephemeral owner %#x, session %#x", st.EphemeralOwner, s.Session().ID)
	}
	if owned, err := s.OwnsEphemeral(ctx, "/eph"); !owned || err != nil {
		t.Fatalf("OwnsEphemeral(/eph) = %v, %v", owned, err)
	}
	if owned, err := s.OwnsEphemeral(ctx, "/a"); owned || err != nil {
		t.Fatalf("OwnsEphemeral(/a), a persistent node = %v, %v", owned, err)
	}
	if err := s.Delete(ctx, "/a/b", 0); err != nil {
		t.Fatal(err)
	}
	// Empty data comes back empty, and slices passed in are copied.
	buf := []byte("keep")
	if err := s.Create(ctx, "/buf", buf, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXX")
	if data, _, _ := s.Get(ctx, "/buf"); string(data) != "keep" {
		t.Fatalf("Get(/buf) = %q", data)
	}
	if err := coord.CreateAll(ctx, s, "/x/y/z", []byte("deep"), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	if data, _, err := s.Get(ctx, "/x/y/z"); err != nil || string(data) != "deep" {
		t.Fatalf("Get(/x/y/z) = %q, %v", data, err)
	}
}

func testErrors(t *testing.T, c *zktest.Cluster) {
	s := open(t, c, nil)
	ctx := ctxT(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Create(ctx, "/p", nil, coord.Persistent))
	must(s.Create(ctx, "/p/child", nil, coord.Persistent))
	must(s.Create(ctx, "/e", nil, coord.Ephemeral))
	_, _, getErr := s.Get(ctx, "/missing")
	_, setErr := s.Set(ctx, "/missing", nil, coord.AnyVersion)
	_, _, childErr := s.Children(ctx, "/missing")
	_, _, _, getwErr := s.GetW(ctx, "/missing")
	cases := []struct {
		name string
		err  error
		want error
		path string
	}{
		{"get missing", getErr, coord.ErrNoNode, "/missing"},
		{"getw missing", getwErr, coord.ErrNoNode, "/missing"},
		{"set missing", setErr, coord.ErrNoNode, "/missing"},
		{"children missing", childErr, coord.ErrNoNode, "/missing"},
		{"create exists", s.Create(ctx, "/p", nil, coord.Persistent), coord.ErrNodeExists, "/p"},
		{"create ephemeral exists", s.Create(ctx, "/e", nil, coord.Ephemeral), coord.ErrNodeExists, "/e"},
		{"create no parent", s.Create(ctx, "/none/x", nil, coord.Persistent), coord.ErrNoNode, "/none/x"},
		{"create under ephemeral", s.Create(ctx, "/e/x", nil, coord.Persistent), coord.ErrNoChildrenForEphemerals, "/e/x"},
		{"create root", s.Create(ctx, "/", nil, coord.Persistent), coord.ErrNodeExists, "/"},
		{"delete not empty", s.Delete(ctx, "/p", coord.AnyVersion), coord.ErrNotEmpty, "/p"},
		{"delete bad version", s.Delete(ctx, "/p/child", 7), coord.ErrBadVersion, "/p/child"},
		{"delete missing", s.Delete(ctx, "/missing", coord.AnyVersion), coord.ErrNoNode, "/missing"},
		{"delete root", s.Delete(ctx, "/", coord.AnyVersion), coord.ErrInvalidPath, "/"},
		{"invalid path", s.Create(ctx, "no/slash", nil, coord.Persistent), coord.ErrInvalidPath, "no/slash"},
		{"trailing slash", s.Delete(ctx, "/p/", coord.AnyVersion), coord.ErrInvalidPath, "/p/"},
		{"dot dot", s.Create(ctx, "/p/../q", nil, coord.Persistent), coord.ErrInvalidPath, "/p/../q"},
		{"unknown mode", s.Create(ctx, "/m", nil, coord.CreateMode(9)), zk.ErrUnsupported, "/m"},
	}
	for _, tc := range cases {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
			continue
		}
		if msg := tc.err.Error(); !strings.HasPrefix(msg, "zk: ") || !strings.Contains(msg, tc.path) {
			t.Errorf("%s: %q does not start with \"zk: \" or name %s", tc.name, msg, tc.path)
		}
	}
	// A ctx that has ended fails at once, with the outcome unknown.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.Get(done, "/p"); !errors.Is(err, coord.ErrConnectionLoss) || !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled ctx: %v", err)
	}
}

func testWatches(t *testing.T, c *zktest.Cluster) {
	s := open(t, c, nil)
	ctx := ctxT(t)
	if err := s.Create(ctx, "/w", []byte("0"), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	_, _, dataW, err := s.GetW(ctx, "/w")
	if err != nil {
		t.Fatal(err)
	}
	_, _, childW, err := s.ChildrenW(ctx, "/w")
	if err != nil {
		t.Fatal(err)
	}
	ok, _, createW, err := s.ExistsW(ctx, "/w/new")
	if err != nil || ok {
		t.Fatalf("ExistsW(/w/new) = %v, %v", ok, err)
	}
	ok, _, existW, err := s.ExistsW(ctx, "/w")
	if err != nil || !ok {
		t.Fatalf("ExistsW(/w) = %v, %v", ok, err)
	}
	quiet(t, dataW)
	quiet(t, childW)

	if _, err := s.Set(ctx, "/w", []byte("1"), coord.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if ev := event(t, dataW, 5*time.Second); ev != (coord.Event{Type: coord.EventNodeDataChanged, Path: "/w"}) {
		t.Errorf("GetW after Set: %+v", ev)
	}
	if ev := event(t, existW, 5*time.Second); ev != (coord.Event{Type: coord.EventNodeDataChanged, Path: "/w"}) {
		t.Errorf("ExistsW (existing) after Set: %+v", ev)
	}
	quiet(t, childW)
	if err := s.Create(ctx, "/w/new", nil, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	if ev := event(t, childW, 5*time.Second); ev != (coord.Event{Type: coord.EventNodeChildrenChanged, Path: "/w"}) {
		t.Errorf("ChildrenW after a create: %+v", ev)
	}
	if ev := event(t, createW, 5*time.Second); ev != (coord.Event{Type: coord.EventNodeCreated, Path: "/w/new"}) {
		t.Errorf("ExistsW (missing) after its create: %+v", ev)
	}

	// Deletion fires data and child watches, each once.
	_, _, dataW, _ = s.GetW(ctx, "/w/new")
	_, _, childW, _ = s.ChildrenW(ctx, "/w/new")
	if err := s.Delete(ctx, "/w/new", coord.AnyVersion); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan coord.Event{"GetW": dataW, "ChildrenW": childW} {
		if ev := event(t, ch, 5*time.Second); ev != (coord.Event{Type: coord.EventNodeDeleted, Path: "/w/new"}) {
			t.Errorf("%s after Delete: %+v", name, ev)
		}
	}

	// Another session's change fires this one's watch.
	other := open(t, c, func(cfg *zk.Config) { cfg.Chroot = s.Chroot() })
	_, _, dataW, _ = s.GetW(ctx, "/w")
	if _, err := other.Set(ctx, "/w", []byte("2"), coord.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if ev := event(t, dataW, 5*time.Second); ev.Type != coord.EventNodeDataChanged {
		t.Errorf("GetW after another session's Set: %+v", ev)
	}
}

func testMulti(t *testing.T, c *zktest.Cluster) {
	s := open(t, c, nil)
	ctx := ctxT(t)
	if err := s.Create(ctx, "/epoch", []byte("0"), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	res, err := s.Multi(ctx,
		&coord.CheckOp{Path: "/epoch", Version: 0},
		&coord.CreateOp{Path: "/controller", Data: []byte("1"), Mode: coord.Ephemeral},
		&coord.SetOp{Path: "/epoch", Data: []byte("1"), Version: 0},
		&coord.CreateOp{Path: "/tmp", Mode: coord.Persistent},
		&coord.DeleteOp{Path: "/tmp", Version: 0},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 5 || res[2].Stat.Version != 1 || res[0] != (coord.OpResult{}) {
		t.Fatalf("results %+v", res)
	}
	if owned, err := s.OwnsEphemeral(ctx, "/controller"); !owned || err != nil {
		t.Fatalf("the multi's ephemeral: owned %v, %v", owned, err)
	}

	// A failed op: MultiError with its index, nothing applied.
	_, err = s.Multi(ctx,
		&coord.CreateOp{Path: "/applied-not", Mode: coord.Persistent},
		&coord.CheckOp{Path: "/epoch", Version: 0}, // it is 1 now
		&coord.SetOp{Path: "/epoch", Data: []byte("2"), Version: 1},
	)
	var me *coord.MultiError
	if !errors.As(err, &me) || me.Index != 1 || !errors.Is(err, coord.ErrBadVersion) || me.Op.OpPath() != "/epoch" {
		t.Fatalf("Multi with a stale check: %v (%#v)", err, me)
	}
	if ok, _, _ := s.Exists(ctx, "/applied-not"); ok {
		t.Fatal("a failed multi applied its first operation")
	}
	if data, _, _ := s.Get(ctx, "/epoch"); string(data) != "1" {
		t.Fatalf("a failed multi applied its last operation: %q", data)
	}
	for _, tc := range []struct {
		ops   []coord.Op
		index int
		want  error
	}{
		{[]coord.Op{&coord.CheckOp{Path: "/epoch", Version: coord.AnyVersion}, &coord.DeleteOp{Path: "/gone", Version: -1}}, 1, coord.ErrNoNode},
		{[]coord.Op{&coord.CreateOp{Path: "/epoch"}}, 0, coord.ErrNodeExists},
		{[]coord.Op{&coord.CheckOp{Path: "/epoch", Version: -1}, &coord.CreateOp{Path: "/controller/x"}}, 1, coord.ErrNoChildrenForEphemerals},
		{[]coord.Op{&coord.SetOp{Path: "/epoch", Version: -1}, &coord.CreateOp{Path: "bad"}}, 1, coord.ErrInvalidPath},
		{[]coord.Op{&coord.DeleteOp{Path: "/", Version: -1}}, 0, coord.ErrInvalidPath},
		{[]coord.Op{&coord.CreateOp{Path: "/q"}, nil}, 1, zk.ErrUnsupported},
	} {
		_, err := s.Multi(ctx, tc.ops...)
		if !errors.As(err, &me) || me.Index != tc.index || !errors.Is(err, tc.want) {
			t.Errorf("Multi(%v): %v; want operation %d failing with %v", tc.ops, err, tc.index, tc.want)
		}
	}
	if res, err := s.Multi(ctx); err != nil || len(res) != 0 {
		t.Errorf("empty Multi = %v, %v", res, err)
	}
}

func testChroot(t *testing.T, c *zktest.Cluster) {
	ctx := ctxT(t)
	chroot := freshChroot(t) + "/deeper/still"
	cfg, err := zk.ParseConnectString(c.ConnectString() + chroot)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Chroot != chroot || !slices.Equal(cfg.Servers, c.Addrs()) {
		t.Fatalf("ParseConnectString: %+v", cfg)
	}
	s := open(t, c, func(c *zk.Config) { c.Chroot = cfg.Chroot })
	raw := open(t, c, func(c *zk.Config) { c.Chroot = "" })
	if ok, _, err := raw.Exists(ctx, chroot); !ok || err != nil {
		t.Fatalf("Open did not create the chroot %s: %v, %v", chroot, ok, err)
	}
	if err := s.Create(ctx, "/n", []byte("in"), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	if data, _, err := raw.Get(ctx, chroot+"/n"); err != nil || string(data) != "in" {
		t.Fatalf("raw Get(%s/n) = %q, %v", chroot, data, err)
	}
	if names, _, err := s.Children(ctx, "/"); err != nil || !slices.Equal(names, []string{"n"}) {
		t.Fatalf("Children(/) in the chroot = %v, %v", names, err)
	}
	_, _, w, err := s.GetW(ctx, "/n")
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(ctx, chroot+"/n", coord.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if ev := event(t, w, 5*time.Second); ev != (coord.Event{Type: coord.EventNodeDeleted, Path: "/n"}) {
		t.Fatalf("watch in the chroot: %+v (paths must not carry the chroot)", ev)
	}
	// A second Open finds the chroot there.
	open(t, c, func(c *zk.Config) { c.Chroot = cfg.Chroot })
}

func testClose(t *testing.T, c *zktest.Cluster) {
	s := open(t, c, nil)
	observer := open(t, c, func(cfg *zk.Config) { cfg.Chroot = s.Chroot() })
	ctx := ctxT(t)
	if err := s.Create(ctx, "/mine", nil, coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	_, _, gone, err := observer.ExistsW(ctx, "/mine")
	if err != nil {
		t.Fatal(err)
	}
	_, _, w, err := s.ChildrenW(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The watch has fired by the time Close returns.
	select {
	case ev := <-w:
		if ev.Type != coord.EventNotWatching || ev.Err != coord.ErrClosed || ev.Path != "/" {
			t.Errorf("watch at Close: %+v", ev)
		}
	default:
		t.Error("a watch had not fired when Close returned")
	}
	if ev := event(t, gone, 5*time.Second); ev.Type != coord.EventNodeDeleted {
		t.Errorf("observer: %+v, want the ephemeral deleted", ev)
	}
	if sess := s.Session(); sess.State != coord.Closed {
		t.Errorf("Session after Close: %v", sess.State)
	}
	if _, _, err := s.Get(ctx, "/"); !errors.Is(err, coord.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if err := s.Create(ctx, "/x", nil, coord.Ephemeral); !errors.Is(err, coord.ErrClosed) {
		t.Errorf("Create after Close: %v", err)
	}
	if _, err := s.Multi(ctx, &coord.CheckOp{Path: "/", Version: -1}); !errors.Is(err, coord.ErrClosed) {
		t.Errorf("Multi after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// testCloseDuringRequests closes the store under busy callers: each call
// ends with a result or ErrClosed, and every watch handed out fires once.
func testCloseDuringRequests(t *testing.T, c *zktest.Cluster) {
	s := open(t, c, nil)
	ctx := ctxT(t)
	if err := s.Create(ctx, "/n", nil, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	watches := make(chan (<-chan coord.Event), 1<<16)
	started := make(chan struct{}, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			for {
				_, _, w, err := s.GetW(ctx, "/n")
				if err != nil {
					if !errors.Is(err, coord.ErrClosed) {
						t.Errorf("GetW during Close: %v", err)
					}
					return
				}
				watches <- w
			}
		}()
	}
	for range 8 {
		<-started
	}
	eventually(t, 10*time.Second, "GetW calls did not get going", func() bool { return len(watches) >= 64 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(watches)
	n := 0
	for w := range watches {
		if ev := event(t, w, 5*time.Second); ev.Type != coord.EventNotWatching || ev.Err != coord.ErrClosed {
			t.Fatalf("watch at Close: %+v", ev)
		}
		n++
	}
	t.Logf("%d watches fired at Close", n)
}

func testLogging(t *testing.T, c *zktest.Cluster) {
	logger, rec := newLogRecorder(t)
	open(t, c, func(cfg *zk.Config) { cfg.Logger = logger })
	if !rec.has("DEBUG go-zookeeper: connected to ") || !rec.has("DEBUG go-zookeeper: authenticated: id=") {
		t.Errorf("go-zookeeper's connect messages did not reach slog at debug level: %q", *rec.recs)
	}
	if !rec.has("INFO zk: session connected") {
		t.Errorf("the session change was not logged: %q", *rec.recs)
	}
}
