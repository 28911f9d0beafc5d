package netfault

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
)

// A cut closes the open connections of the link and refuses new dials, one
// way or both; Heal restores them.
func TestCutAndHeal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go io.Copy(c, c)
		}
	}()
	n := New()
	n.Name(ln.Addr().String(), 2)
	ctx := context.Background()
	c, err := n.Dialer(1)(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
	n.Cut(2, 1, false) // the other way only: 1's link is up
	if _, err := c.Write([]byte("pong")); err != nil {
		t.Fatalf("write over a link cut the other way: %v", err)
	}
	n.Cut(1, 2, false)
	if _, err := io.ReadFull(c, buf); err == nil {
		t.Fatal("read on a connection whose link was cut")
	}
	if _, err := n.Dialer(1)(ctx, "tcp", ln.Addr().String()); !errors.Is(err, ErrCut) {
		t.Fatalf("dial over a cut link: %v", err)
	}
	if c3, err := n.Dialer(3)(ctx, "tcp", ln.Addr().String()); err != nil {
		t.Fatalf("dial by another broker: %v", err)
	} else {
		c3.Close()
	}
	n.Heal()
	c2, err := n.Dialer(1)(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial after Heal: %v", err)
	}
	c2.Close()
}
