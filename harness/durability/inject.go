package durability

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/weir-broker/weir/cluster/faultproxy"
	"github.com/weir-broker/weir/harness/clusterproc"
	"github.com/weir-broker/weir/harness/result"
)

// brokerOf returns broker id of c as it is now (a fault may have
// restarted it).
func brokerOf(c *clusterproc.Cluster, id int32) *clusterproc.Broker { return c.Broker(id) }

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
	case KillLeader, Pause, SessionExpiry, Term, LinkDown, SlowLinks, FlakyLinks, OneWay:
		f.Target = fmt.Sprintf("leader of %d/%d", p.Topic, p.Partition)
		id, err := obs.leaderOf(ctx, p.Topic, p.Partition, l.cfg.HealTimeout)
		if err != nil {
			return fail(err)
		}
		victim = id
	case DiskFull:
		f.Target = fmt.Sprintf("a follower of %d/%d", p.Topic, p.Partition)
		id, err := obs.followerOf(ctx, p.Topic, p.Partition, l.cfg.HealTimeout)
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
	case KillRandom, DiskPowerCut:
		f.Target, victim = fmt.Sprintf("broker %d", p.Broker), p.Broker
	case PowerCut:
		victim = l.c.PowerCutBroker
		if victim == 0 {
			return fail(fmt.Errorf("%w: %s needs a broker on the power-cut file system; the cluster has none", ErrConfig, p.Kind))
		}
		f.Target = fmt.Sprintf("broker %d", victim)
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
	case KillLeader, KillController, KillRandom, Term:
		sig := syscall.SIGKILL
		if p.Kind == Term {
			sig = syscall.SIGTERM // a controlled shutdown
		}
		err = l.stop(victim, sig)
		if err == nil {
			err = hold(p.Hold)
		}
		if err == nil {
			err = l.restart(ctx, victim)
		}
	case PowerCut:
		if err = l.c.PowerCut(victim); err != nil {
			err = fmt.Errorf("%w: %w", ErrBroker, err)
		}
		if err == nil {
			err = hold(p.Hold)
		}
		if err == nil {
			err = l.restart(ctx, victim)
		}
	case DiskPowerCut:
		if _, err = l.c.DiskPowerCut(victim); err != nil {
			err = fmt.Errorf("%w: %w", ErrBroker, err)
		}
		if err == nil {
			err = hold(p.Hold)
		}
		if err == nil {
			err = l.restart(ctx, victim)
		}
	case Pause:
		// A pause well within the session (pings come every third of
		// it): the broker keeps its registration and wakes up believing
		// it leads.
		err = l.pause(victim, func() error { return hold(min(p.Hold, l.cfg.SessionTimeout/3)) })
	case SessionExpiry:
		err = l.pause(victim, func() error {
			if err := obs.waitGone(ctx, victim, 3*l.cfg.SessionTimeout+10*time.Second); err != nil {
				return err
			}
			return hold(min(p.Hold, time.Second))
		})
	case RollingRestart:
		if _, err = obs.waitWhole(ctx, l.cfg.HealTimeout); err != nil {
			err = fmt.Errorf("before the first restart: %w", err)
			break
		}
		for _, b := range l.c.Members() {
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
	case LinkDown:
		// Longer than the session, so that ZooKeeper expires the cut-off
		// leader and its partitions move while it runs on believing it
		// leads; then it comes back.
		if err = l.c.LinkDown(victim); err == nil {
			err = hold(max(p.Hold, l.cfg.SessionTimeout+2*time.Second))
			if uerr := l.c.LinkUp(victim); uerr != nil {
				err = errors.Join(err, uerr)
			}
		}
	case SlowLinks, FlakyLinks, OneWay:
		err = l.links(victim, p, hold)
	case DiskFull:
		var free func() error
		if free, err = l.c.FillDisk(victim); err == nil {
			err = errors.Join(hold(p.Hold), free())
		}
	case ZooKeeperStop:
		zk := l.c.ZooKeeperServer
		if zk == nil {
			return fail(fmt.Errorf("%w: %s needs the ZooKeeper the lab started", ErrConfig, p.Kind))
		}
		if err = zk.Stop(); err == nil {
			err = hold(p.Hold)
			// Started again even when ctx ended (Ctrl-C): the brokers'
			// controlled shutdowns need it.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			err = errors.Join(err, zk.Start(sctx))
			cancel()
		}
	}
	if err != nil {
		return fail(err)
	}
	f.Healed = time.Since(start)
	return f, nil
}

// links strikes the replication links of broker victim (through the
// cluster's fault proxies) with a link fault, holds it, and heals them.
func (l *lab) links(victim int32, p Planned, hold func(time.Duration) error) error {
	var touched []*faultproxy.Proxy
	defer func() {
		for _, px := range touched {
			px.Heal()
		}
	}()
	var errs []error
	for _, b := range l.c.Members() {
		if b.ID == victim {
			continue
		}
		to, from := l.c.Link(b.ID, victim), l.c.Link(victim, b.ID) // b fetching from victim; victim from b
		if to == nil || from == nil {
			return fmt.Errorf("%w: %s needs the fault proxies between brokers (no link %d<->%d)", ErrConfig, p.Kind, b.ID, victim)
		}
		switch p.Kind {
		case SlowLinks:
			for _, px := range []*faultproxy.Proxy{to, from} {
				errs = append(errs, px.Delay(faultproxy.Upstream, LinkDelay), px.Delay(faultproxy.Downstream, LinkDelay))
			}
			touched = append(touched, to, from)
		case FlakyLinks:
			seed := uint64(l.cfg.Seed)<<8 | uint64(b.ID)
			errs = append(errs, to.DropRate(LinkDropRate, seed), from.DropRate(LinkDropRate, seed+1))
			touched = append(touched, to, from)
		case OneWay:
			// b's fetches reach the leader; its answers never reach b.
			errs = append(errs, to.Blackhole(faultproxy.Downstream, true))
			touched = append(touched, to)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return hold(p.Hold)
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
	var out []int32
	for _, b := range c.Members() {
		select {
		case <-b.Exited():
		default:
			out = append(out, b.ID)
		}
	}
	return out
}
