package node

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// TestCreateTopicWholeOrNothing: when one partition of a new topic cannot
// be opened (here: the process is out of descriptors when its first
// segment is created), CreateTopic fails with ErrPartitionStorage wrapping
// the cause, and nothing of the topic remains: not in the metadata, not on
// disk. The broker then creates topics as usual.
func TestCreateTopicWholeOrNothing(t *testing.T) {
	mem := vfs.NewMem()
	fsys := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if op == errorfs.OpCreate && strings.Contains(path, "/doomed-3/") && strings.HasSuffix(path, ".log") {
			return syscall.EMFILE
		}
		return nil
	}))
	srv := memstore.NewServer()
	n, err := Open(Config{DataDir: "/data", NodeID: 1, FS: fsys, Advertised: "localhost:9092", Coord: srv.Connect(),
		OffsetsPartitions: 1, OffsetsReplicationFactor: 1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	_, err = n.CreateTopic(ctx, CreateTopic{Name: "doomed", Partitions: 8, ReplicationFactor: 1})
	if !errors.Is(err, ErrPartitionStorage) || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("CreateTopic with a partition that cannot open: %v, want ErrPartitionStorage wrapping EMFILE", err)
	}
	if im, _ := n.image.load(); im.Topics["doomed"] != nil {
		t.Fatalf("the topic is still there: %+v", im.Topics["doomed"])
	}
	names, err := mem.List("/data")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasPrefix(name, "doomed-") {
			t.Fatalf("partition directory %s left behind", filepath.Join("/data", name))
		}
	}
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "fine", Partitions: 8, ReplicationFactor: 1}); err != nil {
		t.Fatalf("a topic after the failed one: %v", err)
	}
}
