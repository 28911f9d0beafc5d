package layout_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
)

// TestAddPartitions: partitions are appended by compare-and-set; a caller
// that read a stale count, or another incarnation, gets
// layout.ErrPartitionsChanged and nothing is written; a missing topic is ErrNoNode.
func TestAddPartitions(t *testing.T) {
	_, ss := cluster(1)
	s := ss[0]
	tp := topic("grow", []int32{1, 2}, []int32{2, 1})
	must(t, layout.CreateTopic(ctx(t), s, tp))
	if err := layout.AddPartitions(ctx(t), s, "grow", tp.ID, 1, [][]int32{{1, 2}}); !errors.Is(err, layout.ErrPartitionsChanged) {
		t.Fatalf("stale count: %v", err)
	}
	if err := layout.AddPartitions(ctx(t), s, "grow", [16]byte{9}, 2, [][]int32{{1, 2}}); !errors.Is(err, layout.ErrPartitionsChanged) {
		t.Fatalf("other incarnation: %v", err)
	}
	if err := layout.AddPartitions(ctx(t), s, "grow", tp.ID, 2, [][]int32{{1, 1}}); !errors.Is(err, layout.ErrInvalid) {
		t.Fatalf("a broker twice: %v", err)
	}
	must(t, layout.AddPartitions(ctx(t), s, "grow", tp.ID, 2, [][]int32{{1, 2}, {2, 1}}))
	got, err := layout.ReadTopic(ctx(t), s, "grow")
	must(t, err)
	if got.ID != tp.ID || !slices.EqualFunc(got.Assignment, [][]int32{{1, 2}, {2, 1}, {1, 2}, {2, 1}}, slices.Equal) {
		t.Fatalf("assignment %v", got.Assignment)
	}
	if err := layout.AddPartitions(ctx(t), s, "gone", tp.ID, 2, [][]int32{{1}}); !errors.Is(err, coord.ErrNoNode) {
		t.Fatalf("missing topic: %v", err)
	}
}
