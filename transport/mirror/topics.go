package mirror

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// refresh lists the source topics, sets up the target side of new topics
// and partitions and starts consuming them, and drops deleted topics. An
// error for one topic is logged and retried at the next refresh; the
// returned error is for the listing as a whole.
func (m *Mirror) refresh(ctx context.Context) error {
	if !m.syncTopicOK {
		if err := m.ensureTopic(ctx, m.cfg.SyncTopic(), 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("delete")}); err != nil {
			m.log.Warn("mirror: cannot create the offset-syncs topic on the target; offset syncs wait", "topic", m.cfg.SyncTopic(), "err", err)
		} else {
			m.syncTopicOK = true
		}
	}
	lctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	details, err := m.srcAdm.ListTopics(lctx)
	if err != nil {
		return fmt.Errorf("%w: list topics: %w", ErrSource, err)
	}
	m.mu.Lock()
	known := maps.Clone(m.topics)
	m.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(known)) {
		d, ok := details[name]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			m.dropTopic(name)
			continue
		}
		m.mu.Lock()
		id := m.srcIDs[name]
		m.mu.Unlock()
		if d.Err == nil && d.ID != id && d.ID != ([16]byte{}) && id != ([16]byte{}) {
			// Deleted and re-created between two listings: another
			// topic under the same name, set up again below.
			m.dropTopic(name)
			delete(known, name)
		}
	}
	for _, d := range details.Sorted() {
		if d.Err != nil || !m.cfg.mirrored(d.Topic) {
			continue
		}
		n := int32(len(d.Partitions))
		if n <= known[d.Topic] {
			continue
		}
		if err := m.addPartitions(ctx, d.Topic, [16]byte(d.ID), known[d.Topic], n); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			m.log.Warn("mirror: cannot set up topic, retrying at the next refresh", "topic", d.Topic,
				"target_topic", m.cfg.TargetTopic(d.Topic), "err", err)
		}
	}
	m.refreshEnds(lctx)
	return nil
}

// refreshEnds reads the source ends of the mirrored partitions, so their
// lag stays true while they are paused or idle (fetches update it
// otherwise).
func (m *Mirror) refreshEnds(ctx context.Context) {
	m.mu.Lock()
	topics := slices.Collect(maps.Keys(m.topics))
	m.mu.Unlock()
	if len(topics) == 0 {
		return
	}
	ends, err := m.srcAdm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return // the next refresh tries again; fetches keep it fresh meanwhile
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			return
		}
		if tr := m.tracker(topicPartition{o.Topic, o.Partition}); tr != nil {
			tr.mu.Lock()
			tr.hwm = max(tr.hwm, o.Offset)
			tr.mu.Unlock()
		}
	})
}

// addPartitions sets up partitions [from, to) of source topic t: target
// topic, start positions, trackers, consumption.
func (m *Mirror) addPartitions(ctx context.Context, t string, id [16]byte, from, to int32) error {
	target := m.cfg.TargetTopic(t)
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var configs map[string]*string
	if from == 0 {
		var err error
		if configs, err = m.sourceConfigs(rctx, t); err != nil {
			return err
		}
	}
	if err := m.ensureTopic(rctx, target, to, configs); err != nil {
		return err
	}
	// FetchOffsets, not FetchOffsetsForTopics: that one asks the cached
	// metadata, which may not know the topic just created.
	// In exactly-once mode, RequireStable waits out a transaction being
	// committed: its positions are the ones to start from.
	fctx := rctx
	if m.cfg.ExactlyOnce {
		fctx = kadm.RequireStable(rctx)
	}
	committed, err := m.tgtAdm.FetchOffsets(fctx, m.cfg.Name)
	if err != nil {
		return fmt.Errorf("%w: fetch positions of group %s: %w", ErrTarget, m.cfg.Name, err)
	}
	var bounds kadm.ListedOffsets
	if m.cfg.StartAtLatest {
		bounds, err = m.srcAdm.ListEndOffsets(rctx, t)
	} else {
		bounds, err = m.srcAdm.ListStartOffsets(rctx, t)
	}
	if err == nil {
		err = bounds.Error()
	}
	if err != nil {
		return fmt.Errorf("%w: list offsets of %s: %w", ErrSource, t, err)
	}
	// A position is committed with the source topic's id: one committed
	// for another id is an earlier topic of this name, deleted since, and
	// this one is copied from its start (not from its end, whatever
	// StartAtLatest says: its records are all new).
	idHex := ""
	if id != ([16]byte{}) {
		idHex = hex.EncodeToString(id[:])
	}
	stale := func(o kadm.OffsetResponse) bool { return o.Metadata != "" && idHex != "" && o.Metadata != idHex }
	starts := bounds
	if m.cfg.StartAtLatest {
		for p := from; p < to; p++ {
			if o, ok := committed.Lookup(target, p); ok && o.Err == nil && stale(o) {
				if starts, err = m.srcAdm.ListStartOffsets(rctx, t); err == nil {
					err = starts.Error()
				}
				if err != nil {
					return fmt.Errorf("%w: list offsets of %s: %w", ErrSource, t, err)
				}
				break
			}
		}
	}
	assign := make(map[int32]kgo.Offset, to-from)
	fwdTrs, fwdAt := map[int32]*tracker{}, map[int32]int64{}
	recreated := false
	m.mu.Lock()
	for p := from; p < to; p++ {
		o, ok := committed.Lookup(target, p)
		ok = ok && o.Err == nil && o.At >= 0
		fresh := ok && stale(o)
		start := int64(0)
		if fresh {
			if l, lok := starts.Lookup(t, p); lok {
				start = l.Offset
			}
		} else if ok {
			start = o.At
		} else if l, lok := bounds.Lookup(t, p); lok {
			start = l.Offset
		}
		tr := newTracker(t, target, p, start, m.cfg.OffsetSyncInterval, m.cfg.BackoffMin, m.cfg.BackoffMax)
		tr.srcID, tr.fresh = idHex, fresh
		recreated = recreated || fresh
		assign[p] = kgo.NewOffset().At(start)
		if ok && !fresh {
			tr.committed = o.At
			if o.LeaderEpoch >= 0 {
				// kgo checks the position against the source's log
				// before its first fetch (KIP-320); a truncation below
				// it is then the record path's (truncation.go).
				tr.epoch = o.LeaderEpoch
				assign[p] = kgo.NewOffset().At(start).WithEpoch(o.LeaderEpoch)
			}
		}
		m.parts[topicPartition{t, p}] = tr
		fwdTrs[p], fwdAt[p] = tr, start
	}
	m.topics[t] = to
	m.srcIDs[t] = id
	m.mu.Unlock()
	if recreated {
		m.log.Warn("mirror: source topic re-created since the mirror's positions in it were committed; copying the new one from its start",
			"topic", t, "target_topic", target, "topic_id", idHex)
	}
	if m.fw != nil {
		m.fw.add(t, fwdTrs, fwdAt)
	} else {
		m.src.AddConsumePartitions(map[string]map[int32]kgo.Offset{t: assign})
	}
	m.log.Info("mirror: mirroring partitions", "topic", t, "target_topic", target, "from_partition", from, "partitions", to)
	return nil
}

// dropTopic stops mirroring a topic deleted on the source, after
// committing what was acknowledged.
func (m *Mirror) dropTopic(t string) {
	m.commit(context.Background())
	m.mu.Lock()
	n := m.topics[t]
	delete(m.topics, t)
	delete(m.srcIDs, t)
	parts := make([]int32, 0, n)
	var paused []int32
	for p := range n {
		tp := topicPartition{t, p}
		if tr := m.parts[tp]; tr != nil {
			if m.paused[tr] {
				paused = append(paused, p)
			}
			delete(m.paused, tr)
		}
		delete(m.parts, tp)
		delete(m.fetchErrs, tp)
		parts = append(parts, p)
	}
	m.mu.Unlock()
	if m.fw != nil {
		m.fw.drop(t)
	}
	m.src.RemoveConsumePartitions(map[string][]int32{t: parts})
	// kgo keeps a partition's pause by name: a topic of this name created
	// again would never be fetched.
	m.src.ResumeFetchPartitions(map[string][]int32{t: paused})
	m.src.PurgeTopicsFromClient(t)
	m.log.Warn("mirror: source topic deleted; stopped mirroring it (the target topic stays)", "topic", t)
}

// sourceConfigs returns the topic configs set on source topic t (not the
// defaults), to create its target topic with.
func (m *Mirror) sourceConfigs(ctx context.Context, t string) (map[string]*string, error) {
	rcs, err := m.srcAdm.DescribeTopicConfigs(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("%w: describe configs of %s: %w", ErrSource, t, err)
	}
	out := map[string]*string{}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, fmt.Errorf("%w: describe configs of %s: %w", ErrSource, t, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && !c.Sensitive && c.Value != nil {
				out[c.Key] = c.Value
			}
		}
	}
	return out, nil
}

// ensureTopic makes target topic t have at least n partitions, creating it
// with configs when absent. A target that refuses the configs gets the
// topic without them, and a warning.
func (m *Mirror) ensureTopic(ctx context.Context, t string, n int32, configs map[string]*string) error {
	details, err := m.tgtAdm.ListTopics(ctx, t)
	if err != nil {
		return fmt.Errorf("%w: metadata of %s: %w", ErrTarget, t, err)
	}
	d, ok := details[t]
	if ok && d.Err == nil {
		have := int32(len(d.Partitions))
		if have >= n {
			return nil
		}
		resp, err := m.tgtAdm.UpdatePartitions(ctx, int(n), t)
		if err == nil {
			err = resp[t].Err
		}
		if err != nil {
			return fmt.Errorf("%w: grow %s from %d to %d partitions: %w", ErrTarget, t, have, n, err)
		}
		m.log.Info("mirror: added partitions to target topic", "target_topic", t, "from", have, "to", n)
		return nil
	}
	if ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("%w: metadata of %s: %w", ErrTarget, t, d.Err)
	}
	_, err = m.tgtAdm.CreateTopic(ctx, n, m.cfg.ReplicationFactor, configs, t)
	if err != nil && len(configs) > 0 && (errors.Is(err, kerr.InvalidConfig) || errors.Is(err, kerr.PolicyViolation)) {
		m.log.Warn("mirror: target refused the source's topic configs; creating the topic without them",
			"target_topic", t, "configs", slices.Sorted(maps.Keys(configs)), "err", err)
		_, err = m.tgtAdm.CreateTopic(ctx, n, m.cfg.ReplicationFactor, nil, t)
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return m.ensureTopic(ctx, t, n, nil) // created meanwhile: check its partitions
	}
	if err != nil {
		return fmt.Errorf("%w: create %s with %d partitions: %w", ErrTarget, t, n, err)
	}
	m.log.Info("mirror: created target topic", "target_topic", t, "partitions", n, "configs", len(configs))
	return nil
}
