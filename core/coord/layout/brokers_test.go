package layout_test

import (
	"slices"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/meta"
)

func TestRegisterBroker(t *testing.T) {
	srv, ss := cluster(2)
	a, b := ss[0], ss[1]
	e1, err := layout.RegisterBroker(ctx(t), a, meta.Broker{ID: 1, Host: "h1", Port: 9092}, 1)
	must(t, err)
	data, st := get(t, a, "/brokers/ids/1")
	if e1 != st.Czxid || st.EphemeralOwner != a.Session().ID {
		t.Fatalf("epoch %d, node %+v", e1, st)
	}
	if want := string(layout.EncodeBroker(meta.Broker{Host: "h1", Port: 9092}, 1)); data != want {
		t.Fatalf("registration %s, want %s", data, want)
	}

	again, err := layout.RegisterBroker(ctx(t), a, meta.Broker{ID: 1, Host: "h1", Port: 9092}, 2)
	if err != nil || again != e1 {
		t.Fatalf("same session again: %d, %v; want %d", again, err, e1)
	}
	_, err = layout.RegisterBroker(ctx(t), b, meta.Broker{ID: 1, Host: "h2", Port: 9093}, 3)
	wantErr(t, err, errs(layout.ErrBrokerIDInUse), "/brokers/ids/1", "h1:9092")

	srv.Expire(a)
	e2, err := layout.RegisterBroker(ctx(t), b, meta.Broker{ID: 1, Host: "h2", Port: 9093}, 4)
	must(t, err)
	if e2 <= e1 {
		t.Fatalf("epoch after re-registering %d, want > %d", e2, e1)
	}
	brokers, _, err := layout.ReadBrokers(ctx(t), b)
	must(t, err)
	if got := brokers[1]; len(brokers) != 1 || got.Host != "h2" || got.Port != 9093 || got.Epoch != e2 {
		t.Fatalf("brokers %+v", brokers)
	}
}

// A lost reply: the node was created; reading it back shows it is ours.
func TestRegisterBrokerLostReply(t *testing.T) {
	srv, ss := cluster(1)
	inj := srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindCreate, layout.BrokerPath(1)), Lost: true})
	epoch, err := layout.RegisterBroker(ctx(t), ss[0], meta.Broker{ID: 1, Host: "h", Port: 1}, 0)
	must(t, err)
	if _, st := get(t, ss[0], layout.BrokerPath(1)); inj.Struck() != 1 || st.Czxid != epoch {
		t.Fatalf("struck %d, epoch %d, node %+v", inj.Struck(), epoch, st)
	}
}

// The reply and the read-back both lost: ErrConnectionLoss, and calling
// again succeeds with the node the first call made.
func TestRegisterBrokerRetryAfterLoss(t *testing.T) {
	srv, ss := cluster(1)
	path := layout.BrokerPath(1)
	srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindCreate, path), Lost: true})
	srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindGet, path), Err: coord.ErrConnectionLoss})
	_, err := layout.RegisterBroker(ctx(t), ss[0], meta.Broker{ID: 1, Host: "h", Port: 1}, 0)
	wantErr(t, err, errs(coord.ErrConnectionLoss), "register broker 1")
	_, st := get(t, ss[0], path)
	epoch, err := layout.RegisterBroker(ctx(t), ss[0], meta.Broker{ID: 1, Host: "h", Port: 1}, 0)
	if err != nil || epoch != st.Czxid {
		t.Fatalf("retry: %d, %v; want the first node's czxid %d", epoch, err, st.Czxid)
	}
}

func TestRegisterBrokerInvalid(t *testing.T) {
	_, ss := cluster(1)
	for _, b := range []meta.Broker{{ID: -1, Host: "h", Port: 1}, {Host: "", Port: 1}, {Host: "a b", Port: 1},
		{Host: "[::1]", Port: 1}, {Host: "h", Port: 0}, {Host: "h", Port: 65536}} {
		_, err := layout.RegisterBroker(ctx(t), ss[0], b, 0)
		wantErr(t, err, errs(layout.ErrInvalid))
	}
	ok := meta.Endpoint{Listener: "INTERNAL", Protocol: "SASL_SSL", Host: "h", Port: 1}
	for _, tc := range []struct {
		e    meta.Endpoint
		want string
	}{
		{meta.Endpoint{Listener: "", Protocol: "SSL", Host: "h", Port: 2}, "listener name"},
		{meta.Endpoint{Listener: "A-B", Protocol: "SSL", Host: "h", Port: 2}, "listener name"},
		{meta.Endpoint{Listener: "internal", Protocol: "SSL", Host: "h", Port: 2}, "named twice"},
		{meta.Endpoint{Listener: "EXTERNAL", Protocol: "TLS", Host: "h", Port: 2}, "security protocol"},
		{meta.Endpoint{Listener: "EXTERNAL", Protocol: "SSL", Host: "a b", Port: 2}, "listener EXTERNAL: address"},
		{meta.Endpoint{Listener: "EXTERNAL", Protocol: "SSL", Host: "h", Port: 0}, "listener EXTERNAL: address"},
	} {
		b := meta.Broker{ID: 1, Host: "h", Port: 1, Endpoints: []meta.Endpoint{ok, tc.e}}
		_, err := layout.RegisterBroker(ctx(t), ss[0], b, 0)
		wantErr(t, err, errs(layout.ErrInvalid), tc.want)
	}
}

// TestRegisterBrokerListeners: every endpoint goes through the store and
// comes back from ReadBrokers, with its protocol; the top-level address is
// the PLAINTEXT listener's.
func TestRegisterBrokerListeners(t *testing.T) {
	_, ss := cluster(1)
	eps := []meta.Endpoint{
		{Listener: "INTERNAL", Protocol: "SASL_PLAINTEXT", Host: "10.0.0.1", Port: 9091},
		{Listener: "EXTERNAL", Protocol: "SASL_SSL", Host: "kafka-1.example.com", Port: 9093},
		{Listener: "LOCAL", Protocol: "PLAINTEXT", Host: "127.0.0.1", Port: 9092},
	}
	_, err := layout.RegisterBroker(ctx(t), ss[0], meta.Broker{ID: 1, Host: "10.0.0.1", Port: 9091, Endpoints: eps}, 0)
	must(t, err)
	brokers, _, err := layout.ReadBrokers(ctx(t), ss[0])
	must(t, err)
	got := brokers[1]
	if !slices.Equal(got.Endpoints, eps) || got.Host != "127.0.0.1" || got.Port != 9092 {
		t.Fatalf("read back %+v, want endpoints %+v and the LOCAL address", got, eps)
	}
	if e, ok := got.Endpoint("external"); !ok || e.Host != "kafka-1.example.com" || e.Port != 9093 {
		t.Errorf("Endpoint(external) = %+v, %v", e, ok)
	}
	if _, ok := got.Endpoint("REPLICATION"); ok {
		t.Errorf("Endpoint(REPLICATION) found")
	}
}

func TestReadBrokers(t *testing.T) {
	srv, ss := cluster(3)
	brokers, watch, err := layout.ReadBrokers(ctx(t), ss[0])
	must(t, err)
	if len(brokers) != 0 {
		t.Fatalf("brokers %v", brokers)
	}
	for i, s := range ss[1:] {
		_, err := layout.RegisterBroker(ctx(t), s, meta.Broker{ID: int32(i + 1), Host: "h", Port: int32(9000 + i)}, 0)
		must(t, err)
	}
	fired(t, watch, coord.EventNodeChildrenChanged)
	brokers, watch, err = layout.ReadBrokers(ctx(t), ss[0])
	must(t, err)
	if len(brokers) != 2 || brokers[2].Port != 9001 || brokers[2].ID != 2 || brokers[1].Epoch >= brokers[2].Epoch {
		t.Fatalf("brokers %+v", brokers)
	}
	quiet(t, watch)

	// Broker 2's session expires between the listing and its read.
	inj := srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindGet, layout.BrokerPath(2)),
		Before: func(memstore.Request) { srv.Expire(ss[2]) }})
	brokers, watch, err = layout.ReadBrokers(ctx(t), ss[0])
	must(t, err)
	if inj.Struck() != 1 || len(brokers) != 1 || brokers[1].Port != 9000 {
		t.Fatalf("struck %d, brokers %+v", inj.Struck(), brokers)
	}
	fired(t, watch, coord.EventNodeChildrenChanged)

	must(t, ss[0].Create(ctx(t), "/brokers/ids/9", []byte(`{"version":5}`), coord.Persistent))
	_, _, err = layout.ReadBrokers(ctx(t), ss[0])
	wantErr(t, err, errs(layout.ErrMalformed), "/brokers/ids/9")
	must(t, ss[0].Delete(ctx(t), "/brokers/ids/9", coord.AnyVersion))
	must(t, ss[0].Create(ctx(t), "/brokers/ids/x", nil, coord.Persistent))
	_, _, err = layout.ReadBrokers(ctx(t), ss[0])
	wantErr(t, err, errs(layout.ErrMalformed), "/brokers/ids/x", "not a broker id")
}
