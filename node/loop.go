package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
)

// The node's loop: one goroutine owns the node's session on the coordination
// store and everything it learns from it. It registers the broker, reads
// the cluster (brokers, controller, topics, partition states, deletion
// requests) through one-shot watches, publishes each new image, opens and
// removes partition logs to match it, and, while this broker is controller,
// runs the controller (control.go).
//
// Watches: each path is watched at most once at a time (armed); a watch that
// fires marks what it covers dirty and the loop reads it again, arming a new
// watch. Nothing is re-read because nothing fired, except after an error (a
// read that failed set no watch) and after a new session (every watch of the
// old one fired NotWatching): "no event" never means "nothing changed" across
// sessions, which is why everything is re-read then. While the store is
// unreachable the node keeps serving from the image it has.

// loopRetry bounds how long the loop waits before trying again after a store
// error.
const loopRetry = 500 * time.Millisecond

// storeTimeout bounds one request to the store (ZooKeeper requests have no
// timeout of their own).
const storeTimeout = 10 * time.Second

type loop struct {
	n     *Node
	store coord.Store

	kick   chan struct{}   // something to do (cap 1)
	ctx    context.Context // cancelled by close: every store request ends
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	dirty dirty
	armed map[string]bool // paths with a watch set and not fired

	// What was read, owned by the loop goroutine. Topics are replaced, never
	// changed in place, so published images can share them.
	session    int64 // the session the cache belongs to
	registered bool
	brokers    map[int32]meta.Broker
	controller int32
	ctrlEpoch  int32
	names      []string
	deleting   map[string]bool
	topics     map[string]*meta.Topic
	// acked: deletions this broker acknowledged, by incarnation: a name
	// deleted, created and deleted again is another deletion to ack.
	acked        map[incarnation]bool
	removed      map[[16]byte]bool  // topics (by id) whose logs this broker removed
	strayDone    atomic.Bool        // setAsideStrays ran
	ctl          *control           // non-nil while this broker is controller
	shuttingDown []int32            // brokers in controlled shutdown, as read
	resigned     []meta.Resignation // resignations of failed replica logs, as read
	lastWarn     string             // the last round failure logged at WARN, and when
	lastWarnAt   time.Time

	// brokerCfgs are /config/brokers/<entity>, as read (configs.go).
	brokerCfgs map[string]map[string]string
}

// incarnation is one topic of a name: its id (the zero id, of a topic
// written before Kafka 2.8, is one incarnation per name).
type incarnation struct {
	name string
	id   [16]byte
}

// dirty is what must be read again.
type dirty struct {
	all, brokers, controller, names, deleting, shutdown, resigned bool
	brokerConfigs                                                 bool
	topics                                                        map[string]bool
}

func newLoop(n *Node, store coord.Store) *loop {
	ctx, cancel := context.WithCancel(context.Background())
	return &loop{n: n, store: store, kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{}),
		removed: map[[16]byte]bool{},
		armed:   map[string]bool{}, dirty: dirty{all: true, topics: map[string]bool{}}, controller: -1,
		brokers: map[int32]meta.Broker{}, deleting: map[string]bool{}, topics: map[string]*meta.Topic{}, acked: map[incarnation]bool{}}
}

func (l *loop) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// arm forwards the one event of watch ch for path: it marks what path covers
// dirty (everything, when the watch was dropped) and wakes the loop.
func (l *loop) arm(path string, ch <-chan coord.Event, mark func(*dirty)) {
	l.mu.Lock()
	l.armed[path] = true
	l.mu.Unlock()
	go func() {
		ev, ok := <-ch
		l.mu.Lock()
		delete(l.armed, path)
		if !ok || ev.Type == coord.EventNotWatching {
			l.dirty.all = true
		} else {
			mark(&l.dirty)
		}
		l.mu.Unlock()
		l.wake()
	}()
}

func (l *loop) isArmed(path string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.armed[path]
}

// take returns what is dirty and clears it.
func (l *loop) take() dirty {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dirty
	l.dirty = dirty{topics: map[string]bool{}}
	return d
}

// redo marks d dirty again (its read failed).
func (l *loop) redo(d dirty) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dirty.all = l.dirty.all || d.all
	l.dirty.brokers = l.dirty.brokers || d.brokers
	l.dirty.controller = l.dirty.controller || d.controller
	l.dirty.names = l.dirty.names || d.names
	l.dirty.deleting = l.dirty.deleting || d.deleting
	l.dirty.shutdown = l.dirty.shutdown || d.shutdown
	l.dirty.resigned = l.dirty.resigned || d.resigned
	l.dirty.brokerConfigs = l.dirty.brokerConfigs || d.brokerConfigs
	for t := range d.topics {
		l.dirty.topics[t] = true
	}
}

func (l *loop) run() {
	defer close(l.done)
	var retry <-chan time.Time
	for {
		sess := l.store.Session()
		if sess.State == coord.Closed {
			return
		}
		if sess.State == coord.Connected && sess.ID != l.session {
			if l.session != 0 {
				l.n.logger.Warn("coordination session replaced; registering again", "old", l.session, "new", sess.ID)
			}
			l.session, l.registered = sess.ID, false
			l.mu.Lock()
			l.armed = map[string]bool{}
			l.dirty.all = true
			l.mu.Unlock()
			l.stepDown("the session ended")
		}
		retry = nil
		if sess.State == coord.Connected {
			if err := l.step(); err != nil {
				l.warnRetry(err)
				retry = time.After(loopRetry)
			} else if l.ctl != nil && l.ctl.held {
				// A write held until the controller's next Tick: come
				// back for it (no watch would).
				retry = time.After(loopRetry)
			}
		}
		select {
		case <-l.kick:
		case <-sess.Changed:
		case <-retry:
		case <-l.ctx.Done():
			return
		}
	}
}

// retryWarnEvery: a round failing the same way is logged at WARN at most this
// often (every time at DEBUG), so a store that keeps refusing does not flood
// the log every loopRetry.
const retryWarnEvery = 30 * time.Second

func (l *loop) warnRetry(err error) {
	msg := err.Error()
	if msg != l.lastWarn || time.Since(l.lastWarnAt) >= retryWarnEvery {
		l.n.logger.Warn("cluster state: will retry", "err", err, "every", loopRetry)
		l.lastWarn, l.lastWarnAt = msg, time.Now()
		return
	}
	l.n.logger.Debug("cluster state: will retry", "err", err)
}

// step does one round: register, read what is dirty, publish, reconcile
// the logs, and control.
func (l *loop) step() error {
	ctx, cancel := context.WithTimeout(l.ctx, storeTimeout)
	defer cancel()
	if !l.registered {
		if _, err := l.n.register(ctx, l.store); err != nil {
			return err
		}
		l.registered = true
		l.n.logger.Info("registered in the cluster", "broker", l.n.cfg.NodeID, "session", l.session)
	}
	d := l.take()
	if err := l.refresh(ctx, d); err != nil {
		return err
	}
	im := l.image()
	// Reconcile before publishing, so that an image that names this broker
	// leader of a partition comes with the partition open.
	deleted, rerr := l.n.reconcile(im, l.removed)
	pending := make(map[incarnation]bool, len(deleted))
	for _, t := range deleted {
		inc := incarnation{t.Name, t.ID}
		pending[inc] = true
		if l.acked[inc] {
			continue
		}
		if err := layout.AckDeletion(ctx, l.store, t.Name, l.n.cfg.NodeID); err != nil {
			rerr = errors.Join(rerr, err)
			continue
		}
		l.acked[inc] = true
	}
	maps.DeleteFunc(l.acked, func(inc incarnation, _ bool) bool { return !pending[inc] })
	if !l.strayDone.Load() && rerr == nil {
		rerr = l.setAsideStrays(im)
	}
	l.n.syncReplicas(im)
	l.n.syncCoordinator(l.ctx, im)
	l.n.syncTxnCoordinator(l.ctx, im) // helper txncoord
	l.n.image.publish(im)
	return errors.Join(rerr, l.control(ctx, im))
}

// refresh reads what d marks dirty, arming a watch on each path it reads;
// what fails is marked dirty again.
func (l *loop) refresh(ctx context.Context, d dirty) (err error) {
	defer func() {
		if err != nil {
			l.redo(d)
		}
	}()
	if d.all {
		d.brokers, d.controller, d.names, d.deleting, d.shutdown, d.resigned = true, true, true, true, true, true
		d.brokerConfigs = true
		for t := range l.topics {
			d.topics[t] = true
		}
	}
	if d.brokers {
		if l.brokers, err = l.readBrokers(ctx); err != nil {
			return err
		}
	}
	if d.controller {
		if err := l.readController(ctx); err != nil {
			return err
		}
	}
	if d.shutdown {
		ids, watch, err := layout.ReadShuttingDown(ctx, l.store)
		if err != nil {
			return err
		}
		l.shuttingDown = ids
		if !l.isArmed(layout.ShuttingDownPath) {
			l.arm(layout.ShuttingDownPath, watch, func(d *dirty) { d.shutdown = true })
		}
	}
	if d.resigned {
		rs, watch, err := layout.ReadResignations(ctx, l.store)
		if err != nil {
			return err
		}
		l.resigned = rs
		if !l.isArmed(layout.ResignedPath) {
			l.arm(layout.ResignedPath, watch, func(d *dirty) { d.resigned = true })
		}
	}
	if d.brokerConfigs {
		if l.brokerCfgs, err = l.readBrokerConfigs(ctx); err != nil {
			return err
		}
	}
	if d.names {
		names, err := l.children(ctx, layout.TopicsPath, func(d *dirty) { d.names = true })
		if err != nil {
			return err
		}
		l.names = names
		for _, t := range names {
			if _, ok := l.topics[t]; !ok {
				d.topics[t] = true
			}
		}
		for t := range l.topics {
			if !slices.Contains(names, t) {
				delete(l.topics, t)
			}
		}
	}
	if d.deleting {
		names, err := l.children(ctx, layout.DeleteTopicsPath, func(d *dirty) { d.deleting = true })
		if err != nil {
			return err
		}
		was := l.deleting
		l.deleting = map[string]bool{}
		for _, t := range names {
			l.deleting[t] = true
			if !was[t] {
				d.topics[t] = true
			}
		}
		for t := range was {
			if !l.deleting[t] {
				d.topics[t] = true
			}
		}
	}
	recheck := false
	for _, name := range slices.Sorted(maps.Keys(d.topics)) {
		if !slices.Contains(l.names, name) {
			delete(l.topics, name)
			continue
		}
		t, err := l.readTopic(ctx, name)
		if errors.Is(err, coord.ErrNoNode) {
			delete(l.topics, name) // deleted meanwhile; the names watch says so too
			delete(d.topics, name)
			continue
		}
		if errors.Is(err, layout.ErrMalformed) {
			// Garbage in the store (written by hand, by another version):
			// the topic is left out until its nodes change (they are
			// watched), and the others are served.
			l.n.logger.Error("topic left out: malformed in the coordination store", "topic", name, "err", err)
			delete(l.topics, name)
			delete(d.topics, name)
			continue
		}
		if err != nil {
			return err
		}
		if old := l.topics[name]; t.Deleting && (old == nil || old.ID != t.ID) {
			recheck = true
		}
		l.topics[name] = t
		delete(d.topics, name)
	}
	if recheck {
		return l.recheckDeleting(ctx)
	}
	return nil
}

// recheckDeleting reads the deletion requests again after a new incarnation
// of a name was read as being deleted: the requests were read before it,
// and the one seen may have been its predecessor's, deleted with it since
// (its watch fired, but may not have marked the loop dirty yet). A new
// topic taken for one being deleted would have its logs removed and its
// leaders never elected until that watch came. CreateTopic refuses a name
// while its request is pending, so a request read after the topic is the
// topic's own. Topics whose flag was wrong are replaced by corrected
// copies.
func (l *loop) recheckDeleting(ctx context.Context) error {
	names, err := l.children(ctx, layout.DeleteTopicsPath, func(d *dirty) { d.deleting = true })
	if err != nil {
		l.redo(dirty{deleting: true})
		return err
	}
	l.deleting = make(map[string]bool, len(names))
	for _, name := range names {
		l.deleting[name] = true
	}
	for name, t := range l.topics {
		if t.Deleting != l.deleting[name] {
			nt := *t
			nt.Deleting = l.deleting[name]
			l.topics[name] = &nt
		}
	}
	return nil
}

// children reads a node's children with a watch (creating the node when it
// is missing, as the layout's parents always exist once used).
func (l *loop) children(ctx context.Context, path string, mark func(*dirty)) ([]string, error) {
	if l.isArmed(path) {
		names, _, err := l.store.Children(ctx, path)
		return names, err
	}
	names, _, ch, err := l.store.ChildrenW(ctx, path)
	if errors.Is(err, coord.ErrNoNode) {
		if err := coord.EnsurePath(ctx, l.store, path); err != nil {
			return nil, err
		}
		names, _, ch, err = l.store.ChildrenW(ctx, path)
	}
	if err != nil {
		return nil, err
	}
	l.arm(path, ch, mark)
	return names, nil
}

func (l *loop) readBrokers(ctx context.Context) (map[int32]meta.Broker, error) {
	ids, err := l.children(ctx, layout.BrokerIDsPath, func(d *dirty) { d.brokers = true })
	if err != nil {
		return nil, err
	}
	out := make(map[int32]meta.Broker, len(ids))
	for _, name := range ids {
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil || id < 0 {
			l.n.logger.Warn("ignoring a broker registration that is not a broker id", "path", coord.Join(layout.BrokerIDsPath, name))
			continue
		}
		path := layout.BrokerPath(int32(id))
		data, st, err := l.store.Get(ctx, path)
		if errors.Is(err, coord.ErrNoNode) {
			continue // gone since the children were read; the watch fires too
		}
		if err != nil {
			return nil, err
		}
		b, err := layout.DecodeBroker(path, data, st)
		if err != nil {
			l.n.logger.Error("ignoring a malformed broker registration", "err", err)
			continue
		}
		out[b.ID] = b
	}
	return out, nil
}

func (l *loop) readController(ctx context.Context) error {
	var (
		exists bool
		err    error
	)
	if l.isArmed(layout.ControllerPath) {
		exists, _, err = l.store.Exists(ctx, layout.ControllerPath)
	} else {
		var ch <-chan coord.Event
		exists, _, ch, err = l.store.ExistsW(ctx, layout.ControllerPath)
		if err == nil {
			l.arm(layout.ControllerPath, ch, func(d *dirty) { d.controller = true })
		}
	}
	if err != nil {
		return err
	}
	l.controller = -1
	if exists {
		data, _, err := l.store.Get(ctx, layout.ControllerPath)
		switch {
		case errors.Is(err, coord.ErrNoNode):
		case err != nil:
			return err
		default:
			id, err := layout.DecodeController(layout.ControllerPath, data)
			if err != nil {
				return err
			}
			l.controller = id
		}
	}
	data, _, err := l.store.Get(ctx, layout.ControllerEpochPath)
	switch {
	case errors.Is(err, coord.ErrNoNode):
		l.ctrlEpoch = 0
	case err != nil:
		return err
	default:
		e, perr := strconv.ParseInt(string(data), 10, 32)
		if perr != nil {
			return fmt.Errorf("%w: %s: %q is not an epoch", layout.ErrMalformed, layout.ControllerEpochPath, data)
		}
		l.ctrlEpoch = int32(e)
	}
	return nil
}

// get reads path with a data watch (an exists watch when it is missing)
// unless one is armed; ok is false when the node does not exist.
func (l *loop) get(ctx context.Context, path string, mark func(*dirty)) (data []byte, st coord.Stat, ok bool, err error) {
	if l.isArmed(path) {
		data, st, err = l.store.Get(ctx, path)
		if errors.Is(err, coord.ErrNoNode) {
			return nil, st, false, nil
		}
		return data, st, err == nil, err
	}
	data, ok, st, ch, err := coord.WatchNode(ctx, l.store, path)
	if ch != nil {
		l.arm(path, ch, mark)
	}
	return data, st, ok, err
}

// readTopic reads a topic's assignment, configs and partition states.
func (l *loop) readTopic(ctx context.Context, name string) (*meta.Topic, error) {
	mark := func(d *dirty) { d.topics[name] = true }
	path := layout.TopicPath(name)
	data, _, ok, err := l.get(ctx, path, mark)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", coord.ErrNoNode, path)
	}
	id, assignment, err := layout.DecodeAssignment(path, data)
	if err != nil {
		return nil, err
	}
	t := &meta.Topic{Name: name, ID: id, Assignment: assignment, States: make([]*meta.PartitionState, len(assignment)),
		Deleting: l.deleting[name]}
	cpath := layout.ConfigTopicPath(name)
	if data, _, ok, err := l.get(ctx, cpath, mark); err != nil {
		return nil, err
	} else if ok {
		if t.Configs, err = layout.DecodeTopicConfig(cpath, data); err != nil {
			return nil, err
		}
	}
	for p := range assignment {
		spath := layout.StatePath(name, int32(p))
		data, st, ok, err := l.get(ctx, spath, mark)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		s, err := layout.DecodeState(spath, data, st)
		if err != nil {
			return nil, err
		}
		t.States[p] = &s
	}
	return t, nil
}

// image builds an image from what was read.
func (l *loop) image() *meta.Image {
	im := &meta.Image{ClusterID: l.n.id.ClusterID, Controller: l.controller, ControllerEpoch: l.ctrlEpoch,
		Brokers: maps.Clone(l.brokers), Topics: maps.Clone(l.topics), BrokerConfigs: l.brokerCfgs}
	for _, id := range l.shuttingDown {
		if im.Live(id) {
			im.ShuttingDown = append(im.ShuttingDown, id)
		}
	}
	for _, r := range l.resigned {
		if im.Live(r.Broker) {
			im.Resigned = append(im.Resigned, r)
		}
	}
	if !im.Live(im.Controller) {
		im.Controller = -1
	}
	return im
}

// setAsideStrays, once, after the first image: partition directories on disk
// that the image does not assign to this broker belong to no topic this
// broker serves (a topic deleted while it was down, a stale copy): they are
// set aside, data kept.
func (l *loop) setAsideStrays(im *meta.Image) error {
	wanted := func(dir string) bool {
		topic, p, ok := logs.ParseDirName(dir)
		if !ok {
			return false
		}
		t := im.Topics[topic]
		return t != nil && !t.Deleting && int(p) < len(t.Assignment) && slices.Contains(t.Assignment[p], l.n.cfg.NodeID)
	}
	if err := l.n.logs.SetAside(func(dir string) bool { return !wanted(dir) }); err != nil {
		return err
	}
	l.strayDone.Store(true)
	return nil
}

// strayChecked reports whether the directories on disk were checked against
// an image (which happens before that image is published).
func (l *loop) strayChecked() bool { return l.strayDone.Load() }

// close stops the loop (cutting short a store request in progress) and
// waits for it.
func (l *loop) close() {
	l.cancel()
	<-l.done
}

// rereadTopic has the loop read a topic again (its states moved under a
// write of this broker's).
func (l *loop) rereadTopic(name string) {
	l.mu.Lock()
	l.dirty.topics[name] = true
	l.mu.Unlock()
	l.wake()
}

// readBrokerConfigs reads every /config/brokers/<entity> (the children
// watched, and each node's data), for the image; a malformed node is logged
// and left out.
func (l *loop) readBrokerConfigs(ctx context.Context) (map[string]map[string]string, error) {
	mark := func(d *dirty) { d.brokerConfigs = true }
	names, err := l.children(ctx, layout.ConfigBrokersPath, mark)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]string, len(names))
	for _, e := range names {
		if !layout.IsBrokerEntity(e) {
			continue
		}
		path := layout.BrokerConfigPath(e)
		data, _, ok, err := l.get(ctx, path, mark)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		cfg, err := layout.DecodeTopicConfig(path, data)
		if err != nil {
			l.n.logger.Error("broker configs left out: malformed in the coordination store", "path", path, "err", err)
			continue
		}
		out[e] = cfg
	}
	return out, nil
}
