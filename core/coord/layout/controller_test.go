package layout_test

import (
	"maps"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/meta"
)

func TestElect(t *testing.T) {
	srv, ss := cluster(3)
	a, b, c := ss[0], ss[1], ss[2]
	id, epoch, watch, err := layout.ReadController(ctx(t), c)
	must(t, err)
	if id != -1 || epoch != 0 {
		t.Fatalf("before any election: controller %d epoch %d", id, epoch)
	}

	c1, err := layout.Elect(ctx(t), a, 1, 100)
	must(t, err)
	if c1 != (layout.Controllership{ID: 1, Epoch: 1, EpochVersion: 1}) {
		t.Fatalf("first controllership %+v", c1)
	}
	fired(t, watch, coord.EventNodeCreated)
	if data, st := get(t, c, layout.ControllerEpochPath); data != "1" || st.Version != 1 {
		t.Fatalf("%s = %q v%d", layout.ControllerEpochPath, data, st.Version)
	}
	if data, st := get(t, c, layout.ControllerPath); data != string(layout.EncodeController(1, 100)) || st.EphemeralOwner != a.Session().ID {
		t.Fatalf("%s = %s, %+v", layout.ControllerPath, data, st)
	}

	_, err = layout.Elect(ctx(t), b, 2, 200)
	wantErr(t, err, errs(coord.ErrNodeExists), "broker 1 is controller")

	id, epoch, watch, err = layout.ReadController(ctx(t), c)
	must(t, err)
	if id != 1 || epoch != 1 {
		t.Fatalf("controller %d epoch %d", id, epoch)
	}
	srv.Expire(a)
	fired(t, watch, coord.EventNodeDeleted)

	c2, err := layout.Elect(ctx(t), b, 2, 300)
	must(t, err)
	if c2 != (layout.Controllership{ID: 2, Epoch: 2, EpochVersion: 2}) {
		t.Fatalf("second controllership %+v", c2)
	}
	if id, epoch, _, err = layout.ReadController(ctx(t), c); err != nil || id != 2 || epoch != 2 {
		t.Fatalf("controller %d epoch %d, %v", id, epoch, err)
	}
}

// TestFencing is the deterministic fencing test: a controller deposed
// without noticing (its session expired and it came back with a new one;
// or an operator deleted /controller to force a move) writes nothing once
// another is elected: every write fails with ErrFenced, and the tree and
// its zxid do not move.
func TestFencing(t *testing.T) {
	for _, how := range []string{"session expired", "controller node deleted"} {
		t.Run(how, func(t *testing.T) {
			srv, ss := cluster(3)
			a, b, admin := ss[0], ss[1], ss[2]
			old, err := layout.Elect(ctx(t), a, 1, 0)
			must(t, err)
			must(t, layout.CreateTopic(ctx(t), admin, topic("t", []int32{1, 2}, []int32{2, 1})))
			st := meta.PartitionState{Leader: 1, ISR: []int32{1, 2}, ControllerEpoch: old.Epoch}
			if v, err := layout.WriteState(ctx(t), a, old, "t", 0, st, true); err != nil || v != 0 {
				t.Fatalf("the controller's own write: %d, %v", v, err)
			}

			switch how {
			case "session expired":
				srv.Expire(a)
				srv.Reconnect(a) // a new session: the old controller is back, unaware
			case "controller node deleted":
				must(t, admin.Delete(ctx(t), layout.ControllerPath, coord.AnyVersion))
			}
			cur, err := layout.Elect(ctx(t), b, 2, 0)
			must(t, err)
			if cur.Epoch != 2 {
				t.Fatalf("new controllership %+v", cur)
			}

			// unchanged runs the deposed controller's writes and checks
			// that the tree and its zxid did not move.
			unchanged := func(writes func()) {
				t.Helper()
				before, zxid := dump(t, admin), srv.Zxid()
				writes()
				if after := dump(t, admin); !maps.Equal(before, after) || srv.Zxid() != zxid {
					t.Fatalf("the deposed controller changed the tree:\nbefore %v\nafter  %v", before, after)
				}
			}
			st.Version, st.Leader, st.LeaderEpoch = 0, 2, 1
			unchanged(func() {
				_, err = layout.WriteState(ctx(t), a, old, "t", 0, st, false)
				wantErr(t, err, errs(layout.ErrFenced), "t-0", "epoch 1")
				_, err = layout.WriteState(ctx(t), a, old, "t", 1, st, true)
				wantErr(t, err, errs(layout.ErrFenced))
			})
			must(t, layout.RequestDeletion(ctx(t), admin, "t"))
			unchanged(func() {
				wantErr(t, layout.DeleteTopic(ctx(t), a, old, "t"), errs(layout.ErrFenced))
				wantErr(t, layout.Resign(ctx(t), a, old), errs(layout.ErrFenced))
			})

			// The current controller's writes go through.
			if v, err := layout.WriteState(ctx(t), b, cur, "t", 0, st, false); err != nil || v != 1 {
				t.Fatalf("the current controller's write: %d, %v", v, err)
			}
		})
	}
}

// A CAS conflict on /controller_epoch (another election slipped in between
// the read and the Multi) is retried with the epoch read again.
func TestElectCASConflict(t *testing.T) {
	srv, ss := cluster(2)
	_, err := layout.Elect(ctx(t), ss[0], 1, 0) // creates /controller_epoch
	must(t, err)
	must(t, layout.Resign(ctx(t), ss[0], layout.Controllership{ID: 1, Epoch: 1, EpochVersion: 1}))
	inj := srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindMulti, layout.ControllerEpochPath),
		Before: func(memstore.Request) {
			_, err := ss[1].Set(ctx(t), layout.ControllerEpochPath, []byte("5"), coord.AnyVersion)
			must(t, err)
		}})
	c, err := layout.Elect(ctx(t), ss[0], 1, 0)
	must(t, err)
	if inj.Struck() != 1 || c != (layout.Controllership{ID: 1, Epoch: 6, EpochVersion: 3}) {
		t.Fatalf("struck %d, controllership %+v", inj.Struck(), c)
	}
}

func TestElectUnknownOutcome(t *testing.T) {
	t.Run("reply lost: won", func(t *testing.T) {
		srv, ss := cluster(1)
		inj := srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindMulti, layout.ControllerPath), Lost: true})
		c, err := layout.Elect(ctx(t), ss[0], 1, 0)
		must(t, err)
		if inj.Struck() != 1 || c != (layout.Controllership{ID: 1, Epoch: 1, EpochVersion: 1}) {
			t.Fatalf("struck %d, controllership %+v", inj.Struck(), c)
		}
	})
	t.Run("request lost: run again", func(t *testing.T) {
		srv, ss := cluster(1)
		inj := srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindMulti, layout.ControllerPath), Err: coord.ErrConnectionLoss})
		c, err := layout.Elect(ctx(t), ss[0], 1, 0)
		must(t, err)
		if inj.Struck() != 1 || c != (layout.Controllership{ID: 1, Epoch: 1, EpochVersion: 1}) {
			t.Fatalf("struck %d, controllership %+v", inj.Struck(), c)
		}
	})
	t.Run("request lost, another won meanwhile", func(t *testing.T) {
		srv, ss := cluster(2)
		srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindMulti, layout.ControllerPath), Err: coord.ErrConnectionLoss,
			Before: func(memstore.Request) {
				_, err := layout.Elect(ctx(t), ss[1], 2, 0)
				must(t, err)
			}})
		_, err := layout.Elect(ctx(t), ss[0], 1, 0)
		wantErr(t, err, errs(coord.ErrNodeExists), "broker 2 is controller")
	})
	t.Run("reply and read-back lost: call again", func(t *testing.T) {
		srv, ss := cluster(1)
		srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindMulti, layout.ControllerPath), Lost: true})
		srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindGet, layout.ControllerPath), Err: coord.ErrConnectionLoss})
		_, err := layout.Elect(ctx(t), ss[0], 1, 0)
		wantErr(t, err, errs(coord.ErrConnectionLoss), "elect 1")
		c, err := layout.Elect(ctx(t), ss[0], 1, 0)
		must(t, err)
		if c != (layout.Controllership{ID: 1, Epoch: 1, EpochVersion: 1}) {
			t.Fatalf("controllership %+v: the first attempt's epoch was 1", c)
		}
	})
}

func TestResign(t *testing.T) {
	_, ss := cluster(2)
	c, err := layout.Elect(ctx(t), ss[0], 1, 0)
	must(t, err)
	_, _, watch, err := layout.ReadController(ctx(t), ss[1])
	must(t, err)
	must(t, layout.Resign(ctx(t), ss[0], c))
	fired(t, watch, coord.EventNodeDeleted)
	must(t, layout.Resign(ctx(t), ss[0], c)) // already gone
	c2, err := layout.Elect(ctx(t), ss[1], 2, 0)
	must(t, err)
	if c2.Epoch != 2 {
		t.Fatalf("after resigning: %+v", c2)
	}
}

func TestReadControllerMalformed(t *testing.T) {
	_, ss := cluster(1)
	must(t, ss[0].Create(ctx(t), layout.ControllerPath, []byte(`{"brokerid":1}`), coord.Ephemeral))
	_, _, _, err := layout.ReadController(ctx(t), ss[0])
	wantErr(t, err, errs(layout.ErrMalformed), layout.ControllerPath, `"version"`)
	must(t, ss[0].Create(ctx(t), layout.ControllerEpochPath, []byte(`x`), coord.Persistent))
	_, err = layout.Elect(ctx(t), ss[0], 1, 0)
	wantErr(t, err, errs(layout.ErrMalformed), layout.ControllerEpochPath)
}
