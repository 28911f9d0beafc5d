package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/weir-broker/weir/core/controller"
	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/meta"
)

// controlTick is how often a controller retries writes held after a failure.
const controlTick = time.Second

// control is this broker's tenure as controller: the controllership it won
// (its epoch fences every write) and the controller state machine it feeds.
type control struct {
	c        layout.Controllership
	sm       *controller.Controller
	brokers  map[int32]meta.Broker  // as last fed
	fed      map[string]*meta.Topic // topics as last fed (images share unchanged ones)
	lastTick time.Time
	shutting []int32            // brokers in controlled shutdown, as last fed
	resigned []meta.Resignation // as last fed
	// lastPreferred is when the last preferred-leader election was asked for.
	lastPreferred time.Time
	// held: a write failed and is held until the next Tick: the loop must
	// come back for it even when nothing else happens.
	held bool
}

// control runs the controller part of one loop step: elect this broker when
// there is no controller, step down when another one is, and otherwise feed
// the controller what changed and execute what it asks for.
func (l *loop) control(ctx context.Context, im *meta.Image) error {
	self := l.n.cfg.NodeID
	if l.ctl != nil && im.Controller != -1 && im.Controller != self {
		l.stepDown("another broker is controller")
	}
	if l.ctl == nil {
		if im.Controller != -1 {
			return nil
		}
		c, err := layout.Elect(ctx, l.store, self, l.n.cfg.Clock.Now().UnixMilli())
		if errors.Is(err, coord.ErrNodeExists) {
			return nil // another broker won; its /controller wakes us
		}
		if err != nil {
			return err
		}
		sm, err := controller.New(controller.Config{ControllerEpoch: c.Epoch})
		if err != nil {
			return err
		}
		l.ctl = &control{c: c, sm: sm, fed: map[string]*meta.Topic{}, lastTick: time.Now(), lastPreferred: time.Now()}
		l.n.logger.Info("elected controller", "broker", self, "controller_epoch", c.Epoch)
	}
	ct := l.ctl
	if ct.brokers == nil || !maps.EqualFunc(ct.brokers, im.Brokers, func(a, b meta.Broker) bool { return a.Epoch == b.Epoch }) {
		if err := ct.sm.SetBrokers(im.Brokers); err != nil {
			return err
		}
		ct.brokers = im.Brokers
	}
	if !slices.Equal(ct.shutting, im.ShuttingDown) {
		ct.sm.SetShuttingDown(im.ShuttingDown)
		ct.shutting = im.ShuttingDown
	}
	if ct.resigned == nil || !slices.Equal(ct.resigned, im.Resigned) {
		ct.sm.SetResignations(im.Resigned)
		ct.resigned = im.Resigned
		if ct.resigned == nil {
			ct.resigned = []meta.Resignation{}
		}
	}
	if iv := l.n.cfg.LeaderImbalanceCheckInterval; iv > 0 && time.Since(ct.lastPreferred) >= iv {
		ct.sm.PreferredElection()
		ct.lastPreferred = time.Now()
	}
	for name, t := range im.Topics {
		if ct.fed[name] == t {
			continue
		}
		if err := ct.sm.SetTopic(t); err != nil {
			l.n.logger.Error("controller refused a topic as read", "topic", name, "err", err)
			continue
		}
		ct.fed[name] = t
	}
	for name := range ct.fed {
		if _, ok := im.Topics[name]; !ok {
			ct.sm.RemoveTopic(name)
			delete(ct.fed, name)
		}
	}
	for name, t := range im.Topics {
		if !t.Deleting {
			continue
		}
		acks, err := l.children(ctx, layout.DeleteTopicPath(name), func(d *dirty) { d.topics[name] = true })
		if err != nil {
			return err
		}
		for _, a := range acks {
			if id, err := strconv.ParseInt(a, 10, 32); err == nil {
				ct.sm.DeletionAcked(name, int32(id))
			}
		}
	}
	if time.Since(ct.lastTick) >= controlTick {
		ct.sm.Tick()
		ct.lastTick = time.Now()
		ct.held = false
	}
	if ct.sm.Deposed() {
		l.stepDown("a newer controller wrote partition states")
		return nil
	}
	var errs []error
	for _, a := range ct.sm.Ready() {
		var err error
		switch a := a.(type) {
		case *controller.CreateState:
			var v int32
			v, err = layout.WriteState(ctx, l.store, ct.c, a.Topic, a.Partition, a.State, true)
			err = l.outcome(a, v, err)
		case *controller.UpdateState:
			st := a.State
			st.Version = a.Version
			var v int32
			v, err = layout.WriteState(ctx, l.store, ct.c, a.Topic, a.Partition, st, false)
			err = l.outcome(a, v, err)
		case *controller.DeleteTopic:
			if t := im.Topics[a.Name]; t == nil || t.ID != a.ID {
				// Not the incarnation the controller decided about (a late
				// action): a conflict, settled by a re-read.
				err = l.outcome(a, 0, fmt.Errorf("%w: topic %q is not the incarnation to delete", coord.ErrNoNode, a.Name))
				break
			}
			err = l.outcome(a, 0, layout.DeleteTopic(ctx, l.store, ct.c, a.Name))
			if err == nil {
				l.n.logger.Info("topic deletion finished", "topic", a.Name)
			}
		case *controller.Reread:
			l.mu.Lock()
			l.dirty.topics[a.Topic] = true
			l.mu.Unlock()
			l.wake()
		}
		if errors.Is(err, layout.ErrFenced) {
			l.stepDown("deposed: its controller epoch is stale")
			return nil
		}
		if err != nil {
			errs = append(errs, err)
			ct.held = true
		}
		if l.ctl == nil {
			return errors.Join(errs...)
		}
	}
	if err := l.dropOrphanDeletions(ctx, im); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...) // held writes: retried after controlTick
}

// outcome reports a write's result to the controller and returns the write's
// own error.
func (l *loop) outcome(w controller.Write, version int32, err error) error {
	if l.ctl == nil {
		return err
	}
	if err == nil {
		if aerr := l.ctl.sm.Applied(w, version); aerr != nil {
			l.n.logger.Error("controller: outcome of an unknown write", "write", w, "err", aerr)
		}
		return nil
	}
	if ferr := l.ctl.sm.Failed(w, err); ferr != nil {
		l.n.logger.Error("controller: outcome of an unknown write", "write", w, "err", ferr)
	}
	if errors.Is(err, coord.ErrBadVersion) || errors.Is(err, coord.ErrNodeExists) || errors.Is(err, coord.ErrNoNode) {
		return nil // a conflict: the controller asked for a re-read
	}
	return err
}

// stepDown ends this broker's tenure as controller, if it had one.
func (l *loop) stepDown(why string) {
	if l.ctl == nil {
		return
	}
	l.n.logger.Warn("no longer controller", "broker", l.n.cfg.NodeID, "controller_epoch", l.ctl.c.Epoch, "why", why)
	l.ctl = nil
}

// dropOrphanDeletions removes the deletion requests of topics that do not
// exist (asked by a broker whose picture was stale): CreateTopic refuses a
// name while its request is pending, so one without a topic would block the
// name forever. The store has the last word: a topic this broker has not
// read yet keeps its request.
func (l *loop) dropOrphanDeletions(ctx context.Context, im *meta.Image) error {
	for _, name := range slices.Sorted(maps.Keys(l.deleting)) {
		if im.Topics[name] != nil || slices.Contains(l.names, name) {
			continue
		}
		dropped, err := layout.DropOrphanDeletion(ctx, l.store, l.ctl.c, name)
		switch {
		case errors.Is(err, layout.ErrTopicExists):
			continue // created meanwhile: its watch brings it
		case errors.Is(err, layout.ErrFenced):
			l.stepDown("deposed: its controller epoch is stale")
			return nil
		case err != nil:
			return err
		case dropped:
			l.n.logger.Warn("dropped the deletion request of a topic that does not exist", "topic", name)
		}
	}
	return nil
}
