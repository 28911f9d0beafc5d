package logs

import (
	"context"
	"testing"

	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// TestUnchangedPartitionOpensAndClosesWithoutWriting: a partition with
// records and an idempotent producer, closed cleanly, opens and closes
// again without creating, writing, renaming, removing or fsyncing anything
// (neither its log nor its producer snapshot), and still knows its
// producer.
func TestUnchangedPartitionOpensAndClosesWithoutWriting(t *testing.T) {
	mem := vfs.NewMem()
	var writes []string
	counting := false
	fsys := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		switch op {
		case errorfs.OpCreate, errorfs.OpWrite, errorfs.OpSync, errorfs.OpTruncate, errorfs.OpRemove,
			errorfs.OpRename, errorfs.OpSyncDir:
			if counting {
				writes = append(writes, op.String()+" "+path)
			}
		}
		return nil
	}))
	clk := newClock()
	m := newManager(t, fsys, clk)
	pc := topicConfig(t, clk, nil, nil, false)
	p, err := m.Open("t", 0, testTopicID("t"), pc)
	if err != nil {
		t.Fatal(err)
	}
	for seq := int32(0); seq < 6; seq += 2 {
		if _, err := p.Append(context.Background(), testbatch.Idempotent(7, 0, seq, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	counting = true
	for range 2 {
		p, err := m.Open("t", 0, testTopicID("t"), pc)
		if err != nil {
			t.Fatal(err)
		}
		if p.ProducerCount() != 1 || p.Log().EndOffset() != 6 {
			t.Fatalf("reopened: %d producers, end %d; want 1 and 6", p.ProducerCount(), p.Log().EndOffset())
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(writes) > 0 {
		t.Fatalf("opening and closing an unchanged partition wrote: %q", writes)
	}
	counting = false
	p, err = m.Open("t", 0, testTopicID("t"), pc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The producer's next sequence is remembered: a retry is a duplicate.
	res, err := p.Append(context.Background(), testbatch.Idempotent(7, 0, 4, 2))
	if err != nil || !res.Duplicate {
		t.Fatalf("retry of the last batch after reopening: %+v, %v; want a duplicate", res, err)
	}
}
