package controller

import (
	"slices"
	"strings"

	"github.com/weir-broker/weir/core/meta"
)

// The rules of this file are pure functions of a partition's assignment,
// its state as read and the live brokers. The package doc says where in
// Kafka each comes from.

// liveFunc reports whether a broker counts as live.
type liveFunc func(int32) bool

// initialState is the first state of a partition that has none (Kafka's
// initializeLeaderAndIsrForPartitions): leader the first live replica in
// assignment order, ISR every live replica in assignment order, leader epoch
// 0. ok is false when no replica is live: the partition then stays without
// a state until one is.
func initialState(assignment []int32, live liveFunc, controllerEpoch int32) (meta.PartitionState, bool) {
	var isr []int32
	for _, r := range assignment {
		if live(r) {
			isr = append(isr, r)
		}
	}
	if len(isr) == 0 {
		return meta.PartitionState{}, false
	}
	return meta.PartitionState{Leader: isr[0], ISR: isr, ControllerEpoch: controllerEpoch, Version: -1}, true
}

// settle is one round of the controller's rules on a partition with a
// state, for the live brokers live: the leader and ISR the partition should
// have, and whether they differ from s's.
//
//   - A live leader keeps its place; dead brokers leave the ISR.
//   - Otherwise (no leader, or a dead one) the leader is the first replica in
//     assignment order that is live and in the ISR, and the ISR keeps its
//     live members (Kafka's offline election); failing that, with unclean
//     election, the first live replica, with the ISR [leader]; failing that,
//     no leader, and dead brokers leave the ISR.
//   - Dead brokers leave the ISR except the last one: an ISR with no live
//     member keeps one (the old leader if it was in the ISR, else its first
//     member; either way one not in avoid when there is such a member), so
//     that a clean election later waits for it.
//
// avoid are brokers whose logs may have lost what the other in-sync
// replicas hold (bounced or resigned: see nextState).
func settle(assignment []int32, s meta.PartitionState, live liveFunc, unclean bool, avoid []int32) (leader int32, isr []int32, changed bool) {
	if s.Leader != meta.NoLeader && live(s.Leader) {
		isr = shrink(s.ISR, live, s.Leader, avoid)
		return s.Leader, isr, !slices.Equal(isr, s.ISR)
	}
	for _, r := range assignment {
		if live(r) && slices.Contains(s.ISR, r) {
			isr = filter(s.ISR, live)
			return r, isr, r != s.Leader || !slices.Equal(isr, s.ISR)
		}
	}
	if unclean {
		for _, r := range assignment {
			if live(r) {
				return r, []int32{r}, true
			}
		}
	}
	isr = shrink(s.ISR, live, s.Leader, avoid)
	return meta.NoLeader, isr, s.Leader != meta.NoLeader || !slices.Equal(isr, s.ISR)
}

// nextState is the state the controller writes over s, and whether there is
// anything to write. bounced are brokers that re-registered (their broker
// epoch grew) since s was settled, or resigned s's epoch: they are handled
// as Kafka's processBrokerChange does, a failure (settle without them) and
// then a startup (settle with them), folded into one write. One difference:
// when no other in-sync replica is live, the ISR kept for a later clean
// election is a dead member that did not bounce, if there is one, rather
// than the bounced broker (which may have come back from an unclean
// shutdown without what the dead one holds): the partition waits for it,
// as KRaft's eligible leader replicas (KIP-966) would. Every write bumps
// the leader epoch by one and carries the controller's epoch.
//
// shutting are brokers in controlled shutdown (Kafka's
// ControlledShutdownPartitionLeaderElectionStrategy): one that leads hands
// the leadership to the first live ISR member in assignment order that is
// not shutting down, and they leave the ISR, except that a partition with
// no other live ISR member keeps its leader and ISR (nothing could take
// over without losing what only it has). preferred moves the leadership to
// the first replica of the assignment when it is live, in the ISR and not
// shutting down (Kafka's preferred replica election).
func nextState(assignment []int32, s meta.PartitionState, live liveFunc, bounced []int32, unclean bool,
	controllerEpoch int32, shutting []int32, preferred bool) (meta.PartitionState, bool) {
	cur, changed := s, false
	if len(bounced) > 0 {
		down := func(id int32) bool { return live(id) && !slices.Contains(bounced, id) }
		cur.Leader, cur.ISR, changed = settle(assignment, s, down, unclean, bounced)
	}
	leader, isr, again := settle(assignment, cur, live, unclean, nil)
	changed = changed || again
	eligible := func(id int32) bool { return live(id) && !slices.Contains(shutting, id) }
	if len(shutting) > 0 && leader != meta.NoLeader {
		if l, i, moved := handOver(assignment, leader, isr, eligible); moved {
			leader, isr, changed = l, i, true
		}
	}
	if preferred && len(assignment) > 0 {
		if p := assignment[0]; p != leader && eligible(p) && slices.Contains(isr, p) {
			leader, changed = p, true
		}
	}
	if !changed {
		return meta.PartitionState{}, false
	}
	return meta.PartitionState{
		Leader:          leader,
		LeaderEpoch:     s.LeaderEpoch + 1,
		ISR:             isr,
		ControllerEpoch: controllerEpoch,
		Version:         -1,
	}, true
}

// handOver applies a controlled shutdown to a partition led by leader
// with ISR isr: brokers not eligible (shutting down) leave the ISR and the
// leadership goes to the first eligible ISR member in assignment order, when
// there is one; otherwise nothing changes.
func handOver(assignment []int32, leader int32, isr []int32, eligible liveFunc) (int32, []int32, bool) {
	keep := filter(isr, eligible)
	if len(keep) == 0 || len(keep) == len(isr) {
		return leader, isr, false
	}
	if !eligible(leader) {
		for _, r := range assignment {
			if slices.Contains(keep, r) {
				leader = r
				break
			}
		}
		if !eligible(leader) {
			leader = keep[0] // an ISR member outside the assignment: still a replica that has it all
		}
	}
	return leader, keep, true
}

// filter returns the live members of isr, in ISR order (a new slice).
func filter(isr []int32, live liveFunc) []int32 {
	out := make([]int32, 0, len(isr))
	for _, r := range isr {
		if live(r) {
			out = append(out, r)
		}
	}
	return out
}

// shrink is filter, except that an ISR without a live member keeps one:
// keep if it is a member, else the first; members not in avoid first.
func shrink(isr []int32, live liveFunc, keep int32, avoid []int32) []int32 {
	out := filter(isr, live)
	if len(out) > 0 || len(isr) == 0 {
		return out
	}
	cands := filter(isr, func(id int32) bool { return !slices.Contains(avoid, id) })
	if len(cands) == 0 {
		cands = isr
	}
	if slices.Contains(cands, keep) {
		return []int32{keep}
	}
	return []int32{cands[0]}
}

// UncleanConfig is the topic config that overrides
// Config.UncleanLeaderElection for one topic (Kafka's name).
const UncleanConfig = "unclean.leader.election.enable"

// uncleanFor is whether topic configs allow unclean elections: the topic's
// own unclean.leader.election.enable if it is "true" or "false" (any case,
// as Kafka parses booleans), else def.
func uncleanFor(configs map[string]string, def bool) bool {
	switch v := configs[UncleanConfig]; {
	case strings.EqualFold(v, "true"):
		return true
	case strings.EqualFold(v, "false"):
		return false
	}
	return def
}
