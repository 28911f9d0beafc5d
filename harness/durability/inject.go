package durability

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/harness/clusterproc"
	"github.com/weir-broker/weir/harness/result"
)

// procs guards the cluster's brokers, which a fault replaces when it
// restarts one while the observer reads their addresses.
var procs sync.Mutex

// brokerOf returns broker id of c as it is now.
func brokerOf(c *clusterproc.Cluster, id int32) *clusterproc.Broker {
	procs.Lock()
	defer procs.Unlock()
	return c.Broker(id)
}

// restartBroker starts broker id of c again on its data directory, at its
// old Kafka address (clients and peers know it), with the flags the
// cluster gave it, and returns once it listens.
func restartBroker(ctx context.Context, c *clusterproc.Cluster, id int32, cfg ClusterConfig) error {
	old := brokerOf(c, id)
	if old == nil {
		return fmt.Errorf("%w: no broker %d", ErrBroker, id)
	}
	select {
	case <-old.Exited():
	default:
		return fmt.Errorf("%w: broker %d is still running", ErrBroker, id)
	}
	flags := clusterproc.MemberArgs(id, c.ZooKeeper)
	flags = append(flags, "--zookeeper-session-timeout", cfg.SessionTimeout.String())
	flags = append(flags, cfg.BrokerFlags...)
	var p *brokerproc.Process
	var err error
	// The old port can be taken for a moment by a connection of the dead
	// process still closing; a few attempts ride that out.
	for attempt := 0; attempt < 5; attempt++ {
		p, err = brokerproc.Start(ctx, brokerproc.Options{Weir: cfg.Weir, DataDir: old.DataDir, Flags: flags,
			Listen: old.Addr, Metrics: true})
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%w: restart broker %d: %w", ErrBroker, id, err)
	}
	procs.Lock()
	c.Brokers[id-1] = &clusterproc.Broker{ID: id, DataDir: old.DataDir, Process: p}
	procs.Unlock()
	return nil
}

// inject strikes with one planned fault and returns once it healed: the
// broker restarted or continued, ZooKeeper serving again. Times in the
// returned record count from start (the first acknowledgement).
func (l *lab) inject(ctx context.Context, p Planned, obs *observer, start time.Time) (result.Fault, error) {
	f := result.Fault{Kind: string(p.Kind), At: time.Since(start)}
	fail := func(err error) (result.Fault, error) {
		f.Healed = time.Since(start)
		f.Error = err.Error()
		return f, fmt.Errorf("fault %s: %w", p, err)
	}
	var victim int32
	switch p.Kind {
	case KillLeader, Pause, SessionExpiry, Term:
		f.Target = fmt.Sprintf("leader of %d/%d", p.Topic, p.Partition)
		id, err := obs.leaderOf(ctx, p.Topic, p.Partition, l.cfg.HealTimeout)
		if err != nil {
			return fail(err)
		}
		victim = id
	case KillController:
		f.Target = "controller"
		id, err := obs.controller(ctx, l.cfg.HealTimeout)
		if err != nil {
			return fail(err)
		}
		victim = id
	case KillRandom:
		f.Target, victim = fmt.Sprintf("broker %d", p.Broker), p.Broker
	case RollingRestart:
		f.Target = "every broker"
	case ZooKeeperStop:
		f.Target = "zookeeper"
	default:
		return fail(fmt.Errorf("%w: unknown fault kind %q", ErrConfig, p.Kind))
	}
	f.Broker = victim
	f.At = time.Since(start)
	hold := func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	var err error
	switch p.Kind {
	case KillLeader, KillController, KillRandom:
		err = l.stop(victim, syscall.SIGKILL)
		if err == nil {
			err = hold(p.Hold)
		}
		if err == nil {
			err = l.restart(ctx, victim)
		}
	case Term:
		err = l.stop(victim, syscall.SIGTERM)
		if err == nil {
			err = hold(p.Hold)
		}
		if err == nil {
			err = l.restart(ctx, victim)
		}
	case Pause:
		// A pause shorter than the session: the broker keeps its
		// registration and wakes up believing it leads.
		err = l.pause(victim, func() error { return hold(min(p.Hold, l.cfg.SessionTimeout/2)) })
	case SessionExpiry:
		err = l.pause(victim, func() error {
			if err := obs.waitGone(ctx, victim, 3*l.cfg.SessionTimeout+10*time.Second); err != nil {
				return err
			}
			return hold(min(p.Hold, time.Second))
		})
	case RollingRestart:
		for _, b := range l.c.Brokers {
			id := b.ID
			if err = l.stop(id, syscall.SIGTERM); err != nil {
				break
			}
			if err = l.restart(ctx, id); err != nil {
				break
			}
			if _, err = obs.waitWhole(ctx, l.cfg.HealTimeout); err != nil {
				err = fmt.Errorf("after restarting broker %d: %w", id, err)
				break
			}
		}
	case ZooKeeperStop:
		zk := l.c.ZooKeeperServer
		if zk == nil {
			return fail(fmt.Errorf("%w: %s needs the ZooKeeper the lab started", ErrConfig, p.Kind))
		}
		if err = zk.Stop(); err == nil {
			if err = hold(p.Hold); err == nil {
				err = zk.Start(ctx)
			}
		}
	}
	if err != nil {
		return fail(err)
	}
	f.Healed = time.Since(start)
	return f, nil
}

// stopTimeout bounds a broker's exit after a signal that ends it (a
// controlled shutdown hands leaderships over first).
const stopTimeout = time.Minute

// stop ends broker id with sig and waits for it to exit.
func (l *lab) stop(id int32, sig syscall.Signal) error {
	b := brokerOf(l.c, id)
	if b == nil {
		return fmt.Errorf("%w: no broker %d", ErrBroker, id)
	}
	if err := b.Cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%w: %v to broker %d: %w", ErrBroker, sig, id, err)
	}
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-b.Exited():
	case <-t.C:
		_ = b.Cmd.Process.Kill()
		<-b.Exited()
		return fmt.Errorf("%w: broker %d did not exit within %v of %v: %s", ErrBroker, id, stopTimeout, sig, b.Output())
	}
	if sig == syscall.SIGTERM && b.ExitErr() != nil {
		return fmt.Errorf("%w: broker %d's controlled shutdown failed: %v: %s", ErrBroker, id, b.ExitErr(), b.Output())
	}
	return nil
}

// pause stops broker id with SIGSTOP, runs during, and continues it.
func (l *lab) pause(id int32, during func() error) error {
	b := brokerOf(l.c, id)
	if b == nil {
		return fmt.Errorf("%w: no broker %d", ErrBroker, id)
	}
	if err := b.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("%w: SIGSTOP to broker %d: %w", ErrBroker, id, err)
	}
	err := during()
	if cerr := b.Cmd.Process.Signal(syscall.SIGCONT); cerr != nil {
		err = errors.Join(err, fmt.Errorf("%w: SIGCONT to broker %d: %w", ErrBroker, id, cerr))
	}
	return err
}

// liveIDs are the ids of the brokers whose processes run, in id order.
func liveIDs(c *clusterproc.Cluster) []int32 {
	procs.Lock()
	defer procs.Unlock()
	var out []int32
	for _, b := range c.Brokers {
		select {
		case <-b.Exited():
		default:
			out = append(out, b.ID)
		}
	}
	return slices.Clip(out)
}
