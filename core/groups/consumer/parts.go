package consumer

import (
	"bytes"
	"maps"
	"slices"
)

// TopicPartitions are partitions of one topic, named by its id.
type TopicPartitions struct {
	Topic      [16]byte
	Partitions []int32
}

// parts is a set of partitions by topic id, each list sorted and without
// duplicates, no topic with an empty list.
type parts map[[16]byte][]int32

// tp names one partition.
type tp struct {
	topic [16]byte
	p     int32
}

func partsOf(l []TopicPartitions) parts {
	out := parts{}
	for _, t := range l {
		ps := append(out[t.Topic], t.Partitions...)
		slices.Sort(ps)
		ps = slices.Compact(ps)
		if len(ps) > 0 {
			out[t.Topic] = ps
		}
	}
	return out
}

func (a parts) has(t [16]byte, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

func (a parts) add(t [16]byte, p int32) {
	ps := a[t]
	if i, ok := slices.BinarySearch(ps, p); !ok {
		a[t] = slices.Insert(ps, i, p)
	}
}

func (a parts) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a parts) each(f func(tp)) {
	for t, ps := range a {
		for _, p := range ps {
			f(tp{t, p})
		}
	}
}

func (a parts) equal(b parts) bool {
	return maps.EqualFunc(a, b, func(x, y []int32) bool { return slices.Equal(x, y) })
}

func (a parts) clone() parts {
	out := make(parts, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

// list returns the set sorted by topic id.
func (a parts) list() []TopicPartitions {
	out := make([]TopicPartitions, 0, len(a))
	for t, ps := range a {
		out = append(out, TopicPartitions{Topic: t, Partitions: slices.Clone(ps)})
	}
	slices.SortFunc(out, func(x, y TopicPartitions) int { return bytes.Compare(x.Topic[:], y.Topic[:]) })
	return out
}

// ownsAny reports whether a heartbeat's owned partitions include any of
// these; nil owned (not sent) counts as owning them all, as in Kafka.
func ownsAny(owned []TopicPartitions, these parts) bool {
	if owned == nil {
		return true
	}
	for _, t := range owned {
		for _, p := range t.Partitions {
			if these.has(t.Topic, p) {
				return true
			}
		}
	}
	return false
}

// subset reports whether owned (which must have been sent) is within a.
func subset(owned []TopicPartitions, a parts) bool {
	if owned == nil {
		return false
	}
	for _, t := range owned {
		for _, p := range t.Partitions {
			if !a.has(t.Topic, p) {
				return false
			}
		}
	}
	return true
}
