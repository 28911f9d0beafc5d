package layout_test

import (
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/coord/memstore"
)

func block(t *testing.T, s coord.Store) layout.ProducerIDBlock {
	t.Helper()
	data, _ := get(t, s, layout.ProducerIDBlockPath)
	b, err := layout.DecodeProducerIDBlock(layout.ProducerIDBlockPath, []byte(data))
	must(t, err)
	return b
}

func TestAllocateProducerIDs(t *testing.T) {
	_, ss := cluster(1)
	s := ss[0]
	if first, err := layout.AllocateProducerIDs(ctx(t), s, 1, 10); err != nil || first != 0 {
		t.Fatalf("first block: %d, %v", first, err)
	}
	if first, err := layout.AllocateProducerIDs(ctx(t), s, 2, 1000); err != nil || first != 10 {
		t.Fatalf("second block: %d, %v", first, err)
	}
	if b := block(t, s); b != (layout.ProducerIDBlock{Broker: 2, First: 10, Last: 1009}) {
		t.Fatalf("node %+v", b)
	}
	_, err := layout.AllocateProducerIDs(ctx(t), s, 1, 0)
	wantErr(t, err, errs(layout.ErrInvalid))

	_, err = s.Set(ctx(t), layout.ProducerIDBlockPath, layout.EncodeProducerIDBlock(layout.ProducerIDBlock{First: 0, Last: math.MaxInt64 - 5}), coord.AnyVersion)
	must(t, err)
	_, err = layout.AllocateProducerIDs(ctx(t), s, 1, 10)
	wantErr(t, err, nil, "exhausted")
	if first, err := layout.AllocateProducerIDs(ctx(t), s, 1, 5); err != nil || first != math.MaxInt64-4 {
		t.Fatalf("last block: %d, %v", first, err)
	}
}

// Kafka creates the node empty at start-up: that is no block yet.
func TestAllocateProducerIDsEmptyNode(t *testing.T) {
	_, ss := cluster(1)
	must(t, ss[0].Create(ctx(t), layout.ProducerIDBlockPath, nil, coord.Persistent))
	if first, err := layout.AllocateProducerIDs(ctx(t), ss[0], 1, 1000); err != nil || first != 0 {
		t.Fatalf("%d, %v", first, err)
	}
}

// Two brokers allocating at once never get overlapping blocks, and no id
// is skipped.
func TestAllocateProducerIDsConcurrent(t *testing.T) {
	_, ss := cluster(2)
	const perBroker, size = 100, 7
	firsts := make([][]int64, 2)
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() {
			for range perBroker {
				first, err := layout.AllocateProducerIDs(ctx(t), s, int32(i), size)
				if err != nil {
					t.Error(err)
					return
				}
				firsts[i] = append(firsts[i], first)
			}
		})
	}
	wg.Wait()
	all := slices.Sorted(slices.Values(slices.Concat(firsts...)))
	for i, first := range all {
		if first != int64(i*size) {
			t.Fatalf("block %d starts at %d, want %d (blocks %v)", i, first, i*size, all)
		}
	}
	if len(all) != 2*perBroker {
		t.Fatalf("%d blocks", len(all))
	}
}

func TestAllocateProducerIDsConflictAndLoss(t *testing.T) {
	srv, ss := cluster(2)
	_, err := layout.AllocateProducerIDs(ctx(t), ss[0], 0, 10)
	must(t, err)
	inj := srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindSet, layout.ProducerIDBlockPath),
		Before: func(memstore.Request) {
			if first, err := layout.AllocateProducerIDs(ctx(t), ss[1], 1, 10); err != nil || first != 10 {
				t.Errorf("the other broker: %d, %v", first, err)
			}
		}})
	if first, err := layout.AllocateProducerIDs(ctx(t), ss[0], 0, 10); err != nil || first != 20 || inj.Struck() != 1 {
		t.Fatalf("after a conflict: %d, %v, struck %d", first, err, inj.Struck())
	}
	// A lost reply: the block [30, 39] was written, and is skipped.
	srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindSet, layout.ProducerIDBlockPath), Lost: true})
	_, err = layout.AllocateProducerIDs(ctx(t), ss[0], 0, 10)
	wantErr(t, err, errs(coord.ErrConnectionLoss))
	if first, err := layout.AllocateProducerIDs(ctx(t), ss[0], 0, 10); err != nil || first != 40 {
		t.Fatalf("after a lost reply: %d, %v", first, err)
	}
}

func TestClusterID(t *testing.T) {
	srv, ss := cluster(2)
	inj := srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindCreate, layout.ClusterIDPath), Lost: true})
	if id, err := layout.ClusterID(ctx(t), ss[0], "first"); err != nil || id != "first" || inj.Struck() != 1 {
		t.Fatalf("%q, %v, struck %d", id, err, inj.Struck())
	}
	if id, err := layout.ClusterID(ctx(t), ss[1], "second"); err != nil || id != "first" {
		t.Fatalf("%q, %v", id, err)
	}
	if data, _ := get(t, ss[0], layout.ClusterIDPath); data != `{"version":"1","id":"first"}` {
		t.Fatalf("node %s", data)
	}
	_, err := layout.ClusterID(ctx(t), ss[0], "")
	wantErr(t, err, errs(layout.ErrInvalid))
}
