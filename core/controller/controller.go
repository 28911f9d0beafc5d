package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/meta"
)

// Config configures a Controller.
type Config struct {
	// ControllerEpoch is the epoch this controller was elected with (what it
	// wrote to /controller_epoch). It stamps every state the controller
	// writes; a state read with a larger one means a newer controller
	// exists (see Deposed). At least 0.
	ControllerEpoch int32
	// UncleanLeaderElection is the broker default of Kafka's
	// unclean.leader.election.enable (false, as in Kafka since 0.11): whether
	// a partition whose ISR has no live member may take any live replica as
	// leader, losing what only the ISR had. A topic's own
	// unclean.leader.election.enable config (UncleanConfig) overrides it.
	UncleanLeaderElection bool
}

func (c Config) validate() error {
	if c.ControllerEpoch < 0 {
		return fmt.Errorf("%w: controller epoch %d", ErrInvalidConfig, c.ControllerEpoch)
	}
	return nil
}

// Controller is the controller's state machine: the live brokers and the
// topics as last read, and the writes in flight. It does no I/O, reads no
// clock and starts no goroutine; it is not safe for concurrent use (one loop
// owns it). See the package doc for the model and the rules.
type Controller struct {
	cfg    Config
	live   map[int32]meta.Broker
	topics map[string]*topic
	// gone are the IDs of topic incarnations known to be gone (deleted by
	// this controller, removed, or replaced by another incarnation of the
	// name): a late read of one is ignored.
	gone    map[[16]byte]bool
	deposed bool
	// shutting are the brokers in controlled shutdown; preferred asks the
	// next Ready for preferred-leader elections.
	shutting  []int32
	preferred bool
	// resigned are the brokers that resigned a partition, by topic and
	// partition, with the leader epoch they resigned in.
	resigned map[string]map[int32][]meta.Resignation
}

// topic is what the controller knows of one topic.
type topic struct {
	// t is the topic as last read, with the controller's applied writes
	// folded in. len(t.States) == len(t.Assignment) <= len(parts): parts
	// beyond the assignment are of an incarnation that had more
	// partitions, kept while they have a write in flight.
	t      *meta.Topic
	reread rereadState
	parts  []part
	// removed: the topic is gone (RemoveTopic, or deleted), and the entry
	// is kept only for its writes in flight, so that a new topic of the
	// same name never gets a second write on a record while one is in
	// flight. It goes when they settle.
	removed bool
	// acked are the brokers that reported their logs of the topic deleted.
	acked map[int32]bool
	// deleting is the DeleteTopic in flight; deleteHeld says the last one
	// failed (not a conflict) and waits for Tick.
	deleting   Write
	deleteHeld bool
}

type rereadState int8

const (
	rereadNone   rereadState = iota
	rereadWanted             // a conflict: Ready asks for a Reread
	rereadAsked              // asked: nothing is written until SetTopic
)

// part is the controller's bookkeeping of one partition.
type part struct {
	// inflight is the state write handed out and not yet settled: there is
	// never a second one.
	inflight Write
	// bounced are brokers that re-registered since the partition was last
	// settled; sentBounces those the in-flight write accounts for.
	bounced, sentBounces []int32
	// held: the last write failed with an error other than a conflict; the
	// partition waits for Tick.
	held bool
}

// New returns a controller that knows no broker and no topic: feed it
// SetBrokers and a SetTopic per topic (what onControllerFailover reads)
// before the first Ready, so that it does not act on half a picture.
func New(cfg Config) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Controller{cfg: cfg, live: map[int32]meta.Broker{}, topics: map[string]*topic{},
		gone: map[[16]byte]bool{}}, nil
}

// SetBrokers replaces the live brokers with live (/brokers/ids as read, by
// id; the map is not kept). A broker that is gone has failed; one that is
// new has started; one whose Epoch grew bounced (it re-registered between
// two reads): its partitions are handled as a failure then a startup, as
// Kafka's processBrokerChange does. Epochs never go back: a read older than
// one seen before keeps the larger epoch.
func (c *Controller) SetBrokers(live map[int32]meta.Broker) error {
	for id, b := range live {
		if id != b.ID {
			return fmt.Errorf("%w: broker %d filed under id %d", ErrInvalidInput, b.ID, id)
		}
	}
	next := maps.Clone(live)
	if next == nil {
		next = map[int32]meta.Broker{}
	}
	var bounced []int32
	for id, b := range next {
		old, ok := c.live[id]
		switch {
		case ok && b.Epoch > old.Epoch:
			bounced = append(bounced, id)
		case ok && b.Epoch < old.Epoch:
			b.Epoch = old.Epoch
			next[id] = b
		}
	}
	c.live = next
	if len(bounced) == 0 {
		return nil
	}
	slices.Sort(bounced)
	for _, tp := range c.topics {
		for p := range tp.t.Assignment {
			if tp.t.States[p] == nil {
				continue // no state yet: nothing the broker led or followed
			}
			pt := &tp.parts[p]
			for _, b := range bounced {
				if slices.Contains(tp.t.Assignment[p], b) && !slices.Contains(pt.bounced, b) {
					pt.bounced = append(pt.bounced, b)
				}
			}
		}
	}
	return nil
}

// SetTopic replaces what the controller knows of a topic with t as read
// (assignment, configs, states with their versions, Deleting); t is not
// kept. It answers a Reread and also serves for a topic seen for the first
// time, a changed assignment (partitions added) or configs, and a deletion
// request. For the same topic (same ID) a state older than the one known
// (a lower version, or none) is ignored, so a read that lags behind a write
// this controller saw applied does not undo it; so are missing partitions
// (partitions are only ever added). A state written by a newer
// controller (a larger ControllerEpoch) deposes this one (Deposed).
//
// Topic IDs tell incarnations of a name apart: a read with another ID than
// the one known is a new incarnation, and the old ID is gone from then on;
// a read of an incarnation known to be gone (replaced, removed, or deleted
// by this controller) is ignored, so a late read cannot bring a deleted
// topic back. This needs the loop to feed the reads of one topic in the
// order it took them (later reads may overtake the outcomes of writes,
// which versions sort out, but not earlier reads). Topics without an ID
// (the zero ID, written before Kafka 2.8) are one incarnation.
func (c *Controller) SetTopic(t *meta.Topic) error {
	if err := validTopic(t); err != nil {
		return err
	}
	if t.ID != ([16]byte{}) && c.gone[t.ID] {
		return nil
	}
	nt := t.Clone()
	for len(nt.States) < len(nt.Assignment) {
		nt.States = append(nt.States, nil)
	}
	for _, s := range nt.States {
		if s != nil && s.ControllerEpoch > c.cfg.ControllerEpoch {
			c.deposed = true
		}
	}
	tp := c.topics[t.Name]
	if tp == nil {
		c.topics[t.Name] = &topic{t: nt, parts: make([]part, len(nt.Assignment)), acked: map[int32]bool{}}
		return nil
	}
	if tp.t.ID == nt.ID && !tp.removed {
		// Partitions are added, never removed: a read with fewer than known
		// was taken before some were added.
		for p := len(nt.Assignment); p < len(tp.t.Assignment); p++ {
			nt.Assignment = append(nt.Assignment, slices.Clone(tp.t.Assignment[p]))
			nt.States = append(nt.States, tp.t.States[p])
		}
		for p := range min(len(nt.States), len(tp.t.States)) {
			if old := tp.t.States[p]; old != nil && (nt.States[p] == nil || nt.States[p].Version < old.Version) {
				nt.States[p] = old
			}
		}
	} else {
		// Another incarnation of the name: what was acked or bounced was
		// about the old one. Writes in flight stay in flight (they are
		// about the same records).
		c.forget(tp.t.ID)
		tp.acked, tp.removed = map[int32]bool{}, false
		for p := range tp.parts {
			tp.parts[p].bounced = nil
		}
	}
	tp.t = nt
	tp.reread = rereadNone
	tp.trim()
	return nil
}

// trim sizes parts to the assignment, keeping parts beyond it that still
// have a write in flight.
func (tp *topic) trim() {
	n := len(tp.t.Assignment)
	for len(tp.parts) > n && tp.parts[len(tp.parts)-1].inflight == nil {
		tp.parts = tp.parts[:len(tp.parts)-1]
	}
	for len(tp.parts) < n {
		tp.parts = append(tp.parts, part{})
	}
}

func validTopic(t *meta.Topic) error {
	switch {
	case t == nil || t.Name == "":
		return fmt.Errorf("%w: a topic without a name", ErrInvalidInput)
	case len(t.Assignment) == 0:
		return fmt.Errorf("%w: topic %q has no partitions", ErrInvalidInput, t.Name)
	case len(t.States) > len(t.Assignment):
		return fmt.Errorf("%w: topic %q has %d states for %d partitions", ErrInvalidInput, t.Name, len(t.States),
			len(t.Assignment))
	}
	for p, r := range t.Assignment {
		if len(r) == 0 {
			return fmt.Errorf("%w: topic %q partition %d has no replicas", ErrInvalidInput, t.Name, p)
		}
	}
	for p, s := range t.States {
		switch {
		case s == nil:
		case len(s.ISR) == 0:
			return fmt.Errorf("%w: topic %q partition %d has an empty ISR", ErrInvalidInput, t.Name, p)
		case s.Version < 0:
			return fmt.Errorf("%w: topic %q partition %d has no version", ErrInvalidInput, t.Name, p)
		}
	}
	return nil
}

// RemoveTopic forgets a topic that is gone from the store. Its writes still
// in flight stay in flight (a new topic of the name gets no write on a
// record that has one) until their outcomes come, which are then ignored.
func (c *Controller) RemoveTopic(name string) {
	if tp := c.topics[name]; tp != nil && !tp.removed {
		c.forget(tp.t.ID)
		tp.removed = true
		c.drop(tp)
	}
}

// drop deletes a removed topic's entry once nothing of it is in flight.
func (c *Controller) drop(tp *topic) {
	if tp.removed && tp.deleting == nil && !tp.anyInflight() {
		delete(c.topics, tp.t.Name)
	}
}

// forget records that the topic incarnation id is gone.
func (c *Controller) forget(id [16]byte) {
	if id != ([16]byte{}) {
		c.gone[id] = true
	}
}

// DeletionAcked records that broker removed its logs of topic (which is
// being deleted). Acks of an unknown topic are ignored.
func (c *Controller) DeletionAcked(topic string, broker int32) {
	if tp := c.topics[topic]; tp != nil && !tp.removed {
		tp.acked[broker] = true
	}
}

// Applied reports that write w (as Ready handed it out) succeeded; for a
// state write, newVersion is the record's version now. A DeleteTopic that
// succeeded forgets the topic (the incarnation it deleted).
func (c *Controller) Applied(w Write, newVersion int32) error {
	tp, p, err := c.inflight(w)
	if err != nil {
		return err
	}
	if d, ok := w.(*DeleteTopic); ok {
		// A read of a new incarnation of the name may have come first.
		c.forget(d.ID)
		tp.deleting = nil
		if tp.t.ID == d.ID {
			c.RemoveTopic(d.Name)
		}
		c.drop(tp)
		return nil
	}
	pt := &tp.parts[p]
	if !tp.removed && p < len(tp.t.States) {
		s := writtenState(pt.inflight)
		s.Version = newVersion
		if old := tp.t.States[p]; old == nil || old.Version < newVersion {
			tp.t.States[p] = &s
		}
		pt.bounced = slices.DeleteFunc(pt.bounced, func(b int32) bool { return slices.Contains(pt.sentBounces, b) })
	}
	pt.inflight, pt.sentBounces = nil, nil
	tp.trim()
	c.drop(tp)
	return nil
}

// Failed reports that write w failed with err. A conflict
// (coord.ErrBadVersion, coord.ErrNodeExists or coord.ErrNoNode: the record
// is not what the controller thinks) makes the controller ask for the topic
// to be read again (Reread) and write nothing for it until SetTopic; any
// other error (coord.ErrConnectionLoss, a timeout) holds the partition, or
// the deletion, until the next Tick, when it is computed afresh. A write
// whose outcome is unknown may have been applied: the retry then fails as a
// conflict, which the re-read settles.
func (c *Controller) Failed(w Write, err error) error {
	tp, p, ierr := c.inflight(w)
	if ierr != nil {
		return ierr
	}
	conflict := isConflict(err)
	if conflict && !tp.removed {
		tp.reread = rereadWanted
	}
	if _, ok := w.(*DeleteTopic); ok {
		tp.deleting = nil
		tp.deleteHeld = !conflict
	} else {
		pt := &tp.parts[p]
		pt.inflight, pt.sentBounces = nil, nil
		pt.held = !conflict
		tp.trim()
	}
	c.drop(tp)
	return nil
}

// isConflict reports whether err says the store holds something other than
// what the write expected. A fenced write (the /controller_epoch check
// failed) also looks like one; it is harmless (a Reread), and the loop
// stops feeding a deposed controller anyway.
func isConflict(err error) bool {
	return errors.Is(err, coord.ErrBadVersion) || errors.Is(err, coord.ErrNodeExists) || errors.Is(err, coord.ErrNoNode)
}

// inflight finds the topic and partition of w, which must be in flight.
func (c *Controller) inflight(w Write) (*topic, int, error) {
	if w == nil {
		return nil, 0, fmt.Errorf("%w: nil", ErrUnknownWrite)
	}
	tp := c.topics[w.TopicName()]
	if tp == nil {
		return nil, 0, fmt.Errorf("%w: %v (topic unknown)", ErrUnknownWrite, w)
	}
	p := -1
	switch w := w.(type) {
	case *DeleteTopic:
		if tp.deleting != nil && sameWrite(tp.deleting, w) {
			return tp, 0, nil
		}
	case *CreateState:
		p = int(w.Partition)
	case *UpdateState:
		p = int(w.Partition)
	}
	if p >= 0 && p < len(tp.parts) && tp.parts[p].inflight != nil && sameWrite(tp.parts[p].inflight, w) {
		return tp, p, nil
	}
	return nil, 0, fmt.Errorf("%w: %v", ErrUnknownWrite, w)
}

func writtenState(w Write) meta.PartitionState {
	switch w := w.(type) {
	case *CreateState:
		return w.State.Clone()
	case *UpdateState:
		return w.State.Clone()
	}
	panic(fmt.Sprintf("controller: %T is not a state write", w))
}

// Tick releases partitions and deletions held by a failed write, so that
// the next Ready retries them. The loop calls it on a timer (a second or so
// suits ZooKeeper); it is the only notion of time the controller has.
func (c *Controller) Tick() {
	for _, tp := range c.topics {
		tp.deleteHeld = false
		for p := range tp.parts {
			tp.parts[p].held = false
		}
	}
}

// Deposed reports whether a state written by a newer controller was read:
// this controller must stop (resign), and Ready hands out nothing more.
func (c *Controller) Deposed() bool { return c.deposed }

// Topic returns a copy of what the controller knows of a topic (states as
// read or as written by its applied writes), or nil.
func (c *Controller) Topic(name string) *meta.Topic {
	if tp := c.topics[name]; tp != nil && !tp.removed {
		return tp.t.Clone()
	}
	return nil
}

// Ready returns what to do now, and hands each action out once: a write
// returned is in flight until Applied or Failed, a Reread until SetTopic.
// Topics come in name order, partitions in index order. There is no
// Advance: a write's outcome is its acknowledgement. A loop that loses a
// batch (it crashed) loses the controller with it: the next controller
// starts from the store.
func (c *Controller) Ready() []Action {
	if c.deposed {
		return nil
	}
	var out []Action
	for _, name := range slices.Sorted(maps.Keys(c.topics)) {
		out = c.readyTopic(c.topics[name], out)
	}
	c.preferred = false
	return out
}

// SetShuttingDown names the brokers in controlled shutdown (each announced
// it before stopping; a broker that is gone is not listed): the partitions
// they lead go to other in-sync replicas, and they leave the ISRs, so that
// clients see their leaders move before the brokers stop, not a failure.
// The list replaces the previous one.
func (c *Controller) SetShuttingDown(ids []int32) {
	c.shutting = slices.Sorted(slices.Values(ids))
}

// ShuttingDownDone reports whether broker id, in controlled shutdown, leads
// no partition any more that another live in-sync replica could take, and
// is in no ISR with another live member: it may stop.
func (c *Controller) ShuttingDownDone(id int32) bool {
	for _, tp := range c.topics {
		if tp.removed || tp.t.Deleting {
			continue
		}
		for _, st := range tp.t.States {
			if st == nil || !slices.Contains(st.ISR, id) {
				continue
			}
			for _, r := range st.ISR {
				if r != id && c.isLive(r) && !slices.Contains(c.shutting, r) {
					return false // someone else could take its place
				}
			}
		}
	}
	return true
}

// SetResignations replaces the resignations (each a broker whose log of a
// partition failed while it was in the ISR, in a leader epoch; see
// meta.Resignation and core/replica's LogFailed). A resignation whose epoch
// is the partition's current one is handled as a bounce of that broker for
// that partition alone (Kafka takes the replicas of a failed log directory
// offline): it leaves the ISR, and if it led, the leadership goes to the
// first other live ISR member in assignment order, or, when there is none,
// back to it in a new epoch (unclean election aside, as for a bounce). The
// new epoch makes the resignation stale, so each is acted on once.
func (c *Controller) SetResignations(rs []meta.Resignation) {
	c.resigned = map[string]map[int32][]meta.Resignation{}
	for _, r := range rs {
		byPart := c.resigned[r.Topic]
		if byPart == nil {
			byPart = map[int32][]meta.Resignation{}
			c.resigned[r.Topic] = byPart
		}
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
}

// resignedFrom returns the brokers that resigned partition p of topic in
// epoch epoch and are still in the ISR, added to bounced (a new slice).
func (c *Controller) resignedFrom(topic string, p int, st *meta.PartitionState, bounced []int32) []int32 {
	rs := c.resigned[topic][int32(p)]
	if len(rs) == 0 {
		return bounced
	}
	out := slices.Clone(bounced)
	for _, r := range rs {
		if r.LeaderEpoch == st.LeaderEpoch && slices.Contains(st.ISR, r.Broker) && !slices.Contains(out, r.Broker) {
			out = append(out, r.Broker)
		}
	}
	return out
}

// PreferredElection asks the next Ready to move every partition's leadership
// to its preferred replica (the first of its assignment) where that one is
// live, in the ISR and not shutting down (Kafka's auto.leader.rebalance,
// which the loop runs every leader.imbalance.check.interval).
func (c *Controller) PreferredElection() { c.preferred = true }

func (c *Controller) readyTopic(tp *topic, out []Action) []Action {
	if tp.removed {
		return out
	}
	name := tp.t.Name
	if tp.reread == rereadWanted {
		out = append(out, &Reread{Topic: name})
		tp.reread = rereadAsked
	}
	if tp.reread != rereadNone || tp.deleting != nil {
		return out
	}
	if tp.t.Deleting {
		if !tp.deleteHeld && !tp.anyInflight() && c.deletionAcked(tp) {
			tp.deleting = &DeleteTopic{Name: name, ID: tp.t.ID}
			out = append(out, cloneWrite(tp.deleting))
		}
		return out
	}
	unclean := uncleanFor(tp.t.Configs, c.cfg.UncleanLeaderElection)
	for p := range tp.t.Assignment {
		pt := &tp.parts[p]
		if pt.inflight != nil || pt.held {
			continue
		}
		var w Write
		if st := tp.t.States[p]; st == nil {
			s, ok := initialState(tp.t.Assignment[p], c.isLive, c.cfg.ControllerEpoch)
			if !ok {
				continue // no live replica: wait (Kafka leaves it a NewPartition)
			}
			w = &CreateState{Topic: name, TopicID: tp.t.ID, Partition: int32(p), State: s}
		} else {
			bounced := c.resignedFrom(name, p, st, pt.bounced)
			s, ok := nextState(tp.t.Assignment[p], *st, c.isLive, bounced, unclean, c.cfg.ControllerEpoch,
				c.shutting, c.preferred)
			if !ok {
				pt.bounced = nil
				continue
			}
			w = &UpdateState{Topic: name, TopicID: tp.t.ID, Partition: int32(p), State: s, Version: st.Version}
		}
		pt.inflight, pt.sentBounces = w, slices.Clone(pt.bounced)
		out = append(out, cloneWrite(w))
	}
	return out
}

func (tp *topic) anyInflight() bool {
	return slices.ContainsFunc(tp.parts, func(p part) bool { return p.inflight != nil })
}

// deletionAcked reports whether every live broker with a replica of the
// topic acked its deletion. Replicas on dead brokers are not waited for.
func (c *Controller) deletionAcked(tp *topic) bool {
	for _, replicas := range tp.t.Assignment {
		for _, r := range replicas {
			if c.isLive(r) && !tp.acked[r] {
				return false
			}
		}
	}
	return true
}

func (c *Controller) isLive(id int32) bool {
	_, ok := c.live[id]
	return ok
}
