package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// Assign places the replicas of a new topic's partitions on brokers, as
// Kafka's rack-unaware assignReplicasToBrokers does (AdminUtils, see the
// package doc): the brokers in id order (AdminZkClient.getBrokerMetadatas
// sorts them; duplicates count once), partition p's first replica (its
// preferred leader) at index (start + p) mod n, round-robin from a random
// start, and its other replicas after it at a shift that is random and grows
// by one every n partitions, so followers spread over the other brokers.
// Each broker leads ⌊partitions/n⌋ or ⌈partitions/n⌉ partitions.
//
// rnd draws the start and the shift (two draws; it must not be nil): a
// seeded source gives the same assignment every time. Errors:
// ErrInvalidPartitions (partitions < 1), ErrInvalidReplicationFactor
// (rf < 1 or more than the brokers).
func Assign(brokers []int32, partitions int32, rf int16, rnd *rand.Rand) ([][]int32, error) {
	ids := slices.Clone(brokers)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if partitions < 1 {
		return nil, fmt.Errorf("%w: %d partitions, at least 1 are needed", ErrInvalidPartitions, partitions)
	}
	if rf < 1 || int(rf) > len(ids) {
		return nil, fmt.Errorf("%w: replication factor %d with %d brokers", ErrInvalidReplicationFactor, rf, len(ids))
	}
	start := rnd.IntN(len(ids))
	shift := rnd.IntN(len(ids))
	return assign(ids, int(partitions), int(rf), start, shift), nil
}

// assign is Kafka's assignReplicasToBrokersRackUnaware with a fixed start
// index and first shift, over sorted, distinct ids with 1 <= rf <= len(ids).
func assign(ids []int32, partitions, rf, start, shift int) [][]int32 {
	n := len(ids)
	out := make([][]int32, partitions)
	for p := range partitions {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + start) % n
		replicas := make([]int32, 0, rf)
		replicas = append(replicas, ids[first])
		for j := range rf - 1 {
			replicas = append(replicas, ids[replicaIndex(first, shift, j, n)])
		}
		out[p] = replicas
	}
	return out
}

// replicaIndex is where replica j+1 of a partition whose first replica is
// at first goes: 1 to n-1 places after it, so never on the first's broker,
// and for j < n-1 never twice on one broker.
func replicaIndex(first, shift, j, n int) int {
	return (first + 1 + (shift+j)%(n-1)) % n
}

// PartitionReplicas is one partition of an explicit assignment, as a
// CreateTopics request (its Assignments) names it.
type PartitionReplicas struct {
	Partition int32
	Replicas  []int32
}

// ValidateAssignment checks an explicit assignment against the brokers
// known (registered) and returns it indexed by partition (new slices). The
// partitions must be 0..n-1, each named once; each must have at least one
// replica, no broker twice, only known brokers, and all the same number of
// replicas: otherwise ErrInvalidReplicaAssignment. Kafka's ZooKeeper mode
// (AdminZkClient.validateTopicCreate) checks all of that except the known
// brokers, which only its KRaft controller checks
// (ReplicationControlManager); weir checks them too, so a topic is never
// created with replicas no broker will host.
func ValidateAssignment(parts []PartitionReplicas, brokers []int32) ([][]int32, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: no partitions", ErrInvalidReplicaAssignment)
	}
	out := make([][]int32, len(parts))
	for _, pr := range parts {
		p := pr.Partition
		switch {
		case p < 0 || int(p) >= len(parts):
			return nil, fmt.Errorf("%w: partition %d of %d: partitions must be 0 to %d", ErrInvalidReplicaAssignment,
				p, len(parts), len(parts)-1)
		case out[p] != nil:
			return nil, fmt.Errorf("%w: partition %d named twice", ErrInvalidReplicaAssignment, p)
		case len(pr.Replicas) == 0:
			return nil, fmt.Errorf("%w: partition %d has no replicas", ErrInvalidReplicaAssignment, p)
		case len(pr.Replicas) != len(parts[0].Replicas):
			return nil, fmt.Errorf("%w: partition %d has %d replicas, partition %d has %d",
				ErrInvalidReplicaAssignment, p, len(pr.Replicas), parts[0].Partition, len(parts[0].Replicas))
		}
		for i, r := range pr.Replicas {
			if !slices.Contains(brokers, r) {
				return nil, fmt.Errorf("%w: partition %d names broker %d, which is not registered",
					ErrInvalidReplicaAssignment, p, r)
			}
			if slices.Contains(pr.Replicas[:i], r) {
				return nil, fmt.Errorf("%w: partition %d names broker %d twice", ErrInvalidReplicaAssignment, p, r)
			}
		}
		out[p] = slices.Clone(pr.Replicas)
	}
	return out, nil
}

// AssignAdded places the replicas of partitions added to a topic whose
// partitions are existing (Kafka's AdminZkClient.createPartitions): count is
// the new total. With manual nil, the rack-unaware assignment continues
// where the topic's began: the replication factor is partition 0's, the
// start index the position of partition 0's first replica among brokers
// (sorted by id), which is also the first shift, and the partition ids
// continue from len(existing), so the leaders keep going round-robin.
// With manual, it must name the replicas of each added partition (count -
// len(existing) of them), each with the topic's replication factor, no
// broker twice and only brokers given; it is returned as given (cloned).
//
// Errors: ErrInvalidPartitions when count is not above len(existing);
// ErrInvalidReplicaAssignment for a manual assignment that breaks the rules;
// ErrInvalidReplicationFactor when the brokers are fewer than the
// replication factor.
func AssignAdded(brokers []int32, existing [][]int32, count int32, manual [][]int32) ([][]int32, error) {
	have := len(existing)
	switch {
	case have == 0 || len(existing[0]) == 0:
		return nil, fmt.Errorf("%w: the topic has no partitions to follow", ErrInvalidPartitions)
	case int(count) < have:
		return nil, fmt.Errorf("%w: the topic has %d partitions, which is more than the %d requested", ErrInvalidPartitions, have, count)
	case int(count) == have:
		return nil, fmt.Errorf("%w: the topic already has %d partitions", ErrInvalidPartitions, have)
	}
	add := int(count) - have
	rf := len(existing[0])
	ids := slices.Clone(brokers)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if manual != nil {
		if len(manual) != add {
			return nil, fmt.Errorf("%w: adding %d partitions, but %d assignments given", ErrInvalidReplicaAssignment, add, len(manual))
		}
		out := make([][]int32, add)
		for i, rs := range manual {
			p := have + i
			if len(rs) != rf {
				return nil, fmt.Errorf("%w: partition %d has %d replicas, the topic's replication factor is %d",
					ErrInvalidReplicaAssignment, p, len(rs), rf)
			}
			for j, r := range rs {
				if !slices.Contains(ids, r) {
					return nil, fmt.Errorf("%w: partition %d names broker %d, which is not registered", ErrInvalidReplicaAssignment, p, r)
				}
				if slices.Contains(rs[:j], r) {
					return nil, fmt.Errorf("%w: partition %d names broker %d twice", ErrInvalidReplicaAssignment, p, r)
				}
			}
			out[i] = slices.Clone(rs)
		}
		return out, nil
	}
	if rf > len(ids) {
		return nil, fmt.Errorf("%w: replication factor %d with %d brokers", ErrInvalidReplicationFactor, rf, len(ids))
	}
	start := max(0, slices.IndexFunc(ids, func(id int32) bool { return id >= existing[0][0] }))
	return assignFrom(ids, have, add, rf, start, start), nil
}

// assignFrom is Kafka's assignReplicasToBrokersRackUnaware with a fixed
// start index (and first shift) and a start partition id: partitions first
// .. first+n-1.
func assignFrom(ids []int32, first, n, rf, start, shift int) [][]int32 {
	size := len(ids)
	out := make([][]int32, 0, n)
	for p := first; p < first+n; p++ {
		if p > 0 && p%size == 0 {
			shift++
		}
		lead := (p + start) % size
		replicas := make([]int32, 0, rf)
		replicas = append(replicas, ids[lead])
		for j := range rf - 1 {
			replicas = append(replicas, ids[replicaIndex(lead, shift, j, size)])
		}
		out = append(out, replicas)
	}
	return out
}
