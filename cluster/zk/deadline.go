package zk

import (
	"net"
	"time"
)

// cappedDialer dials with dial and caps every deadline go-zookeeper sets on
// the connection at limit from now. go-zookeeper gives the session
// handshake ten times its read timeout (two thirds of the session timeout):
// a connection a server accepted while it was still starting, and never
// answers, would hold the client for over six session timeouts, long past
// the session's expiry, instead of trying again. Java's client gives the
// handshake the session timeout divided among the servers; one session
// timeout is what is capped here. Other reads and writes already have
// shorter deadlines, which stay as they are.
func cappedDialer(dial func(network, address string, timeout time.Duration) (net.Conn, error), limit time.Duration) func(string, string, time.Duration) (net.Conn, error) {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := dial(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &cappedConn{Conn: c, limit: limit}, nil
	}
}

type cappedConn struct {
	net.Conn
	limit time.Duration
}

func (c *cappedConn) capped(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	if max := time.Now().Add(c.limit); t.After(max) {
		return max
	}
	return t
}

func (c *cappedConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.capped(t)) }
func (c *cappedConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.capped(t)) }
func (c *cappedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.capped(t)) }
