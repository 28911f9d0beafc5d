package replica

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/meta"
)

// A simulated partition of three replicas driven only through the
// Replica values: logs and epoch caches are slices, the store is one
// record changed by compare-and-set, the controller elects from the ISR
// (Kafka's clean election, core/controller's rules), and every event is
// chosen at random: appends, follower fetches, epoch queries, time passing,
// brokers dying and coming back (their logs intact), fsyncs, and logs
// failing: a failed log may lose what its last fsync did not cover, which a
// follower's recovery cuts at once and a leader's only once its resignation
// ended the term (LogFailed), as the node does. Power cuts: a broker loses
// what its last fsync did not cover and comes back unclean (Unclean), often
// before the controller has reacted to its death, so that the record still
// names it leader, or in the ISR, in the epoch it held; it is cut only
// while another live in-sync replica that is not unclean holds every
// committed record (two copies lost at once are outside the guarantee).
// The invariants checked after every event:
//
//   - a leader is in its maximal ISR, and its high watermark never goes down
//     within its term and never passes its log end;
//   - a record below any high watermark a leader published (committed) is
//     never lost nor changed: every later leader holds it, byte for byte;
//   - no two brokers lead the same epoch.

type entry struct {
	epoch int32
	id    int // unique per record appended
}

type simBroker struct {
	id     int32
	alive  bool
	log    []entry
	epochs []EpochStart // the leader-epoch cache
	hw     int64        // checkpointed
	r      *Replica
	// flushed: what the last fsync covered; failed: the log failed and
	// its recovery (a cut to flushed) is held until the term ends.
	flushed int64
	failed  bool
}

func (b *simBroker) leo() int64 { return int64(len(b.log)) }

// startEpoch adds (epoch, start) to the cache if it is newer than the last.
func (b *simBroker) startEpoch(e EpochStart) {
	if n := len(b.epochs); n == 0 || b.epochs[n-1].Epoch < e.Epoch {
		b.epochs = append(b.epochs, e)
	}
}

// endOffsetFor is OffsetForLeaderEpoch on this broker's log.
func (b *simBroker) endOffsetFor(epoch int32) EpochEnd {
	if len(b.epochs) == 0 || epoch < 0 {
		return Undefined
	}
	if epoch < b.epochs[0].Epoch {
		return EpochEnd{Epoch: epoch, EndOffset: b.epochs[0].StartOffset}
	}
	for i := len(b.epochs) - 1; i >= 0; i-- {
		if b.epochs[i].Epoch <= epoch {
			if i == len(b.epochs)-1 {
				return EpochEnd{Epoch: b.epochs[i].Epoch, EndOffset: b.leo()}
			}
			return EpochEnd{Epoch: b.epochs[i].Epoch, EndOffset: b.epochs[i+1].StartOffset}
		}
	}
	return Undefined
}

func (b *simBroker) latestEpoch() int32 {
	if len(b.epochs) == 0 {
		return -1
	}
	return b.epochs[len(b.epochs)-1].Epoch
}

func (b *simBroker) truncate(to int64) {
	if to < b.leo() {
		b.log = b.log[:to]
	}
	for len(b.epochs) > 0 && b.epochs[len(b.epochs)-1].StartOffset >= to && b.epochs[len(b.epochs)-1].StartOffset > 0 {
		b.epochs = b.epochs[:len(b.epochs)-1]
	}
	b.hw = min(b.hw, b.leo())
	b.flushed = min(b.flushed, b.leo())
}

// recover is a failed log's recovery in place: back to its last fsync. A
// broker alone in the ISR holds the only copy the high watermark counts:
// what it had not fsynced is lost, as in a power cut of a single node, and
// is committed no more. Any other cut of a committed record is a bug the
// checks catch.
func (s *sim) recover(b *simBroker) {
	if slices.Equal(s.rec.ISR, []int32{b.id}) && int64(len(s.committed)) > b.flushed {
		s.logf("the sole in-sync copy loses committed [%d, %d)", b.flushed, len(s.committed))
		s.committed = s.committed[:b.flushed]
	}
	b.truncate(b.flushed)
	b.failed = false
}

type sim struct {
	t        *testing.T
	rnd      *rand.Rand
	now      time.Time
	replicas []int32
	brokers  map[int32]*simBroker
	rec      meta.PartitionState
	nextID   int
	// committed[o] is the record at offset o once a leader published a
	// high watermark above o.
	committed []entry
	// epochLeader: who led each epoch.
	epochLeader map[int32]int32
	// termHW: the high watermark the leader of the current epoch published.
	termHW map[int32]int64
	// resignations wait for the controller: (broker, epoch).
	resignations [][2]int32
	// handovers counts leaderships moved by a resignation; uncleanLeads
	// the leaders back from a power cut that found the record still
	// naming them leader in their old epoch.
	handovers, uncleanLeads int
	trace                   []string
}

func newSim(t *testing.T, seed uint64) *sim {
	s := &sim{t: t, rnd: rand.New(rand.NewPCG(seed, seed^0x5eed)), now: t0, replicas: []int32{1, 2, 3},
		brokers: map[int32]*simBroker{}, epochLeader: map[int32]int32{}, termHW: map[int32]int64{}}
	s.rec = meta.PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2, 3}, Version: 0}
	for _, id := range s.replicas {
		b := &simBroker{id: id, alive: true}
		b.r = New(Config{Self: id, LagTimeMax: 30 * time.Second}, 0, 0)
		s.brokers[id] = b
	}
	s.publish()
	return s
}

func (s *sim) logf(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%v ", s.now.Sub(t0))+fmt.Sprintf(format, args...))
	if len(s.trace) > 60 {
		s.trace = s.trace[1:]
	}
}

func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	for _, l := range s.trace {
		s.t.Log(l)
	}
	s.t.Fatalf(format, args...)
}

// publish delivers the record to every live broker.
func (s *sim) publish() {
	for _, id := range s.replicas {
		b := s.brokers[id]
		if b.alive {
			st := s.rec.Clone()
			if b.failed && b.r.MayRecover(s.replicas, &st, b.latestEpoch()) {
				s.recover(b)
				s.logf("b%d recovers (end %d)", id, b.leo())
			}
			b.r.SetState(s.now, s.replicas, &st, b.leo())
			s.stillFailed(b)
		}
	}
	s.settle()
}

// settle executes every broker's Ready until none has anything to do.
func (s *sim) settle() {
	for range 20 {
		busy := false
		for _, id := range s.replicas {
			b := s.brokers[id]
			if !b.alive {
				continue
			}
			rd := b.r.Ready()
			if rd.Empty() {
				continue
			}
			busy = true
			if rd.HWChanged {
				b.hw = rd.HighWatermark
			}
			if rd.StartEpoch != nil {
				b.startEpoch(*rd.StartEpoch)
			}
			if rd.Truncate != nil {
				b.truncate(*rd.Truncate)
				s.logf("b%d truncates to %d", id, *rd.Truncate)
				b.r.Truncated(b.leo())
			}
			if rd.Reset != nil {
				s.fail("reset to %d: the simulation has no retention", *rd.Reset)
			}
			if rd.Resign != nil {
				s.logf("b%d resigns epoch %d", id, *rd.Resign)
				s.resignations = append(s.resignations, [2]int32{id, *rd.Resign})
			}
			if rd.Propose != nil {
				p := rd.Propose
				if p.Version == s.rec.Version && s.rec.Leader == id && s.rec.LeaderEpoch == p.State.LeaderEpoch {
					s.rec = p.State.Clone()
					s.rec.Version = p.Version + 1
					s.logf("b%d ISR -> %v (v%d)", id, s.rec.ISR, s.rec.Version)
					s.publish()
				} else {
					b.r.ProposalFailed()
				}
			}
		}
		if !busy {
			return
		}
	}
}

// control is the controller: a dead leader is replaced by the first live
// ISR member in assignment order, dead brokers leave the ISR (but the last
// member stays), each change bumping the epoch; a dead partition gets a
// leader again when an ISR member returns.
func (s *sim) control() {
	st := s.rec
	leader, isr := s.elect(func(id int32) bool { return s.brokers[id].alive })
	if len(isr) == 0 {
		isr = []int32{st.ISR[0]}
		if slices.Contains(st.ISR, st.Leader) {
			isr = []int32{st.Leader}
		}
	}
	if leader == st.Leader && slices.Equal(isr, st.ISR) {
		return
	}
	s.rec = meta.PartitionState{Leader: leader, LeaderEpoch: st.LeaderEpoch + 1, ISR: isr, Version: st.Version + 1}
	s.logf("controller: leader %d epoch %d ISR %v", leader, s.rec.LeaderEpoch, isr)
	s.publish()
}

// stillFailed is the node's step after a state record reached a broker
// whose log is failed: an in-sync replica resigns (again, in a new term),
// any other recovers in place at once.
func (s *sim) stillFailed(b *simBroker) {
	switch {
	case !b.failed:
	case b.r.HoldRecovery():
		b.r.LogFailed()
	default:
		s.recover(b)
		b.r.Truncated(b.leo())
		s.logf("b%d recovers in place (end %d)", b.id, b.leo())
	}
}

// resignAll answers every pending resignation.
func (s *sim) resignAll() {
	rs := s.resignations
	s.resignations = nil
	for _, r := range rs {
		s.resign(r[0], r[1])
	}
}

// resign is the controller's answer to a resignation (core/controller
// handles it as a bounce of the broker): it leaves the ISR, and a leader
// hands the leadership to the first other live ISR member in assignment
// order; with none, the partition waits for another member that is dead
// (no leader, the ISR that member), or with none either, it leads again,
// alone in the ISR, in a new epoch.
func (s *sim) resign(id, epoch int32) {
	st := s.rec
	if st.LeaderEpoch != epoch || !slices.Contains(st.ISR, id) {
		return
	}
	leader, isr := s.elect(func(r int32) bool { return r != id && s.brokers[r].alive })
	if leader == meta.NoLeader {
		leader, isr = id, []int32{id}
		if i := slices.IndexFunc(st.ISR, func(r int32) bool { return r != id }); i >= 0 {
			leader, isr = meta.NoLeader, []int32{st.ISR[i]}
		}
	}
	if st.Leader == id && leader != id {
		s.handovers++
	}
	s.rec = meta.PartitionState{Leader: leader, LeaderEpoch: epoch + 1, ISR: isr, Version: st.Version + 1}
	s.logf("controller: b%d resigned: leader %d epoch %d ISR %v", id, leader, s.rec.LeaderEpoch, isr)
	s.publish()
}

// elect is the record's leader if it counts as live, else the first replica
// in assignment order that does and is in the ISR (none: NoLeader), with
// the ISR's members that count as live.
func (s *sim) elect(live func(int32) bool) (leader int32, isr []int32) {
	st := s.rec
	leader = st.Leader
	if leader == meta.NoLeader || !live(leader) {
		leader = meta.NoLeader
		for _, r := range s.replicas {
			if live(r) && slices.Contains(st.ISR, r) {
				leader = r
				break
			}
		}
	}
	for _, r := range st.ISR {
		if live(r) {
			isr = append(isr, r)
		}
	}
	return leader, isr
}

func (s *sim) leader() *simBroker {
	if s.rec.Leader == meta.NoLeader {
		return nil
	}
	b := s.brokers[s.rec.Leader]
	if !b.alive || b.r.Role() != Leader || b.r.Resigned() {
		return nil // a resigned leader serves nothing: no produce, fetch or epoch query (the node refuses them)
	}
	return b
}

func (s *sim) step() {
	switch n := s.rnd.IntN(100); {
	case n < 30: // append
		if l := s.leader(); l != nil {
			k := 1 + s.rnd.IntN(3)
			for range k {
				s.nextID++
				l.log = append(l.log, entry{epoch: l.r.Epoch(), id: s.nextID})
			}
			l.r.Appended(l.leo())
			s.logf("b%d appends %d (end %d)", l.id, k, l.leo())
		}
	case n < 72: // a follower fetches or asks for its epoch's end
		f := s.brokers[s.replicas[s.rnd.IntN(3)]]
		l := s.leader()
		if !f.alive || l == nil || f.r.Role() != Follower || f.r.Leader() != l.id || f.r.Epoch() != l.r.Epoch() {
			return
		}
		switch f.r.follow {
		case awaitingEpochEnd:
			ans := l.endOffsetFor(f.latestEpoch())
			local := Undefined
			if ans.Epoch >= 0 {
				local = f.endOffsetFor(ans.Epoch)
			}
			s.logf("b%d asks b%d for epoch %d: %+v (local %+v)", f.id, l.id, f.latestEpoch(), ans, local)
			f.r.EpochEnd(ans, local)
		case fetching:
			off := f.leo()
			if err := l.r.FollowerFetch(s.now, f.id, off); err != nil {
				f.r.OutOfRange(0)
				s.logf("b%d fetch at %d: %v", f.id, off, err)
				break
			}
			end := min(l.leo(), off+int64(1+s.rnd.IntN(4)))
			for _, e := range l.log[off:end] {
				if e.epoch > f.latestEpoch() {
					f.startEpoch(EpochStart{Epoch: e.epoch, StartOffset: f.leo()})
				}
				f.log = append(f.log, e)
			}
			s.settle() // the leader's HW moved with the fetch
			f.r.Appended(f.leo())
			f.r.LeaderHighWatermark(l.r.HighWatermark())
			s.logf("b%d fetched [%d, %d) from b%d", f.id, off, end, l.id)
		}
	case n < 78: // a broker fsyncs its log
		if b := s.brokers[s.replicas[s.rnd.IntN(3)]]; b.alive && !b.failed {
			b.flushed = b.leo()
		}
	case n < 83: // a broker's log fails
		b := s.brokers[s.replicas[s.rnd.IntN(3)]]
		if !b.alive || b.failed {
			break
		}
		b.failed = true
		s.logf("b%d's log fails (end %d, flushed %d, %v)", b.id, b.leo(), b.flushed, b.r.Role())
		s.stillFailed(b)
	case n < 85: // the controller handles the resignations
		s.resignAll()
	case n < 88: // time passes
		s.now = s.now.Add(time.Duration(s.rnd.IntN(12)) * time.Second)
		for _, id := range s.replicas {
			if b := s.brokers[id]; b.alive {
				b.r.Tick(s.now)
			}
		}
	case n < 94: // a broker dies
		b := s.brokers[s.replicas[s.rnd.IntN(3)]]
		if b.alive {
			b.alive = false
			s.logf("b%d dies", b.id)
			// A death is noticed a session timeout later: the controller
			// has read the resignations written meanwhile.
			s.resignAll()
			s.control()
		}
	case n < 97: // a broker's power is cut, and it comes back at once
		s.powerCut(s.brokers[s.replicas[s.rnd.IntN(3)]])
	default: // a broker comes back, with its log and checkpointed HW
		b := s.brokers[s.replicas[s.rnd.IntN(3)]]
		if !b.alive {
			b.alive = true
			if b.failed { // a restart recovers the log
				s.recover(b)
			}
			b.r = New(Config{Self: b.id, LagTimeMax: 30 * time.Second}, b.leo(), b.hw)
			s.logf("b%d returns (end %d, hw %d)", b.id, b.leo(), b.hw)
			st := s.rec.Clone()
			b.r.SetState(s.now, s.replicas, &st, b.leo())
			s.control()
		}
	}
	s.settle()
	s.check()
}

// powerCut cuts b's power: its log keeps what its last fsync covered, and
// it comes back unclean (Unclean) before the controller noticed it went
// (half the time the controller does notice, later). Only while another
// live in-sync replica, not unclean itself, holds the committed records.
func (s *sim) powerCut(b *simBroker) {
	if !b.alive || b.failed {
		return
	}
	other := slices.ContainsFunc(s.rec.ISR, func(id int32) bool {
		o := s.brokers[id]
		return id != b.id && o.alive && !o.failed && !o.r.IsUnclean()
	})
	if !other {
		return
	}
	b.truncate(b.flushed)
	b.r = New(Config{Self: b.id, LagTimeMax: 30 * time.Second}, b.leo(), b.hw)
	b.r.Unclean()
	st := s.rec.Clone()
	s.logf("b%d's power is cut; back unclean (end %d, hw %d) with the record %+v", b.id, b.leo(), b.hw, st)
	if st.Leader == b.id {
		s.uncleanLeads++
	}
	b.r.SetState(s.now, s.replicas, &st, b.leo())
	if s.rnd.IntN(2) == 0 {
		s.control() // the controller saw it go and come back: nothing to do for it
	}
}

func (s *sim) check() {
	for _, id := range s.replicas {
		b := s.brokers[id]
		if !b.alive {
			continue
		}
		r := b.r
		if r.HighWatermark() > b.leo() {
			s.fail("b%d: high watermark %d past its log end %d", id, r.HighWatermark(), b.leo())
		}
		if r.Role() != Leader || r.Resigned() {
			continue // a resigned leader serves nothing, and no follower copies it
		}
		e := r.Epoch()
		if who, ok := s.epochLeader[e]; ok && who != id {
			s.fail("epoch %d led by b%d and b%d", e, who, id)
		}
		s.epochLeader[e] = id
		if !slices.Contains(r.MaximalISR(), id) {
			s.fail("b%d leads outside its ISR %v", id, r.MaximalISR())
		}
		if prev, ok := s.termHW[e]; ok && r.HighWatermark() < prev {
			s.fail("b%d: high watermark went from %d down to %d in epoch %d", id, prev, r.HighWatermark(), e)
		}
		s.termHW[e] = r.HighWatermark()
		// Committed records: everything below this leader's HW is now
		// committed; what was committed before must be here unchanged.
		for o, c := range s.committed {
			if int64(o) >= b.leo() || b.log[o] != c {
				got := "nothing"
				if int64(o) < b.leo() {
					got = fmt.Sprint(b.log[o])
				}
				s.fail("leader b%d (epoch %d) holds %s at committed offset %d, committed %v", id, e, got, o, c)
			}
		}
		for o := int64(len(s.committed)); o < r.HighWatermark(); o++ {
			s.committed = append(s.committed, b.log[o])
		}
	}
}

func TestRandomizedReplication(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	maxCommitted, handovers, uncleanLeads := 0, 0, 0
	for seed := range uint64(seeds) {
		s := newSim(t, seed)
		for range 600 {
			s.step()
		}
		maxCommitted = max(maxCommitted, len(s.committed))
		handovers += s.handovers
		uncleanLeads += s.uncleanLeads
	}
	t.Logf("%d leaderships moved by resignations, %d leaders back from a power cut still recorded as leader, in %d runs",
		handovers, uncleanLeads, seeds)
	if uncleanLeads < seeds/10 {
		t.Fatalf("%d leaders back from a power cut still recorded as leader in %d runs: the simulation does not exercise it",
			uncleanLeads, seeds)
	}
	if handovers < seeds/10 {
		t.Fatalf("%d leaderships moved by a failed log in %d runs: the simulation does not exercise resignations", handovers, seeds)
	}
	if maxCommitted < 50 {
		t.Fatalf("the simulation committed at most %d records in a run: it does not exercise replication", maxCommitted)
	}
}
