package controller

import (
	"fmt"
	"slices"

	"github.com/weir-broker/weir/core/meta"
)

// Action is one thing for the loop to do: *CreateState, *UpdateState and
// *DeleteTopic are writes (report each outcome with Applied or Failed);
// *Reread asks for a topic to be read again and fed back with SetTopic (or
// RemoveTopic when it is gone). Actions belong to the caller.
type Action interface {
	fmt.Stringer
	action()
}

// Write is an Action that changes the store: *CreateState, *UpdateState or
// *DeleteTopic. Every write must be fenced by the controller epoch (the
// CheckOp of /controller_epoch in the same Multi). Each names the topic
// incarnation (topic ID) it is for: a loop that also makes the write
// conditional on the topic still having that ID (a CheckOp on
// /brokers/topics/<name> at the version it read with that ID) keeps a
// write meant for a deleted topic off a new topic of the same name.
type Write interface {
	Action
	// TopicName is the topic the write is about.
	TopicName() string
}

// CreateState creates the state record of a partition that has none
// (/brokers/topics/<Topic>/partitions/<Partition>/state, and its missing
// parents). It fails with coord.ErrNodeExists when the record exists: a
// conflict. Applied's version is the new record's, 0.
type CreateState struct {
	Topic     string
	TopicID   [16]byte // the incarnation of Topic the write is for
	Partition int32
	// State is the record to write; its Version is -1 (not known until
	// written).
	State meta.PartitionState
}

// UpdateState replaces a partition's state record if its version is still
// Version (a compare-and-set): coord.ErrBadVersion otherwise, a conflict.
// Applied's version is the record's new one (Version+1).
type UpdateState struct {
	Topic     string
	TopicID   [16]byte // the incarnation of Topic the write is for
	Partition int32
	// State is the record to write; its Version is -1 (not known until
	// written).
	State   meta.PartitionState
	Version int32
}

// DeleteTopic removes a topic whose deletion was asked for: its partition
// state records, its assignment (/brokers/topics/<Name>), its configs
// (/config/topics/<Name>) and, last, the request (/admin/delete_topics/<Name>).
// The loop deletes only if the topic still has ID: a deletion that runs
// late must not remove a new topic of the same name (it then fails with
// coord.ErrNoNode).
type DeleteTopic struct {
	Name string
	ID   [16]byte // the incarnation to delete
}

// Reread asks for Topic to be read again (assignment, configs, states with
// their versions, deletion request) and fed back with SetTopic, or with
// RemoveTopic if it no longer exists. Until then the controller writes
// nothing for the topic.
type Reread struct {
	Topic string
}

func (*CreateState) action() {}
func (*UpdateState) action() {}
func (*DeleteTopic) action() {}
func (*Reread) action()      {}

func (a *CreateState) TopicName() string { return a.Topic }
func (a *UpdateState) TopicName() string { return a.Topic }
func (a *DeleteTopic) TopicName() string { return a.Name }

func (a *CreateState) String() string {
	return fmt.Sprintf("create %s/%d %s", a.Topic, a.Partition, stateString(a.State))
}

func (a *UpdateState) String() string {
	return fmt.Sprintf("update %s/%d@%d %s", a.Topic, a.Partition, a.Version, stateString(a.State))
}

func (a *DeleteTopic) String() string { return "delete " + a.Name }
func (a *Reread) String() string      { return "reread " + a.Topic }

// stateString is the compact form the script tests compare.
func stateString(s meta.PartitionState) string {
	return fmt.Sprintf("leader=%d epoch=%d isr=%v ce=%d", s.Leader, s.LeaderEpoch, s.ISR, s.ControllerEpoch)
}

// sameWrite reports whether a and b are the same write (the loop hands back
// a copy, or the pointer it was given).
func sameWrite(a, b Write) bool {
	switch a := a.(type) {
	case *CreateState:
		b, ok := b.(*CreateState)
		return ok && a.Topic == b.Topic && a.TopicID == b.TopicID && a.Partition == b.Partition &&
			a.State.Equal(b.State)
	case *UpdateState:
		b, ok := b.(*UpdateState)
		return ok && a.Topic == b.Topic && a.TopicID == b.TopicID && a.Partition == b.Partition &&
			a.Version == b.Version && a.State.Equal(b.State)
	case *DeleteTopic:
		b, ok := b.(*DeleteTopic)
		return ok && a.Name == b.Name && a.ID == b.ID
	}
	return false
}

// clone returns a copy of a state write the caller may keep.
func cloneWrite(w Write) Write {
	switch w := w.(type) {
	case *CreateState:
		c := *w
		c.State.ISR = slices.Clone(w.State.ISR)
		return &c
	case *UpdateState:
		c := *w
		c.State.ISR = slices.Clone(w.State.ISR)
		return &c
	case *DeleteTopic:
		c := *w
		return &c
	}
	return w
}
