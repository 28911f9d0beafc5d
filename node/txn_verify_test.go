package node_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/txn"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/node"
	"github.com/weir-broker/weir/transport"
)

// startServed opens broker id of the cluster of srv, served by the
// transport on a loopback port, stopped at the end of the test.
func startServed(t testing.TB, srv *memstore.Server, id int32) *node.Node {
	t.Helper()
	n, _ := startServedWith(t, srv, id, nil)
	return n
}

// startServedWith is startServed calling before (unless nil) on the opened
// node before it is served; it returns the node and its address.
func startServedWith(t testing.TB, srv *memstore.Server, id int32, before func(*node.Node)) (*node.Node, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.Open(node.Config{DataDir: t.TempDir(), FS: vfs.Default, NodeID: id, Advertised: l.Addr().String(),
		Coord: srv.Connect(), OffsetsReplicationFactor: 1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(n)
	}
	s, err := transport.NewServer(transport.Config{Logger: logger, Metrics: transport.NewMetrics(n.Metrics())}, n)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		<-served
		n.Close()
	})
	return n, l.Addr().String()
}

// A partition leader asks the transaction coordinator on another broker
// whether a transactional produce's partition is in the producer's
// transaction (AddPartitionsToTxn v4 VerifyOnly, over the network): in it,
// nil; not in it, INVALID_TXN_STATE; an older epoch, fenced.
func TestTxnVerifyAtAnotherBroker(t *testing.T) {
	srv := memstore.NewServer()
	nodes := map[int32]*node.Node{1: startServed(t, srv, 1), 2: startServed(t, srv, 2)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b node.Broker
	var err error
	for { // broker 1 may not see the new topic's leaders at once
		b, err = nodes[1].FindCoordinator(ctx, node.CoordinatorTransaction, "etl")
		if !errors.Is(err, node.ErrCoordinatorNotAvailable) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	coord, leader := nodes[b.ID], nodes[3-b.ID]
	if err := coord.AwaitTxnLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := coord.CreateTopic(ctx, node.CreateTopic{Name: "out", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := coord.InitTransactionalProducerID(ctx, "etl", time.Minute, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	for { // the coordinator may not see "out" at once
		var errs []error
		errs, err = coord.AddPartitionsToTxn(ctx, "etl", pid, epoch, []node.TopicPartition{{Topic: "out", Partition: 0}})
		if err == nil && errs[0] == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Nor the other broker the leaders of __transaction_state (the ids
	// below map to two of its partitions), nor load those it leads.
	for _, id := range []string{"etl", "nobody"} {
		for {
			_, err := leader.FindCoordinator(ctx, node.CoordinatorTransaction, id)
			if !errors.Is(err, node.ErrCoordinatorNotAvailable) || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := leader.AwaitTxnLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	for { // the leader may not see the transaction log's leaders at once
		err = leader.TxnVerify(ctx, "etl", pid, epoch, "out", 0)
		if !errors.Is(err, node.ErrCoordinatorNotAvailable) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil {
		t.Fatalf("verify of a partition in the transaction: %v", err)
	}
	if err := leader.TxnVerify(ctx, "etl", pid, epoch, "out", 1); !errors.Is(err, txn.ErrInvalidTxnState) {
		t.Fatalf("verify of a partition not in the transaction: %v", err)
	}
	if err := leader.TxnVerify(ctx, "etl", pid, epoch-1, "out", 0); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("verify with an older epoch: %v", err)
	}
	if err := leader.TxnVerify(ctx, "nobody", pid, epoch, "out", 0); !errors.Is(err, txn.ErrInvalidProducerIDMapping) {
		t.Fatalf("verify of an unknown id: %v", err)
	}
}
