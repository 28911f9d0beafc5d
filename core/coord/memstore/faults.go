package memstore

import (
	"slices"
	"strconv"

	"github.com/weir-broker/weir/core/coord"
)

// Kind is the method a request comes from.
type Kind int8

// The kinds of request; AnyKind matches them all in On.
const (
	AnyKind Kind = iota
	KindGet
	KindExists
	KindChildren
	KindCreate
	KindSet
	KindDelete
	KindMulti
)

var kindNames = [...]string{"any", "get", "exists", "children", "create", "set", "delete", "multi"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

func (k Kind) write() bool { return k >= KindCreate }

// Request is what a fault sees of a request: read it, do not change it.
type Request struct {
	Store   *Store // the session's store
	Session int64  // its session id
	Kind    Kind
	Path    string     // "" for a Multi
	Ops     []coord.Op // a write's operations (one for Create, Set, Delete)
	Watch   bool       // GetW, ExistsW, ChildrenW
}

// Touches reports whether the request reads or writes path.
func (r Request) Touches(path string) bool {
	return r.Path == path || slices.ContainsFunc(r.Ops, func(op coord.Op) bool { return op.OpPath() == path })
}

// On matches requests of kind (AnyKind: all) that touch path ("": any path).
func On(kind Kind, path string) func(Request) bool {
	return func(r Request) bool {
		return (kind == AnyKind || r.Kind == kind) && (path == "" || r.Touches(path))
	}
}

// Fault changes what happens to the requests it matches. A request that
// fails before reaching the server (a closed, expired or disconnected
// session, a done ctx, an invalid path) is never matched.
type Fault struct {
	// Match selects requests; nil matches every request. It runs under the
	// server's lock: it must not call the server or its stores (compare
	// Request.Store instead).
	Match func(Request) bool
	// Times is how many matching requests the fault strikes: 0 means once,
	// a negative number every one until the Injection is cancelled.
	Times int
	// Before, if set, runs just before the request applies, without the
	// server's lock, so it may use any session of the server (write the
	// node the request is about to CAS, or Disconnect the requester).
	Before func(Request)
	// Err, if set, fails the request with Err (wrapped) instead of applying
	// it: nothing changes. coord.ErrConnectionLoss is a request lost on the
	// way to the server.
	Err error
	// Lost applies the request and then fails it with
	// coord.ErrConnectionLoss: the reply was lost, the outcome unknown to
	// the caller. A lost read sets no watch. Lost and Err are exclusive.
	Lost bool
}

// Injection is a fault in force.
type Injection struct {
	srv    *Server
	f      Fault
	struck int
}

// Inject puts f in force, after the faults already in force: a request is
// struck by the first one that matches it and is not spent.
func (srv *Server) Inject(f Fault) *Injection {
	if f.Err != nil && f.Lost {
		panic("memstore: Fault with both Err and Lost")
	}
	if f.Times == 0 {
		f.Times = 1
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	inj := &Injection{srv: srv, f: f}
	srv.faults = append(srv.faults, inj)
	return inj
}

// Struck returns how many requests the fault has struck.
func (inj *Injection) Struck() int {
	inj.srv.mu.Lock()
	defer inj.srv.mu.Unlock()
	return inj.struck
}

// Cancel takes the fault out of force.
func (inj *Injection) Cancel() {
	srv := inj.srv
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.faults = slices.DeleteFunc(srv.faults, func(x *Injection) bool { return x == inj })
}

// strike finds the fault for req, counts the strike, drops the fault if it is
// spent, and returns it; the caller holds srv.mu.
func (srv *Server) strike(req Request) *Fault {
	for i, inj := range srv.faults {
		if inj.f.Match != nil && !inj.f.Match(req) {
			continue
		}
		inj.struck++
		if inj.f.Times > 0 && inj.struck >= inj.f.Times {
			srv.faults = slices.Delete(srv.faults, i, i+1)
		}
		return &inj.f
	}
	return nil
}
