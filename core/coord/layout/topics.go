package layout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/meta"
)

// CreateTopic writes a new topic in one Multi: its assignment node
// /brokers/topics/<t> (t.ID, t.Assignment) and its config node
// /config/topics/<t> (t.Configs), after ensuring both parents. Any broker
// calls it (Kafka's AdminZkClient): it is not fenced. The controller learns
// of the topic from its watch on /brokers/topics and writes the partition
// states.
//
// The topic's node existing is ErrTopicExists; so is a deletion request
// of the name still pending (/admin/delete_topics/<t>, the previous
// incarnation's), then wrapping ErrMarkedForDeletion too: a topic created
// under a pending request would be read as being deleted (Kafka's
// AdminZkClient refuses it the same way, with the same check before the
// write: a request made between the two is about the new topic, which it
// deletes). A config node left without
// its topic (Kafka's admin writes the config first, and may have died
// between) is overwritten, as Kafka does. t.Name must follow Kafka's rules
// (1-249 of [a-zA-Z0-9._-]), and every partition needs one or more
// distinct replicas >= 0: otherwise the error wraps ErrInvalid.
// After ErrConnectionLoss the topic node is read back: holding exactly what
// this call wrote, it is success. (When even the read fails, a retry may
// get ErrTopicExists for its own topic: ReadTopic's ID tells.)
func CreateTopic(ctx context.Context, s coord.Store, t *meta.Topic) error {
	fail := func(err error) error { return fmt.Errorf("layout: create topic %q: %w", t.Name, err) }
	if err := checkTopicName(t.Name); err != nil {
		return fail(err)
	}
	if !checkAssignment(t.Assignment) {
		return fail(fmt.Errorf("%w: assignment %v: want one or more partitions, each with distinct replicas >= 0",
			ErrInvalid, t.Assignment))
	}
	for _, p := range []string{TopicsPath, ConfigTopicsPath} {
		if err := coord.EnsurePath(ctx, s, p); err != nil {
			return fail(err)
		}
	}
	path, cfgPath := TopicPath(t.Name), ConfigTopicPath(t.Name)
	if marked, _, err := s.Exists(ctx, DeleteTopicPath(t.Name)); err != nil {
		return fail(err)
	} else if marked {
		return fail(fmt.Errorf("%w: %w: %s", ErrTopicExists, ErrMarkedForDeletion, DeleteTopicPath(t.Name)))
	}
	data, cfg := EncodeAssignment(t.ID, t.Assignment), EncodeTopicConfig(t.Configs)
	for {
		leftover, _, err := s.Exists(ctx, cfgPath)
		if err != nil {
			return fail(err)
		}
		var cfgOp coord.Op = &coord.CreateOp{Path: cfgPath, Data: cfg, Mode: coord.Persistent}
		if leftover {
			cfgOp = &coord.SetOp{Path: cfgPath, Data: cfg, Version: coord.AnyVersion}
		}
		_, err = s.Multi(ctx, &coord.CreateOp{Path: path, Data: data, Mode: coord.Persistent}, cfgOp)
		var me *coord.MultiError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &me) && me.Index == 0 && errors.Is(err, coord.ErrNodeExists):
			return fail(fmt.Errorf("%w: %s: %w", ErrTopicExists, path, err))
		case errors.As(err, &me) && me.Index == 1 && (errors.Is(err, coord.ErrNodeExists) || errors.Is(err, coord.ErrNoNode)):
			continue // the config node came or went meanwhile
		case errors.Is(err, coord.ErrConnectionLoss):
			got, _, rerr := s.Get(ctx, path)
			if rerr == nil && bytes.Equal(got, data) {
				return nil
			}
			return fail(err)
		default:
			return fail(err)
		}
	}
}

// ReadTopicNames returns the topics' names, sorted, and a watch on
// /brokers/topics's children (created first if missing).
func ReadTopicNames(ctx context.Context, s coord.Store) ([]string, <-chan coord.Event, error) {
	if err := coord.EnsurePath(ctx, s, TopicsPath); err != nil {
		return nil, nil, fmt.Errorf("layout: read topic names: %w", err)
	}
	names, _, watch, err := s.ChildrenW(ctx, TopicsPath)
	if err != nil {
		return nil, nil, fmt.Errorf("layout: read topic names: %w", err)
	}
	return names, watch, nil
}

// ReadTopic reads a topic: its assignment, its configs (none when the
// config node is missing), every partition's state (nil where none was
// written), and whether its deletion was requested. A topic that does not
// exist is coord.ErrNoNode (wrapped). The reads are not one snapshot: use
// WatchTopic to learn of changes made while reading.
func ReadTopic(ctx context.Context, s coord.Store, name string) (*meta.Topic, error) {
	t, _, err := readTopic(ctx, s, name, false)
	return t, err
}

// WatchTopic is ReadTopic plus watches that fire on any change of what it
// read: watches[0] the assignment node (data change, deletion), [1] the
// config node, [2] the deletion request node (creation, deletion), and
// [3+p] partition p's state node (creation, data change, deletion). Each
// fires once; read again (and watch again) after any of them fires.
func WatchTopic(ctx context.Context, s coord.Store, name string) (*meta.Topic, []<-chan coord.Event, error) {
	return readTopic(ctx, s, name, true)
}

func readTopic(ctx context.Context, s coord.Store, name string, watch bool) (*meta.Topic, []<-chan coord.Event, error) {
	fail := func(err error) (*meta.Topic, []<-chan coord.Event, error) {
		return nil, nil, fmt.Errorf("layout: read topic %q: %w", name, err)
	}
	if err := checkTopicRef(name); err != nil {
		return fail(err)
	}
	var watches []<-chan coord.Event
	path := TopicPath(name)
	var data []byte
	var err error
	if watch {
		var w <-chan coord.Event
		data, _, w, err = s.GetW(ctx, path)
		watches = append(watches, w)
	} else {
		data, _, err = s.Get(ctx, path)
	}
	if err != nil {
		return fail(err)
	}
	t := &meta.Topic{Name: name}
	if t.ID, t.Assignment, err = DecodeAssignment(path, data); err != nil {
		return fail(err)
	}
	// read is Get, or coord.WatchNode when watching: a missing node is not an
	// error, and its watch fires when it is created.
	read := func(path string) ([]byte, bool, coord.Stat, error) {
		if !watch {
			data, st, err := s.Get(ctx, path)
			if errors.Is(err, coord.ErrNoNode) {
				return nil, false, st, nil
			}
			return data, err == nil, st, err
		}
		data, ok, st, w, err := coord.WatchNode(ctx, s, path)
		watches = append(watches, w)
		return data, ok, st, err
	}
	cfgPath := ConfigTopicPath(name)
	cfg, ok, _, err := read(cfgPath)
	switch {
	case err != nil:
		return fail(err)
	case ok:
		if t.Configs, err = DecodeTopicConfig(cfgPath, cfg); err != nil {
			return fail(err)
		}
	default:
		t.Configs = map[string]string{}
	}
	if watch {
		var w <-chan coord.Event
		t.Deleting, _, w, err = s.ExistsW(ctx, DeleteTopicPath(name))
		watches = append(watches, w)
	} else {
		t.Deleting, _, err = s.Exists(ctx, DeleteTopicPath(name))
	}
	if err != nil {
		return fail(err)
	}
	// Without watches, list the partition nodes first so as to read only
	// the states that exist; a watch must be set on each one anyway.
	var present []string
	if !watch {
		present, _, err = s.Children(ctx, PartitionsPath(name))
		if err != nil && !errors.Is(err, coord.ErrNoNode) {
			return fail(err)
		}
	}
	t.States = make([]*meta.PartitionState, len(t.Assignment))
	for p := range t.States {
		sp := StatePath(name, int32(p))
		if !watch && !slices.Contains(present, strconv.Itoa(p)) {
			continue
		}
		data, ok, st, err := read(sp)
		if err != nil {
			return fail(err)
		}
		if !ok {
			continue
		}
		ps, err := DecodeState(sp, data, st)
		if err != nil {
			return fail(err)
		}
		t.States[p] = &ps
	}
	return t, watches, nil
}

// WriteState writes partition p's state as controller c, fenced: in one
// Multi with c.Fence(), either (create) it creates the state node, and the
// partitions and partition nodes above it where they are missing, or it
// sets the state at version st.Version (the version read; a CAS, never
// AnyVersion). It returns the node's new version (0 when created).
//
// A failed fence is ErrFenced (nothing was written). A version conflict is
// coord.ErrBadVersion; creating a state that exists is coord.ErrNodeExists;
// setting one that does not, or creating one for a topic that does not
// exist, coord.ErrNoNode. st.ControllerEpoch is written as given
// (normally c.Epoch).
func WriteState(ctx context.Context, s coord.Store, c Controllership, topic string, p int32, st meta.PartitionState, create bool) (newVersion int32, err error) {
	fail := func(err error) (int32, error) {
		return 0, fmt.Errorf("layout: write state of %s-%d: %w", topic, p, err)
	}
	if err := checkTopicRef(topic); err != nil {
		return fail(err)
	}
	if p < 0 {
		return fail(fmt.Errorf("%w: partition %d < 0", ErrInvalid, p))
	}
	if err := checkState(st); err != nil {
		return fail(err)
	}
	if !create && st.Version < 0 {
		return fail(fmt.Errorf("%w: version %d: a state is set by CAS on the version read", ErrInvalid, st.Version))
	}
	path, data := StatePath(topic, p), EncodeState(st)
	for {
		ops := []coord.Op{c.Fence()}
		if !create {
			ops = append(ops, &coord.SetOp{Path: path, Data: data, Version: st.Version})
		} else {
			for _, parent := range []string{PartitionsPath(topic), PartitionPath(topic, p)} {
				ok, _, err := s.Exists(ctx, parent)
				if err != nil {
					return fail(err)
				}
				if !ok {
					ops = append(ops, &coord.CreateOp{Path: parent, Mode: coord.Persistent})
				}
			}
			ops = append(ops, &coord.CreateOp{Path: path, Data: data, Mode: coord.Persistent})
		}
		res, err := s.Multi(ctx, ops...)
		if err == nil {
			return res[len(res)-1].Stat.Version, nil
		}
		var me *coord.MultiError
		if create && errors.As(err, &me) && me.Index > 0 && me.Index < len(ops)-1 && errors.Is(err, coord.ErrNodeExists) {
			continue // a parent was created meanwhile
		}
		return fail(fenced(c, err))
	}
}

// checkState checks what WriteState would write with DecodeState's rules.
func checkState(st meta.PartitionState) error {
	bad := st.Leader < meta.NoLeader || st.LeaderEpoch < 0 || st.ControllerEpoch < 0
	for i, r := range st.ISR {
		bad = bad || r < 0 || slices.Contains(st.ISR[:i], r)
	}
	if bad {
		return fmt.Errorf("%w: invalid state %+v: leader >= -1, epochs >= 0, ISR of distinct ids >= 0",
			ErrInvalid, st)
	}
	return nil
}

// WriteISR writes an ISR change a partition's leader makes (Kafka's
// ZooKeeper-mode leaders before AlterPartition): partition p's state set to
// st by compare-and-set on version (the version the leader read), not
// fenced by a controller epoch: the CAS is the fence, since every change the
// controller makes moves the version. It returns the new version. A
// conflict is coord.ErrBadVersion (re-read, and decide again); a missing
// state or topic is coord.ErrNoNode.
func WriteISR(ctx context.Context, s coord.Store, topic string, p int32, st meta.PartitionState, version int32) (int32, error) {
	fail := func(err error) (int32, error) {
		return 0, fmt.Errorf("layout: write ISR of %s-%d: %w", topic, p, err)
	}
	if err := checkTopicRef(topic); err != nil {
		return fail(err)
	}
	if p < 0 || version < 0 {
		return fail(fmt.Errorf("%w: partition %d, version %d", ErrInvalid, p, version))
	}
	if err := checkState(st); err != nil {
		return fail(err)
	}
	if st.Leader == meta.NoLeader || !slices.Contains(st.ISR, st.Leader) {
		return fail(fmt.Errorf("%w: leader %d outside the ISR %v", ErrInvalid, st.Leader, st.ISR))
	}
	stat, err := s.Set(ctx, StatePath(topic, p), EncodeState(st), version)
	if err != nil {
		return fail(err)
	}
	return stat.Version, nil
}
