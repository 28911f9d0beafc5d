package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// server is a TCP server on 127.0.0.1 running handle for each connection;
// it stops, its connections closed, when the test ends.
type server struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
}

func startServer(t testing.TB, handle func(net.Conn)) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				handle(c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *server) addr() string { return s.ln.Addr().String() }

func (s *server) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func echo(c net.Conn) { io.Copy(c, c) }

func newProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// dial connects to the proxy, with a deadline as a safety net.
func dial(t testing.TB, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads its echo.
func roundTrip(c net.Conn, msg string) error {
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return errors.New("echo " + string(buf) + ", sent " + msg)
	}
	return nil
}

// waitFor polls cond every millisecond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}

// Without faults the bytes go both ways, are counted, and a half-close
// travels through: the client's end reaches the server, whose end reaches
// the client.
func TestForward(t *testing.T) {
	srv := startServer(t, echo)
	p := newProxy(t, srv.addr())
	c := dial(t, p)
	if err := roundTrip(c, "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	rest, err := io.ReadAll(c)
	if err != nil || string(rest) != "bye" {
		t.Fatalf("after the half-close: %q %v, want the echo then EOF", rest, err)
	}
	waitFor(t, "the link to end", func() bool { return p.Stats().Open == 0 })
	s := p.Stats()
	if s.Forwarded != [2]int64{8, 8} || s.Accepted != 1 || s.Refused != 0 || s.Reset != 0 {
		t.Errorf("stats %+v", s)
	}
}

// A delay applies to an open connection, per direction: a round trip takes
// at least the sum (a lower bound only; machines are noisy).
func TestDelay(t *testing.T) {
	srv := startServer(t, echo)
	p := newProxy(t, srv.addr())
	c := dial(t, p)
	if err := roundTrip(c, "warm"); err != nil {
		t.Fatal(err)
	}
	const up, down = 60 * time.Millisecond, 40 * time.Millisecond
	if err := p.Delay(Upstream, up); err != nil {
		t.Fatal(err)
	}
	if err := p.Delay(Downstream, down); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := roundTrip(c, "slow"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < up+down {
		t.Errorf("round trip took %v with delays %v and %v", took, up, down)
	}
	// Many chunks in flight at once: each is late by the delay, in order.
	msg := bytes.Repeat([]byte("0123456789"), 1000)
	start = time.Now()
	for i := 0; i < len(msg); i += 100 {
		if _, err := c.Write(msg[i : i+100]); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("pipelined echo: %v, equal %v", err, bytes.Equal(got, msg))
	}
	if took := time.Since(start); took < up+down {
		t.Errorf("pipelined round trip took %v", took)
	}
	p.Heal()
	if err := roundTrip(c, "fast"); err != nil {
		t.Fatal(err)
	}
}

// A blackhole is one-way: bytes flow the other way; what it swallowed is
// never delivered, and lifting it resets the connection that lost bytes.
func TestBlackholeOneWay(t *testing.T) {
	for _, dir := range []Dir{Upstream, Downstream} {
		t.Run(dir.String(), func(t *testing.T) {
			serverSide := make(chan net.Conn, 1)
			served := make(chan struct{})
			srv := startServer(t, func(c net.Conn) {
				serverSide <- c
				<-served
			})
			defer close(served)
			p := newProxy(t, srv.addr())
			client := dial(t, p)
			server := <-serverSide
			server.SetDeadline(time.Now().Add(20 * time.Second))
			// The side whose bytes are swallowed, and the other.
			from, to := client, server
			if dir == Downstream {
				from, to = server, client
			}
			if err := p.Blackhole(dir, true); err != nil {
				t.Fatal(err)
			}
			if _, err := from.Write([]byte("lost")); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the bytes to be swallowed", func() bool { return p.Stats().Discarded[dir] == 4 })
			// The other way works, on the same connection.
			if _, err := to.Write([]byte("back")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			if _, err := io.ReadFull(from, buf); err != nil || string(buf) != "back" {
				t.Fatalf("the other way: %q %v", buf, err)
			}
			if s := p.Stats(); s.Open != 1 || s.Reset != 0 {
				t.Fatalf("a blackhole closed the connection: %+v", s)
			}
			p.Heal()
			got, err := io.ReadAll(to)
			if len(got) != 0 || err == nil {
				t.Errorf("after Heal the receiving side read %q, %v; want nothing and a reset", got, err)
			}
			if s := p.Stats(); s.Reset != 1 || s.Forwarded[dir] != 0 {
				t.Errorf("stats %+v", s)
			}
			// New connections work again.
			if dir == Upstream {
				c := dial(t, p)
				if _, err := c.Write([]byte("ok")); err != nil {
					t.Fatal(err)
				}
				s := <-serverSide
				if _, err := io.ReadFull(s, buf[:2]); err != nil || string(buf[:2]) != "ok" {
					t.Errorf("after Heal: %q %v", buf[:2], err)
				}
			}
		})
	}
}

// A connection that lost no bytes to a blackhole lives on after it.
func TestBlackholeSparesIdleConnections(t *testing.T) {
	srv := startServer(t, echo)
	p := newProxy(t, srv.addr())
	c := dial(t, p)
	if err := roundTrip(c, "before"); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(Upstream, true)
	p.Blackhole(Downstream, true)
	p.Blackhole(Upstream, false)
	p.Heal()
	if err := roundTrip(c, "after"); err != nil {
		t.Fatalf("a connection idle through the blackhole: %v", err)
	}
	if s := p.Stats(); s.Reset != 0 {
		t.Errorf("stats %+v", s)
	}
}

// Cut resets open connections and refuses new ones until Heal.
func TestCutAndHeal(t *testing.T) {
	srv := startServer(t, echo)
	p := newProxy(t, srv.addr())
	c := dial(t, p)
	if err := roundTrip(c, "ping"); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes on a cut connection", n)
	}
	// The kernel accepts and the proxy resets it at once, which the dial
	// itself may already see.
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		defer c2.Close()
		c2.SetDeadline(time.Now().Add(20 * time.Second))
		if err := roundTrip(c2, "ping"); err == nil {
			t.Fatal("a connection made while cut echoed")
		}
	}
	waitFor(t, "the refusal", func() bool { return p.Stats().Refused == 1 })
	if s := p.Stats(); s.Reset != 1 || s.Refused != 1 || s.Open != 0 {
		t.Errorf("stats while cut: %+v", s)
	}
	p.Heal()
	if err := roundTrip(dial(t, p), "pong"); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

// A drop rate of 1 resets a connection before its first byte goes through.
func TestDropAll(t *testing.T) {
	srv := startServer(t, echo)
	p := newProxy(t, srv.addr())
	c := dial(t, p)
	if err := roundTrip(c, "ok"); err != nil {
		t.Fatal(err)
	}
	if err := p.DropRate(1, 1); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(c, "dropped"); err == nil {
		t.Fatal("a round trip survived a drop rate of 1")
	}
	if s := p.Stats(); s.Reset != 1 || s.Forwarded[Upstream] != 2 {
		t.Errorf("stats %+v", s)
	}
}

// Drops are deterministic given the seed: the same traffic through two
// proxies seeded alike loses the same connections.
func TestDropDeterministic(t *testing.T) {
	srv := startServer(t, echo)
	outcomes := func(seed uint64) []bool {
		p := newProxy(t, srv.addr())
		if err := p.DropRate(0.3, seed); err != nil {
			t.Fatal(err)
		}
		var out []bool
		for range 40 {
			c := dial(t, p)
			out = append(out, roundTrip(c, "x") == nil)
			c.Close()
		}
		return out
	}
	a, b := outcomes(7), outcomes(7)
	if !slicesEqual(a, b) {
		t.Fatalf("same seed, different drops:\n%v\n%v", a, b)
	}
	var lost int
	for _, ok := range a {
		if !ok {
			lost++
		}
	}
	if lost == 0 || lost == len(a) {
		t.Errorf("%d of %d connections lost at a drop rate of 0.3", lost, len(a))
	}
}

func slicesEqual(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// SetTarget sends new connections elsewhere; an empty target refuses them.
func TestSetTarget(t *testing.T) {
	greeter := func(hello string) func(net.Conn) {
		return func(c net.Conn) { c.Write([]byte(hello)) }
	}
	a, b := startServer(t, greeter("a")), startServer(t, greeter("b"))
	p := newProxy(t, a.addr())
	read := func() string {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			return "" // refused: reset before the handshake completed
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		got, _ := io.ReadAll(c)
		return string(got)
	}
	if got := read(); got != "a" {
		t.Fatalf("got %q from the first target", got)
	}
	p.SetTarget(b.addr())
	if got := read(); got != "b" || p.Target() != b.addr() {
		t.Fatalf("got %q after SetTarget", got)
	}
	p.SetTarget("")
	if got := read(); got != "" || p.Stats().Refused != 1 {
		t.Fatalf("got %q without a target; stats %+v", got, p.Stats())
	}
}

func TestInvalid(t *testing.T) {
	p := newProxy(t, "")
	for name, err := range map[string]error{
		"negative delay": p.Delay(Upstream, -time.Second),
		"bad direction":  p.Blackhole(Dir(2), true),
		"rate above 1":   p.DropRate(1.5, 0),
		"negative rate":  p.DropRate(-0.1, 0),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// Whatever faults are toggled while data flows, an echoed random payload
// comes back as an exact prefix of what was sent: the stream is cut short,
// never holed or garbled.
func TestNeverCorrupt(t *testing.T) {
	srv := startServer(t, echo)
	p := newProxy(t, srv.addr())
	rng := rand.New(rand.NewPCG(1, 2))
	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}

	stop := make(chan struct{})
	toggled := make(chan struct{})
	go func() {
		defer close(toggled)
		rng := rand.New(rand.NewPCG(3, 4))
		tick := time.NewTicker(250 * time.Microsecond) // pacing the faults, not synchronising
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			dir := Dir(rng.IntN(2))
			switch n := rng.IntN(20); {
			case n < 5:
				p.Delay(dir, time.Duration(rng.IntN(1000))*time.Microsecond)
			case n < 8:
				p.Blackhole(dir, true)
			case n < 12:
				p.Blackhole(dir, false)
			case n < 15:
				p.DropRate(rng.Float64()*0.02, rng.Uint64())
			case n < 16:
				p.Cut()
			default:
				p.Heal()
			}
		}
	}()

	round := func() (got []byte) {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			return nil // refused while cut
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second)) // a safety net
		go func() {
			rng := rand.New(rand.NewPCG(uint64(len(payload)), 5))
			for rest := payload; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(8<<10))
				if _, err := c.Write(rest[:n]); err != nil {
					return
				}
				rest = rest[n:]
			}
			c.(*net.TCPConn).CloseWrite()
		}()
		got, err = io.ReadAll(c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("a round hung (%d bytes back)", len(got))
		}
		return got
	}
	// Rounds until every kind of fault has struck (a deadline as a safety net).
	var whole, short, midway int
	struck := func() bool {
		s := p.Stats()
		return whole >= 3 && midway >= 10 && s.Discarded[Upstream] > 0 && s.Discarded[Downstream] > 0 &&
			s.Reset >= 10 && s.Refused > 0
	}
	deadline := time.Now().Add(20 * time.Second)
	for !struck() && time.Now().Before(deadline) {
		got := round()
		if !bytes.Equal(got, payload[:min(len(got), len(payload))]) || len(got) > len(payload) {
			t.Fatalf("%d bytes back are not a prefix of the payload", len(got))
		}
		if len(got) == len(payload) {
			whole++
		} else {
			short++
		}
		if len(got) > 0 && len(got) < len(payload) {
			midway++
		}
	}
	if !struck() {
		t.Errorf("not every fault struck: %d rounds whole, %d cut short (%d midway), stats %+v", whole, short, midway, p.Stats())
	}
	close(stop)
	<-toggled
	p.Heal()
	if got := round(); !bytes.Equal(got, payload) {
		t.Fatalf("after Heal %d of %d bytes came back", len(got), len(payload))
	}
	t.Logf("%d rounds whole, %d cut short (%d midway); %+v", whole, short, midway, p.Stats())
}

// Close ends every goroutine of the proxy, with connections open in every
// state: idle, holding a delayed chunk, and blackholed.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	srv := startServer(t, echo)
	p, err := New("127.0.0.1:0", srv.addr())
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		conns = append(conns, c)
		if err := roundTrip(c, "up"); err != nil {
			t.Fatal(err)
		}
	}
	p.Delay(Downstream, time.Hour)
	conns[1].Write([]byte("held")) // its echo waits in the proxy
	waitFor(t, "the chunk to go up", func() bool { return p.Stats().Forwarded[Upstream] == 3*2+4 })
	p.Blackhole(Upstream, true)
	conns[2].Write([]byte("lost"))
	waitFor(t, "the chunk to be swallowed", func() bool { return p.Stats().Discarded[Upstream] == 4 })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		if _, err := io.ReadAll(c); err != nil && !errors.Is(err, net.ErrClosed) {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("a connection stayed open after Close")
			}
		}
		c.Close()
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Error("the proxy still accepts after Close")
	}
	srv.close()
	waitFor(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// BenchmarkThroughput sends a stream one way to a server that discards
// it, directly and through the proxy without faults.
func BenchmarkThroughput(b *testing.B) {
	for _, via := range []string{"direct", "proxy"} {
		b.Run("via="+via, func(b *testing.B) {
			received := make(chan int64, 1)
			srv := startServer(b, func(c net.Conn) {
				n, _ := io.Copy(io.Discard, c)
				received <- n
			})
			addr := srv.addr()
			if via == "proxy" {
				addr = newProxy(b, addr).Addr()
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 64<<10)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			c.(*net.TCPConn).CloseWrite()
			if n := <-received; n != int64(b.N*len(buf)) {
				b.Fatalf("server received %d bytes, want %d", n, b.N*len(buf))
			}
			b.StopTimer()
			c.Close()
		})
	}
}
