package zk_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-broker/weir/cluster/zk"
	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/core/coord"
)

// sessionTimeout for most tests: short, but many pings (every 2/3 x 1/2 of
// it) long, so a loaded machine does not expire sessions by accident.
const sessionTimeout = 4 * time.Second

var chroots atomic.Int64

// freshChroot names a chroot no other test of this binary uses: an empty
// store on a shared server.
func freshChroot(t *testing.T) string {
	name := strings.NewReplacer("/", "_", " ", "_", "#", "_").Replace(t.Name())
	return fmt.Sprintf("/t%d_%s", chroots.Add(1), name)
}

// logRecorder keeps every record's level and message and passes them on to
// the test's output.
type logRecorder struct {
	next slog.Handler
	mu   *sync.Mutex
	recs *[]string
}

func newLogRecorder(t *testing.T) (*slog.Logger, *logRecorder) {
	r := &logRecorder{
		next: slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}),
		mu:   &sync.Mutex{},
		recs: new([]string),
	}
	return slog.New(r), r
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(ctx context.Context, rec slog.Record) error {
	r.mu.Lock()
	*r.recs = append(*r.recs, rec.Level.String()+" "+rec.Message)
	r.mu.Unlock()
	return r.next.Handle(ctx, rec)
}
func (r *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorder{next: r.next.WithAttrs(as), mu: r.mu, recs: r.recs}
}
func (r *logRecorder) WithGroup(name string) slog.Handler {
	return &logRecorder{next: r.next.WithGroup(name), mu: r.mu, recs: r.recs}
}

// has reports whether a record starting with prefix ("LEVEL message") was logged.
func (r *logRecorder) has(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range *r.recs {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// open opens a store on the cluster with a fresh chroot (unless the config
// function sets another) and closes it when the test ends.
func open(t *testing.T, c *zktest.Cluster, edit func(*zk.Config)) *zk.Store {
	t.Helper()
	logger, _ := newLogRecorder(t)
	cfg := zk.Config{Servers: c.Addrs(), Chroot: freshChroot(t), SessionTimeout: sessionTimeout, Logger: logger}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	s, err := zk.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitSession waits on Changed until the session satisfies cond.
func waitSession(t *testing.T, s coord.Store, timeout time.Duration, what string, cond func(coord.Session) bool) coord.Session {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		sess := s.Session()
		if cond(sess) {
			return sess
		}
		select {
		case <-sess.Changed:
		case <-deadline.C:
			t.Fatalf("after %v the session is %v %#x: want %s", timeout, sess.State, sess.ID, what)
		}
	}
}

// event waits for a watch to fire.
func event(t *testing.T, ch <-chan coord.Event, timeout time.Duration) coord.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed without an event")
		}
		if _, ok := <-ch; ok {
			t.Fatal("watch delivered a second event")
		}
		return ev
	case <-time.After(timeout):
		t.Fatalf("watch did not fire within %v", timeout)
	}
	return coord.Event{}
}

// quiet asserts that a watch has not fired (yet).
func quiet(t *testing.T, ch <-chan coord.Event) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("watch fired early: %+v", ev)
	default:
	}
}

// eventually polls cond every 20 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		<-tick.C
	}
}

// retryLoss retries f while it fails with ErrConnectionLoss (the client is
// still reconnecting), as a caller would, for up to 10 s.
func retryLoss(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		if !errors.Is(err, coord.ErrConnectionLoss) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		<-tick.C
	}
}
