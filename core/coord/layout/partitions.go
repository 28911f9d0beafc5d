package layout

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/weir-broker/weir/core/coord"
)

// ErrPartitionsChanged: AddPartitions found the topic other than the caller
// read it (another incarnation of the name, or partitions added meanwhile).
var ErrPartitionsChanged = errors.New("layout: the topic's partitions changed")

// AddPartitions appends partitions to a topic (Kafka's CreatePartitions in
// ZooKeeper mode, AdminZkClient.createPartitions): the assignment node
// /brokers/topics/<t> is set to its partitions as read, followed by added,
// by compare-and-set on the version read. The topic must still have the
// ID id and exactly existing partitions: otherwise ErrPartitionsChanged
// (another writer got there first; read again, decide again); a topic that
// is gone is coord.ErrNoNode. Any broker calls it, unfenced; the controller
// learns of the new partitions from its watch on the node and writes their
// states, and the brokers assigned them open their logs.
func AddPartitions(ctx context.Context, s coord.Store, name string, id [16]byte, existing int, added [][]int32) error {
	fail := func(err error) error { return fmt.Errorf("layout: add partitions to %q: %w", name, err) }
	if err := checkTopicRef(name); err != nil {
		return fail(err)
	}
	path := TopicPath(name)
	for {
		data, st, err := s.Get(ctx, path)
		if err != nil {
			return fail(err)
		}
		gotID, assignment, err := DecodeAssignment(path, data)
		if err != nil {
			return fail(err)
		}
		if gotID != id || len(assignment) != existing {
			return fail(fmt.Errorf("%w: read %d partitions, now %d (same incarnation: %v)", ErrPartitionsChanged,
				existing, len(assignment), gotID == id))
		}
		next := slices.Concat(assignment, added)
		if !checkAssignment(next) {
			return fail(fmt.Errorf("%w: assignment %v: each partition needs distinct replicas >= 0", ErrInvalid, added))
		}
		_, err = s.Set(ctx, path, EncodeAssignment(id, next), st.Version)
		if errors.Is(err, coord.ErrBadVersion) {
			continue // changed meanwhile: the checks above decide again
		}
		if err != nil {
			return fail(err)
		}
		return nil
	}
}
