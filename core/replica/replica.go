package replica

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weir-broker/weir/core/meta"
)

// The replica's answers; every error it returns wraps one of them.
var (
	// ErrNotLeader: the broker does not lead the partition (any more).
	// NOT_LEADER_OR_FOLLOWER.
	ErrNotLeader = errors.New("replica: not the leader")
	// ErrNotEnoughReplicas: an acks=all produce with fewer in-sync replicas
	// than min.insync.replicas; nothing was appended. NOT_ENOUGH_REPLICAS.
	ErrNotEnoughReplicas = errors.New("replica: not enough in-sync replicas")
	// ErrNotEnoughReplicasAfterAppend: an acks=all produce was appended and
	// reached the high watermark, but the ISR had shrunk below
	// min.insync.replicas by then. NOT_ENOUGH_REPLICAS_AFTER_APPEND.
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: not enough in-sync replicas after append")
	// ErrNotReplica: a fetch from a broker that is not a replica of the
	// partition. NOT_LEADER_OR_FOLLOWER, as Kafka answers.
	ErrNotReplica = errors.New("replica: not a replica of the partition")
	// ErrOffsetOutOfRange: a follower fetched past the leader's log end (its
	// log diverged, and it has not truncated yet). OFFSET_OUT_OF_RANGE.
	ErrOffsetOutOfRange = errors.New("replica: fetch offset out of range")
	// ErrLogFailed: the leader's log failed and it resigned; it serves
	// nothing of the partition until the controller has moved the
	// leadership. KAFKA_STORAGE_ERROR, which clients and followers retry.
	ErrLogFailed = errors.New("replica: the leader's log failed; it resigned")
)

// DefaultLagTimeMax is Kafka's replica.lag.time.max.ms.
const DefaultLagTimeMax = 30 * time.Second

// Config configures a Replica.
type Config struct {
	// Self is this broker's id.
	Self int32
	// LagTimeMax: a follower that has not caught up for this long leaves the
	// ISR (replica.lag.time.max.ms). Default DefaultLagTimeMax.
	LagTimeMax time.Duration
}

// Role is what this broker is for the partition.
type Role uint8

const (
	// None: no leader, or this broker is not a replica.
	None Role = iota
	Leader
	Follower
)

func (r Role) String() string {
	switch r {
	case Leader:
		return "leader"
	case Follower:
		return "follower"
	}
	return "none"
}

// EpochStart is a leader epoch and the offset of its first record: an entry
// of the log's leader-epoch cache.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}

// EpochEnd is where an epoch ends (OffsetForLeaderEpoch): the largest epoch
// at or below the one asked for, and the offset after its last record
// (the start of the next epoch, or the log end for the latest). Epoch -1
// and EndOffset -1 mean the epoch is unknown (UNDEFINED_EPOCH).
type EpochEnd struct {
	Epoch     int32
	EndOffset int64
}

// Undefined is the answer for an unknown epoch.
var Undefined = EpochEnd{Epoch: -1, EndOffset: -1}

// FetchTarget tells the follower's fetcher where to fetch from.
type FetchTarget struct {
	Leader      int32
	LeaderEpoch int32 // sent as CurrentLeaderEpoch
	Offset      int64
}

// EpochQuery asks the leader where an epoch of the follower's ends
// (OffsetForLeaderEpoch with CurrentLeaderEpoch = LeaderEpoch). The loop
// asks for the follower's latest epoch in its log, or answers EpochEnd
// with Undefined at once when the log has none (it is empty).
type EpochQuery struct {
	Leader      int32
	LeaderEpoch int32
}

// Proposal is an ISR change for the loop to write: the state record with
// ISR, by compare-and-set on Version. Report a failure with
// ProposalFailed; success shows as the SetState that reads it back.
type Proposal struct {
	State   meta.PartitionState // Version is -1; write it as the new record
	Version int32               // the version to compare against
}

// Ready is what the loop must do, collected since the last Ready: the
// fields that are set. Act on them in this order: StartEpoch before the
// epoch's first append; Truncate (or Reset) before the Fetch that follows.
type Ready struct {
	// HighWatermark, when HWChanged, is the new high watermark: publish it
	// (consumers are served up to it; acks=all waits check it) and
	// checkpoint it.
	HighWatermark int64
	HWChanged     bool
	// StartEpoch: record the epoch's start in the log's epoch cache.
	StartEpoch *EpochStart
	// QueryEpoch: ask the leader where the follower's latest epoch ends,
	// and feed the answer to EpochEnd.
	QueryEpoch *EpochQuery
	// Truncate: cut the log back to this offset (its records at and above
	// go), then report the new end with Truncated.
	Truncate *int64
	// Reset: remove every record and restart the log (empty) at this
	// offset, then report it with Truncated.
	Reset *int64
	// Fetch: (re)point the fetcher; StopFetch: stop fetching this
	// partition.
	Fetch     *FetchTarget
	StopFetch bool
	// Propose: write this ISR change.
	Propose *Proposal
	// Resign: the log failed while this broker leads in this leader
	// epoch; ask the controller to move the leadership (see LogFailed).
	Resign *int32
}

// Empty reports whether there is nothing to do.
func (rd Ready) Empty() bool {
	return !rd.HWChanged && rd.StartEpoch == nil && rd.QueryEpoch == nil && rd.Truncate == nil &&
		rd.Reset == nil && rd.Fetch == nil && !rd.StopFetch && rd.Propose == nil && rd.Resign == nil
}

// follower is the leader's view of one follower.
type follower struct {
	leo          int64 // its log end: the offset of its last fetch; -1 unknown
	lastCaughtUp time.Time
	// The previous fetch: when, and the leader's log end then.
	lastFetch    time.Time
	lastFetchLEO int64
}

// followState is where a follower is in following its leader.
type followState uint8

const (
	awaitingEpochEnd followState = iota // asked the leader where our epoch ends
	truncating                          // told the loop to truncate
	fetching
)

// Replica is one partition's replication state on this broker. It is not
// safe for concurrent use: the caller serialises the calls (the node holds a
// mutex per partition).
type Replica struct {
	cfg Config

	role     Role
	leader   int32
	epoch    int32 // the leader epoch of the record followed or led
	replicas []int32
	isr      []int32 // the ISR of the record
	version  int32   // the record's version
	// stateEpoch is the controller epoch of the record, kept in proposals.
	stateEpoch int32

	leo int64 // this broker's log end
	hw  int64

	// leader
	epochStart int64
	followers  map[int32]*follower
	pending    *Proposal
	resigned   bool // the log failed in this term (LogFailed)

	// follower
	follow   followState
	leaderHW int64

	// barred are brokers that may not join the ISR now (SetBarred).
	barred []int32

	// unclean: the log came back from an unclean shutdown (Unclean), and
	// no state record has yet taken this broker out of the ISR or made it
	// leader alone in an epoch after uncleanEpoch, the leader epoch of the
	// first record applied since (uncleanSeen).
	unclean      bool
	uncleanSeen  bool
	uncleanEpoch int32

	ready Ready
}

// New returns the replica state of a partition whose log ends at logEnd and
// whose high watermark was checkpointed at hw (0 when none: clamped to the
// log end). It has no role until SetState.
func New(cfg Config, logEnd, hw int64) *Replica {
	if cfg.LagTimeMax <= 0 {
		cfg.LagTimeMax = DefaultLagTimeMax
	}
	return &Replica{cfg: cfg, leader: meta.NoLeader, leo: logEnd, hw: min(max(hw, 0), logEnd), version: -1}
}

// Role, Leader and Epoch say what the last SetState made of this broker;
// LogEnd and HighWatermark are the log end and high watermark it knows.
func (r *Replica) Role() Role           { return r.role }
func (r *Replica) Leader() int32        { return r.leader }
func (r *Replica) Epoch() int32         { return r.epoch }
func (r *Replica) LogEnd() int64        { return r.leo }
func (r *Replica) HighWatermark() int64 { return r.hw }

// Replicas returns the partition's assigned replicas (a copy).
func (r *Replica) Replicas() []int32 { return slices.Clone(r.replicas) }

// ISR returns the ISR of the state record (a copy).
func (r *Replica) ISR() []int32 { return slices.Clone(r.isr) }

// MaximalISR returns the ISR with the members a pending proposal adds (a
// copy): what the high watermark waits for.
func (r *Replica) MaximalISR() []int32 {
	out := slices.Clone(r.isr)
	if r.pending != nil {
		for _, id := range r.pending.State.ISR {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// FollowerLogEnd returns the leader's idea of a follower's log end (-1
// when unknown or not a follower), for metrics and tests.
func (r *Replica) FollowerLogEnd(id int32) int64 {
	if f := r.followers[id]; f != nil {
		return f.leo
	}
	return -1
}

// Resigned reports whether the log failed in this term while this broker
// was in the ISR, and it asked the controller to take it out (LogFailed).
func (r *Replica) Resigned() bool { return r.resigned }

// HoldRecovery reports whether the log must not recover in place by itself
// now: other replicas exist and this broker is in the ISR, so the high
// watermark may count records past its last fsync that a recovery would cut
// (as a leader it would then give their offsets to new records in the same
// epoch; as a follower it could be elected without them). The loop holds
// the log's automatic recovery while this is true (see LogFailed and
// MayRecover).
func (r *Replica) HoldRecovery() bool {
	return len(r.replicas) > 1 && slices.Contains(r.isr, r.cfg.Self)
}

// MayRecover reports whether a failed log may be recovered in place (cut
// back to its last fsync) before the state record st is applied, given
// latestEpoch, the latest leader epoch in the log (-1 for none): when
// under st no in-sync replica can count on what the log holds past that
// fsync. That is so when this broker is not in st's ISR (or is the only
// replica), and when st makes it leader alone in the ISR in an epoch its
// log has not started: the others, out of sync, learn from the new epoch
// where its log ends (OffsetForLeaderEpoch) and truncate to it. The loop
// asks before every SetState while the log is failed.
func (r *Replica) MayRecover(replicas []int32, st *meta.PartitionState, latestEpoch int32) bool {
	self := r.cfg.Self
	switch {
	case len(replicas) <= 1 || !slices.Contains(replicas, self) || st == nil:
		return true
	case !slices.Contains(st.ISR, self):
		return true
	}
	return st.Leader == self && len(st.ISR) == 1 && st.LeaderEpoch > latestEpoch
}

// Unclean tells a replica, before its first SetState, that its log came
// back from an unclean shutdown (a crash or a power cut: no clean-shutdown
// marker, or a partition directory that was gone): it may have lost
// records it had acknowledged to its leader, or that it acknowledged as
// the leader, with no trace of the cut. Taking up the ISR membership or
// the leadership it held before would let the others count on what it no
// longer has: as a leader in the same epoch its followers would truncate
// to its shortened log (the acknowledged records only they still hold
// gone for good), and new records would get the offsets they hold others
// at; as an in-sync follower it could be elected without them. So, as
// KRaft's controller does for a broker registering after an unclean
// shutdown (KIP-966, KAFKA-15586), it leaves the ISR and gives up its
// leaderships first: in every term whose record names it in the ISR of a
// partition with other replicas, it resigns (Ready.Resign, as LogFailed
// does, and a resigned leader serves nothing) until a record takes it out
// of the ISR, or makes it leader alone in a new epoch (after the first
// record it applied: no other replica holds more, so the controller keeps
// it, and its followers truncate by that new epoch). A record that made
// it leader in a new epoch but kept others in the ISR (written by a
// controller that had not heard of the restart yet) is resigned as well.
func (r *Replica) Unclean() {
	r.unclean, r.uncleanSeen = true, false
}

// IsUnclean reports whether the log came back from an unclean shutdown and
// the controller has not yet answered this broker's resignation (Unclean).
func (r *Replica) IsUnclean() bool { return r.unclean }

// checkUnclean applies the Unclean rule to the record just applied (st
// nil: none yet).
func (r *Replica) checkUnclean(st *meta.PartitionState) {
	if !r.unclean || st == nil {
		return
	}
	self := r.cfg.Self
	if !r.uncleanSeen {
		r.uncleanSeen, r.uncleanEpoch = true, st.LeaderEpoch
	}
	switch {
	case len(r.replicas) <= 1 || !slices.Contains(r.replicas, self) || !slices.Contains(st.ISR, self):
		r.unclean = false // no other replica counts on this log
	case st.Leader == self && len(st.ISR) == 1 && st.LeaderEpoch > r.uncleanEpoch:
		r.unclean = false // leader alone in a new epoch: no one holds more
	case r.role != None && !r.resigned:
		r.resigned = true
		epoch := r.epoch
		r.ready.Resign = &epoch
	}
}

// Pending returns the ISR proposal in flight, if any.
func (r *Replica) Pending() (Proposal, bool) {
	if r.pending == nil {
		return Proposal{}, false
	}
	return *r.pending, true
}

// Ready returns what to do and forgets it.
func (r *Replica) Ready() Ready {
	rd := r.ready
	r.ready = Ready{}
	return rd
}

// SetState applies the partition's assignment and state record as read
// from the store (st nil: no record yet), with the log's end now. It makes
// this broker leader, follower or neither, as the record says, and applies
// ISR changes (confirming a proposal in flight).
func (r *Replica) SetState(now time.Time, replicas []int32, st *meta.PartitionState, logEnd int64) {
	r.leo = logEnd
	r.clampHW()
	r.replicas = slices.Clone(replicas)
	if st == nil || st.Leader == meta.NoLeader || !slices.Contains(replicas, r.cfg.Self) {
		if st != nil {
			r.isr, r.version, r.epoch, r.stateEpoch = slices.Clone(st.ISR), st.Version, st.LeaderEpoch, st.ControllerEpoch
		}
		r.becomeNone()
		r.checkUnclean(st)
		return
	}
	if st.Version >= 0 && st.Version < r.version {
		return // an older read than one applied already
	}
	defer r.checkUnclean(st)
	switch {
	case st.Leader == r.cfg.Self && (r.role != Leader || st.LeaderEpoch != r.epoch):
		r.becomeLeader(now, st)
	case st.Leader == r.cfg.Self:
		// The same term: an ISR change (ours confirmed, or the
		// controller's without a new epoch).
		r.applyRecord(st)
	case r.role != Follower || st.LeaderEpoch != r.epoch || st.Leader != r.leader:
		r.becomeFollower(st)
	default:
		r.applyRecord(st)
	}
	r.advanceHW()
}

func (r *Replica) applyRecord(st *meta.PartitionState) {
	if r.pending != nil && st.Version != r.pending.Version {
		r.pending = nil // written, or overtaken by another change
	}
	r.isr, r.version, r.stateEpoch = slices.Clone(st.ISR), st.Version, st.ControllerEpoch
}

func (r *Replica) becomeNone() {
	if r.role == Follower {
		r.ready.StopFetch, r.ready.Fetch, r.ready.QueryEpoch = true, nil, nil
	}
	r.role, r.leader, r.followers, r.pending, r.resigned = None, meta.NoLeader, nil, nil, false
}

func (r *Replica) becomeLeader(now time.Time, st *meta.PartitionState) {
	if r.role == Follower {
		r.ready.StopFetch, r.ready.Fetch, r.ready.QueryEpoch = true, nil, nil
	}
	r.role, r.leader, r.epoch, r.resigned = Leader, r.cfg.Self, st.LeaderEpoch, false
	r.isr, r.version, r.stateEpoch, r.pending = slices.Clone(st.ISR), st.Version, st.ControllerEpoch, nil
	r.epochStart = r.leo
	r.ready.StartEpoch = &EpochStart{Epoch: st.LeaderEpoch, StartOffset: r.leo}
	r.followers = map[int32]*follower{}
	for _, id := range r.replicas {
		if id == r.cfg.Self {
			continue
		}
		f := &follower{leo: -1, lastFetchLEO: -1}
		if slices.Contains(r.isr, id) {
			f.lastCaughtUp = now
		}
		r.followers[id] = f
	}
}

func (r *Replica) becomeFollower(st *meta.PartitionState) {
	r.role, r.leader, r.epoch = Follower, st.Leader, st.LeaderEpoch
	r.isr, r.version, r.stateEpoch = slices.Clone(st.ISR), st.Version, st.ControllerEpoch
	r.followers, r.pending, r.resigned = nil, nil, false
	r.follow = awaitingEpochEnd
	r.leaderHW = -1
	r.ready.Fetch, r.ready.StopFetch = nil, true // no fetching until truncated
	r.ready.QueryEpoch = &EpochQuery{Leader: st.Leader, LeaderEpoch: st.LeaderEpoch}
}

// Appended tells that the log now ends at end (an append, on either side).
func (r *Replica) Appended(end int64) {
	r.leo = end
	switch r.role {
	case Leader:
		r.advanceHW()
	case Follower:
		r.followerHW()
	}
}

// FollowerFetch is a fetch by follower id at fetchOffset, at now. It
// updates the follower's log end and caught-up time, may propose the
// follower back into the ISR, and may advance the high watermark.
func (r *Replica) FollowerFetch(now time.Time, id int32, fetchOffset int64) error {
	if r.role != Leader {
		return fmt.Errorf("%w: broker %d fetched", ErrNotLeader, id)
	}
	f := r.followers[id]
	if f == nil {
		return fmt.Errorf("%w: broker %d", ErrNotReplica, id)
	}
	if r.resigned {
		// What it reads may be cut: a follower must not learn of an end
		// (or copy records) the recovery is about to take back.
		return fmt.Errorf("%w: broker %d fetched in epoch %d", ErrLogFailed, id, r.epoch)
	}
	if fetchOffset > r.leo || fetchOffset < 0 {
		return fmt.Errorf("%w: broker %d fetched at %d, log ends at %d", ErrOffsetOutOfRange, id, fetchOffset, r.leo)
	}
	switch {
	case fetchOffset >= r.leo:
		f.lastCaughtUp = now
	case f.lastFetchLEO >= 0 && fetchOffset >= f.lastFetchLEO:
		f.lastCaughtUp = maxTime(f.lastCaughtUp, f.lastFetch)
	}
	f.leo = fetchOffset
	f.lastFetch, f.lastFetchLEO = now, r.leo
	r.maybeExpand(id, f)
	r.advanceHW()
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// SetBarred names the brokers that may not join the ISR however caught up
// they are (the list replaces the previous one): brokers not registered
// (one restarted while its old session lives fetches before it registers,
// and the controller would take it out of the ISR again at once, each time
// in a new leader epoch) and brokers in controlled shutdown (Kafka's
// KIP-841 keeps fenced and shutting-down brokers out of ISR expansion).
// They may still fetch.
func (r *Replica) SetBarred(ids []int32) {
	r.barred = append(r.barred[:0], ids...)
}

// maybeExpand proposes id into the ISR when it has caught up with the high
// watermark and the leader's epoch.
func (r *Replica) maybeExpand(id int32, f *follower) {
	if r.pending != nil || r.resigned || slices.Contains(r.isr, id) || slices.Contains(r.barred, id) {
		return
	}
	if f.leo < r.hw || f.leo < r.epochStart {
		return
	}
	isr := make([]int32, 0, len(r.isr)+1)
	for _, rid := range r.replicas { // in assignment order
		if rid == id || slices.Contains(r.isr, rid) {
			isr = append(isr, rid)
		}
	}
	r.propose(isr)
}

// Tick lets time pass: followers not caught up for LagTimeMax are proposed
// out of the ISR.
func (r *Replica) Tick(now time.Time) {
	if r.role != Leader || r.pending != nil || r.resigned {
		return
	}
	var out []int32
	for _, id := range r.isr {
		if id == r.cfg.Self {
			continue
		}
		f := r.followers[id]
		if f == nil {
			continue // not a replica any more: the controller's to fix
		}
		if f.leo != r.leo && now.Sub(f.lastCaughtUp) > r.cfg.LagTimeMax {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return
	}
	isr := make([]int32, 0, len(r.isr))
	for _, id := range r.isr {
		if !slices.Contains(out, id) {
			isr = append(isr, id)
		}
	}
	if !slices.Contains(isr, r.cfg.Self) {
		isr = append([]int32{r.cfg.Self}, isr...) // a leader is always in its ISR
	}
	r.propose(isr)
}

func (r *Replica) propose(isr []int32) {
	p := &Proposal{
		State: meta.PartitionState{Leader: r.cfg.Self, LeaderEpoch: r.epoch, ISR: isr,
			ControllerEpoch: r.stateEpoch, Version: -1},
		Version: r.version,
	}
	r.pending = p
	cp := *p
	cp.State = p.State.Clone()
	r.ready.Propose = &cp
}

// ProposalFailed drops the proposal in flight (the write failed or
// conflicted); the rules make it again if they still call for it, at the
// next fetch or Tick (after a conflict, once the new record is read).
func (r *Replica) ProposalFailed() { r.pending = nil }

// advanceHW moves a leader's high watermark to the smallest log end over
// the maximal ISR, never down.
func (r *Replica) advanceHW() {
	if r.role != Leader {
		return
	}
	hw := r.leo
	for _, id := range r.MaximalISR() {
		if id == r.cfg.Self {
			continue
		}
		f := r.followers[id]
		if f == nil || f.leo < 0 {
			return // a member not heard from holds it
		}
		hw = min(hw, f.leo)
	}
	r.setHW(hw)
}

// clampHW lowers the high watermark to the log end when a cut (a recovery
// between terms, a truncation) left the log shorter: Kafka's truncateTo
// does the same. A leader's high watermark never goes down within a term;
// its log is cut only between terms (see LogFailed).
func (r *Replica) clampHW() {
	if r.hw > r.leo {
		r.hw = r.leo
		r.ready.HighWatermark, r.ready.HWChanged = r.leo, true
	}
}

// LogFailed tells that the log failed (a write or an fsync failed): its
// recovery in place would cut it back to its last fsync. A replica out of
// the ISR may recover so (a follower truncates and fetches again anyway),
// and so may a partition's only replica (what a power cut would lose). An
// in-sync replica of a partition with others must not (see HoldRecovery):
// it resigns instead, as Kafka takes a failed log directory offline.
// Ready.Resign asks the controller to take it out of the ISR, which it
// does as for a bounced broker: a leader hands the leadership to another
// live in-sync replica, or leads again alone in a new epoch when none can
// take it; a follower leaves the ISR. Until a new state record arrives, a
// resigned leader serves no follower (ErrLogFailed), proposes no ISR
// change, holds its high watermark and fails acks=all waits it cannot
// complete; the loop recovers the log when MayRecover says so, and calls
// LogFailed again in a new term that still finds the log failed. Once per
// term.
func (r *Replica) LogFailed() {
	if r.role == None || r.resigned || !r.HoldRecovery() {
		return
	}
	r.resigned = true
	epoch := r.epoch
	r.ready.Resign = &epoch
}

func (r *Replica) setHW(hw int64) {
	if hw > r.hw {
		r.hw = hw
		r.ready.HighWatermark, r.ready.HWChanged = hw, true
	}
}

// CheckAppend is the check before an acks=all append: the ISR must have
// at least minInsync members.
func (r *Replica) CheckAppend(minInsync int) error {
	switch {
	case r.role != Leader:
		return ErrNotLeader
	case r.resigned:
		return fmt.Errorf("%w: epoch %d", ErrLogFailed, r.epoch)
	}
	if len(r.isr) < minInsync {
		return fmt.Errorf("%w: %d in sync (%v), min.insync.replicas %d", ErrNotEnoughReplicas, len(r.isr), r.isr, minInsync)
	}
	return nil
}

// AcksAll reports whether an acks=all produce whose records end before
// next has completed: the high watermark has reached next; err is
// ErrNotEnoughReplicasAfterAppend if the maximal ISR then has fewer than
// minInsync members, ErrNotLeader once this broker does not lead.
func (r *Replica) AcksAll(next int64, minInsync int) (done bool, err error) {
	switch {
	case r.role != Leader:
		return true, ErrNotLeader
	case r.resigned && r.hw < next:
		// Another replica may yet commit them: the producer's retry
		// (idempotent) finds out there.
		return true, fmt.Errorf("%w: epoch %d", ErrLogFailed, r.epoch)
	}
	if r.hw < next {
		return false, nil
	}
	if m := r.MaximalISR(); len(m) < minInsync {
		return true, fmt.Errorf("%w: %d in sync (%v), min.insync.replicas %d", ErrNotEnoughReplicasAfterAppend, len(m), m, minInsync)
	}
	return true, nil
}

// LeaderHighWatermark is the leader's high watermark and log start, from a
// fetch response: a follower's high watermark is min(the leader's, its own
// log end).
func (r *Replica) LeaderHighWatermark(hw int64) {
	if r.role != Follower {
		return
	}
	r.leaderHW = hw
	r.followerHW()
}

func (r *Replica) followerHW() {
	if r.leaderHW < 0 {
		return
	}
	hw := min(r.leaderHW, r.leo)
	if hw != r.hw {
		r.hw = hw
		r.ready.HighWatermark, r.ready.HWChanged = hw, true
	}
}

// EpochEnd is the leader's answer to the follower's QueryEpoch (leader
// for the latest epoch of the follower's log), with local: where the
// follower's own log ends that epoch (the largest epoch of its log at or
// below leader.Epoch, Undefined when none). It decides the truncation
// (KIP-101/279, see the package doc) and asks for it.
func (r *Replica) EpochEnd(leader, local EpochEnd) {
	if r.role != Follower || r.follow != awaitingEpochEnd {
		return
	}
	to := r.hw // the leader does not know the epoch: fall back to the HW
	if leader.EndOffset >= 0 && leader.Epoch >= 0 {
		to = leader.EndOffset
		if local.EndOffset >= 0 {
			to = min(to, local.EndOffset)
		}
	}
	to = min(to, r.leo)
	r.follow = truncating
	r.ready.Truncate = &to
}

// OutOfRange is the leader's answer to a fetch at the follower's log end
// that it is out of its range, with the leader's log start: below it (the
// leader's retention went past the follower), the follower empties its log
// and restarts it there; otherwise the follower's log went past the
// leader's (an unclean election, or a truncation it has not heard of), and
// it asks again where its epoch ends, which truncates it.
func (r *Replica) OutOfRange(leaderStart int64) {
	if r.role != Follower || r.follow != fetching {
		return
	}
	r.ready.Fetch, r.ready.StopFetch = nil, true
	if r.leo < leaderStart {
		r.follow = truncating
		start := leaderStart
		r.ready.Reset = &start
		return
	}
	r.follow = awaitingEpochEnd
	r.ready.QueryEpoch = &EpochQuery{Leader: r.leader, LeaderEpoch: r.epoch}
}

// TruncateFailed tells that the truncation (or reset) Ready asked for
// failed (the log failed): the follower asks the leader again where its
// epoch ends, and truncates then. It never fetches onto a log it could not
// cut: the records it kept may differ from the leader's at those offsets.
func (r *Replica) TruncateFailed() {
	if r.role != Follower || r.follow != truncating {
		return
	}
	r.follow = awaitingEpochEnd
	r.ready.Fetch, r.ready.StopFetch = nil, true
	r.ready.QueryEpoch = &EpochQuery{Leader: r.leader, LeaderEpoch: r.epoch}
}

// Truncated tells that the log was cut (or reset) as asked and now ends
// at end: the follower fetches from there.
func (r *Replica) Truncated(end int64) {
	r.leo = end
	r.clampHW()
	if r.role != Follower || r.follow != truncating {
		return
	}
	r.follow = fetching
	r.ready.StopFetch = false
	r.ready.Fetch = &FetchTarget{Leader: r.leader, LeaderEpoch: r.epoch, Offset: end}
}
