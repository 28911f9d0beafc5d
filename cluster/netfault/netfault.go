// Package netfault is a loopback network that can fail on demand, for
// in-process cluster tests: each broker dials its peers through Net.Dialer
// (node.Config.ReplicaDialer), and the test cuts links between two brokers
// (Cut: open connections are closed, new dials refused, both ways or one),
// delays them, and heals them. Addresses are told apart by the broker ids
// registered for them (Name), so a broker restarted on a new port keeps its
// faults.
package netfault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ErrCut is the error of a dial over a cut link.
var ErrCut = errors.New("netfault: link cut")

// Net is the network between brokers.
type Net struct {
	mu    sync.Mutex
	names map[string]int32  // address -> broker
	cut   map[[2]int32]bool // from, to
	delay map[[2]int32]time.Duration
	conns map[[2]int32]map[*conn]bool
}

// New returns a network with every link up.
func New() *Net {
	return &Net{names: map[string]int32{}, cut: map[[2]int32]bool{}, delay: map[[2]int32]time.Duration{},
		conns: map[[2]int32]map[*conn]bool{}}
}

// Name registers addr as broker id's.
func (n *Net) Name(addr string, id int32) {
	n.mu.Lock()
	n.names[addr] = id
	n.mu.Unlock()
}

// Cut cuts the link from a to b (a's dials of b fail, and a's open
// connections to b are closed); with both, b to a too.
func (n *Net) Cut(a, b int32, both bool) {
	n.mu.Lock()
	var closing []*conn
	for _, l := range [][2]int32{{a, b}, {b, a}} {
		if l == [2]int32{b, a} && !both {
			continue
		}
		n.cut[l] = true
		for c := range n.conns[l] {
			closing = append(closing, c)
		}
	}
	n.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}

// Isolate cuts every link of broker a, both ways.
func (n *Net) Isolate(a int32, others ...int32) {
	for _, b := range others {
		if b != a {
			n.Cut(a, b, true)
		}
	}
}

// Delay delays every write from a to b by d (0: none).
func (n *Net) Delay(a, b int32, d time.Duration) {
	n.mu.Lock()
	n.delay[[2]int32{a, b}] = d
	n.mu.Unlock()
}

// Heal restores every link.
func (n *Net) Heal() {
	n.mu.Lock()
	n.cut = map[[2]int32]bool{}
	n.delay = map[[2]int32]time.Duration{}
	n.mu.Unlock()
}

// Dialer returns the dial function of broker from.
func (n *Net) Dialer(from int32) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		n.mu.Lock()
		to, ok := n.names[address]
		link := [2]int32{from, to}
		cut := ok && n.cut[link]
		n.mu.Unlock()
		if cut {
			return nil, fmt.Errorf("%w: broker %d to broker %d (%s)", ErrCut, from, to, address)
		}
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, address)
		if err != nil || !ok {
			return nc, err
		}
		c := &conn{Conn: nc, n: n, link: link}
		n.mu.Lock()
		if n.cut[link] { // cut while dialling
			n.mu.Unlock()
			nc.Close()
			return nil, fmt.Errorf("%w: broker %d to broker %d (%s)", ErrCut, from, to, address)
		}
		if n.conns[link] == nil {
			n.conns[link] = map[*conn]bool{}
		}
		n.conns[link][c] = true
		n.mu.Unlock()
		return c, nil
	}
}

type conn struct {
	net.Conn
	n    *Net
	link [2]int32
	once sync.Once
}

func (c *conn) Write(b []byte) (int, error) {
	c.n.mu.Lock()
	d, cut := c.n.delay[c.link], c.n.cut[c.link]
	c.n.mu.Unlock()
	if cut {
		return 0, fmt.Errorf("%w: broker %d to broker %d", ErrCut, c.link[0], c.link[1])
	}
	if d > 0 {
		time.Sleep(d) // the delay being injected, not a synchronisation
	}
	return c.Conn.Write(b)
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.n.mu.Lock()
		delete(c.n.conns[c.link], c)
		c.n.mu.Unlock()
	})
	return c.Conn.Close()
}
