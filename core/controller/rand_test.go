package controller

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/meta"
)

// TestRandomCluster drives a controller through a random cluster life:
// brokers die, start and bounce; topics are created (with Assign), asked
// for deletion and acked; leaders change their own ISRs behind the
// controller's back; reads arrive late; writes run in any order, fail, or
// are applied and reported lost; the controller fails over. After every step
// it checks the invariants (see check*), and at the end, once faults stop,
// that the cluster settles where the rules say.
func TestRandomCluster(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { newSim(t, uint64(seed)).run(400) })
	}
}

type pkey struct {
	id [16]byte
	p  int32
}

// flight is an action handed out, and the epoch of the controller that
// handed it out.
type flight struct {
	a       Action
	ce      int32
	unclean bool // whether the topic allowed unclean elections then
}

type sim struct {
	t        *testing.T
	seed     uint64
	rng      *rand.Rand
	cfg      Config
	c        *Controller
	zxid     int64
	live     map[int32]meta.Broker
	store    map[string]*meta.Topic
	topicIDs byte
	inflight []flight
	reports  []report        // outcomes of writes done, not yet reported
	lagging  []*meta.Topic   // reads taken earlier, delivered late
	epochs   map[pkey]int32  // the highest leader epoch each partition had
	busy     map[string]bool // "<topic>/<p>" and "<topic>" with a write in flight
	faults   bool            // writes may fail; off while settling
	unclean  bool            // of the write being executed
	log      []string        // the steps so far, for failures
	// restarted are the replicas of brokers back from an unclean shutdown
	// that still resign (replica.Unclean's rule, which the sim plays for
	// the brokers), with the leader epoch of the first state each saw (-1
	// before one); resigns are the resignations as last fed.
	restarted map[restartKey]int32
	resigns   []meta.Resignation
}

// restartKey is a broker's replica of a partition of a topic incarnation.
type restartKey struct {
	broker int32
	id     [16]byte
	name   string
	p      int32
}

// topicNames are few, so that names are reused by new incarnations.
var topicNames = []string{"a", "b", "c", "d"}

const brokerCount = 5

func newSim(t *testing.T, seed uint64) *sim {
	s := &sim{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 7)), live: map[int32]meta.Broker{},
		store: map[string]*meta.Topic{}, epochs: map[pkey]int32{}, busy: map[string]bool{}, faults: true,
		restarted: map[restartKey]int32{}}
	s.cfg = Config{ControllerEpoch: 1, UncleanLeaderElection: seed%3 == 0}
	for id := int32(1); id <= brokerCount; id++ {
		if s.rng.IntN(4) != 0 {
			s.start(id)
		}
	}
	s.failover()
	return s
}

func (s *sim) fatalf(format string, args ...any) {
	s.t.Helper()
	tail := s.log[max(0, len(s.log)-60):]
	s.t.Fatalf("seed %d: %s\nlast steps:\n  %s", s.seed, fmt.Sprintf(format, args...), strings.Join(tail, "\n  "))
}

func (s *sim) logf(format string, args ...any) { s.log = append(s.log, fmt.Sprintf(format, args...)) }

func (s *sim) must(err error) {
	s.t.Helper()
	if err != nil {
		s.fatalf("%v", err)
	}
}

func (s *sim) start(id int32) {
	s.zxid++
	s.live[id] = meta.Broker{ID: id, Host: "h", Port: 9092, Epoch: s.zxid}
}

// failover starts a new controller (the next epoch) on what the store
// holds; the old one's writes are fenced from now on.
func (s *sim) failover() {
	if s.c != nil {
		s.cfg.ControllerEpoch++
	}
	c, err := New(s.cfg)
	s.must(err)
	// The old controller's loop took the late reads: they die with it.
	s.c, s.busy, s.lagging, s.reports = c, map[string]bool{}, nil, nil
	s.must(c.SetBrokers(maps.Clone(s.live)))
	for _, name := range slices.Sorted(maps.Keys(s.store)) {
		s.must(c.SetTopic(s.store[name].Clone()))
	}
	c.SetResignations(slices.Clone(s.resigns))
}

// restartUnclean is a broker back from an unclean shutdown: a new
// registration, and every replica it has resigns while the rule says so
// (see resign). The controller sees the bounce, or (the scenario that
// needs the resignations) it was cut off meanwhile and a new one starts.
func (s *sim) restartUnclean() {
	ids := s.liveIDs()
	if len(ids) == 0 {
		return
	}
	id := ids[s.rng.IntN(len(ids))]
	s.start(id)
	for _, name := range s.topics(nil) {
		t := s.store[name]
		for p, replicas := range t.Assignment {
			if slices.Contains(replicas, id) {
				s.restarted[restartKey{id, t.ID, name, int32(p)}] = -1
			}
		}
	}
	if s.rng.IntN(2) == 0 {
		s.logf("broker %d restarts uncleanly; the controller sees the bounce", id)
		s.must(s.c.SetBrokers(maps.Clone(s.live)))
		return
	}
	s.logf("broker %d restarts uncleanly while the controller is cut off; a new one starts", id)
	s.failover()
}

// resign plays the brokers' side of replica.Unclean on the store: a
// replica back from an unclean shutdown resigns in every term whose state
// names it in the ISR (of a partition with other replicas) under a live
// leader, until it is out of the ISR or leads alone in an epoch after the
// first it saw. The resignations go to the controller when they change.
func (s *sim) resign() {
	var rs []meta.Resignation
	for _, k := range slices.SortedFunc(maps.Keys(s.restarted), func(a, b restartKey) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	}) {
		t := s.store[k.name]
		_, live := s.live[k.broker]
		if t == nil || t.ID != k.id || !live {
			delete(s.restarted, k) // gone; a broker that died again restarts anew
			continue
		}
		st := t.States[k.p]
		if st == nil {
			continue
		}
		first := s.restarted[k]
		if first < 0 {
			first = st.LeaderEpoch
			s.restarted[k] = first
		}
		_, leaderLive := s.live[st.Leader]
		switch {
		case len(t.Assignment[k.p]) <= 1 || !slices.Contains(st.ISR, k.broker):
			delete(s.restarted, k)
		case st.Leader == k.broker && len(st.ISR) == 1 && st.LeaderEpoch > first:
			delete(s.restarted, k)
		case st.Leader != meta.NoLeader && leaderLive:
			rs = append(rs, meta.Resignation{Broker: k.broker, Topic: k.name, Partition: k.p, LeaderEpoch: st.LeaderEpoch})
		}
	}
	slices.SortFunc(rs, meta.Resignation.Compare)
	if !slices.Equal(rs, s.resigns) {
		s.logf("resignations %v", rs)
		s.resigns = rs
		s.c.SetResignations(slices.Clone(rs))
	}
}

func (s *sim) run(steps int) {
	for range steps {
		s.step()
		s.resign()
		s.ready()
		s.checkStore()
	}
	s.settle()
}

func (s *sim) liveIDs() []int32 { return slices.Sorted(maps.Keys(s.live)) }

func (s *sim) pick(names []string) string { return names[s.rng.IntN(len(names))] }

func (s *sim) step() {
	switch n := s.rng.IntN(100); {
	case n < 6: // a broker dies
		if ids := s.liveIDs(); len(ids) > 0 {
			id := ids[s.rng.IntN(len(ids))]
			delete(s.live, id)
			s.logf("broker %d dies", id)
			s.must(s.c.SetBrokers(maps.Clone(s.live)))
		}
	case n < 12: // a broker starts
		id := int32(1 + s.rng.IntN(brokerCount))
		if _, ok := s.live[id]; !ok {
			s.start(id)
			s.logf("broker %d starts", id)
			s.must(s.c.SetBrokers(maps.Clone(s.live)))
		}
	case n < 15: // a broker bounces
		if ids := s.liveIDs(); len(ids) > 0 {
			id := ids[s.rng.IntN(len(ids))]
			s.start(id)
			s.logf("broker %d bounces", id)
			s.must(s.c.SetBrokers(maps.Clone(s.live)))
		}
	case n < 17:
		s.restartUnclean()
	case n < 20:
		s.createTopic()
	case n < 23:
		if names := s.topics(func(t *meta.Topic) bool { return !t.Deleting }); len(names) > 0 {
			name := s.pick(names)
			s.store[name].Deleting = true
			s.logf("deletion of %s asked", name)
			s.must(s.c.SetTopic(s.store[name].Clone()))
		}
	case n < 28:
		if names := s.topics(func(t *meta.Topic) bool { return t.Deleting }); len(names) > 0 {
			name := s.pick(names)
			if b := s.liveReplicas(s.store[name]); len(b) > 0 {
				id := b[s.rng.IntN(len(b))]
				s.logf("broker %d acks deletion of %s", id, name)
				s.c.DeletionAcked(name, id)
			}
		}
	case n < 36:
		s.leaderISRChange()
	case n < 40: // a watch fires: a fresh read
		if names := s.topics(nil); len(names) > 0 {
			name := s.pick(names)
			s.deliverLagging(name)
			s.logf("read of %s", name)
			s.must(s.c.SetTopic(s.store[name].Clone()))
		}
	case n < 44: // a read taken now arrives later
		if names := s.topics(nil); len(names) > 0 {
			s.lagging = append(s.lagging, s.store[s.pick(names)].Clone())
		}
	case n < 47:
		if len(s.lagging) > 0 {
			s.deliverLagging(s.lagging[s.rng.IntN(len(s.lagging))].Name)
		}
	case n < 48:
		s.addPartition()
	case n < 49:
		if names := s.topics(nil); len(names) > 0 {
			name := s.pick(names)
			t := s.store[name]
			if t.Configs == nil {
				t.Configs = map[string]string{}
			}
			t.Configs[UncleanConfig] = []string{"true", "false", ""}[s.rng.IntN(3)]
			s.logf("%s: unclean %q", name, t.Configs[UncleanConfig])
			s.must(s.c.SetTopic(t.Clone()))
		}
	case n < 51:
		s.logf("tick")
		s.c.Tick()
	case n < 52:
		s.logf("controller fails over")
		s.failover()
	case n < 58:
		if len(s.reports) > 0 {
			i := s.rng.IntN(len(s.reports))
			r := s.reports[i]
			s.reports = slices.Delete(s.reports, i, i+1)
			s.report(r)
		}
	default:
		if len(s.inflight) > 0 {
			s.execute(s.rng.IntN(len(s.inflight)))
		}
	}
}

// deliverLagging feeds the late reads of name, oldest first: the loop
// feeds the reads of one topic in the order it took them (SetTopic's
// contract), though they may come after outcomes of writes applied since.
// A late read of a topic that is gone is still a read of it.
func (s *sim) deliverLagging(name string) {
	keep := s.lagging[:0]
	for _, t := range s.lagging {
		if t.Name != name {
			keep = append(keep, t)
			continue
		}
		s.logf("late read of %s (id %d)", name, t.ID[0])
		s.must(s.c.SetTopic(t))
	}
	s.lagging = keep
}

// topics are the store's topic names (that match keep, if not nil), sorted.
func (s *sim) topics(keep func(*meta.Topic) bool) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(s.store)) {
		if keep == nil || keep(s.store[name]) {
			out = append(out, name)
		}
	}
	return out
}

func (s *sim) liveReplicas(t *meta.Topic) []int32 {
	var out []int32
	for _, replicas := range t.Assignment {
		for _, r := range replicas {
			if _, ok := s.live[r]; ok && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

func (s *sim) createTopic() {
	name := s.pick(topicNames)
	ids := s.liveIDs()
	if s.store[name] != nil || len(ids) == 0 {
		return
	}
	rf := int16(1 + s.rng.IntN(min(3, len(ids))))
	asg, err := Assign(ids, int32(1+s.rng.IntN(3)), rf, s.rng)
	s.must(err)
	s.topicIDs++
	t := &meta.Topic{Name: name, ID: [16]byte{s.topicIDs}, Assignment: asg, States: make([]*meta.PartitionState, len(asg))}
	s.store[name] = t
	s.logf("topic %s created: %v", name, asg)
	s.must(s.c.SetTopic(t.Clone()))
}

// addPartition adds a partition to a topic (CreatePartitions), placed
// on the live brokers with the topic's replication factor.
func (s *sim) addPartition() {
	names := s.topics(func(t *meta.Topic) bool { return !t.Deleting })
	if len(names) == 0 {
		return
	}
	t := s.store[s.pick(names)]
	rf := len(t.Assignment[0])
	if len(s.live) < rf {
		return
	}
	asg, err := Assign(s.liveIDs(), 1, int16(rf), s.rng)
	s.must(err)
	t.Assignment = append(t.Assignment, asg[0])
	t.States = append(t.States, nil)
	s.logf("%s: partition %d added on %v", t.Name, len(t.Assignment)-1, asg[0])
	s.must(s.c.SetTopic(t.Clone()))
}

// leaderISRChange is a live leader shrinking its ISR (a follower fell
// behind) or expanding it (a live follower caught up), with the leader
// epoch kept and the version moved, as Kafka's leaders did before 2.7.
func (s *sim) leaderISRChange() {
	names := s.topics(func(t *meta.Topic) bool { return !t.Deleting })
	if len(names) == 0 {
		return
	}
	t := s.store[s.pick(names)]
	p := s.rng.IntN(len(t.Assignment))
	st := t.States[p]
	if st == nil || st.Leader == meta.NoLeader {
		return
	}
	if _, ok := s.live[st.Leader]; !ok {
		return
	}
	isr := slices.Clone(st.ISR)
	if s.rng.IntN(2) == 0 {
		isr = slices.DeleteFunc(isr, func(r int32) bool { return r != st.Leader && s.rng.IntN(2) == 0 })
	} else {
		for _, r := range t.Assignment[p] {
			if _, ok := s.live[r]; ok && !slices.Contains(isr, r) {
				isr = append(isr, r)
				break
			}
		}
	}
	if slices.Equal(isr, st.ISR) {
		return
	}
	next := st.Clone()
	next.ISR, next.Version = isr, st.Version+1
	s.logf("leader %d of %s/%d sets ISR %v (version %d)", st.Leader, t.Name, p, isr, next.Version)
	s.setState(t, p, &next)
	// The controller hears of it, later (Kafka's ISR change notification,
	// or a watch on the state record).
	s.lagging = append(s.lagging, t.Clone())
}

// setState changes a state in the store, checking the per-partition rules
// every writer keeps.
func (s *sim) setState(t *meta.Topic, p int, st *meta.PartitionState) {
	s.t.Helper()
	k := pkey{t.ID, int32(p)}
	if e, ok := s.epochs[k]; ok && st.LeaderEpoch < e {
		s.fatalf("%s/%d: leader epoch went from %d to %d", t.Name, p, e, st.LeaderEpoch)
	}
	s.epochs[k] = st.LeaderEpoch
	t.States[p] = st
}

// ready collects Ready's actions and checks each as it is handed out.
func (s *sim) ready() {
	for _, a := range s.c.Ready() {
		s.logf("ready: %v", a)
		s.checkIssued(a)
		f := flight{a: a, ce: s.cfg.ControllerEpoch}
		if v := s.c.Topic(actionTopic(a)); v != nil {
			f.unclean = uncleanFor(v.Configs, s.cfg.UncleanLeaderElection)
		}
		s.inflight = append(s.inflight, f)
	}
}

func actionTopic(a Action) string {
	if r, ok := a.(*Reread); ok {
		return r.Topic
	}
	return a.(Write).TopicName()
}

func busyKey(name string, p int32) string { return fmt.Sprintf("%s/%d", name, p) }

// checkIssued asserts what must hold of an action when it is handed out:
// one write per partition in flight (and none beside a deletion), and the
// state rules against the controller's own view.
func (s *sim) checkIssued(a Action) {
	s.t.Helper()
	var name string
	var p int32
	var st meta.PartitionState
	switch a := a.(type) {
	case *Reread:
		return
	case *DeleteTopic:
		for k := range s.busy {
			if k == a.Name || strings.HasPrefix(k, a.Name+"/") {
				s.fatalf("%v while %s is in flight", a, k)
			}
		}
		s.busy[a.Name] = true
		return
	case *CreateState:
		name, p, st = a.Topic, a.Partition, a.State
	case *UpdateState:
		name, p, st = a.Topic, a.Partition, a.State
	}
	k := busyKey(name, p)
	if s.busy[k] || s.busy[name] {
		s.fatalf("%v while a write of %s is in flight", a, k)
	}
	s.busy[k] = true
	s.checkState(name, p, st)
	if st.ControllerEpoch != s.cfg.ControllerEpoch || st.Version != -1 {
		s.fatalf("%v: controller epoch %d, version %d", a, st.ControllerEpoch, st.Version)
	}
	if st.Leader != meta.NoLeader {
		if _, ok := s.live[st.Leader]; !ok {
			s.fatalf("%v: the new leader is not live", a)
		}
	}
	view := s.c.Topic(name)
	switch a := a.(type) {
	case *CreateState:
		var want []int32
		for _, r := range view.Assignment[p] {
			if _, ok := s.live[r]; ok {
				want = append(want, r)
			}
		}
		if st.LeaderEpoch != 0 || !slices.Equal(st.ISR, want) || st.Leader != want[0] {
			s.fatalf("%v: want leader %d, ISR %v, epoch 0", a, want[0], want)
		}
	case *UpdateState:
		old := view.States[p]
		if old == nil || old.Version != a.Version || st.LeaderEpoch != old.LeaderEpoch+1 {
			s.fatalf("%v over the controller's own %+v", a, old)
		}
		s.checkStep(uncleanFor(view.Configs, s.cfg.UncleanLeaderElection), old, &st, a)
		s.checkResigned(name, p, old, &st, a)
	}
}

// checkResigned asserts that a write over old answers a resignation of
// old's epoch by an in-sync replica: it leaves the ISR, unless it is left
// alone in it, and it leads only when no other in-sync replica that did
// not resign too was live.
func (s *sim) checkResigned(name string, p int32, old, st *meta.PartitionState, a Action) {
	s.t.Helper()
	for _, r := range s.resigns {
		if r.Topic != name || r.Partition != p || r.LeaderEpoch != old.LeaderEpoch || !slices.Contains(old.ISR, r.Broker) {
			continue
		}
		if slices.Contains(st.ISR, r.Broker) && len(st.ISR) > 1 {
			s.fatalf("%v: broker %d resigned in epoch %d and stays in the ISR with others", a, r.Broker, r.LeaderEpoch)
		}
		other := slices.ContainsFunc(old.ISR, func(id int32) bool {
			_, ok := s.live[id]
			return id != r.Broker && ok && !slices.Contains(s.resigns,
				meta.Resignation{Broker: id, Topic: name, Partition: p, LeaderEpoch: old.LeaderEpoch})
		})
		if st.Leader == r.Broker && other {
			s.fatalf("%v: broker %d resigned in epoch %d and leads, with another in-sync replica live", a, r.Broker, r.LeaderEpoch)
		}
	}
}

// checkStep asserts the election rules of one controller write from old
// to st: with unclean elections off, a new leader comes from the old ISR
// and the ISR only shrinks; with them on, a leader from outside the ISR
// leads alone.
func (s *sim) checkStep(unclean bool, old, st *meta.PartitionState, a Action) {
	s.t.Helper()
	for _, r := range st.ISR {
		if !slices.Contains(old.ISR, r) && !(unclean && slices.Equal(st.ISR, []int32{st.Leader})) {
			s.fatalf("%v: ISR %v grew from %v", a, st.ISR, old.ISR)
		}
	}
	if st.Leader != meta.NoLeader && st.Leader != old.Leader && !slices.Contains(old.ISR, st.Leader) && !unclean {
		s.fatalf("%v: leader %d is not from the ISR %v, and unclean election is off", a, st.Leader, old.ISR)
	}
}

// checkState asserts what every state must be: a non-empty ISR, the leader
// in it or none.
func (s *sim) checkState(name string, p int32, st meta.PartitionState) {
	s.t.Helper()
	if len(st.ISR) == 0 {
		s.fatalf("%s/%d: empty ISR", name, p)
	}
	if st.Leader != meta.NoLeader && !slices.Contains(st.ISR, st.Leader) {
		s.fatalf("%s/%d: leader %d not in ISR %v", name, p, st.Leader, st.ISR)
	}
}

func (s *sim) checkStore() {
	s.t.Helper()
	for name, t := range s.store {
		for p, st := range t.States {
			if st != nil {
				s.checkState(name, int32(p), *st)
			}
		}
	}
}

// execute runs in-flight action i against the store and reports its
// outcome to the controller that handed it out (if it still runs).
func (s *sim) execute(i int) {
	f := s.inflight[i]
	s.inflight = slices.Delete(s.inflight, i, i+1)
	if f.ce != s.cfg.ControllerEpoch {
		return // from a deposed controller: fenced
	}
	if r, ok := f.a.(*Reread); ok {
		s.deliverLagging(r.Topic)
		if t := s.store[r.Topic]; t != nil {
			s.logf("reread of %s answered", r.Topic)
			s.must(s.c.SetTopic(t.Clone()))
		} else {
			s.logf("reread of %s: gone", r.Topic)
			s.c.RemoveTopic(r.Topic)
		}
		return
	}
	w := f.a.(Write)
	s.unclean = f.unclean
	lost := fmt.Errorf("multi: %w", coord.ErrConnectionLoss)
	var r report
	switch n := s.rng.IntN(20); {
	case s.faults && n < 2:
		s.logf("%v: lost, not applied", w)
		r = report{f: f, err: lost}
	case s.faults && n < 3:
		v, err := s.write(w)
		if err == nil {
			s.logf("%v: applied, but reported lost", w)
			err = lost
		}
		r = report{f: f, v: v, err: err}
	default:
		v, err := s.write(w)
		s.logf("%v: applied (version %d) or failed (%v)", w, v, err)
		r = report{f: f, v: v, err: err}
	}
	if s.faults && s.rng.IntN(4) == 0 {
		s.reports = append(s.reports, r) // done, but reported later
		return
	}
	s.report(r)
}

// report is a write's outcome, for the controller that handed it out.
type report struct {
	f   flight
	v   int32
	err error
}

func (s *sim) report(r report) {
	if r.f.ce != s.cfg.ControllerEpoch {
		return // that controller is gone
	}
	w := r.f.a.(Write)
	s.settled(w)
	if r.err != nil {
		s.logf("report: %v failed: %v", w, r.err)
		s.outcome(w, s.c.Failed(w, r.err))
		return
	}
	s.logf("report: %v applied, version %d", w, r.v)
	s.outcome(w, s.c.Applied(w, r.v))
}

// outcome checks what Applied or Failed returned: the write was in flight.
func (s *sim) outcome(w Write, err error) {
	s.t.Helper()
	if err != nil {
		s.fatalf("outcome of %v: %v", w, err)
	}
}

// settled clears the in-flight marks of w.
func (s *sim) settled(w Write) {
	switch w := w.(type) {
	case *DeleteTopic:
		delete(s.busy, w.Name)
	case *CreateState:
		delete(s.busy, busyKey(w.Topic, w.Partition))
	case *UpdateState:
		delete(s.busy, busyKey(w.Topic, w.Partition))
	}
}

// write applies w to the store as ZooKeeper would: compare-and-set on the
// version, node-exists on a second create.
func (s *sim) write(w Write) (int32, error) {
	t := s.store[w.TopicName()]
	if t == nil {
		return 0, coord.ErrNoNode
	}
	switch w := w.(type) {
	case *CreateState:
		if int(w.Partition) >= len(t.States) {
			return 0, coord.ErrNoNode
		}
		if t.States[w.Partition] != nil {
			return 0, coord.ErrNodeExists
		}
		st := w.State.Clone()
		st.Version = 0
		s.setState(t, int(w.Partition), &st)
		return 0, nil
	case *UpdateState:
		if int(w.Partition) >= len(t.States) || t.States[w.Partition] == nil {
			return 0, coord.ErrNoNode
		}
		old := t.States[w.Partition]
		if old.Version != w.Version {
			return 0, fmt.Errorf("multi: %w", coord.ErrBadVersion)
		}
		st := w.State.Clone()
		st.Version = old.Version + 1
		if st.LeaderEpoch <= old.LeaderEpoch {
			s.fatalf("%v over %+v: the leader epoch does not grow", w, old)
		}
		s.checkStep(s.unclean, old, &st, w)
		s.setState(t, int(w.Partition), &st)
		return st.Version, nil
	case *DeleteTopic:
		if t.ID != w.ID {
			return 0, coord.ErrNoNode // the loop's topic-ID check: that topic is gone
		}
		if !t.Deleting {
			s.fatalf("%v of a topic not being deleted", w)
		}
		delete(s.store, w.Name)
		return 0, nil
	}
	panic(w)
}

// settle stops the faults, lets every live replica ack every deletion and
// runs the loop until the controller has nothing more to do, then checks
// that the cluster is where the rules say, and that a new controller
// starting on it would write nothing.
func (s *sim) settle() {
	s.faults = false
	for _, name := range s.topics(nil) {
		s.deliverLagging(name)
		s.must(s.c.SetTopic(s.store[name].Clone()))
	}
	for len(s.lagging) > 0 {
		s.deliverLagging(s.lagging[0].Name) // of topics gone since
	}
	for _, r := range s.reports {
		s.report(r)
	}
	s.reports = nil
	for round := 0; ; round++ {
		if round > 50 {
			s.fatalf("still handing out actions after 50 rounds without faults")
		}
		for _, name := range s.topics(func(t *meta.Topic) bool { return t.Deleting }) {
			for _, r := range s.liveReplicas(s.store[name]) {
				s.c.DeletionAcked(name, r)
			}
		}
		s.c.Tick()
		s.resign()
		s.ready()
		if len(s.inflight) == 0 && len(s.reports) == 0 {
			break
		}
		for len(s.inflight) > 0 {
			s.execute(0)
		}
	}
	for _, name := range s.topics(nil) {
		t := s.store[name]
		if t.Deleting {
			s.fatalf("%s: still being deleted, every live replica acked", name)
		}
		view := s.c.Topic(name)
		if view == nil {
			s.fatalf("%s: unknown to the controller", name)
		}
		unclean := uncleanFor(t.Configs, s.cfg.UncleanLeaderElection)
		for p, st := range t.States {
			s.checkSettled(t, p, st, unclean)
			if v := view.States[p]; (v == nil) != (st == nil) || v != nil && (!v.Equal(*st) || v.Version != st.Version) {
				s.fatalf("%s/%d: the controller has %+v, the store %+v", name, p, v, st)
			}
		}
	}
	for k := range s.restarted {
		s.fatalf("broker %d back from an unclean shutdown still resigns %s/%d: %+v", k.broker, k.name, k.p,
			s.store[k.name].States[k.p])
	}
	s.logf("a new controller starts on the settled cluster")
	s.failover()
	if got := s.c.Ready(); len(got) != 0 {
		s.fatalf("a controller starting on a settled cluster hands out %v", got)
	}
}

// checkSettled asserts the state rules say leave st alone: a live leader
// with a live ISR, or no leader only when the ISR is one dead broker (and,
// with unclean elections, no replica is live); a state as soon as a replica
// is live.
func (s *sim) checkSettled(t *meta.Topic, p int, st *meta.PartitionState, unclean bool) {
	s.t.Helper()
	isLive := func(id int32) bool { _, ok := s.live[id]; return ok }
	anyLive := slices.ContainsFunc(t.Assignment[p], isLive)
	switch {
	case st == nil:
		if anyLive {
			s.fatalf("%s/%d: no state, with a live replica", t.Name, p)
		}
	case st.Leader != meta.NoLeader:
		if !isLive(st.Leader) || !slices.ContainsFunc(st.ISR, isLive) || slices.ContainsFunc(st.ISR, func(r int32) bool {
			return !isLive(r)
		}) {
			s.fatalf("%s/%d: settled at %+v, live %v", t.Name, p, st, s.liveIDs())
		}
	default:
		if len(st.ISR) != 1 || isLive(st.ISR[0]) || unclean && anyLive {
			s.fatalf("%s/%d: no leader with %+v, live %v, unclean %v", t.Name, p, st, s.liveIDs(), unclean)
		}
	}
}
