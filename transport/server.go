package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-broker/weir/node"
	"github.com/weir-broker/weir/transport/fetchsession"
)

// Server serves the Kafka protocol for one broker: it owns the listeners and
// connections, and hands decoded requests to the node.
type Server struct {
	cfg  Config
	node *node.Node
	// mdCache: Metadata's topics for the node's current list (api_metadata.go).
	mdCache atomic.Pointer[metadataCache]
	log     *slog.Logger
	m       *Metrics
	now     func() time.Time // Config.seams' clock, or time.Now
	budget  *budget          // Config.MaxQueuedRequestBytes
	// sessions are the incremental fetch sessions (api_fetch.go).
	sessions *fetchSessions
	warns    *limitedLog // warnings clients can trigger at will
	// acls is the authorizer (authorize.go); nil without Config.Authorizer.
	acls *aclState

	// ctx is cancelled by Close; every connection's context derives from it,
	// so long polls and blocked joins end.
	ctx          context.Context
	cancel       context.CancelFunc
	housekeeping sync.Once // starts tickLoop, with the first Serve

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	paths     map[string]string // TLS listener name: its Fetch path (FetchPaths)
	wg        sync.WaitGroup    // one per connection
}

// NewServer returns a server for the node, which stays owned by the caller:
// Close does not close it.
func NewServer(cfg Config, n *node.Node) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if n == nil {
		return nil, fmt.Errorf("%w: a node is required", ErrConfig)
	}
	sc, err := fetchsession.New(fetchsession.Config{Slots: cfg.FetchSessionSlots, EvictionAge: cfg.FetchSessionEvictionAge})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		sessions:  &fetchSessions{c: sc, m: cfg.Metrics},
		cfg:       cfg,
		node:      n,
		log:       cfg.Logger,
		m:         cfg.Metrics,
		now:       time.Now,
		budget:    &budget{max: cfg.MaxQueuedRequestBytes},
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		paths:     make(map[string]string),
	}
	if cfg.seams != nil && cfg.seams.now != nil {
		s.now = cfg.seams.now
	}
	s.warns = newLimitedLog(s.log, warnInterval, s.now)
	if err := s.startAuthorizer(); err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

// Serve accepts connections on l until Close, then returns nil; it returns
// another error only when l fails for good. Serve may be called for several
// listeners.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.housekeeping.Do(func() {
		s.wg.Add(1)
		go s.tickLoop()
	})
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()

	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("transport: accept: %w", err)
			}
			// Out of file descriptors and the like: wait and retry, as
			// net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.warns.warn("transport: accept failed, retrying", "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		s.startConn(nc, listenerOf(l))
	}
}

// Close stops accepting, closes every connection (ending long polls and
// blocked group joins), and waits for their handlers to return.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	s.cancel()
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.warns.flush(true)
	return nil
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) startConn(nc net.Conn, lst *Listener) {
	s.mu.Lock()
	if s.closed || (s.cfg.MaxConnections > 0 && len(s.conns) >= s.cfg.MaxConnections) {
		full := !s.closed
		s.mu.Unlock()
		if full {
			s.warns.warn("transport: too many connections, closing a new one", "remote", nc.RemoteAddr(), "max", s.cfg.MaxConnections)
			s.m.connRejected()
		}
		nc.Close()
		return
	}
	c := newConn(s, wrapTLS(nc, lst))
	c.lst = lst
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.m.connOpened()
	go func() {
		defer s.wg.Done()
		if c.handshake() {
			stop := c.armAuthTimeout()
			c.serve()
			stop()
		}
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.m.connClosed()
	}()
}

// tickLoop does the server's periodic work until Close: closing idle
// connections, and logging the counts of suppressed warnings. It ticks
// every MaxIdle/10 or every second, whichever is more often.
func (s *Server) tickLoop() {
	defer s.wg.Done()
	tick := (<-chan time.Time)(nil)
	if s.cfg.seams != nil && s.cfg.seams.tick != nil {
		tick = s.cfg.seams.tick
	} else {
		every := time.Second
		if s.cfg.MaxIdle > 0 {
			every = min(max(s.cfg.MaxIdle/10, time.Millisecond), time.Second)
		}
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick:
			s.closeIdle(s.now())
			s.warns.flush(false)
		}
	}
}

// closeIdle closes the connections that have been idle for MaxIdle at now.
func (s *Server) closeIdle(now time.Time) {
	if s.cfg.MaxIdle <= 0 {
		return
	}
	type idle struct {
		c *conn
		d time.Duration
	}
	var close []idle
	s.mu.Lock()
	for c := range s.conns {
		if d := c.idleFor(now); d >= s.cfg.MaxIdle {
			close = append(close, idle{c, d})
		}
	}
	s.mu.Unlock()
	for _, i := range close {
		i.c.closeIdle(i.d)
	}
}

// ConnStats describes what each open connection holds (see Config's limits),
// in no particular order.
func (s *Server) ConnStats() []ConnStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ConnStats, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c.stats())
	}
	return out
}

// RequestBudget describes the broker-wide bound on request bytes
// (Config.MaxQueuedRequestBytes).
func (s *Server) RequestBudget() RequestBudgetStats { return s.budget.stats() }

// code returns err's Kafka error code, logging errors that the table does not
// know (they become UNKNOWN_SERVER_ERROR).
func (s *Server) code(err error) int16 {
	if err == nil {
		return 0
	}
	if ke := kerrOf(err); ke != nil {
		return ke.Code
	}
	s.log.Error("transport: unmapped error", "err", err)
	return errorCode(err)
}
