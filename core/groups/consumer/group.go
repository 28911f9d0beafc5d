package consumer

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/weir-broker/weir/core/groups/assignor"
)

// Member epochs with a meaning of their own in a heartbeat.
const (
	JoinEpoch        = 0
	LeaveEpoch       = -1 // the member leaves the group
	StaticLeaveEpoch = -2 // a static member leaves for now, keeping its partitions
)

// Defaults of Config (Kafka's group.consumer.* broker defaults).
const (
	DefaultSessionTimeout    = 45 * time.Second
	DefaultHeartbeatInterval = 5 * time.Second
)

// Config is the coordinator's settings for consumer groups.
type Config struct {
	// SessionTimeout: a member that does not heartbeat for this long is
	// removed. Default 45s (group.consumer.session.timeout.ms).
	SessionTimeout time.Duration
	// HeartbeatInterval is what members are told to heartbeat at. Default 5s
	// (group.consumer.heartbeat.interval.ms).
	HeartbeatInterval time.Duration
	// MaxSize bounds the members of a group; 0 is unbounded
	// (group.consumer.max.size).
	MaxSize int
	// Assignors served; the first is the default. Default: uniform, range.
	Assignors []assignor.Assignor
}

// Validate fills defaults and rejects nonsense.
func (c Config) Validate() (Config, error) {
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if len(c.Assignors) == 0 {
		c.Assignors = []assignor.Assignor{assignor.Uniform, assignor.Range}
	}
	if c.SessionTimeout < 0 || c.HeartbeatInterval < 0 || c.HeartbeatInterval >= c.SessionTimeout || c.MaxSize < 0 {
		return c, fmt.Errorf("consumer group: config: session timeout %v, heartbeat interval %v, max size %d",
			c.SessionTimeout, c.HeartbeatInterval, c.MaxSize)
	}
	return c, nil
}

// Topics is the topic metadata a group assigns from.
type Topics interface {
	// Topic returns the topic named name; false when there is none.
	Topic(name string) (assignor.Topic, bool)
	// Names lists every topic (regex subscriptions match against them).
	Names() []string
}

// HeartbeatRequest is one ConsumerGroupHeartbeat. Fields that may be left
// out when unchanged are nil (or -1).
type HeartbeatRequest struct {
	MemberID    string
	MemberEpoch int32
	InstanceID  *string
	RackID      *string
	// RebalanceTimeoutMillis bounds how long the member may take to revoke
	// partitions; -1 unchanged.
	RebalanceTimeoutMillis int32
	SubscribedTopicNames   []string
	SubscribedTopicRegex   *string
	ServerAssignor         *string
	// Owned are the partitions the member owns; nil when not sent.
	Owned                []TopicPartitions
	ClientID, ClientHost string
}

// HeartbeatResponse answers a heartbeat. Assignment is nil when the
// member's assignment did not change and the request was not a full one.
type HeartbeatResponse struct {
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	Assignment        []TopicPartitions
}

type memberState int8

const (
	stable     memberState = iota
	unrevoked              // waiting for the member to revoke partitions
	unreleased             // waiting for other members to release partitions
)

func (s memberState) String() string {
	return [...]string{"stable", "unrevoked_partitions", "unreleased_partitions"}[s]
}

type member struct {
	id                   string
	instanceID, rackID   *string
	clientID, clientHost string
	epoch, prevEpoch     int32
	state                memberState
	assigned, revoking   parts
	rebalanceTimeout     time.Duration
	topics               []string // sorted
	regex                string
	re                   *regexp.Regexp
	assignor             string
	sessionDeadline      time.Time
	revokeDeadline       time.Time // zero unless unrevoked
}

func (m *member) setEpoch(e int32) {
	if e != m.epoch {
		m.prevEpoch, m.epoch = m.epoch, e
	}
}

// holder is the member holding a partition (assigned or pending
// revocation) and the member epoch at which it got it.
type holder struct {
	member string
	since  int32
}

// Group is one consumer group. It is not safe for concurrent use.
type Group struct {
	id                 string
	cfg                Config
	epoch, targetEpoch int32
	assignorName       string // of the current target
	members            map[string]*member
	static             map[string]string // instance id -> member id
	target             map[string]parts
	holders            map[tp]holder
	// subscribed is the subscription metadata: every topic some member
	// subscribes to that exists, by name.
	subscribed map[string]assignor.Topic
	// names and regexes count the members subscribing to each topic name
	// and each regex, so resolving the subscription costs one lookup per
	// name, not one per member and name.
	names   map[string]int
	regexes map[string]*regexp.Regexp
	reCount map[string]int
}

// New returns an empty group. cfg must have been validated.
func New(id string, cfg Config) *Group {
	return &Group{id: id, cfg: cfg, members: map[string]*member{}, static: map[string]string{},
		target: map[string]parts{}, holders: map[tp]holder{}, subscribed: map[string]assignor.Topic{},
		names: map[string]int{}, regexes: map[string]*regexp.Regexp{}, reCount: map[string]int{}}
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// Empty reports whether the group has no members.
func (g *Group) Empty() bool { return len(g.members) == 0 }

// Epoch is the group epoch.
func (g *Group) Epoch() int32 { return g.epoch }

// State is Kafka's name of the group's state: Empty, Assigning (the target
// is behind the group epoch), Reconciling (some member is not at the target)
// or Stable.
func (g *Group) State() string {
	switch {
	case len(g.members) == 0:
		return "Empty"
	case g.epoch > g.targetEpoch:
		return "Assigning"
	}
	for _, m := range g.members {
		if m.state != stable || m.epoch != g.targetEpoch {
			return "Reconciling"
		}
	}
	return "Stable"
}

// Check validates a heartbeat against the protocol's rules, before any
// group is looked at (ErrInvalidRequest, ErrInvalidRegex,
// ErrUnsupportedAssignor); Heartbeat checks it too.
func (c Config) Check(r HeartbeatRequest) error {
	bad := func(why string) error { return fmt.Errorf("%w: %s", ErrInvalidRequest, why) }
	switch {
	case r.MemberID == "":
		return bad("member id can't be empty")
	case r.InstanceID != nil && *r.InstanceID == "":
		return bad("instance id can't be empty")
	case r.RackID != nil && *r.RackID == "":
		return bad("rack id can't be empty")
	case r.MemberEpoch < StaticLeaveEpoch:
		return bad(fmt.Sprintf("member epoch %d is invalid", r.MemberEpoch))
	case r.MemberEpoch == JoinEpoch && r.RebalanceTimeoutMillis < 0:
		return bad("rebalance timeout must be provided in the first request")
	case r.MemberEpoch == JoinEpoch && (r.Owned == nil || len(r.Owned) > 0):
		return bad("owned topic partitions must be empty when (re-)joining")
	case r.MemberEpoch == JoinEpoch && r.SubscribedTopicNames == nil && r.SubscribedTopicRegex == nil:
		return bad("subscribed topic names or regex must be set in the first request")
	}
	if r.SubscribedTopicRegex != nil && *r.SubscribedTopicRegex != "" {
		if _, err := regexp.Compile(anchored(*r.SubscribedTopicRegex)); err != nil {
			return fmt.Errorf("%w: %q: %v", ErrInvalidRegex, *r.SubscribedTopicRegex, err)
		}
	}
	if r.ServerAssignor != nil && c.assignor(*r.ServerAssignor) == nil {
		var names []string
		for _, a := range c.Assignors {
			names = append(names, a.Name())
		}
		return fmt.Errorf("%w: %q (served: %v)", ErrUnsupportedAssignor, *r.ServerAssignor, names)
	}
	return nil
}

// anchored makes a regex match whole names, as Java's Matcher.matches.
func anchored(re string) string { return `^(?:` + re + `)$` }

func (c Config) assignor(name string) assignor.Assignor {
	for _, a := range c.Assignors {
		if a.Name() == name {
			return a
		}
	}
	return nil
}

// Heartbeat handles a ConsumerGroupHeartbeat at time now, with topics the
// current topic metadata.
func (g *Group) Heartbeat(now time.Time, topics Topics, r HeartbeatRequest) (HeartbeatResponse, error) {
	fail := HeartbeatResponse{MemberID: r.MemberID, MemberEpoch: r.MemberEpoch}
	if err := g.cfg.Check(r); err != nil {
		return fail, err
	}
	if r.MemberEpoch == LeaveEpoch || r.MemberEpoch == StaticLeaveEpoch {
		return g.leave(r)
	}
	m, joined, err := g.memberFor(now, r)
	if err != nil {
		return fail, err
	}
	changed := joined
	if r.InstanceID != nil {
		m.instanceID = cloneStr(r.InstanceID)
	}
	if r.RackID != nil {
		m.rackID = cloneStr(r.RackID)
	}
	if r.RebalanceTimeoutMillis >= 0 {
		m.rebalanceTimeout = time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
	}
	if r.ServerAssignor != nil && *r.ServerAssignor != m.assignor {
		m.assignor, changed = *r.ServerAssignor, true
	}
	if r.SubscribedTopicNames != nil {
		names := slices.Clone(r.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.topics) {
			g.count(m, -1)
			m.topics, changed = names, true
			g.count(m, +1)
		}
	}
	if r.SubscribedTopicRegex != nil && *r.SubscribedTopicRegex != m.regex {
		g.count(m, -1)
		m.regex, m.re, changed = *r.SubscribedTopicRegex, nil, true
		if m.regex != "" {
			m.re = regexp.MustCompile(anchored(m.regex)) // validated
		}
		g.count(m, +1)
	}
	m.clientID, m.clientHost = r.ClientID, r.ClientHost
	m.sessionDeadline = now.Add(g.cfg.SessionTimeout)

	if sub := g.resolve(topics); !maps.Equal(sub, g.subscribed) {
		g.subscribed, changed = sub, true
	}
	if changed {
		g.epoch++
	}
	if g.epoch > g.targetEpoch {
		g.computeTarget()
	}
	before := m.assigned
	g.reconcile(now, m, r.Owned)

	resp := HeartbeatResponse{MemberID: m.id, MemberEpoch: m.epoch, HeartbeatInterval: g.cfg.HeartbeatInterval}
	full := r.MemberEpoch == JoinEpoch ||
		r.RebalanceTimeoutMillis >= 0 && (r.SubscribedTopicNames != nil || r.SubscribedTopicRegex != nil) && r.Owned != nil
	if full || !before.equal(m.assigned) {
		resp.Assignment = m.assigned.list()
	}
	return resp, nil
}

// memberFor finds (or, for a join, makes) the heartbeat's member and checks
// its epoch; joined reports a new member.
func (g *Group) memberFor(now time.Time, r HeartbeatRequest) (m *member, joined bool, err error) {
	if r.InstanceID != nil {
		return g.staticMember(now, r)
	}
	m = g.members[r.MemberID]
	if r.MemberEpoch == JoinEpoch {
		if m != nil {
			// A client rejoining under its id owns nothing (a join lists
			// no partitions): start it afresh.
			g.remove(m)
		}
		if g.cfg.MaxSize > 0 && len(g.members) >= g.cfg.MaxSize {
			return nil, false, fmt.Errorf("%w: %d members", ErrGroupFull, g.cfg.MaxSize)
		}
		return g.add(r.MemberID), true, nil
	}
	if m == nil {
		return nil, false, fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, r.MemberID, g.id)
	}
	return m, false, checkEpoch(m, r.MemberEpoch, r.Owned)
}

func (g *Group) staticMember(now time.Time, r HeartbeatRequest) (*member, bool, error) {
	inst := *r.InstanceID
	old := g.members[g.static[inst]]
	if r.MemberEpoch != JoinEpoch {
		switch {
		case old == nil:
			return nil, false, fmt.Errorf("%w: instance id %q is not a member of group %q", ErrUnknownMemberID, inst, g.id)
		case old.id != r.MemberID:
			return nil, false, fmt.Errorf("%w: instance id %q is member %q, not %q", ErrFencedInstanceID, inst, old.id, r.MemberID)
		}
		return old, false, checkEpoch(old, r.MemberEpoch, r.Owned)
	}
	if old == nil || old.id == r.MemberID {
		m, joined, err := g.memberFor(now, HeartbeatRequest{MemberID: r.MemberID, MemberEpoch: JoinEpoch})
		if err == nil {
			g.static[inst] = m.id
		}
		return m, joined, err
	}
	if old.epoch != StaticLeaveEpoch {
		return nil, false, fmt.Errorf("%w: instance id %q is still member %q", ErrUnreleasedInstanceID, inst, old.id)
	}
	if g.members[r.MemberID] != nil {
		g.remove(g.members[r.MemberID])
	}
	// The instance comes back under a new member id: the new member takes
	// the old one's place and assignment, without a rebalance.
	m := &member{id: r.MemberID, instanceID: old.instanceID, rackID: old.rackID, topics: old.topics,
		regex: old.regex, re: old.re, assignor: old.assignor, rebalanceTimeout: old.rebalanceTimeout,
		assigned: old.assigned, revoking: parts{}}
	delete(g.members, old.id)
	g.members[m.id] = m
	g.static[inst] = m.id
	if t, ok := g.target[old.id]; ok {
		g.target[m.id] = t
		delete(g.target, old.id)
	}
	for k, h := range g.holders {
		if h.member == old.id {
			if old.revoking.has(k.topic, k.p) {
				delete(g.holders, k)
			} else {
				g.holders[k] = holder{member: m.id, since: 0}
			}
		}
	}
	return m, false, nil
}

// checkEpoch is Kafka's throwIfConsumerGroupMemberEpochIsInvalid.
func checkEpoch(m *member, epoch int32, owned []TopicPartitions) error {
	if epoch > m.epoch || epoch < m.epoch && (epoch != m.prevEpoch || !subset(owned, m.assigned)) {
		return fmt.Errorf("%w: member %q sent epoch %d, its epoch is %d; it must give up its partitions and rejoin",
			ErrFencedMemberEpoch, m.id, epoch, m.epoch)
	}
	return nil
}

func (g *Group) add(id string) *member {
	m := &member{id: id, assigned: parts{}, revoking: parts{}}
	g.members[id] = m
	return m
}

// remove takes a member out of the group: its partitions are free, and the
// group epoch moves so the others are assigned them.
func (g *Group) remove(m *member) {
	delete(g.members, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	delete(g.target, m.id)
	g.count(m, -1)
	for k, h := range g.holders {
		if h.member == m.id {
			delete(g.holders, k)
		}
	}
	g.epoch++
}

// leave handles epochs -1 and -2.
func (g *Group) leave(r HeartbeatRequest) (HeartbeatResponse, error) {
	resp := HeartbeatResponse{MemberID: r.MemberID, MemberEpoch: r.MemberEpoch}
	var m *member
	if r.InstanceID != nil {
		m = g.members[g.static[*r.InstanceID]]
		switch {
		case m == nil:
			return resp, fmt.Errorf("%w: instance id %q is not a member of group %q", ErrUnknownMemberID, *r.InstanceID, g.id)
		case m.id != r.MemberID:
			return resp, fmt.Errorf("%w: instance id %q is member %q, not %q", ErrFencedInstanceID, *r.InstanceID, m.id, r.MemberID)
		}
	} else if m = g.members[r.MemberID]; m == nil {
		return resp, fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, r.MemberID, g.id)
	} else if r.MemberEpoch == StaticLeaveEpoch && m.instanceID == nil {
		// Kafka wants the instance id with -2; franz-go leaves without it,
		// so a static member is also found by its member id.
		return resp, fmt.Errorf("%w: epoch -2 from %q, which is not a static member", ErrInvalidRequest, m.id)
	}
	if r.MemberEpoch == StaticLeaveEpoch {
		// Gone for now: its partitions stay its own until its session
		// times out or the instance rejoins.
		m.setEpoch(StaticLeaveEpoch)
		return resp, nil
	}
	g.remove(m)
	return resp, nil
}

// count adds (d = +1) or removes (d = -1) m's subscription to the group's
// counts.
func (g *Group) count(m *member, d int) {
	for _, n := range m.topics {
		if g.names[n] += d; g.names[n] <= 0 {
			delete(g.names, n)
		}
	}
	if m.re == nil {
		return
	}
	if g.reCount[m.regex] += d; g.reCount[m.regex] <= 0 {
		delete(g.reCount, m.regex)
		delete(g.regexes, m.regex)
	} else {
		g.regexes[m.regex] = m.re
	}
}

// resolve computes the subscription metadata: every existing topic some
// member subscribes to, by name or regex.
func (g *Group) resolve(topics Topics) map[string]assignor.Topic {
	out := make(map[string]assignor.Topic, len(g.subscribed))
	for n := range g.names {
		if t, ok := topics.Topic(n); ok {
			out[n] = t
		}
	}
	if len(g.regexes) == 0 {
		return out
	}
	for _, n := range topics.Names() {
		if _, done := out[n]; done {
			continue
		}
		for _, re := range g.regexes {
			if re.MatchString(n) {
				if t, ok := topics.Topic(n); ok {
					out[n] = t
				}
				break
			}
		}
	}
	return out
}

// subscribes reports whether m subscribes to the topic named name.
func (m *member) subscribes(name string) bool {
	_, ok := slices.BinarySearch(m.topics, name)
	return ok || m.re != nil && m.re.MatchString(name)
}

// preferred is the assignor most members ask for (ties to the earlier in
// Config.Assignors), or the default.
func (g *Group) preferred() assignor.Assignor {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best := g.cfg.Assignors[0]
	for _, a := range g.cfg.Assignors {
		if votes[a.Name()] > votes[best.Name()] {
			best = a
		}
	}
	return best
}

// computeTarget runs the assignor for the current group epoch.
func (g *Group) computeTarget() {
	spec := assignor.Spec{Topics: map[[16]byte]assignor.Topic{}}
	names := slices.Sorted(maps.Keys(g.subscribed))
	for _, n := range names {
		t := g.subscribed[n]
		spec.Topics[t.ID] = t
	}
	ids := slices.Sorted(maps.Keys(g.members))
	for _, id := range ids {
		m := g.members[id]
		am := assignor.Member{ID: id, Current: g.target[id]}
		for _, n := range names {
			if m.subscribes(n) {
				am.Topics = append(am.Topics, g.subscribed[n].ID)
			}
		}
		spec.Members = append(spec.Members, am)
	}
	a := g.preferred()
	out := a.Assign(spec)
	g.target = make(map[string]parts, len(out))
	for id, ps := range out {
		g.target[id] = parts(ps)
		for t, l := range ps {
			if len(l) == 0 {
				delete(g.target[id], t)
			}
		}
	}
	g.targetEpoch, g.assignorName = g.epoch, a.Name()
}

// Tick removes members whose session timed out, and members that did not
// revoke partitions within their rebalance timeout. It returns why each
// removed member went, for the log.
func (g *Group) Tick(now time.Time) []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		switch {
		case !now.Before(m.sessionDeadline):
			out = append(out, fmt.Sprintf("member %s fenced: no heartbeat within the session timeout %v", id, g.cfg.SessionTimeout))
		case m.state == unrevoked && !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline):
			out = append(out, fmt.Sprintf("member %s fenced: partitions not revoked within its rebalance timeout %v", id, m.rebalanceTimeout))
		default:
			continue
		}
		g.remove(m)
	}
	return out
}

// NextDeadline is when Tick next has something to do (zero: nothing).
func (g *Group) NextDeadline() time.Time {
	var next time.Time
	for _, m := range g.members {
		for _, d := range []time.Time{m.sessionDeadline, m.revokeDeadline} {
			if !d.IsZero() && (next.IsZero() || d.Before(next)) {
				next = d
			}
		}
	}
	return next
}

// Partition names one partition by topic name.
type Partition struct {
	Topic     string
	Partition int32
}

// CheckCommit validates an OffsetCommit for the group (Kafka's
// ConsumerGroup.validateOffsetCommit, with KIP-1251): with a negative epoch
// and the group empty, anyone may commit; otherwise the member must exist
// (ErrUnknownMemberID), and its epoch must be the member's, or older but at
// or after the epoch at which the member got each committed partition, which
// it must still hold (ErrStaleMemberEpoch).
func (g *Group) CheckCommit(memberID string, epoch int32, committed []Partition) error {
	if epoch < 0 && len(g.members) == 0 {
		return nil
	}
	m := g.members[memberID]
	if m == nil {
		return fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, memberID, g.id)
	}
	if epoch == m.epoch {
		return nil
	}
	if epoch > m.epoch || epoch < 0 {
		return fmt.Errorf("%w: commit with epoch %d, member %q is at %d", ErrStaleMemberEpoch, epoch, m.id, m.epoch)
	}
	for _, p := range committed {
		t, ok := g.subscribed[p.Topic]
		h, held := g.holders[tp{t.ID, p.Partition}]
		if !ok || !held || h.member != m.id || h.since > epoch {
			return fmt.Errorf("%w: commit of %s-%d with epoch %d, member %q is at %d and does not hold it since then",
				ErrStaleMemberEpoch, p.Topic, p.Partition, epoch, m.id, m.epoch)
		}
	}
	return nil
}

// CheckFetch validates an OffsetFetch (OffsetFetch v9+ carries the member):
// without a member id (an admin) anything goes; otherwise the member must
// exist and the epoch be its own.
func (g *Group) CheckFetch(memberID *string, epoch int32) error {
	if memberID == nil || *memberID == "" && epoch < 0 {
		return nil
	}
	m := g.members[*memberID]
	switch {
	case m == nil:
		return fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, *memberID, g.id)
	case epoch != m.epoch:
		return fmt.Errorf("%w: fetch with epoch %d, member %q is at %d", ErrStaleMemberEpoch, epoch, m.id, m.epoch)
	}
	return nil
}

func cloneStr(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

// sortedMembers returns the members by id.
func (g *Group) sortedMembers() []*member {
	out := slices.Collect(maps.Values(g.members))
	slices.SortFunc(out, func(a, b *member) int { return cmp.Compare(a.id, b.id) })
	return out
}
