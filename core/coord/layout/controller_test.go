package layout_test

import (
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/coord/memstore"
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
