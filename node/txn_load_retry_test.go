package node

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// TestTxnLoadRetried: a load of the transaction log that fails (reads of
// its segment fail, three times in a row) is tried again by itself, with a
// backoff, rather than at the node loop's next step, which may never come
// in a cluster where nothing changes: the coordinator loads, and serves the
// transactional id written before the restart.
func TestTxnLoadRetried(t *testing.T) {
	const failures = 3
	var (
		mu     sync.Mutex
		armed  bool
		struck int
	)
	mem := vfs.NewMem()
	fsys := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		mu.Lock()
		defer mu.Unlock()
		if armed && op == errorfs.OpRead && strings.Contains(path, "/"+TransactionStateTopic+"-") && strings.HasSuffix(path, ".log") {
			struck++
			armed = struck < failures
			return syscall.EIO
		}
		return nil
	}))
	srv := memstore.NewServer()
	open := func() *Node {
		t.Helper()
		n, err := Open(Config{DataDir: "/data", NodeID: 1, FS: fsys, Advertised: "localhost:9092", Coord: srv.Connect(),
			OffsetsPartitions: 1, OffsetsReplicationFactor: 1, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := open()
	if err := n.AwaitTxnLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := n.InitTransactionalProducerID(ctx, "etl", time.Minute, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	armed = true
	mu.Unlock()
	n = open()
	defer n.Close()
	if err := n.AwaitTxnLoaded(ctx); err != nil {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("after %d failed loads: %v", struck, err)
	}
	mu.Lock()
	if struck != failures {
		t.Errorf("%d reads of the transaction log failed, want %d", struck, failures)
	}
	mu.Unlock()
	d, err := n.DescribeTransaction(ctx, "etl")
	if err != nil || d.ProducerID != pid || d.Epoch != epoch {
		t.Fatalf("after the reload: %+v, %v; want producer %d epoch %d", d, err, pid, epoch)
	}
}
