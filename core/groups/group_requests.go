package groups

import "time"

// sync handles a SyncGroup. The leader's assignments complete the rebalance
// and answer every member waiting; others wait for the leader. Its answer
// is a reply to waiter w.
func (g *group) sync(now time.Time, w uint64, r SyncRequest) {
	defer g.advance(now)
	if err := g.checkGeneration(r.MemberID, r.InstanceID, r.Generation); err != nil {
		g.replySync(w, SyncResult{}, err)
		return
	}
	if r.ProtocolType != nil && *r.ProtocolType != g.protocolType || r.Protocol != nil && *r.Protocol != g.protocol {
		g.replySync(w, SyncResult{}, g.errorf(ErrInconsistentProtocol, "sync names protocol %s/%s, group has %q/%q",
			strOrNil(r.ProtocolType), strOrNil(r.Protocol), g.protocolType, g.protocol))
		return
	}
	m := g.byID[r.MemberID]
	switch g.state {
	case statePreparingRebalance:
		g.replySync(w, SyncResult{}, g.errorf(ErrRebalanceInProgress, "rejoin"))
	case stateCompletingRebalance:
		if m.syncWaiter != 0 && m.syncWaiter != w {
			g.replySync(m.syncWaiter, SyncResult{}, g.errorf(ErrRebalanceInProgress, "superseded by a newer SyncGroup"))
		}
		m.syncWaiter = w
		g.synced(m)
		if m.id != g.leader {
			return
		}
		for _, x := range g.order {
			x.assignment = []byte{}
			if a, ok := r.Assignments[x.id]; ok {
				x.assignment = a
			}
		}
		g.state = stateStable
		g.persist = true
		for _, x := range g.order {
			if x.syncWaiter != 0 {
				g.replySync(x.syncWaiter, g.syncResult(x), nil)
				x.syncWaiter = 0
				x.expires = now.Add(x.session)
			}
		}
	case stateStable:
		g.synced(m)
		g.replySync(w, g.syncResult(m), nil)
		m.expires = now.Add(m.session)
	default:
		g.replySync(w, SyncResult{}, g.errorf(ErrUnknownMemberID, "member %q in state %v", m.id, g.state))
	}
}

// synced notes that m sent its SyncGroup for this generation.
func (g *group) synced(m *member) {
	delete(g.pendingSync, m.id)
	if len(g.pendingSync) == 0 {
		g.syncAt = time.Time{}
	}
}

func (g *group) syncResult(m *member) SyncResult {
	return SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}
}

func strOrNil(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return `"` + *s + `"`
}

// checkGeneration validates a request of a current member: the group is not
// deleted, the member (and instance) is known, the generation is current.
func (g *group) checkGeneration(memberID string, instanceID *string, generation int32) error {
	if g.state == stateDead {
		return g.errorf(ErrCoordinatorNotAvailable, "deleted")
	}
	if err := g.validateMember(memberID, instanceID); err != nil {
		return err
	}
	if generation != g.generation {
		return g.errorf(ErrIllegalGeneration, "generation %d, group is at %d", generation, g.generation)
	}
	return nil
}

// heartbeat handles a Heartbeat: it keeps the member's session alive and
// tells it to rejoin while a join phase runs.
func (g *group) heartbeat(now time.Time, memberID string, instanceID *string, generation int32) error {
	defer g.advance(now)
	if err := g.checkGeneration(memberID, instanceID, generation); err != nil {
		return err
	}
	m := g.byID[memberID]
	switch g.state {
	case stateEmpty:
		return g.errorf(ErrUnknownMemberID, "group is empty")
	case statePreparingRebalance:
		m.expires = now.Add(m.session)
		return g.errorf(ErrRebalanceInProgress, "rejoin")
	default:
		// CompletingRebalance counts as alive too: clients may heartbeat
		// between their join and sync responses.
		m.expires = now.Add(m.session)
		return nil
	}
}

// leave handles a LeaveGroup for several members, returning one result
// each. A member id handed out but not yet used may leave too.
func (g *group) leave(now time.Time, members []LeaveMember) []error {
	defer g.advance(now)
	errs := make([]error, len(members))
	for i, lm := range members {
		if g.state == stateDead {
			errs[i] = g.errorf(ErrCoordinatorNotAvailable, "deleted")
			continue
		}
		if lm.MemberID == "" {
			id, ok := "", false
			if lm.InstanceID != nil {
				id, ok = g.static[*lm.InstanceID]
			}
			if !ok {
				errs[i] = g.errorf(ErrUnknownMemberID, "leave without member id or known instance id")
				continue
			}
			g.removeMember(now, g.byID[id], "left")
			continue
		}
		if _, ok := g.pending[lm.MemberID]; ok {
			delete(g.pending, lm.MemberID)
			continue
		}
		if err := g.validateMember(lm.MemberID, lm.InstanceID); err != nil {
			errs[i] = err
			continue
		}
		g.removeMember(now, g.byID[lm.MemberID], "left")
	}
	return errs
}

// commitCheck decides whether a member may commit offsets now: a simple
// commit (negative generation) when the group has no members, else a current
// member of the current generation outside the sync phase.
func (g *group) commitCheck(now time.Time, memberID string, instanceID *string, generation int32) error {
	defer g.advance(now)
	if g.state == stateDead {
		return g.errorf(ErrCoordinatorNotAvailable, "deleted")
	}
	if instanceID != nil {
		if cur, ok := g.static[*instanceID]; ok && cur != memberID {
			return g.errorf(ErrFencedInstanceID, "instance %q is member %q now, not %q", *instanceID, cur, memberID)
		}
	}
	if generation < 0 && g.state == stateEmpty {
		return nil
	}
	m := g.byID[memberID]
	switch {
	case m == nil:
		return g.errorf(ErrUnknownMemberID, "no member %q", memberID)
	case generation != g.generation:
		return g.errorf(ErrIllegalGeneration, "generation %d, group is at %d", generation, g.generation)
	case g.state == stateCompletingRebalance:
		// The member has its join response but not its assignment.
		return g.errorf(ErrRebalanceInProgress, "awaiting assignment")
	}
	m.expires = now.Add(m.session)
	return nil
}

// txnCommitCheck decides whether a transactional offset commit may go
// ahead (Kafka's GroupCoordinator.validateOffsetCommit for transactional
// commits): a request naming no member (TxnOffsetCommit v0-v2) commits
// whatever the group's state; one naming a member must name a current one
// (a static member by its current id) and the group's generation. Unlike
// commitCheck it leaves the member's session alone and accepts a commit
// while the group awaits its assignment, as Kafka does.
func (g *group) txnCommitCheck(now time.Time, memberID string, instanceID *string, generation int32) error {
	defer g.advance(now)
	switch {
	case g.state == stateDead:
		return g.errorf(ErrCoordinatorNotAvailable, "deleted")
	case generation < 0 && g.state == stateEmpty:
		return nil
	case generation < 0 && memberID == "" && instanceID == nil:
		return nil
	}
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		switch {
		case !ok:
			return g.errorf(ErrUnknownMemberID, "no static member %q", *instanceID)
		case cur != memberID:
			return g.errorf(ErrFencedInstanceID, "instance %q is member %q now, not %q", *instanceID, cur, memberID)
		}
	}
	switch {
	case g.byID[memberID] == nil:
		return g.errorf(ErrUnknownMemberID, "no member %q", memberID)
	case generation != g.generation:
		return g.errorf(ErrIllegalGeneration, "generation %d, group is at %d", generation, g.generation)
	}
	return nil
}

// tick performs the transitions due at now (session, join phase and sync
// phase expirations).
func (g *group) tick(now time.Time) { g.advance(now) }

// nextDeadline is when tick is next due; zero if nothing is pending.
func (g *group) nextDeadline() time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, at := range g.pending {
		earlier(at)
	}
	for _, m := range g.order {
		if m.isNew || m.joinWaiter == 0 && m.syncWaiter == 0 {
			earlier(m.expires)
		}
	}
	if len(g.pendingSync) > 0 {
		earlier(g.syncAt)
	}
	if g.state == statePreparingRebalance {
		earlier(g.rebalanceAt)
	}
	return next
}

// describe is the group as DescribeGroups shows it.
func (g *group) describe() Description {
	d := Description{Group: g.id, State: g.state.String(), ProtocolType: g.protocolType}
	stable := g.state == stateStable
	if stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.order {
		x := Member{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
		if stable {
			x.Metadata, x.Assignment = m.metadataFor(g.protocol), m.assignment
		}
		d.Members = append(d.Members, x)
	}
	return d
}
