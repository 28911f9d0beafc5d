package consumer

import (
	"maps"
	"slices"
	"time"
)

// reconcile moves m one step towards its target assignment (Kafka's
// CurrentAssignmentBuilder); owned is what its heartbeat says it owns (nil:
// not sent).
func (g *Group) reconcile(now time.Time, m *member, owned []TopicPartitions) {
	wasUnrevoked, oldEpoch := m.state == unrevoked, m.epoch
	switch {
	case m.state == stable && m.epoch == g.targetEpoch:
		return
	case m.state == unrevoked:
		if ownsAny(owned, m.revoking) {
			return // still revoking
		}
		g.next(m, m.epoch+1, owned)
	default:
		g.next(m, m.epoch, owned)
	}
	if m.state != unrevoked {
		m.revokeDeadline = time.Time{}
	} else if !wasUnrevoked || m.epoch != oldEpoch {
		m.revokeDeadline = now.Add(m.rebalanceTimeout)
	}
}

// next computes m's next assignment towards the target at epoch (its epoch
// if it must still revoke): it keeps what it has of the target, must revoke
// the rest, and gains the target's partitions that no other member holds.
func (g *Group) next(m *member, epoch int32, owned []TopicPartitions) {
	target := g.target[m.id]
	keep, revoke, gain := parts{}, parts{}, parts{}
	waiting := false
	topics := slices.Collect(maps.Keys(target))
	for t := range m.assigned {
		if _, ok := target[t]; !ok {
			topics = append(topics, t)
		}
	}
	for _, t := range topics {
		for _, p := range m.assigned[t] {
			if target.has(t, p) {
				keep.add(t, p)
			} else {
				revoke.add(t, p)
			}
		}
		for _, p := range target[t] {
			if keep.has(t, p) {
				continue
			}
			if h, held := g.holders[tp{t, p}]; held && h.member != m.id {
				waiting = true // another member still holds it
				continue
			}
			gain.add(t, p)
		}
	}
	switch {
	case revoke.count() > 0 && ownsAny(owned, revoke):
		m.state, m.assigned, m.revoking = unrevoked, keep, revoke
		m.setEpoch(epoch)
	default:
		gain.each(func(k tp) { keep.add(k.topic, k.p) })
		m.state, m.assigned, m.revoking = stable, keep, parts{}
		if waiting {
			m.state = unreleased
		}
		m.setEpoch(g.targetEpoch)
	}
	g.hold(m)
}

// hold records what m holds (assigned or pending revocation), keeping the
// epoch at which it got partitions it held already.
func (g *Group) hold(m *member) {
	for k, h := range g.holders {
		if h.member == m.id && !m.assigned.has(k.topic, k.p) && !m.revoking.has(k.topic, k.p) {
			delete(g.holders, k)
		}
	}
	set := func(k tp) {
		if h, ok := g.holders[k]; !ok || h.member != m.id {
			g.holders[k] = holder{member: m.id, since: m.epoch}
		}
	}
	m.assigned.each(set)
	m.revoking.each(set)
}
