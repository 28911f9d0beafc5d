package transport

// Regression tests for bugs a review found in the broker (each failed before
// its fix).

import (
	"context"
	"encoding/binary"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/node"
)

// A long poll at the end of a topic deleted while it waits answers at once
// with NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata), instead of
// spinning on the closed log's wake-up channel until MaxWait.
func TestFetchAnswersWhenTopicDeletedDuringLongPoll(t *testing.T) {
	var waits atomic.Int64
	started := make(chan struct{}, 1)
	testHookFetchWait = func() {
		waits.Add(1)
		select {
		case started <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { testHookFetchWait = nil })
	b := startBroker(t)
	b.createTopic(t, "t", 1, nil)
	rc := b.dial(t)
	req := fetchReq(11, 20*time.Second, 1, 1<<20, "t", map[int32]int64{0: 0})
	corr := rc.send(req)
	<-started
	start := time.Now()
	if _, err := b.node.DeleteTopic(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	resp := rc.recv(req, corr).(*kmsg.FetchResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Errorf("fetch of a topic deleted during its long poll: error %d, want %d", code, kerr.NotLeaderForPartition.Code)
	}
	if n := waits.Load(); n > 3 {
		t.Errorf("long poll woke %d times over a deleted topic's closed log", n)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("answered only after %v", took)
	}
}

// Reading a deleted topic's log maps to a retriable code, not UNKNOWN_SERVER_ERROR.
func TestReadClosedLogErrorCode(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 1, nil)
	p, err := b.node.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.node.DeleteTopic(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	_, rerr := p.Read(0, 1<<20, math.MaxInt64)
	if got := errorCode(rerr); got != kerr.NotLeaderForPartition.Code {
		t.Fatalf("read of a deleted log: %v -> code %d", rerr, got)
	}
}

// A client that goes away during a long poll frees its connection (and its
// MaxConnections slot) at once, not when the poll's MaxWait ends.
func TestClosedConnFreedDuringLongPoll(t *testing.T) {
	waiting := setFetchHook(t)
	b := startBroker(t, func(c *Config, _ *node.Config) { c.MaxConnections = 1 })
	b.createTopic(t, "t", 1, nil)
	a := b.dial(t)
	a.send(fetchReq(11, 60*time.Second, 1, 1<<20, "t", map[int32]int64{0: 0}))
	<-waiting
	a.c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.s.mu.Lock()
		n := len(b.s.conns)
		b.s.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connection(s) still open 10s after the client closed during a 60s long poll", n)
		}
		runtime.Gosched() // polling, bounded by the deadline above
	}
	c := b.dial(t)
	c.send(apiVersionsReq(3))
	if _, err := c.readFrame(); err != nil {
		t.Fatalf("new connection refused after the dead one left: %v", err)
	}
}

// gatedSyncFS holds every fsync of a .log file until gate is unlocked.
type gatedSyncFS struct {
	vfs.FS
	gate *sync.RWMutex
}

type gatedSyncFile struct {
	vfs.File
	gate *sync.RWMutex
}

func (f gatedSyncFile) Sync() error {
	if strings.HasSuffix(f.Name(), ".log") {
		f.gate.RLock()
		defer f.gate.RUnlock()
	}
	return f.File.Sync()
}

func (s gatedSyncFS) Create(name string) (vfs.File, error) {
	f, err := s.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return gatedSyncFile{f, s.gate}, nil
}

func (s gatedSyncFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := s.FS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return gatedSyncFile{f, s.gate}, nil
}

// A durable-acks produce whose fsync outlasts the request's timeout answers
// REQUEST_TIMED_OUT when the timeout passes; the fsync goes on.
func TestDurableAckRespectsRequestTimeout(t *testing.T) {
	gate := &sync.RWMutex{}
	b := startBroker(t, func(c *Config, o *node.Config) { o.FS = gatedSyncFS{vfs.NewMem(), gate} })
	b.createTopic(t, "d", 1, map[string]string{"weir.durable.acks": "true"})
	gate.Lock() // the disk stalls
	release := time.AfterFunc(15*time.Second, gate.Unlock)
	rc := b.dial(t)
	req := produceReq(7, -1, "d", 0, batch(t, "slow", 1))
	req.TimeoutMillis = 200
	resp := rc.do(req).(*kmsg.ProduceResponse)
	if release.Stop() {
		gate.Unlock()
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.RequestTimedOut.Code {
		t.Fatalf("durable produce with a stalled fsync and timeout.ms=200: error %d, want REQUEST_TIMED_OUT", code)
	}
}

// min.insync.replicas above 1 makes acks=all produces fail with
// NOT_ENOUGH_REPLICAS on one node; acks=1 still works.
func TestMinInsyncReplicas(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "m", 1, map[string]string{"min.insync.replicas": "2"})
	rc := b.dial(t)
	if code := rc.do(produceReq(7, -1, "m", 0, batch(t, "all", 1))).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with min.insync.replicas=2: error %d, want NOT_ENOUGH_REPLICAS", code)
	}
	if code := rc.do(produceReq(7, 1, "m", 0, batch(t, "one", 1))).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("acks=1: error %d", code)
	}
}

// Requests other than Produce have a lower size bound, checked before the
// frame is allocated: a hostile control request cannot make the broker
// decode (and amplify) a Produce-sized body.
func TestControlRequestSizeBound(t *testing.T) {
	b := startBroker(t, func(c *Config, _ *node.Config) { c.MaxControlRequestBytes = 64 << 10 })
	b.createTopic(t, "t", 1, nil)
	big := b.dial(t)
	// A Metadata frame announcing 100 KiB: refused after its key, before the body.
	big.write(append(binary.BigEndian.AppendUint32(nil, 100<<10), 0, 3))
	big.expectClosed()
	// A Produce of 100 KiB is still served.
	rc := b.dial(t)
	resp := rc.do(produceReq(7, 1, "t", 0, batch(t, strings.Repeat("x", 100<<10), 1))).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("100 KiB produce: error %d", code)
	}
}

// DeleteGroups deletes an empty group with its committed offsets, refuses a
// group with members, and reports unknown groups.
func TestDeleteGroups(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 1, nil)
	tp := groups.TopicPartition{Topic: "t", Partition: 0}
	if _, err := b.coord(t).Commit("done", "", nil, -1, []groups.OffsetCommit{{TopicPartition: tp, Offset: 7, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	// A group with a member (joined, rebalance complete) is not empty.
	if _, err := b.coord(t).Join(context.Background(), groups.JoinRequest{Group: "busy", ProtocolType: "consumer",
		Protocols: []groups.Protocol{{Name: "range"}}, SessionTimeout: 30 * time.Second, RebalanceTimeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	rc := b.dial(t)
	resp := rc.do(&kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"done", "busy", "none"}}).(*kmsg.DeleteGroupsResponse)
	want := []int16{0, kerr.NonEmptyGroup.Code, kerr.GroupIDNotFound.Code}
	for i, g := range resp.Groups {
		if g.ErrorCode != want[i] {
			t.Errorf("%s: error %d, want %d", g.Group, g.ErrorCode, want[i])
		}
	}
	if got, err := b.coord(t).Fetch("done", []groups.TopicPartition{tp}); err != nil {
		t.Fatal(err)
	} else if c, ok := got[tp]; ok && c.Offset >= 0 {
		t.Fatalf("deleted group kept committed offset %d", c.Offset)
	}
}
