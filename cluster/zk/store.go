package zk

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/weir-broker/weir/core/coord"
)

// closeWait bounds how long Close waits for go-zookeeper's loop to end (it
// sends closeSession and waits up to 1 s for the reply, or gives up on a
// dead server within its 1 s redial pause).
const closeWait = 10 * time.Second

var worldACL = gozk.WorldACL(gozk.PermAll)

// Store is a coord.Store over one ZooKeeper session. It is safe for
// concurrent use.
type Store struct {
	cfg    Config
	log    *slog.Logger
	chroot string // "" or an absolute path without a trailing slash

	conn   *gozk.Conn
	connp  atomic.Pointer[gozk.Conn] // for the event callback, which may run before Open has conn
	events <-chan gozk.Event         // only to learn, in Close, that the library's loop ended

	done      chan struct{} // closed by Close
	closeOnce sync.Once
	watches   sync.WaitGroup // live watch forwarders

	mu      sync.Mutex
	id      int64
	state   coord.SessionState
	changed chan struct{}
}

var _ coord.Store = (*Store)(nil)

// Open connects to the ensemble and waits, until ctx ends, for a session;
// then it creates the chroot if it is missing. The store reconnects on its
// own after that, for as long as it is open.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "zk"),
		chroot:  cfg.Chroot,
		done:    make(chan struct{}),
		state:   coord.Connecting,
		changed: make(chan struct{}),
	}
	// go-zookeeper's option type is unexported: every option is always given.
	conn, events, err := gozk.Connect(cfg.Servers, cfg.SessionTimeout,
		gozk.WithLogger(debugLogger{s.log}),
		gozk.WithEventCallback(s.onEvent),
		gozk.WithMaxBufferSize(cfg.MaxBufferSize),
		gozk.WithDialer(cappedDialer(cfg.Dialer, cfg.SessionTimeout)))
	if err != nil {
		return nil, fmt.Errorf("zk: open %v: %w", cfg.Servers, err)
	}
	s.conn, s.events = conn, events
	s.connp.Store(conn)
	s.mu.Lock()
	if conn.State() == gozk.StateHasSession {
		s.setLocked(conn.SessionID(), coord.Connected)
	}
	s.mu.Unlock()

	for {
		sess := s.Session()
		if sess.State == coord.Connected {
			break
		}
		select {
		case <-sess.Changed:
		case <-ctx.Done():
			s.Close()
			return nil, fmt.Errorf("zk: open %v: no session: %w (%w)", cfg.Servers, coord.ErrConnectionLoss, ctx.Err())
		}
	}
	if err := s.ensureChroot(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.log.Debug("zk: open", "servers", cfg.Servers, "chroot", cfg.Chroot, "session", fmt.Sprintf("%#x", s.Session().ID))
	return s, nil
}

// ensureChroot creates the chroot and its parents, as Kafka does.
func (s *Store) ensureChroot(ctx context.Context) error {
	if s.chroot == "" {
		return nil
	}
	cur := ""
	for _, c := range splitPath(s.chroot) {
		cur += "/" + c
		p := cur
		err := s.call(ctx, func() error {
			_, err := s.conn.Create(p, nil, gozk.FlagPersistent, worldACL)
			return err
		})
		if err != nil && err != gozk.ErrNodeExists {
			return s.mapErr("open: create chroot", p, err)
		}
	}
	return nil
}

// Chroot returns the chroot the store lives under ("" for none).
func (s *Store) Chroot() string { return s.chroot }

// Server returns the address of the server the store is (or was last)
// connected to; for diagnostics and tests.
func (s *Store) Server() string { return s.conn.Server() }

// onEvent is go-zookeeper's event callback: it runs on the library's
// goroutines and must not block. Only session events matter here; node
// events reach their watch channels directly.
func (s *Store) onEvent(ev gozk.Event) {
	if ev.Type != gozk.EventSession {
		return
	}
	s.mu.Lock()
	if s.state == coord.Closed {
		s.mu.Unlock()
		return
	}
	prev := s.state
	switch ev.State {
	case gozk.StateHasSession:
		conn := s.connp.Load()
		if conn == nil {
			s.mu.Unlock()
			return // Open reads the state once it has conn
		}
		s.setLocked(conn.SessionID(), coord.Connected)
	case gozk.StateExpired:
		s.setLocked(s.id, coord.Expired)
	default: // disconnected, connecting, TCP-connected without a session yet
		s.setLocked(s.id, coord.Connecting)
	}
	state, id := s.state, s.id
	s.mu.Unlock()
	if state != prev {
		level := slog.LevelInfo
		if state == coord.Expired {
			level = slog.LevelWarn
		}
		s.log.Log(context.Background(), level, "zk: session "+state.String(),
			"session", fmt.Sprintf("%#x", id), "server", ev.Server)
	}
}

// setLocked changes the session snapshot and wakes its waiters; no-op when
// nothing changes. s.mu is held.
func (s *Store) setLocked(id int64, state coord.SessionState) {
	if id == s.id && state == s.state {
		return
	}
	s.id, s.state = id, state
	close(s.changed)
	s.changed = make(chan struct{})
}

// Session returns the session's current state. ID keeps the last session's
// id until a new session replaces it: while Expired and the Connecting that
// follows an expiry, it is the id of the session that expired.
func (s *Store) Session() coord.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return coord.Session{ID: s.id, State: s.state, Changed: s.changed}
}

func (s *Store) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Close ends the session: go-zookeeper sends closeSession (the server
// deletes the ephemerals) and waits up to a second for the reply; every
// watch fires EventNotWatching with ErrClosed before Close returns.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		close(s.done)
		s.setLocked(s.id, coord.Closed)
		s.mu.Unlock()
		if s.conn == nil {
			return
		}
		s.conn.Close()
		timeout := time.NewTimer(closeWait)
		defer timeout.Stop()
	drain:
		for {
			select {
			case _, ok := <-s.events:
				if !ok {
					break drain
				}
			case <-timeout.C:
				s.log.Warn("zk: close: the client's loop did not end", "after", closeWait)
				break drain
			}
		}
		s.watches.Wait()
	})
	return nil
}

// call runs the blocking go-zookeeper request f and returns its error, or
// gives up when ctx ends or the store closes. go-zookeeper has no request
// timeout: a request sent to a server that stops answering waits until the
// connection is declared dead (2/3 of the session timeout). A request given
// up on may still be applied later; f must only write variables the caller
// reads after call returned nil.
func (s *Store) call(ctx context.Context, f func() error) error {
	if s.isClosed() {
		return errStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return errAbandoned{err}
	}
	res := make(chan error, 1)
	go func() { res <- f() }()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return errAbandoned{ctx.Err()}
	case <-s.done:
		return errStoreClosed
	}
}

// abs validates a caller's path and returns it under the chroot.
func (s *Store) abs(op, path string) (string, error) {
	if err := coord.ValidatePath(path); err != nil {
		return "", fmt.Errorf("zk: %s: %w", op, err)
	}
	if s.chroot == "" {
		return path, nil
	}
	if path == "/" {
		return s.chroot, nil
	}
	return s.chroot + path, nil
}

func splitPath(p string) []string { return strings.Split(p[1:], "/") }

func toStat(st *gozk.Stat) coord.Stat {
	if st == nil {
		return coord.Stat{}
	}
	return coord.Stat{
		Czxid: st.Czxid, Mzxid: st.Mzxid, Version: st.Version, Cversion: st.Cversion,
		EphemeralOwner: st.EphemeralOwner, DataLength: st.DataLength, NumChildren: st.NumChildren,
	}
}

// Get implements coord.Store.
func (s *Store) Get(ctx context.Context, path string) ([]byte, coord.Stat, error) {
	full, err := s.abs("get", path)
	if err != nil {
		return nil, coord.Stat{}, err
	}
	var data []byte
	var st *gozk.Stat
	err = s.call(ctx, func() (err error) { data, st, err = s.conn.Get(full); return err })
	if err != nil {
		return nil, coord.Stat{}, s.mapErr("get", path, err)
	}
	return data, toStat(st), nil
}

// GetW implements coord.Store.
func (s *Store) GetW(ctx context.Context, path string) ([]byte, coord.Stat, <-chan coord.Event, error) {
	full, err := s.abs("getw", path)
	if err != nil {
		return nil, coord.Stat{}, nil, err
	}
	var data []byte
	var st *gozk.Stat
	var ch <-chan gozk.Event
	err = s.call(ctx, func() (err error) { data, st, ch, err = s.conn.GetW(full); return err })
	if err != nil {
		return nil, coord.Stat{}, nil, s.mapErr("getw", path, err)
	}
	return data, toStat(st), s.forward(path, ch), nil
}

// Exists implements coord.Store.
func (s *Store) Exists(ctx context.Context, path string) (bool, coord.Stat, error) {
	full, err := s.abs("exists", path)
	if err != nil {
		return false, coord.Stat{}, err
	}
	var ok bool
	var st *gozk.Stat
	err = s.call(ctx, func() (err error) { ok, st, err = s.conn.Exists(full); return err })
	if err != nil {
		return false, coord.Stat{}, s.mapErr("exists", path, err)
	}
	if !ok {
		return false, coord.Stat{}, nil
	}
	return true, toStat(st), nil
}

// ExistsW implements coord.Store.
func (s *Store) ExistsW(ctx context.Context, path string) (bool, coord.Stat, <-chan coord.Event, error) {
	full, err := s.abs("existsw", path)
	if err != nil {
		return false, coord.Stat{}, nil, err
	}
	var ok bool
	var st *gozk.Stat
	var ch <-chan gozk.Event
	err = s.call(ctx, func() (err error) { ok, st, ch, err = s.conn.ExistsW(full); return err })
	if err != nil {
		return false, coord.Stat{}, nil, s.mapErr("existsw", path, err)
	}
	if !ok {
		return false, coord.Stat{}, s.forward(path, ch), nil
	}
	return true, toStat(st), s.forward(path, ch), nil
}

// Children implements coord.Store.
func (s *Store) Children(ctx context.Context, path string) ([]string, coord.Stat, error) {
	full, err := s.abs("children", path)
	if err != nil {
		return nil, coord.Stat{}, err
	}
	var names []string
	var st *gozk.Stat
	err = s.call(ctx, func() (err error) { names, st, err = s.conn.Children(full); return err })
	if err != nil {
		return nil, coord.Stat{}, s.mapErr("children", path, err)
	}
	slices.Sort(names)
	return names, toStat(st), nil
}

// ChildrenW implements coord.Store.
func (s *Store) ChildrenW(ctx context.Context, path string) ([]string, coord.Stat, <-chan coord.Event, error) {
	full, err := s.abs("childrenw", path)
	if err != nil {
		return nil, coord.Stat{}, nil, err
	}
	var names []string
	var st *gozk.Stat
	var ch <-chan gozk.Event
	err = s.call(ctx, func() (err error) { names, st, ch, err = s.conn.ChildrenW(full); return err })
	if err != nil {
		return nil, coord.Stat{}, nil, s.mapErr("childrenw", path, err)
	}
	slices.Sort(names)
	return names, toStat(st), s.forward(path, ch), nil
}

// Create implements coord.Store. An Ephemeral create whose outcome is
// unknown (the connection closed under it, or its reply would not decode)
// is resolved before Create returns, while ctx lasts: see the package doc.
func (s *Store) Create(ctx context.Context, path string, data []byte, mode coord.CreateMode) error {
	full, err := s.abs("create", path)
	if err != nil {
		return err
	}
	data = bytes.Clone(data) // a request given up on is still encoded later
	switch mode {
	case coord.Persistent:
		err := s.call(ctx, func() error {
			_, err := s.conn.Create(full, data, gozk.FlagPersistent, worldACL)
			return err
		})
		return s.mapErr("create", path, err)
	case coord.Ephemeral:
		return s.createEphemeral(ctx, path, full, data)
	}
	return fmt.Errorf("zk: create %s: %w: mode %v", path, ErrUnsupported, mode)
}

// Set implements coord.Store.
func (s *Store) Set(ctx context.Context, path string, data []byte, version int32) (coord.Stat, error) {
	full, err := s.abs("set", path)
	if err != nil {
		return coord.Stat{}, err
	}
	data = bytes.Clone(data)
	var st *gozk.Stat
	err = s.call(ctx, func() (err error) { st, err = s.conn.Set(full, data, version); return err })
	if err != nil {
		return coord.Stat{}, s.mapErr("set", path, err)
	}
	return toStat(st), nil
}

// Delete implements coord.Store. The root cannot be deleted (under a
// chroot, ZooKeeper itself would let the chroot node go).
func (s *Store) Delete(ctx context.Context, path string, version int32) error {
	full, err := s.abs("delete", path)
	if err != nil {
		return err
	}
	if path == "/" {
		return fmt.Errorf("zk: delete /: %w: the root always exists", coord.ErrInvalidPath)
	}
	err = s.call(ctx, func() error { return s.conn.Delete(full, version) })
	return s.mapErr("delete", path, err)
}

// debugLogger routes go-zookeeper's Printf logging to slog at debug level
// (its default logger writes to the standard logger, that is stderr).
type debugLogger struct{ l *slog.Logger }

func (d debugLogger) Printf(format string, args ...any) {
	if d.l.Enabled(context.Background(), slog.LevelDebug) {
		d.l.Debug("go-zookeeper: " + fmt.Sprintf(format, args...))
	}
}
