// Package memstore is an in-memory coordination store for deterministic
// tests: one Server holds the tree (like one ZooKeeper ensemble), and each
// Connect opens a session on it, a coord.Store. Tests of the code around the
// store (broker registration, the controller) make the server misbehave on
// demand, with no clocks, sleeps or goroutines:
//
//   - Expire(s) ends s's session as a session timeout does: its ephemeral
//     nodes are deleted (other sessions' watches fire), its own watches fire
//     EventNotWatching with coord.ErrSessionExpired, s.Session().State is
//     Expired and requests fail with coord.ErrSessionExpired.
//   - Disconnect(s) cuts s off (a network partition between one broker and
//     the ensemble): requests fail with coord.ErrConnectionLoss and apply
//     nothing, the state is Connecting, but the server still thinks the
//     session is alive, so its ephemeral nodes stay and its watches stay set.
//     They do not fire while disconnected; the events are held.
//   - Reconnect(s) is the next step of the client, and it is explicit so a
//     test sees and controls every state: from Connecting, the session is
//     Connected again (same id) and the held events are delivered, as
//     ZooKeeper's client re-sends its watches on reconnecting; or, if the
//     session expired meanwhile, the client learns it now: Expired, watches
//     fire NotWatching. From Expired, a new session is Connected (a new id),
//     with no ephemeral nodes and no watches. The coord.Store contract says
//     a store reconnects "on its own": here the test is the one that says
//     when.
//   - Inject(Fault) fails the next matching request(s) before they apply
//     (nothing changes) or after (the write applied, the caller gets
//     coord.ErrConnectionLoss: the unknown outcome), and runs a function just
//     before a matching request applies, so a test can slip in a conflicting
//     write (a CAS conflict). The returned *Injection counts its strikes, so
//     a test can assert the fault really struck.
//
// Zxids come from one counter per server, from 1, one per transaction that
// changes something (a Multi's nodes share one); session ids from another,
// also from 1. Both are deterministic, so tests may assert exact values.
//
// A request with a done ctx fails before it reaches the server, applying
// nothing, with an error that wraps both coord.ErrConnectionLoss (what the
// interface promises) and ctx's error.
//
// Close ends the session at once, even while disconnected (a test store has
// no reason to wait for an expiry): ephemeral nodes deleted, watches fire
// NotWatching with coord.ErrClosed.
package memstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/internal/tree"
)

// Server is one shared tree and its sessions. Its methods and those of its
// stores are safe for concurrent use.
type Server struct {
	mu       sync.Mutex
	tree     *tree.Tree
	sessions int64 // the last session id handed out
	faults   []*Injection
}

// NewServer returns a server with an empty tree (the root alone).
func NewServer() *Server {
	return &Server{tree: tree.New()}
}

// Zxid returns the zxid of the last transaction that changed the tree.
func (srv *Server) Zxid() int64 {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.tree.Zxid()
}

// Store is one session on a Server; it implements coord.Store.
type Store struct {
	srv     *Server
	id      int64
	state   coord.SessionState
	alive   bool // the server's view: the session exists
	changed chan struct{}
}

var _ coord.Store = (*Store)(nil)

// Connect opens a new session, Connected.
func (srv *Server) Connect() *Store {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	s := &Store{srv: srv, changed: make(chan struct{})}
	srv.newSession(s)
	return s
}

func (srv *Server) newSession(s *Store) {
	srv.sessions++
	s.id = srv.sessions
	s.alive = true
	s.setState(coord.Connected)
}

// setState records a change of state or id; the caller holds srv.mu.
func (s *Store) setState(st coord.SessionState) {
	s.state = st
	close(s.changed)
	s.changed = make(chan struct{})
}

// Session implements coord.Store.
func (s *Store) Session() coord.Session {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	return coord.Session{ID: s.id, State: s.state, Changed: s.changed}
}

// endSession deletes the session's ephemeral nodes on the server.
func (srv *Server) endSession(s *Store) {
	if s.alive {
		s.alive = false
		srv.tree.EndSession(s.id).Commit()
	}
}

// Expire ends s's session on the server: see the package doc. A
// disconnected client learns of it only at Reconnect. Expiring a session
// that already ended does nothing.
func (srv *Server) Expire(s *Store) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if !s.alive {
		return
	}
	if s.state == coord.Connected {
		srv.tree.DropWatches(s.id, coord.ErrSessionExpired)
		s.setState(coord.Expired)
	}
	srv.endSession(s)
}

// Disconnect cuts a Connected s off from the server: see the package doc.
func (srv *Server) Disconnect(s *Store) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if s.state != coord.Connected {
		return
	}
	srv.tree.Pause(s.id)
	s.setState(coord.Connecting)
}

// Reconnect takes s one step towards Connected: Connecting becomes Connected
// (same session, held events delivered) or, if the session expired
// meanwhile, Expired; Expired becomes Connected with a new session. In other
// states it does nothing.
func (srv *Server) Reconnect(s *Store) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	switch {
	case s.state == coord.Connecting && s.alive:
		srv.tree.Resume(s.id)
		s.setState(coord.Connected)
	case s.state == coord.Connecting:
		srv.tree.DropWatches(s.id, coord.ErrSessionExpired)
		s.setState(coord.Expired)
	case s.state == coord.Expired:
		srv.newSession(s)
	}
}

// Close implements coord.Store.
func (s *Store) Close() error {
	srv := s.srv
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if s.state == coord.Closed {
		return nil
	}
	// Watches first: a closing session hears of its end, not of the
	// deletion of its own ephemeral nodes.
	srv.tree.DropWatches(s.id, coord.ErrClosed)
	srv.endSession(s)
	s.setState(coord.Closed)
	return nil
}

// usable is the error for a request of s in its current state, if any.
func (s *Store) usable(ctx context.Context, req *Request) error {
	switch s.state {
	case coord.Closed:
		return req.errorf(coord.ErrClosed)
	case coord.Expired:
		return req.errorf(coord.ErrSessionExpired)
	case coord.Connecting:
		return req.errorf(coord.ErrConnectionLoss)
	}
	if err := ctx.Err(); err != nil {
		return req.errorf(fmt.Errorf("%w (%w)", coord.ErrConnectionLoss, err))
	}
	return nil
}

// do runs one request: state and ctx checks, faults, then apply (under
// srv.mu) unless a fault says otherwise.
func (s *Store) do(ctx context.Context, req *Request, apply func(t *tree.Tree) error) error {
	srv := s.srv
	if err := req.validate(); err != nil {
		return err
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if err := s.usable(ctx, req); err != nil {
		return err
	}
	req.Store, req.Session = s, s.id
	f := srv.strike(*req)
	if f != nil && f.Before != nil {
		func() {
			srv.mu.Unlock()
			defer srv.mu.Lock() // even if Before calls t.Fatal
			f.Before(*req)
		}()
		if err := s.usable(ctx, req); err != nil {
			return err
		}
	}
	switch {
	case f != nil && f.Err != nil:
		return req.errorf(f.Err)
	case f != nil && f.Lost && !req.Kind.write():
		return req.errorf(coord.ErrConnectionLoss)
	}
	if err := apply(srv.tree); err != nil {
		return err
	}
	if f != nil && f.Lost {
		return req.errorf(coord.ErrConnectionLoss)
	}
	return nil
}
