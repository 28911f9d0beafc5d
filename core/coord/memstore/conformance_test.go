package memstore_test

import (
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/coordtest"
	"github.com/weir-broker/weir/core/coord/memstore"
)

type harness struct{}

func (harness) New(t *testing.T) coordtest.Env { return env{memstore.NewServer()} }

type env struct{ srv *memstore.Server }

func (e env) Connect(t *testing.T) coord.Store {
	s := e.srv.Connect()
	t.Cleanup(func() { s.Close() })
	return s
}

// Expire expires the session and, since a memstore client reconnects only
// when told, reconnects it: a new session.
func (e env) Expire(t *testing.T, s coord.Store) {
	ms := s.(*memstore.Store)
	e.srv.Expire(ms)
	if st := ms.Session().State; st != coord.Expired {
		t.Fatalf("state %v after Expire, want expired", st)
	}
	e.srv.Reconnect(ms)
}

func TestConformance(t *testing.T) { coordtest.Run(t, harness{}) }
