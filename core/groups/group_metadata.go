package groups

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group metadata records: what a group is, kept beside its committed offsets
// in its partition of __consumer_offsets, in Kafka's formats (kmsg's
// GroupMetadataKey, key version 2, and GroupMetadataValue, value version 3),
// so that a group reads back as what it was after a restart or a move, and
// tools that read the topic (Burrow) see the same records as from Kafka.
//
// As Kafka's GroupMetadataManager does, the coordinator writes one when a
// rebalance completes (the leader's SyncGroup makes the group Stable: the
// protocol type, the protocol, the generation, the leader and every member
// with its client id and host, timeouts, subscription and assignment), when
// a join phase ends with no members (Empty: the protocol type and
// generation, no members), and when a static member rejoining a Stable
// group replaces its member id; a tombstone when the group is deleted
// (DeleteGroups, offset expiry, or an empty group with nothing left to
// keep). The state machine only says a record is due (group.persist); the
// Coordinator builds and appends it, ordered in the log with the group's
// commits. It does not wait for the record to be replicated before
// answering SyncGroup (Kafka does): the answer stands either way, and a
// record that fails to commit (logged) only means that after a restart the
// group reads back as it was at its previous record, whose members are
// then either current (and carry on) or stale (told to rejoin), which
// clients do on their own. Nothing is lost: offsets are separate records.
//
// Load replays the records and restores each group as Kafka's
// GroupCoordinator.onGroupLoaded does: a group with members is Stable at
// its generation, every member alive for one session timeout from the load
// (each keeps its place by heartbeating with its member id and generation,
// as a client does after its coordinator restarted; one that does not is
// removed when its session expires, and the group rebalances); a group
// without members is Empty, empty since the record's timestamp (so offset
// expiry counts from then). A restored member's only protocol is the
// group's, with its subscription, as in Kafka.

const (
	groupKeyVersion   = 2
	groupValueVersion = 3
)

// groupKey encodes group's metadata key.
func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

// decodeGroupValue decodes a group metadata value (any of Kafka's versions
// 0-3; kmsg reads by the version in the value).
func decodeGroupValue(b []byte) (*kmsg.GroupMetadataValue, error) {
	v := new(kmsg.GroupMetadataValue)
	if err := v.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("%w: group metadata value: %v", ErrCorrupt, err)
	}
	if v.Version < 0 || v.Version > groupValueVersion {
		return nil, fmt.Errorf("%w: group metadata value version %d, want 0-%d", ErrCorrupt, v.Version, groupValueVersion)
	}
	return v, nil
}

// takePersist reports whether a group metadata record is due since the
// last call (see the comment above).
func (g *group) takePersist() bool {
	p := g.persist
	g.persist = false
	return p
}

// metadataValue is the group's metadata record as of now.
func (g *group) metadataValue(now time.Time) kmsg.GroupMetadataValue {
	v := kmsg.GroupMetadataValue{Version: groupValueVersion, ProtocolType: g.protocolType,
		Generation: g.generation, CurrentStateTimestamp: now.UnixMilli()}
	if g.state == stateEmpty {
		if !g.emptySince.IsZero() {
			v.CurrentStateTimestamp = g.emptySince.UnixMilli()
		}
		return v
	}
	v.Protocol, v.Leader = &g.protocol, &g.leader
	for _, m := range g.order {
		v.Members = append(v.Members, kmsg.GroupMetadataValueMember{
			MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			RebalanceTimeoutMillis: int32(m.rebalance.Milliseconds()), SessionTimeoutMillis: int32(m.session.Milliseconds()),
			Subscription: m.metadataFor(g.protocol), Assignment: m.assignment,
		})
	}
	return v
}

// fitsRecord reports whether every string of group's record v fits the
// format's int16 lengths (flexible requests may carry longer ones, which
// would write a record no one could read back).
func fitsRecord(group string, v *kmsg.GroupMetadataValue) bool {
	long := func(s string) bool { return len(s) > maxString }
	if long(group) || long(v.ProtocolType) || v.Protocol != nil && long(*v.Protocol) || v.Leader != nil && long(*v.Leader) {
		return false
	}
	for _, m := range v.Members {
		if long(m.MemberID) || long(m.ClientID) || long(m.ClientHost) || m.InstanceID != nil && long(*m.InstanceID) {
			return false
		}
	}
	return true
}

// restoreGroup is group id as its metadata record v says, loaded at now
// (see the comment above).
func restoreGroup(id string, cfg *Options, v *kmsg.GroupMetadataValue, now time.Time) *group {
	g := newGroup(id, cfg)
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	if len(v.Members) == 0 {
		g.state = stateEmpty
		if v.CurrentStateTimestamp > 0 {
			g.emptySince = time.UnixMilli(v.CurrentStateTimestamp)
		}
		return g
	}
	g.state = stateStable
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	for _, vm := range v.Members {
		if g.byID[vm.MemberID] != nil {
			continue
		}
		session := time.Duration(vm.SessionTimeoutMillis) * time.Millisecond
		rebalance := time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond
		if rebalance <= 0 { // value v0 has none
			rebalance = session
		}
		m := &member{id: vm.MemberID, instanceID: cloneString(vm.InstanceID), clientID: vm.ClientID,
			clientHost: vm.ClientHost, protocolType: v.ProtocolType,
			protocols: []Protocol{{Name: g.protocol, Metadata: vm.Subscription}},
			session:   session, rebalance: rebalance, expires: now.Add(session), assignment: vm.Assignment}
		if m.assignment == nil {
			m.assignment = []byte{}
		}
		g.order = append(g.order, m)
		g.byID[m.id] = m
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
	}
	g.leader = g.order[0].id
	if v.Leader != nil && g.byID[*v.Leader] != nil {
		g.leader = *v.Leader
	}
	return g
}
