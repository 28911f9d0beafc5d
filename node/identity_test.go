package node

import (
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/clock/clocktest"
	"github.com/weir-broker/weir/core/vfs"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newFakeClock() *clocktest.Clock { return clocktest.New(time.Now()) }

func TestIdentityIsKept(t *testing.T) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	id, fresh, err := loadIdentity(fsys, "/d", 3)
	if err != nil || !fresh {
		t.Fatalf("first load: fresh %v, %v", fresh, err)
	}
	if len(id.ClusterID) != 22 || id.NodeID != 3 {
		t.Errorf("identity %+v, want a 22-character cluster id and node 3", id)
	}
	if err := saveIdentity(fsys, "/d", id); err != nil {
		t.Fatal(err)
	}
	// Durable: a power cut right after keeps it.
	again, fresh, err := loadIdentity(fsys.CrashClone(), "/d", 3)
	if err != nil || again != id || fresh {
		t.Errorf("after a crash: %+v, fresh %v, %v; want %+v", again, fresh, err, id)
	}
	if _, _, err := loadIdentity(fsys, "/d", 4); !errors.Is(err, ErrNodeMismatch) {
		t.Errorf("another node id: %v, want ErrNodeMismatch", err)
	}

	f, err := fsys.Create("/d/" + metaFile)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("version=1\nno equals sign\n"))
	f.Close()
	if _, _, err := loadIdentity(fsys, "/d", 3); err == nil || !strings.Contains(err.Error(), "key=value") {
		t.Errorf("malformed file: %v, want an error", err)
	}
}

func TestRetentionLoop(t *testing.T) {
	clock := newFakeClock()
	var passes atomic.Int32
	fail := errors.New("disk on fire")
	r := startRetentionLoop(clock, time.Minute, func() error {
		if passes.Add(1) == 2 {
			return fail // logged; the loop goes on
		}
		return nil
	}, testLogger(t))

	clock.Advance(time.Minute - time.Millisecond)
	if n := passes.Load(); n != 0 {
		t.Fatalf("%d passes before the interval", n)
	}
	for want := int32(1); want <= 3; want++ {
		clock.Advance(time.Minute)
		if n := passes.Load(); n != want {
			t.Fatalf("after %d intervals: %d passes", want, n)
		}
	}
	r.stop()
	if clock.Pending() != 0 {
		t.Errorf("%d timers pending after stop", clock.Pending())
	}
	clock.Advance(time.Hour)
	if n := passes.Load(); n != 3 {
		t.Errorf("%d passes after stop, want 3", n)
	}
}

func TestRetentionLoopStopWaitsForPass(t *testing.T) {
	clock := newFakeClock()
	started, release := make(chan struct{}), make(chan struct{})
	r := startRetentionLoop(clock, time.Minute, func() error {
		close(started)
		<-release
		return nil
	}, testLogger(t))
	go clock.Advance(time.Minute)
	<-started
	stopped := make(chan struct{})
	go func() {
		r.stop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("stop returned while a pass was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopped
	if clock.Pending() != 0 {
		t.Errorf("the pass scheduled another after stop")
	}
}
