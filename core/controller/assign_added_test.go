package controller

import (
	"errors"
	"slices"
	"testing"
)

// TestAssignAdded: added partitions continue the topic's round-robin (the
// preferred leader of partition p is broker (p + start) mod n, start being
// where partition 0's leader sits), keep the replication factor with
// distinct replicas, and a manual assignment is checked as Kafka does.
func TestAssignAdded(t *testing.T) {
	ids := []int32{1, 2, 3, 4}
	for start := range len(ids) {
		existing := assign(ids, 3, 2, start, start)
		added, err := AssignAdded([]int32{4, 3, 2, 1}, existing, 9, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(added) != 6 {
			t.Fatalf("start %d: %d partitions added, want 6", start, len(added))
		}
		for i, rs := range slices.Concat(existing, added) {
			if want := ids[(i+start)%len(ids)]; rs[0] != want {
				t.Fatalf("start %d: partition %d led by %d, want %d: %v", start, i, rs[0], want, added)
			}
			if len(rs) != 2 || rs[0] == rs[1] {
				t.Fatalf("start %d: partition %d replicas %v", start, i, rs)
			}
		}
	}
	existing := [][]int32{{1, 2}, {2, 3}}
	for _, c := range []struct {
		name   string
		count  int32
		manual [][]int32
		want   error
	}{
		{"decrease", 1, nil, ErrInvalidPartitions},
		{"same", 2, nil, ErrInvalidPartitions},
		{"negative", -1, nil, ErrInvalidPartitions},
		{"too few assignments", 4, [][]int32{{1, 2}}, ErrInvalidReplicaAssignment},
		{"wrong factor", 3, [][]int32{{1}}, ErrInvalidReplicaAssignment},
		{"unknown broker", 3, [][]int32{{1, 9}}, ErrInvalidReplicaAssignment},
		{"broker twice", 3, [][]int32{{2, 2}}, ErrInvalidReplicaAssignment},
	} {
		if _, err := AssignAdded([]int32{1, 2, 3}, existing, c.count, c.manual); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if got, err := AssignAdded([]int32{1, 2, 3}, existing, 3, [][]int32{{3, 1}}); err != nil || !slices.Equal(got[0], []int32{3, 1}) {
		t.Fatalf("manual: %v, %v", got, err)
	}
	if _, err := AssignAdded([]int32{1}, existing, 3, nil); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("fewer brokers than the factor: %v", err)
	}
}
