package groups

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/weir-broker/weir/core/groups/consumer"
	"github.com/weir-broker/weir/core/partlog"
)

// Coordinator is the group coordinator of a broker: the membership state
// machine of every group (see group) behind one mutex, the requests that must
// wait (JoinGroup, SyncGroup) parked on channels, one timer from
// Options.Clock for the earliest deadline of any group, and the committed
// offsets of every partition of __consumer_offsets the broker leads (see
// Load). It is safe for concurrent use.
type Coordinator struct {
	o Options

	mu     sync.Mutex
	closed bool
	groups map[string]*group
	// cgroups are the KIP-848 consumer groups (consumer_groups.go).
	cgroups map[string]*consumer.Group
	// shards are the partitions of __consumer_offsets loaded or loading.
	shards  map[int32]*shard
	lastL   uint64 // numbers the loads
	waiters map[uint64]waiter
	lastW   uint64
	// legacy is an old-layout store whose groups are imported as their
	// partitions load (Import).
	legacy *Legacy
	// timer fires at timerAt, the earliest deadline known when it was set
	// (deadlines only move later between events, so firing early is
	// harmless: the callback re-arms). timerSeq tells a stale callback
	// from the current one.
	timer    partlog.Timer
	timerAt  time.Time
	timerSeq uint64
}

// shard is one partition of __consumer_offsets: loading until its store is
// set.
type shard struct {
	partition int32
	load      uint64 // which Load this is
	log       Log
	store     *offsetStore // nil while loading
	// completions are the transaction markers that came while it loaded
	// (CompleteTxn), applied when the replay ends.
	completions []completion
}

// waiter is a parked JoinGroup or SyncGroup: the channel of its reply and
// its group.
type waiter struct {
	ch    chan reply
	group string
}

// New returns a coordinator that serves no group until the partitions of
// __consumer_offsets that hold them are loaded (Load).
func New(o Options) (*Coordinator, error) {
	o, err := o.validate()
	if err != nil {
		return nil, err
	}
	return &Coordinator{o: o, groups: map[string]*group{}, shards: map[int32]*shard{},
		waiters: map[uint64]waiter{}, cgroups: map[string]*consumer.Group{}}, nil
}

// Load makes the coordinator serve the groups of partition p of
// __consumer_offsets, whose log is log: StartLoad and its replay.
func (c *Coordinator) Load(ctx context.Context, p int32, log Log) error {
	return c.StartLoad(p, log)(ctx)
}

// StartLoad registers partition p, whose log is log, as loading: from now
// on its groups get ErrCoordinatorLoadInProgress. The replay it returns (the
// caller runs it, on a goroutine of its own if it likes) reads the log up to
// its end, imports the partition's groups of an old-layout store (Import),
// and then serves them: each group with a group metadata record as that
// record says (a Stable group with its members, each alive for a session
// timeout; an Empty one; see group_metadata.go), each other group with
// committed offsets Empty. Starting
// a load of a partition loaded or loading already with the same log does
// nothing (its replay returns nil at once); with another log, it unloads
// first. An Unload or Close before the replay ends abandons it
// (ErrNotCoordinator), and so does ctx ending. A log that cannot be read is
// an error naming the offset; the partition then stays unloaded.
func (c *Coordinator) StartLoad(p int32, log Log) func(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return func(context.Context) error { return errClosed }
	}
	if sh := c.shards[p]; sh != nil {
		if sh.log == log {
			return func(context.Context) error { return nil }
		}
		c.unloadLocked(p)
	}
	c.lastL++
	sh := &shard{partition: p, load: c.lastL, log: log}
	c.shards[p] = sh
	return func(ctx context.Context) error { return c.replay(ctx, sh) }
}

// replay is a load's replay (see StartLoad).
func (c *Coordinator) replay(ctx context.Context, sh *shard) error {
	p := sh.partition
	start := c.o.Clock.Now()
	st := newStore(sh.log)
	err := st.replay(ctx, sh.log.EndOffset())

	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.shards[p]; cur != sh || c.closed {
		return fmt.Errorf("%w: partition %d was unloaded while it loaded", ErrNotCoordinator, p)
	}
	if err == nil {
		_, err = c.importLocked(p, st)
	}
	if err != nil {
		delete(c.shards, p)
		return fmt.Errorf("groups: load partition %d: %w", p, err)
	}
	sh.store = st
	for _, cp := range sh.completions {
		st.completeTxn(cp.producerID, cp.commit)
	}
	sh.completions = nil
	now := c.o.Clock.Now()
	restored := 0
	for _, id := range slices.Sorted(maps.Keys(st.metas)) {
		if c.groups[id] == nil {
			g := restoreGroup(id, &c.o, st.metas[id], now)
			c.groups[id] = g
			c.arm(g.nextDeadline())
			if len(g.order) > 0 {
				restored++
			}
		}
	}
	for _, id := range st.groups() {
		if c.groups[id] == nil {
			c.groups[id] = newGroup(id, &c.o)
		}
	}
	c.o.Logger.Info("offsets partition loaded", "partition", p, "groups", len(st.offsets), "offsets", st.live,
		"group_metadata", len(st.metas), "groups_with_members", restored, "records", st.records,
		"skipped", st.skipped, "open_transactions", len(st.txns), "took", now.Sub(start))
	return nil
}

// Unload stops serving the groups of partition p (this broker no longer
// leads it): their parked requests are answered ErrNotCoordinator, and
// their membership and offsets are forgotten here; the new leader loads
// them from the log. Unloading a partition not loaded does nothing.
func (c *Coordinator) Unload(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unloadLocked(p)
}

func (c *Coordinator) unloadLocked(p int32) {
	if c.shards[p] == nil {
		return
	}
	delete(c.shards, p)
	for w, wt := range c.waiters {
		if c.o.PartitionFor(wt.group) == p {
			wt.ch <- reply{waiter: w, err: fmt.Errorf("%w: partition %d of the offsets topic moved", ErrNotCoordinator, p)}
			delete(c.waiters, w)
		}
	}
	for id := range c.groups {
		if c.o.PartitionFor(id) == p {
			delete(c.groups, id)
		}
	}
	for id := range c.cgroups {
		if c.o.PartitionFor(id) == p {
			delete(c.cgroups, id)
		}
	}
	c.o.Logger.Info("offsets partition unloaded", "partition", p)
}

// Loaded reports whether partition p is loaded (not merely loading).
func (c *Coordinator) Loaded(p int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh := c.shards[p]
	return sh != nil && sh.store != nil
}

// storeOf returns the offsets of group's partition: ErrNotCoordinator when
// it is not loaded here, ErrCoordinatorLoadInProgress while it loads,
// ErrCoordinatorNotAvailable once closed. Called with mu held.
func (c *Coordinator) storeOf(group string) (*offsetStore, error) {
	if c.closed {
		return nil, errClosed
	}
	p := c.o.PartitionFor(group)
	sh := c.shards[p]
	switch {
	case sh == nil:
		return nil, fmt.Errorf("%w: partition %d of the offsets topic is not loaded here", ErrNotCoordinator, p)
	case sh.store == nil:
		return nil, fmt.Errorf("%w: partition %d of the offsets topic", ErrCoordinatorLoadInProgress, p)
	}
	return sh.store, nil
}

// Close answers every waiting JoinGroup and SyncGroup with
// ErrCoordinatorNotAvailable (clients look for the coordinator again) and
// stops the timer. The logs are the broker's: Close leaves them open. Later
// calls fail with ErrCoordinatorNotAvailable.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	for w, wt := range c.waiters {
		wt.ch <- reply{waiter: w, err: fmt.Errorf("%w: shutting down", ErrCoordinatorNotAvailable)}
		delete(c.waiters, w)
	}
	clear(c.shards)
	return nil
}

var errClosed = fmt.Errorf("%w: closed", ErrCoordinatorNotAvailable)

// Join handles a JoinGroup and blocks until the join phase ends (or ctx
// ends, with ctx.Err()). On ErrMemberIDRequired the result carries the new
// MemberID. The returned slices must not be modified.
func (c *Coordinator) Join(ctx context.Context, r JoinRequest) (JoinResult, error) {
	fail := JoinResult{Generation: -1, MemberID: r.MemberID}
	if r.Group == "" {
		return fail, fmt.Errorf("%w: empty group id", ErrInvalidGroupID)
	}
	r.InstanceID = cloneString(r.InstanceID)
	r.Protocols = slices.Clone(r.Protocols)
	for i := range r.Protocols {
		r.Protocols[i].Metadata = slices.Clone(r.Protocols[i].Metadata)
	}
	c.mu.Lock()
	if _, err := c.storeOf(r.Group); err != nil {
		c.mu.Unlock()
		return fail, err
	}
	if err := c.classicJoinAllowed(r.Group); err != nil {
		c.mu.Unlock()
		return fail, err
	}
	g := c.groups[r.Group]
	if g == nil {
		if r.MemberID != "" {
			c.mu.Unlock()
			return fail, fmt.Errorf("%w: group %q does not exist", ErrUnknownMemberID, r.Group)
		}
		g = newGroup(r.Group, &c.o)
		c.groups[r.Group] = g
	}
	w, ch := c.newWaiter(r.Group)
	g.join(c.o.Clock.Now(), w, r)
	c.settle(g)
	c.mu.Unlock()
	rep, err := c.wait(ctx, w, ch)
	if err != nil {
		return fail, err
	}
	return rep.join, rep.err
}

// Sync handles a SyncGroup and blocks until the leader has sent the
// assignments (or ctx ends, with ctx.Err()).
func (c *Coordinator) Sync(ctx context.Context, r SyncRequest) (SyncResult, error) {
	if r.Group == "" {
		return SyncResult{}, fmt.Errorf("%w: empty group id", ErrInvalidGroupID)
	}
	r.InstanceID = cloneString(r.InstanceID)
	if r.Assignments != nil {
		a := make(map[string][]byte, len(r.Assignments))
		for id, b := range r.Assignments {
			a[id] = slices.Clone(b)
		}
		r.Assignments = a
	}
	c.mu.Lock()
	if _, err := c.storeOf(r.Group); err != nil {
		c.mu.Unlock()
		return SyncResult{}, err
	}
	g := c.groups[r.Group]
	if g == nil {
		c.mu.Unlock()
		return SyncResult{}, fmt.Errorf("%w: group %q does not exist", ErrUnknownMemberID, r.Group)
	}
	w, ch := c.newWaiter(r.Group)
	g.sync(c.o.Clock.Now(), w, r)
	c.settle(g)
	c.mu.Unlock()
	rep, err := c.wait(ctx, w, ch)
	if err != nil {
		return SyncResult{}, err
	}
	return rep.sync, rep.err
}

// Heartbeat keeps a member's session alive. ErrRebalanceInProgress tells it
// to rejoin; ErrIllegalGeneration and ErrUnknownMemberID that it is stale.
func (c *Coordinator) Heartbeat(group, memberID string, instanceID *string, generation int32) error {
	if group == "" {
		return fmt.Errorf("%w: empty group id", ErrInvalidGroupID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.storeOf(group); err != nil {
		return err
	}
	g := c.groups[group]
	if g == nil {
		return fmt.Errorf("%w: group %q does not exist", ErrUnknownMemberID, group)
	}
	err := g.heartbeat(c.o.Clock.Now(), memberID, instanceID, generation)
	c.settle(g)
	return err
}

// Leave removes members from a group, which then rebalances. err is for the
// whole request (invalid group id, closed); otherwise perMember[i] is the
// outcome for members[i] (ErrUnknownMemberID for an unknown group).
func (c *Coordinator) Leave(group string, members []LeaveMember) (perMember []error, err error) {
	if group == "" {
		return nil, fmt.Errorf("%w: empty group id", ErrInvalidGroupID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.storeOf(group); err != nil {
		return nil, err
	}
	g := c.groups[group]
	if g == nil {
		perMember = make([]error, len(members))
		for i := range perMember {
			perMember[i] = fmt.Errorf("%w: group %q does not exist", ErrUnknownMemberID, group)
		}
		return perMember, nil
	}
	perMember = g.leave(c.o.Clock.Now(), members)
	c.settle(g)
	return perMember, nil
}

// Commit stores committed offsets. Generation -1 with an empty member id is
// a simple commit (a consumer without group management), allowed while the
// group has no members; otherwise the member and generation must be current
// and the group not awaiting its assignment. When err is not nil it applies
// to every partition, and every perPartition entry is err too; otherwise
// perPartition[i] is the outcome for offsets[i]. Offsets are acknowledged
// once they count as committed in the offsets log (Log.Append: on a single
// node the page cache, as Kafka acknowledges them; in a cluster the ISR);
// the wait for that happens without the coordinator's lock, so one commit
// waiting for its replicas holds up no other request (and not the broker
// loading or unloading partitions), and it is applied to what OffsetFetch
// answers in log order.
func (c *Coordinator) Commit(group, memberID string, instanceID *string, generation int32,
	offsets []OffsetCommit) (perPartition []error, err error) {
	all := func(err error) ([]error, error) {
		perPartition = make([]error, len(offsets))
		for i := range perPartition {
			perPartition[i] = err
		}
		return perPartition, err
	}
	if len(group) > maxString {
		return all(fmt.Errorf("%w: group id of %d bytes", ErrInvalidGroupID, len(group)))
	}
	c.mu.Lock()
	locked := true
	defer func() {
		if locked {
			c.mu.Unlock()
		}
	}()
	store, err := c.storeOf(group)
	if err != nil {
		return all(err)
	}
	now := c.o.Clock.Now()
	g := c.groups[group]
	cg := c.cgroups[group]
	if cg != nil {
		// A consumer group: the generation is the member epoch.
		if err := consumerCommitCheck(cg, memberID, generation, offsets); err != nil {
			return all(err)
		}
	} else if g == nil {
		if generation >= 0 {
			return all(fmt.Errorf("%w: group %q does not exist", ErrIllegalGeneration, group))
		}
		g = newGroup(group, &c.o)
		c.groups[group] = g
	}
	settle := func() {
		if cg != nil {
			c.settleConsumer(cg)
		} else {
			c.settle(g)
		}
	}
	if cg == nil {
		err = g.commitCheck(now, memberID, instanceID, generation)
		if err != nil {
			c.settle(g)
			return all(err)
		}
	}
	perPartition = make([]error, len(offsets))
	valid := make([]OffsetCommit, 0, len(offsets))
	var at []int
	for i, oc := range offsets {
		switch {
		case oc.Metadata != nil && len(*oc.Metadata) > c.o.MaxMetadataBytes:
			perPartition[i] = fmt.Errorf("%w: %d bytes for %s-%d, limit %d", ErrOffsetMetadataTooLarge,
				len(*oc.Metadata), oc.Topic, oc.Partition, c.o.MaxMetadataBytes)
		case len(oc.Topic) > maxString:
			perPartition[i] = fmt.Errorf("%w: topic name of %d bytes", ErrInvalidCommitSize, len(oc.Topic))
		default:
			valid = append(valid, oc)
			at = append(at, i)
		}
	}
	pw, wait, err := store.begin(commitEntries(group, valid, now), now)
	if err == nil {
		c.mu.Unlock()
		locked = false
		werr := wait(context.Background())
		c.mu.Lock()
		locked = true
		store.finish(pw, werr)
		settle()
		c.mu.Unlock()
		locked = false
		<-pw.drained // behind a write still waiting, which its own caller finishes
		err = werr
	} else {
		settle()
	}
	if err != nil {
		// The store failing is the coordinator failing: clients retry.
		err = fmt.Errorf("%w: storing offsets: %v", ErrCoordinatorNotAvailable, err)
		c.o.Logger.Error("commit failed", "group", group, "err", err)
		for _, i := range at {
			perPartition[i] = err
		}
	}
	return perPartition, nil
}

// Fetch returns a group's committed offsets for parts (all of them when parts
// is nil); partitions without a committed offset are absent. An unknown group
// has none.
func (c *Coordinator) Fetch(group string, parts []TopicPartition) (map[TopicPartition]Committed, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	store, err := c.storeOf(group)
	if err != nil {
		return nil, err
	}
	return store.fetch(group, parts), nil
}

// Describe describes a group; an unknown group is described as Dead, without
// error, as Kafka does.
func (c *Coordinator) Describe(group string) (Description, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.storeOf(group); err != nil {
		return Description{}, err
	}
	if cg := c.cgroups[group]; cg != nil {
		return classicView(cg), nil
	}
	g := c.groups[group]
	if g == nil {
		return Description{Group: group, State: stateDead.String()}, nil
	}
	return g.describe(), nil
}

// List lists every group of the partitions loaded, sorted by id.
func (c *Coordinator) List() []Listing {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Listing, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, Listing{Group: g.id, ProtocolType: g.protocolType, State: g.state.String()})
	}
	for id, cg := range c.cgroups {
		out = append(out, Listing{Group: id, ProtocolType: "consumer", State: cg.State(), Type: "consumer"})
	}
	slices.SortFunc(out, func(a, b Listing) int { return cmp.Compare(a.Group, b.Group) })
	return out
}

// Delete deletes an empty group and its committed offsets (DeleteGroups).
func (c *Coordinator) Delete(group string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	store, err := c.storeOf(group)
	if err != nil {
		return err
	}
	g := c.groups[group]
	if cg := c.cgroups[group]; cg != nil {
		if !cg.Empty() {
			return fmt.Errorf("%w: consumer group %q is %s", ErrNotEmpty, group, cg.State())
		}
		delete(c.cgroups, group)
		g = newGroup(group, &c.o) // deleted below like an empty classic group
		c.groups[group] = g
	}
	switch {
	case g == nil:
		return fmt.Errorf("%w: %q", ErrGroupIDNotFound, group)
	case g.state != stateEmpty:
		return fmt.Errorf("%w: %q is %v with %d members", ErrNotEmpty, group, g.state, len(g.order))
	}
	err = store.removeGroup(c.o.Clock.Now(), group)
	if err != nil {
		return fmt.Errorf("%w: deleting offsets: %v", ErrCoordinatorNotAvailable, err)
	}
	g.state = stateDead
	delete(c.groups, group)
	return nil
}

// ExpireOffsets deletes the committed offsets of every group that has no
// members and has seen no commit, and no member, for longer than retention:
// Kafka's offsets.retention.minutes (7 days by default), counted from when the
// group became empty or from its newest commit, whichever is later (after a
// restart the time it became empty is its group metadata record's; a group
// without one counts its newest commit alone). It returns the groups
// expired; the broker calls it from its retention loop.
func (c *Coordinator) ExpireOffsets(retention time.Duration) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	now := c.o.Clock.Now()
	cutoff := now.Add(-retention).UnixMilli()
	var expired []string
	for _, p := range slices.Sorted(maps.Keys(c.shards)) {
		store := c.shards[p].store
		if store == nil {
			continue
		}
		exp, err := c.expireLocked(store, now, cutoff)
		expired = append(expired, exp...)
		if err != nil {
			return expired, err
		}
	}
	return expired, nil
}

// expireLocked expires the groups of one partition (see ExpireOffsets).
func (c *Coordinator) expireLocked(store *offsetStore, now time.Time, cutoff int64) ([]string, error) {
	var expired []string
	for _, id := range store.groups() {
		g := c.groups[id]
		if g != nil && g.state != stateEmpty || store.txnPendingFor(id) {
			// Members, or offsets of an open transaction (Kafka keeps
			// those too): not expired.
			continue
		}
		if cg := c.cgroups[id]; cg != nil {
			if !cg.Empty() {
				continue
			}
			delete(c.cgroups, id)
		}
		anchor := int64(math.MinInt64)
		if g != nil && !g.emptySince.IsZero() {
			anchor = g.emptySince.UnixMilli()
		}
		for _, v := range store.offsets[id] {
			anchor = max(anchor, v.commitTime)
		}
		if anchor >= cutoff {
			continue
		}
		if err := store.removeGroup(now, id); err != nil {
			return expired, fmt.Errorf("%w: expiring offsets: %v", ErrCoordinatorNotAvailable, err)
		}
		if g != nil {
			g.state = stateDead
			delete(c.groups, id)
		}
		expired = append(expired, id)
	}
	return expired, nil
}

// RemoveTopic deletes every group's committed offsets for a deleted topic, as
// Kafka does, so that a topic created again under the name starts without
// them.
func (c *Coordinator) RemoveTopic(topic string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosed
	}
	var errs []error
	for _, p := range slices.Sorted(maps.Keys(c.shards)) {
		store := c.shards[p].store
		if store == nil {
			continue
		}
		err := store.removeWhere(c.o.Clock.Now(), func(k offsetKey) bool { return k.Topic == topic })
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: deleting offsets of partition %d: %v", ErrCoordinatorNotAvailable, p, err))
		}
	}
	for id, g := range c.groups {
		c.forget(id, g)
	}
	return errors.Join(errs...)
}

func cloneString(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

// newWaiter registers a channel for one reply. Called with mu held.
func (c *Coordinator) newWaiter(group string) (uint64, chan reply) {
	c.lastW++
	ch := make(chan reply, 1)
	c.waiters[c.lastW] = waiter{ch: ch, group: group}
	return c.lastW, ch
}

// wait waits for the reply to w, or for ctx to end.
func (c *Coordinator) wait(ctx context.Context, w uint64, ch chan reply) (reply, error) {
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
	}
	c.mu.Lock()
	delete(c.waiters, w)
	c.mu.Unlock()
	select {
	case r := <-ch: // it came while we took the lock
		return r, nil
	default:
		// The group still counts the request as waiting, as Kafka does
		// for a client that went away; its answer will be dropped.
		return reply{}, ctx.Err()
	}
}

// settle delivers g's queued replies, writes its metadata record if one is
// due, forgets g if nothing is left of it, and makes sure the timer fires by
// g's next deadline. Called with mu held after every event.
func (c *Coordinator) settle(g *group) {
	c.after(g)
	c.arm(g.nextDeadline())
}

// after delivers g's queued replies and then forgets g, or writes its
// metadata record if one is due. Called with mu held.
func (c *Coordinator) after(g *group) {
	c.deliver(g.take())
	due := g.takePersist()
	if c.forget(g.id, g) || !due {
		return
	}
	if sh := c.shards[c.o.PartitionFor(g.id)]; sh != nil && sh.store != nil {
		v := g.metadataValue(c.o.Clock.Now())
		if !fitsRecord(g.id, &v) {
			c.o.Logger.Warn("group metadata not written: a string is longer than the record format holds", "group", g.id[:min(len(g.id), 100)])
			return
		}
		c.writeMeta(sh.store, g.id, v.AppendTo(nil))
	}
}

// writeMeta appends group's metadata record (value nil: a tombstone) and
// waits for it to commit on a goroutine of its own, logging a failure (see
// group_metadata.go for why nothing waits for it). Called with mu held.
func (c *Coordinator) writeMeta(store *offsetStore, group string, value []byte) {
	wait, err := store.writeMeta(group, value, c.o.Clock.Now())
	if err != nil {
		c.o.Logger.Warn("cannot write group metadata", "group", group, "tombstone", value == nil, "err", err)
		return
	}
	go func() {
		if err := wait(context.Background()); err != nil {
			c.o.Logger.Warn("group metadata not committed", "group", group, "tombstone", value == nil, "err", err)
		}
	}()
}

func (c *Coordinator) deliver(rs []reply) {
	for _, r := range rs {
		if wt, ok := c.waiters[r.waiter]; ok {
			delete(c.waiters, r.waiter)
			wt.ch <- r
		}
	}
}

// forget drops a group with no members, no member ids handed out and no
// committed offsets: nothing would distinguish it from a new one, and
// clients with random group ids (kcat -G) would otherwise pile them up. A
// metadata record it has gets a tombstone (Kafka's cleanupGroupMetadata).
// It reports whether it dropped g.
func (c *Coordinator) forget(id string, g *group) bool {
	if g.state != stateEmpty || !g.empty() {
		return false
	}
	sh := c.shards[c.o.PartitionFor(id)]
	if sh != nil && sh.store != nil && (sh.store.offsets[id] != nil || sh.store.pendingFor(id)) {
		return false
	}
	delete(c.groups, id)
	if sh != nil && sh.store != nil && sh.store.metas[id] != nil {
		c.writeMeta(sh.store, id, nil)
	}
	return true
}

// arm makes the timer fire no later than at (zero: no deadline).
func (c *Coordinator) arm(at time.Time) {
	if at.IsZero() || c.closed || c.timer != nil && !c.timerAt.After(at) {
		return
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	c.timerSeq++
	seq := c.timerSeq
	c.timerAt = at
	c.timer = c.o.Clock.AfterFunc(at.Sub(c.o.Clock.Now()), func() { c.fire(seq) })
}

// fire ticks every group and re-arms the timer for the earliest deadline.
func (c *Coordinator) fire(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || seq != c.timerSeq {
		return
	}
	c.timer, c.timerAt = nil, time.Time{}
	now := c.o.Clock.Now()
	var next time.Time
	for _, g := range c.groups {
		g.tick(now)
		c.after(g)
		if d := g.nextDeadline(); !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	next = c.tickConsumers(now, next)
	c.arm(next)
}

// randomMemberID is Kafka's member id: the client id (or instance id), a
// dash and a random UUID.
func randomMemberID(prefix string) string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}
