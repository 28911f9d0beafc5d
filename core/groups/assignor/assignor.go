// Package assignor holds the server-side partition assignors of KIP-848
// consumer groups: the coordinator, not a client, decides which member
// consumes which partition. Two are built in, under Kafka's names:
//
//   - "uniform" (Kafka's UniformAssignor, the default): every partition of
//     the subscribed topics goes to one subscriber, the counts per member
//     differ by at most one when all members subscribe to the same topics
//     (best effort otherwise: a partition only moves to a member with at
//     least two fewer), and it is sticky: a member keeps the partitions it
//     had unless balance needs them elsewhere.
//   - "range" (Kafka's server-side RangeAssignor): topic by topic, members
//     subscribed to it, sorted by member id, get contiguous ranges of
//     partitions, the first (partitions % members) one more, so members
//     subscribed to co-partitioned topics get the same partition numbers of
//     each (joins need this). It is sticky within each member's quota.
//
// An assignor is a pure function of its Spec: the same members, topics and
// current assignment give the same answer, which the coordinator's tests
// rely on. Topics are named by their ids, as in the protocol.
package assignor

import (
	"cmp"
	"slices"
)

// Topic is one topic the group subscribes to, as the assignor sees it.
type Topic struct {
	ID         [16]byte
	Name       string
	Partitions int32
}

// Member is one member of the group for an assignment.
type Member struct {
	ID string
	// Topics are the ids of the topics it subscribes to that exist (those
	// not in Spec.Topics are ignored).
	Topics [][16]byte
	// Current is its assignment before this one (the target assignment of
	// the previous group epoch), which sticky assignors try to keep.
	Current map[[16]byte][]int32
}

// Spec is the input of an assignment.
type Spec struct {
	Members []Member
	Topics  map[[16]byte]Topic
}

// Assignment maps a member id to its partitions, by topic id, each list
// sorted. Every member of the Spec has an entry (maybe empty); a topic with
// no partition for a member is absent from its map.
type Assignment map[string]map[[16]byte][]int32

// Assignor computes a group's target assignment. Assign must not modify the
// Spec.
type Assignor interface {
	Name() string
	Assign(Spec) Assignment
}

// Uniform and Range are the built-in assignors; Default is the one a group
// uses when its members name none.
var (
	Uniform Assignor = uniform{}
	Range   Assignor = rangeAssignor{}
	Default          = Uniform
)

// Lookup returns the built-in assignor named name.
func Lookup(name string) (Assignor, bool) {
	switch name {
	case Uniform.Name():
		return Uniform, true
	case Range.Name():
		return Range, true
	}
	return nil, false
}

// Names lists the built-in assignors, the default first.
func Names() []string { return []string{Uniform.Name(), Range.Name()} }

// tp is one partition.
type tp struct {
	topic [16]byte
	p     int32
}

// sortedTopics returns the spec's topics sorted by name, then id, so that
// every assignment is deterministic.
func sortedTopics(s Spec) []Topic {
	ts := make([]Topic, 0, len(s.Topics))
	for _, t := range s.Topics {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b Topic) int {
		if c := cmp.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return slices.Compare(a.ID[:], b.ID[:])
	})
	return ts
}

// sortedMembers returns the members' indexes sorted by member id.
func sortedMembers(s Spec) []int {
	idx := make([]int, len(s.Members))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(s.Members[a].ID, s.Members[b].ID) })
	return idx
}

// subscribes reports whether m subscribes to topic id.
func subscribes(m Member, id [16]byte) bool { return slices.Contains(m.Topics, id) }

// build turns an owner per partition into an Assignment.
func build(s Spec, owner map[tp]int) Assignment {
	out := make(Assignment, len(s.Members))
	for _, m := range s.Members {
		out[m.ID] = map[[16]byte][]int32{}
	}
	for k, i := range owner {
		a := out[s.Members[i].ID]
		a[k.topic] = append(a[k.topic], k.p)
	}
	for _, a := range out {
		for _, ps := range a {
			slices.Sort(ps)
		}
	}
	return out
}
