package groups

import (
	"bytes"
	"fmt"
	"slices"
	"time"
)

// state is a group's place in the classic rebalance protocol.
type state int8

const (
	stateEmpty state = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

// String returns Kafka's name for the state, as DescribeGroups and
// ListGroups report it.
func (s state) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	default:
		return "Dead"
	}
}

// newMemberJoinTimeout bounds how long a member that joined for the first
// time may wait in a rebalance without a heartbeat (Kafka's
// NewMemberJoinTimeoutMs): a client that gave up and retried with a new
// member id leaves a defunct member behind, and this removes it.
const newMemberJoinTimeout = 5 * time.Minute

// reply is the answer to one blocked request, identified by the waiter token
// the caller passed in: a JoinGroup (join), a SyncGroup (sync), or an error
// for either.
type reply struct {
	waiter uint64
	join   JoinResult
	sync   SyncResult
	err    error
}

// member is one member of a group.
type member struct {
	id                   string
	instanceID           *string
	clientID, clientHost string
	protocolType         string
	protocols            []Protocol
	session, rebalance   time.Duration
	// expires is when the member is removed unless it heartbeats (or
	// rejoins, syncs, commits) first; members awaiting a join or sync
	// response are exempt, except new ones (see newMemberJoinTimeout).
	expires time.Time
	isNew   bool
	// joinWaiter and syncWaiter are the tokens of the member's blocked
	// JoinGroup and SyncGroup; 0 when none.
	joinWaiter, syncWaiter uint64
	assignment             []byte
}

// matches reports whether protocols are exactly the member's (names,
// metadata and order): a rejoin that changes nothing.
func (m *member) matches(protocols []Protocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b Protocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

func (m *member) supports(name string) bool {
	return slices.ContainsFunc(m.protocols, func(p Protocol) bool { return p.Name == name })
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

// group is one consumer group's membership state machine: Kafka's classic
// GroupCoordinator logic for one group, as a value. Every method takes the
// current time; none blocks, sleeps, starts goroutines or reads a clock.
// Requests that must wait (JoinGroup, SyncGroup) are identified by waiter
// tokens, and every answer, to the caller or to members waiting since
// earlier, is queued as a reply and collected with take. Time-driven
// transitions happen in tick, and nextDeadline says when tick is next due.
type group struct {
	id  string
	cfg *Options

	state                  state
	emptySince             time.Time // when the last member left (zero: never had one here)
	generation             int32
	protocolType, protocol string
	leader                 string

	order   []*member          // members in join order
	byID    map[string]*member // members by id
	static  map[string]string  // instance id -> member id
	pending map[string]time.Time
	// pending holds the ids handed out with ErrMemberIDRequired, until the
	// member joins with it or the time (its session timeout) passes.

	// PreparingRebalance: the join phase ends at rebalanceAt. While initial
	// (the group was Empty), it ends only then and is extended while new
	// members keep arriving, by at most initialRemaining in total.
	rebalanceAt      time.Time
	initial          bool
	initialRemaining time.Duration
	newMemberAdded   bool

	// After a join phase, members that have not sent SyncGroup by syncAt
	// are removed.
	syncAt      time.Time
	pendingSync map[string]bool

	out []reply
	// persist: a group metadata record is due (group_metadata.go).
	persist bool
}

func newGroup(id string, cfg *Options) *group {
	return &group{
		id:          id,
		cfg:         cfg,
		byID:        map[string]*member{},
		static:      map[string]string{},
		pending:     map[string]time.Time{},
		pendingSync: map[string]bool{},
	}
}

// take returns the replies queued since the last take.
func (g *group) take() []reply {
	out := g.out
	g.out = nil
	return out
}

func (g *group) replyJoin(w uint64, r JoinResult, err error) {
	if w != 0 {
		g.out = append(g.out, reply{waiter: w, join: r, err: err})
	}
}

func (g *group) replySync(w uint64, r SyncResult, err error) {
	if w != 0 {
		g.out = append(g.out, reply{waiter: w, sync: r, err: err})
	}
}

// joinError answers a JoinGroup with err and no generation.
func (g *group) joinError(w uint64, memberID string, err error) {
	g.replyJoin(w, JoinResult{Generation: -1, MemberID: memberID}, err)
}

func (g *group) errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: group %q: %s", sentinel, g.id, fmt.Sprintf(format, args...))
}

// empty reports whether the group has no members, pending or not.
func (g *group) empty() bool {
	return len(g.order) == 0 && len(g.pending) == 0
}

// join handles a JoinGroup. Its answer (immediate or after the rebalance)
// is a reply to waiter w.
func (g *group) join(now time.Time, w uint64, r JoinRequest) {
	defer g.advance(now)
	if r.RebalanceTimeout <= 0 {
		r.RebalanceTimeout = r.SessionTimeout
	}
	switch {
	case g.state == stateDead:
		g.joinError(w, r.MemberID, g.errorf(ErrCoordinatorNotAvailable, "deleted"))
	case r.SessionTimeout < g.cfg.MinSessionTimeout || r.SessionTimeout > g.cfg.MaxSessionTimeout:
		g.joinError(w, r.MemberID, g.errorf(ErrInvalidSessionTimeout, "%v outside [%v, %v]",
			r.SessionTimeout, g.cfg.MinSessionTimeout, g.cfg.MaxSessionTimeout))
	case !g.supportsProtocols(g.selfID(r), r.ProtocolType, r.Protocols):
		g.joinError(w, r.MemberID, g.errorf(ErrInconsistentProtocol,
			"protocol type %q with %d protocols does not fit the group's %q", r.ProtocolType, len(r.Protocols), g.protocolType))
	case r.MemberID == "":
		g.joinNew(now, w, r)
	default:
		g.joinKnown(now, w, r)
	}
}

// selfID is the member a JoinGroup comes from, if known: its member id, or
// the current member id of its instance.
func (g *group) selfID(r JoinRequest) string {
	if r.MemberID == "" && r.InstanceID != nil {
		return g.static[*r.InstanceID]
	}
	return r.MemberID
}

// supportsProtocols reports whether a member (self, "" for a new one) may
// join with these protocols: some protocol type and protocols at all, and,
// if there are other members, their protocol type and at least one protocol
// all of them support.
func (g *group) supportsProtocols(self, protocolType string, protocols []Protocol) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	others := 0
	for _, m := range g.order {
		if m.id != self {
			others++
		}
	}
	if others == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.order {
			if m.id != self && !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// joinNew handles a JoinGroup with an empty member id.
func (g *group) joinNew(now time.Time, w uint64, r JoinRequest) {
	prefix := r.ClientID
	if r.InstanceID != nil {
		prefix = *r.InstanceID
	}
	id := g.cfg.newMemberID(prefix)
	switch {
	case r.InstanceID != nil && g.static[*r.InstanceID] != "":
		g.replaceStatic(now, w, g.static[*r.InstanceID], id, r)
	case r.InstanceID == nil && r.RequireKnownMemberID:
		g.pending[id] = now.Add(r.SessionTimeout)
		g.replyJoin(w, JoinResult{Generation: -1, MemberID: id},
			g.errorf(ErrMemberIDRequired, "rejoin with member id %q", id))
	default:
		g.addMember(now, w, id, r)
	}
}

// joinKnown handles a JoinGroup with a member id.
func (g *group) joinKnown(now time.Time, w uint64, r JoinRequest) {
	if _, ok := g.pending[r.MemberID]; ok {
		if r.InstanceID != nil {
			g.joinError(w, r.MemberID, g.errorf(ErrUnknownMemberID,
				"member id %q was handed out to a dynamic member, not instance %q", r.MemberID, *r.InstanceID))
			return
		}
		g.addMember(now, w, r.MemberID, r)
		return
	}
	if err := g.validateMember(r.MemberID, r.InstanceID); err != nil {
		g.joinError(w, r.MemberID, err)
		return
	}
	m := g.byID[r.MemberID]
	switch g.state {
	case statePreparingRebalance:
		g.updateMember(m, w, r)
	case stateCompletingRebalance:
		if m.matches(r.Protocols) {
			// It missed the join response: answer it again.
			g.replyJoin(w, g.joinResult(m), nil)
			return
		}
		g.updateMember(m, w, r)
		g.prepareRebalance(now)
	case stateStable:
		if m.id != g.leader && m.matches(r.Protocols) {
			// A follower with nothing new: let it sync again.
			g.replyJoin(w, JoinResult{Generation: g.generation, ProtocolType: g.protocolType,
				Protocol: g.protocol, LeaderID: g.leader, MemberID: m.id}, nil)
			return
		}
		// The leader rejoining asks for a new assignment (its view of
		// the topics changed); a follower with new metadata needs one.
		g.updateMember(m, w, r)
		g.prepareRebalance(now)
	default:
		g.joinError(w, r.MemberID, g.errorf(ErrUnknownMemberID, "member %q in state %v", r.MemberID, g.state))
	}
}

// validateMember checks that id is a member and, for a static member, that
// it is the instance's current member id.
func (g *group) validateMember(id string, instanceID *string) error {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		switch {
		case !ok:
			return g.errorf(ErrUnknownMemberID, "unknown instance id %q", *instanceID)
		case cur != id:
			return g.errorf(ErrFencedInstanceID, "instance %q is member %q now, not %q", *instanceID, cur, id)
		}
		return nil
	}
	if g.byID[id] == nil {
		return g.errorf(ErrUnknownMemberID, "no member %q", id)
	}
	return nil
}

// addMember adds a new member awaiting the join phase and starts one if
// none is running.
func (g *group) addMember(now time.Time, w uint64, id string, r JoinRequest) {
	m := &member{
		id:           id,
		instanceID:   r.InstanceID,
		clientID:     r.ClientID,
		clientHost:   r.ClientHost,
		protocolType: r.ProtocolType,
		protocols:    r.Protocols,
		session:      r.SessionTimeout,
		rebalance:    r.RebalanceTimeout,
		expires:      now.Add(newMemberJoinTimeout),
		isNew:        true,
		joinWaiter:   w,
	}
	if g.state == statePreparingRebalance && g.initial {
		g.newMemberAdded = true
	}
	if len(g.order) == 0 {
		g.protocolType = r.ProtocolType
	}
	g.order = append(g.order, m)
	g.byID[id] = m
	if g.leader == "" {
		g.leader = id
	}
	if r.InstanceID != nil {
		g.static[*r.InstanceID] = id
	}
	delete(g.pending, id)
	g.maybePrepareRebalance(now)
}

// updateMember records a rejoin: new protocols and timeouts, and w as the
// waiter for the join phase (a superseded waiter is told to rejoin).
func (g *group) updateMember(m *member, w uint64, r JoinRequest) {
	m.protocols = r.Protocols
	m.protocolType = r.ProtocolType
	m.session = r.SessionTimeout
	m.rebalance = r.RebalanceTimeout
	if len(g.order) == 1 {
		g.protocolType = r.ProtocolType
	}
	if m.joinWaiter != 0 && m.joinWaiter != w {
		g.joinError(m.joinWaiter, m.id, g.errorf(ErrRebalanceInProgress, "superseded by a newer JoinGroup"))
	}
	m.joinWaiter = w
}

// replaceStatic gives a static member that rejoined without its member id
// (a restarted client) a new id, fencing the old one. In a Stable group
// whose protocol does not change, it keeps its assignment without a
// rebalance: that is the point of static membership.
func (g *group) replaceStatic(now time.Time, w uint64, oldID, newID string, r JoinRequest) {
	m := g.byID[oldID]
	fenced := g.errorf(ErrFencedInstanceID, "instance %q rejoined as %q", *r.InstanceID, newID)
	g.joinError(m.joinWaiter, oldID, fenced)
	g.replySync(m.syncWaiter, SyncResult{}, fenced)
	m.joinWaiter, m.syncWaiter = 0, 0

	oldLeader := g.leader
	delete(g.byID, oldID)
	m.id = newID
	g.byID[newID] = m
	g.static[*r.InstanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	m.clientID, m.clientHost = r.ClientID, r.ClientHost
	g.updateMember(m, w, r)
	m.expires = now.Add(m.session)

	switch g.state {
	case stateStable:
		if g.selectProtocol() == g.protocol {
			// Answer with the old leader id, so that a leader coming
			// back does not compute an assignment a Stable group would
			// not hand out.
			m.joinWaiter = 0
			g.replyJoin(w, JoinResult{Generation: g.generation, ProtocolType: g.protocolType,
				Protocol: g.protocol, LeaderID: oldLeader, MemberID: newID}, nil)
			g.persist = true // the new member id
			return
		}
		g.prepareRebalance(now)
	case stateCompletingRebalance:
		// The leader may be assigning to the old id: start over.
		g.prepareRebalance(now)
	}
}

// maybePrepareRebalance starts a join phase unless one is running.
func (g *group) maybePrepareRebalance(now time.Time) {
	switch g.state {
	case stateEmpty, stateStable, stateCompletingRebalance:
		g.prepareRebalance(now)
	}
}

// prepareRebalance starts a join phase: members awaiting their assignment
// are told to rejoin, and the phase ends when every member has rejoined or
// the rebalance timeout passes (for a group that was Empty: after the
// initial delay).
func (g *group) prepareRebalance(now time.Time) {
	if g.state == stateCompletingRebalance {
		for _, m := range g.order {
			m.assignment = nil
			if m.syncWaiter != 0 {
				g.replySync(m.syncWaiter, SyncResult{}, g.errorf(ErrRebalanceInProgress, "a member joined or left"))
				m.syncWaiter = 0
				m.expires = now.Add(m.session)
			}
		}
	}
	g.syncAt = time.Time{}
	clear(g.pendingSync)
	timeout := g.rebalanceTimeout()
	if g.state == stateEmpty {
		g.initial = true
		g.newMemberAdded = false
		g.initialRemaining = max(timeout-g.cfg.InitialRebalanceDelay, 0)
		g.rebalanceAt = now.Add(g.cfg.InitialRebalanceDelay)
	} else {
		g.initial = false
		g.rebalanceAt = now.Add(timeout)
	}
	g.state = statePreparingRebalance
	g.cfg.Logger.Debug("preparing rebalance", "group", g.id, "generation", g.generation, "members", len(g.order))
}

// rebalanceTimeout is the longest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.order {
		d = max(d, m.rebalance)
	}
	return d
}

// allJoined: every member is awaiting the join phase's end, and no member
// id handed out is still to be used.
func (g *group) allJoined() bool {
	for _, m := range g.order {
		if m.joinWaiter == 0 {
			return false
		}
	}
	return len(g.pending) == 0
}

// removeMember removes a member (it left, or its session expired) and starts
// a rebalance for the others. Its waiters learn it is gone.
func (g *group) removeMember(now time.Time, m *member, why string) {
	gone := g.errorf(ErrUnknownMemberID, "member %q %s", m.id, why)
	g.joinError(m.joinWaiter, "", gone)
	g.replySync(m.syncWaiter, SyncResult{}, gone)
	m.joinWaiter, m.syncWaiter = 0, 0
	g.drop(m)
	g.cfg.Logger.Info("member removed", "group", g.id, "member", m.id, "reason", why)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.prepareRebalance(now)
	}
}

// drop deletes a member from every index and picks another leader if it was
// the leader.
func (g *group) drop(m *member) {
	delete(g.byID, m.id)
	g.order = slices.DeleteFunc(g.order, func(x *member) bool { return x == m })
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	delete(g.pendingSync, m.id)
	if g.leader == m.id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0].id
		}
	}
}

// expired reports whether m's session has run out at now.
func (g *group) expired(m *member, now time.Time) bool {
	if !m.isNew && (m.joinWaiter != 0 || m.syncWaiter != 0) {
		return false
	}
	return !now.Before(m.expires)
}

// advance performs every transition due at now: expirations, the end of a
// join phase, the end of the sync phase. Every event ends with it, and so
// does tick.
func (g *group) advance(now time.Time) {
	if g.state == stateDead {
		return
	}
	for id, at := range g.pending {
		if !now.Before(at) {
			delete(g.pending, id)
		}
	}
	for _, m := range slices.Clone(g.order) {
		if g.byID[m.id] == m && g.expired(m, now) {
			g.removeMember(now, m, "timed out")
		}
	}
	if !g.syncAt.IsZero() && !now.Before(g.syncAt) {
		g.syncAt = time.Time{}
		if g.state == stateCompletingRebalance || g.state == stateStable {
			var late []*member
			for _, m := range g.order {
				if g.pendingSync[m.id] {
					late = append(late, m)
				}
			}
			for _, m := range late {
				g.replySync(m.syncWaiter, SyncResult{}, g.errorf(ErrUnknownMemberID, "member %q did not sync in time", m.id))
				m.syncWaiter = 0
				g.drop(m)
				g.cfg.Logger.Info("member removed", "group", g.id, "member", m.id, "reason", "no SyncGroup in time")
			}
			if len(late) > 0 {
				g.prepareRebalance(now)
			}
		}
	}
	if g.state != statePreparingRebalance {
		return
	}
	if now.Before(g.rebalanceAt) {
		if !g.initial && g.allJoined() {
			g.completeJoin(now)
		}
		return
	}
	if g.initial && g.newMemberAdded && g.initialRemaining > 0 && g.cfg.InitialRebalanceDelay > 0 {
		// Members are still arriving at a new group: wait some more.
		g.newMemberAdded = false
		d := min(g.cfg.InitialRebalanceDelay, g.initialRemaining)
		g.initialRemaining -= d
		g.rebalanceAt = now.Add(d)
		return
	}
	g.completeJoin(now)
}

// completeJoin ends a join phase: dynamic members that did not rejoin are
// removed, a leader that did not rejoin is replaced, the generation goes up,
// a protocol is selected and every waiting member gets its answer (the
// leader with the member list).
func (g *group) completeJoin(now time.Time) {
	for _, m := range slices.Clone(g.order) {
		if m.joinWaiter == 0 && m.instanceID == nil {
			g.drop(m)
			g.cfg.Logger.Info("member removed", "group", g.id, "member", m.id, "reason", "did not rejoin")
		}
	}
	if len(g.order) > 0 && !g.electJoinedLeader() {
		// Only static members that have not rejoined are left: wait for
		// them, or for their sessions to expire.
		g.initial = false
		g.rebalanceAt = now.Add(g.rebalanceTimeout())
		return
	}
	g.generation++
	g.initial = false
	clear(g.pendingSync)
	if len(g.order) == 0 {
		g.state = stateEmpty
		g.emptySince = now
		g.protocol = ""
		g.leader = ""
		g.persist = true
		g.cfg.Logger.Info("group empty", "group", g.id, "generation", g.generation)
		return
	}
	g.protocol = g.selectProtocol()
	g.state = stateCompletingRebalance
	for _, m := range g.order {
		if m.joinWaiter != 0 {
			g.replyJoin(m.joinWaiter, g.joinResult(m), nil)
			m.joinWaiter = 0
		}
		m.expires = now.Add(m.session)
		m.isNew = false
		g.pendingSync[m.id] = true
	}
	g.syncAt = now.Add(g.rebalanceTimeout())
	g.cfg.Logger.Info("rebalanced", "group", g.id, "generation", g.generation, "protocol", g.protocol,
		"leader", g.leader, "members", len(g.order))
}

// electJoinedLeader keeps the leader if it rejoined, else makes the first
// member (in join order) that did the leader. False if none did.
func (g *group) electJoinedLeader() bool {
	if m := g.byID[g.leader]; m != nil && m.joinWaiter != 0 {
		return true
	}
	for _, m := range g.order {
		if m.joinWaiter != 0 {
			g.leader = m.id
			return true
		}
	}
	return false
}

// selectProtocol picks, among the protocols every member supports, the one
// most members prefer (each votes for its first choice among them); a tie
// goes to the protocol that got its first vote earliest in join order.
func (g *group) selectProtocol() string {
	if len(g.order) == 0 {
		return ""
	}
	var candidates []string
	for _, p := range g.order[0].protocols {
		all := true
		for _, m := range g.order[1:] {
			if !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	if len(candidates) == 0 {
		// Join keeps the members' protocols intersecting, so this does
		// not happen; fall back to the first member's first choice.
		return g.order[0].protocols[0].Name
	}
	votes := map[string]int{}
	var first []string // protocols in order of their first vote
	for _, m := range g.order {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				if votes[p.Name] == 0 {
					first = append(first, p.Name)
				}
				votes[p.Name]++
				break
			}
		}
	}
	best := first[0]
	for _, name := range first[1:] {
		if votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// joinResult is m's answer at the end of a join phase.
func (g *group) joinResult(m *member) JoinResult {
	r := JoinResult{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol,
		LeaderID: g.leader, MemberID: m.id}
	if m.id == g.leader {
		r.Members = make([]Member, len(g.order))
		for i, x := range g.order {
			r.Members[i] = Member{MemberID: x.id, InstanceID: x.instanceID, ClientID: x.clientID,
				ClientHost: x.clientHost, Metadata: x.metadataFor(g.protocol)}
		}
	}
	return r
}
