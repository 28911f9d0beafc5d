package durability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/harness/device/diskfs"
	"github.com/weir-broker/weir/transport/broker"
)

// target is the broker under test, through its crash and restart.
type target interface {
	// addr is where the current broker serves the Kafka protocol.
	addr() string
	// crash injects the fault and returns its instant. The broker is gone
	// when it returns: nothing it does afterwards reaches what restart
	// starts from.
	crash(rng *rand.Rand) (time.Time, error)
	// restart starts a broker on what the crash left.
	restart(ctx context.Context) error
	// close stops the current broker gracefully, and anything left.
	close() error
}

// powerDataDir is the in-process brokers' data directory, on their own
// in-memory file system.
const powerDataDir = "/weir"

// powerTarget runs the broker in process on a vfs.PowerFS.
type powerTarget struct {
	cfg  Config
	fs   *vfs.PowerFS
	b    *broker.Broker
	dead *atomic.Bool // silences the first broker's log at the cut
	torn bool
	late *lateness
	// Of the first broker, read at the cut: its fsyncs, the longest, and
	// the worst lateness of a timer in its process.
	syncs         int64
	maxSync       time.Duration
	timerLateness time.Duration
}

func startPower(cfg Config) (*powerTarget, error) {
	t := &powerTarget{cfg: cfg, fs: vfs.NewPower(vfs.NewMem(), vfs.PowerConfig{SyncLatency: cfg.SyncLatency}), torn: cfg.Torn, dead: new(atomic.Bool)}
	first := cfg
	first.Logger = slog.New(brokerproc.Quiet(cfg.Logger.Handler(), t.dead))
	b, err := startInProcess(first, t.fs)
	if err != nil {
		return nil, err
	}
	t.b = b
	t.late = watchLateness(latenessPeriod)
	return t, nil
}

func startInProcess(cfg Config, fs vfs.FS) (*broker.Broker, error) {
	b, err := broker.Start(broker.Config{
		DataDir:                    powerDataDir,
		Listen:                     "127.0.0.1:0",
		FS:                         fs,
		GroupInitialRebalanceDelay: 0,
		PluginDir:                  cfg.PluginDir,
		Logger:                     cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBroker, err)
	}
	return b, nil
}

func (t *powerTarget) addr() string { return t.b.Addr() }

func (t *powerTarget) crash(rng *rand.Rand) (time.Time, error) {
	var torn *rand.Rand
	if t.torn {
		torn = rng
	}
	clone, at := t.fs.Cut(torn)
	t.dead.Store(true)
	t.syncs, t.maxSync, t.timerLateness = t.fs.Syncs(), t.fs.MaxSync(), t.late.stop()
	// The dead machine's broker: its connections close, its file
	// operations fail; it has nothing left to say, errors included.
	_ = t.b.Close()
	t.fs = vfs.NewPower(clone, vfs.PowerConfig{}) // what the next broker runs on; no more cuts
	return at, nil
}

func (t *powerTarget) restart(context.Context) error {
	b, err := startInProcess(t.cfg, t.fs)
	if err != nil {
		return err
	}
	t.b = b
	return nil
}

func (t *powerTarget) close() error {
	t.late.stop()
	if err := t.b.Close(); err != nil {
		return fmt.Errorf("%w: close: %w", ErrBroker, err)
	}
	return nil
}

// latenessPeriod is how often the lateness watch sets its timer.
const latenessPeriod = 2 * time.Millisecond

// lateness watches how late timers fire in this process: the delay the
// partition logs' flush timers suffer too, when the load generator and
// the broker share the process and the machine's cores. An age bound is
// checked with it added, measured rather than assumed.
type lateness struct {
	done chan struct{}
	out  chan time.Duration
	once sync.Once
	max  time.Duration
}

func watchLateness(period time.Duration) *lateness {
	l := &lateness{done: make(chan struct{}), out: make(chan time.Duration, 1)}
	go func() {
		var worst time.Duration
		t := time.NewTimer(period)
		defer t.Stop()
		for due := time.Now().Add(period); ; due = time.Now().Add(period) {
			t.Reset(period)
			select {
			case <-l.done:
				l.out <- worst
				return
			case <-t.C:
				worst = max(worst, time.Since(due))
			}
		}
	}()
	return l
}

// stop ends the watch and returns the worst lateness seen; later calls
// return the same.
func (l *lateness) stop() time.Duration {
	l.once.Do(func() {
		close(l.done)
		l.max = <-l.out
	})
	return l.max
}

// killTarget runs `weir broker` subprocesses on one data directory.
type killTarget struct {
	cfg Config
	p   *brokerproc.Process
}

// startProcess starts `weir broker` on dir; it gets SIGKILL if this process
// dies first. Errors wrap ErrBroker.
func startProcess(ctx context.Context, weir, dir string, flags []string) (*brokerproc.Process, error) {
	p, err := brokerproc.Start(ctx, brokerproc.Options{Weir: weir, DataDir: dir, Flags: flags, DeathSignal: syscall.SIGKILL})
	if err != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w: %w", ErrBroker, err)
	}
	return p, err
}

func startKill(ctx context.Context, cfg Config) (*killTarget, error) {
	p, err := startProcess(ctx, cfg.Weir, cfg.DataDir, cfg.BrokerFlags)
	if err != nil {
		return nil, err
	}
	return &killTarget{cfg: cfg, p: p}, nil
}

func (t *killTarget) addr() string { return t.p.Addr }

func (t *killTarget) crash(*rand.Rand) (time.Time, error) {
	at := time.Now()
	if err := t.p.Cmd.Process.Kill(); err != nil {
		return at, fmt.Errorf("%w: SIGKILL: %w", ErrBroker, err)
	}
	<-t.p.Exited()
	if !killed(t.p.ExitErr()) {
		return at, fmt.Errorf("%w: exited with %v before SIGKILL reached it: %s", ErrBroker, t.p.ExitErr(), t.p.Output())
	}
	return at, nil
}

func (t *killTarget) restart(ctx context.Context) error {
	p, err := startProcess(ctx, t.cfg.Weir, t.cfg.DataDir, t.cfg.BrokerFlags)
	if err != nil {
		return err
	}
	t.p = p
	return nil
}

// close stops the broker; one the experiment killed (and could not restart)
// is already gone, which is not an error.
func (t *killTarget) close() error {
	select {
	case <-t.p.Exited():
		if killed(t.p.ExitErr()) {
			return nil
		}
	default:
	}
	if err := t.p.Stop(); err != nil {
		return fmt.Errorf("%w: stop: %w", ErrBroker, err)
	}
	return nil
}

// killed reports whether a process exited by SIGKILL.
func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// diskTarget runs `weir broker` subprocesses on an emulated disk
// (harness/device/diskfs) mounted at the data directory, and cuts its
// power: SIGKILL, the mount loses what no fsync covered, a fresh mount of
// the same backing directory, a new process on it.
type diskTarget struct {
	cfg     Config
	backing string
	m       *diskfs.Mount
	p       *brokerproc.Process
	// Of the first broker's disk, read at the cut: its fsyncs, the longest
	// (device time), and what the cut took back.
	syncs   int64
	maxSync time.Duration
	lost    diskfs.CutReport
}

func startDisk(ctx context.Context, cfg Config) (*diskTarget, error) {
	backing := cfg.Device.Backing
	if backing == "" {
		backing = filepath.Clean(cfg.DataDir) + ".disk"
	}
	m, err := diskfs.New(cfg.DataDir, diskfs.Options{Profile: cfg.Device.Profile, Backing: backing,
		RealTime: cfg.Device.RealTime, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("%w: emulated disk: %w", ErrBroker, err)
	}
	t := &diskTarget{cfg: cfg, backing: backing, m: m}
	if t.p, err = startProcess(ctx, cfg.Weir, cfg.DataDir, cfg.BrokerFlags); err != nil {
		return nil, errors.Join(err, t.unmount())
	}
	return t, nil
}

func (t *diskTarget) addr() string { return t.p.Addr }

func (t *diskTarget) crash(*rand.Rand) (time.Time, error) {
	at := time.Now()
	if err := t.p.Cmd.Process.Kill(); err != nil {
		return at, fmt.Errorf("%w: SIGKILL: %w", ErrBroker, err)
	}
	<-t.p.Exited()
	if !killed(t.p.ExitErr()) {
		return at, fmt.Errorf("%w: exited with %v before SIGKILL reached it: %s", ErrBroker, t.p.ExitErr(), t.p.Output())
	}
	st := t.m.Status()
	t.syncs, t.maxSync = st.Counts.Fsyncs, st.Counts.MaxFsync
	m, rep, err := t.m.PowerCycle()
	t.m, t.lost = m, rep
	if err != nil {
		return at, fmt.Errorf("%w: power cut of the emulated disk: %w", ErrBroker, err)
	}
	return at, nil
}

func (t *diskTarget) restart(ctx context.Context) error {
	p, err := startProcess(ctx, t.cfg.Weir, t.cfg.DataDir, t.cfg.BrokerFlags)
	if err != nil {
		return err
	}
	t.p = p
	return nil
}

// close stops the broker (one killed and not restarted is already gone),
// unmounts the disk and removes its backing directory.
func (t *diskTarget) close() error {
	var err error
	select {
	case <-t.p.Exited():
	default:
		if serr := t.p.Stop(); serr != nil {
			err = fmt.Errorf("%w: stop: %w", ErrBroker, serr)
		}
	}
	return errors.Join(err, t.unmount())
}

func (t *diskTarget) unmount() error {
	var err error
	if t.m != nil {
		if uerr := t.m.Unmount(); uerr != nil {
			err = fmt.Errorf("%w: %w", ErrBroker, uerr)
		}
		t.m = nil
	}
	if err == nil {
		err = os.RemoveAll(t.backing)
	}
	return err
}
