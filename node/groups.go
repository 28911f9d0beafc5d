package node

import (
	"github.com/weir-broker/weir/core/groups"
)

// Coordinator types of FindCoordinator.
const (
	CoordinatorGroup       = 0
	CoordinatorTransaction = 1
)

// GroupCoordinator returns the coordinator that serves group on this broker.
// Every group is coordinated here on one node; in a cluster, the broker
// leading the group's __consumer_offsets partition coordinates it.
func (n *Node) GroupCoordinator(group string) (*groups.Coordinator, error) {
	return n.groups, nil
}

// FindCoordinator returns the broker that coordinates key (a group id, or a
// transactional id): ErrInvalidCoordinatorType for another key type.
// Transactional ids are answered like groups; the requests that would follow
// are refused (ErrTransactionsNotSupported).
func (n *Node) FindCoordinator(keyType int8, key string) (Broker, error) {
	if keyType != CoordinatorGroup && keyType != CoordinatorTransaction {
		return Broker{ID: -1}, ErrInvalidCoordinatorType
	}
	return n.self, nil
}

// ListGroups lists the groups this broker coordinates.
func (n *Node) ListGroups() []groups.Listing { return n.groups.List() }

// CommitOffsets commits offsets for a group, as OffsetCommit does: offsets
// for partitions that do not exist are refused (their entry in the result is
// ErrUnknownTopic or ErrUnknownPartition, wrapped) and the others committed.
// perCommit has one entry per commit; err is an error finding the group's
// coordinator, which then applies to every valid commit.
func (n *Node) CommitOffsets(group, memberID string, instanceID *string, generation int32,
	commits []groups.OffsetCommit) (perCommit []error, err error) {
	perCommit = make([]error, len(commits))
	valid := make([]groups.OffsetCommit, 0, len(commits))
	idx := make([]int, 0, len(commits))
	for i, c := range commits {
		if err := n.HasPartition(c.Topic, c.Partition); err != nil {
			perCommit[i] = err
			continue
		}
		valid = append(valid, c)
		idx = append(idx, i)
	}
	if len(valid) == 0 {
		return perCommit, nil
	}
	coord, err := n.GroupCoordinator(group)
	if err != nil {
		for _, i := range idx {
			perCommit[i] = err
		}
		return perCommit, err
	}
	// An error of the whole commit is in every entry of res too.
	res, _ := coord.Commit(group, memberID, instanceID, generation, valid)
	for k, i := range idx {
		if k < len(res) {
			perCommit[i] = res[k]
		}
	}
	return perCommit, nil
}
