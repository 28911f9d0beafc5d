// Package peer is how a broker talks to another broker as a follower: the
// Fetch (with ReplicaID) and OffsetForLeaderEpoch requests of Kafka's
// replica fetcher, over the Kafka protocol with franz-go's kmsg, on one
// connection to one broker, one request at a time and no retries of its
// own: the fetcher decides what to do next. The connection is the client's
// own (conn.go), not a franz-go client's, so that a fetch's records are read
// into a buffer kept from one fetch to the next: they are valid until the
// client's next request.
//
// The requests are Fetch v11 (the newest weir serves: ReplicaID and
// CurrentLeaderEpoch, no LastFetchedEpoch, so followers truncate through
// OffsetForLeaderEpoch) and OffsetForLeaderEpoch v3 (ReplicaID and
// CurrentLeaderEpoch). Types here are plain values; the node converts.
package peer

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Dialer dials a broker (tests put a faulty network here).
type Dialer func(ctx context.Context, network, address string) (net.Conn, error)

// Client talks to one broker, one request at a time (concurrent calls
// queue).
type Client struct {
	addr     string
	self     int32
	dial     Dialer
	clientID string

	closed atomic.Bool
	connMu sync.Mutex
	conn   net.Conn // nil until dialed, and after an error

	mu       sync.Mutex // held by the request in progress, over what follows
	lastUsed time.Time
	corr     int32
	wbuf     []byte // the request being written
	rbuf     []byte // the last response, kept for the next
}

// Dial returns a client of the broker at addr, for follower self, dialing
// with dial (nil: net.Dialer). The connection is made on the first request,
// and again on the request after any error.
func Dial(addr string, self int32, dial Dialer) (*Client, error) {
	return &Client{addr: addr, self: self, dial: dial, clientID: fmt.Sprintf("weir-replica-fetcher-%d", self)}, nil
}

// Addr is the broker's address.
func (c *Client) Addr() string { return c.addr }

// Close closes the client's connection; requests fail afterwards. A request
// in progress ends with an error.
func (c *Client) Close() {
	c.closed.Store(true)
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// FetchPartition is one partition of a follower's fetch.
type FetchPartition struct {
	Topic              string
	Partition          int32
	CurrentLeaderEpoch int32
	FetchOffset        int64
	// LogStartOffset is the follower's log start, which the leader's
	// DeleteRecords waits for (-1: not reported).
	LogStartOffset int64
	MaxBytes       int32
}

// Fetched is one partition's answer. Err is the partition's error code as
// a kerr error (nil for none). Records alias the client's buffer: they are
// valid until its next request.
type Fetched struct {
	Topic          string
	Partition      int32
	Err            error
	HighWatermark  int64
	LogStartOffset int64
	Records        []byte
}

// FetchRequest is a follower's fetch.
type FetchRequest struct {
	MaxWait            time.Duration
	MinBytes, MaxBytes int32
	Partitions         []FetchPartition
}

// Fetch sends a follower's fetch and returns each partition's answer (in
// the request's order as far as the response keeps it). The records are
// valid until the client's next request.
func (c *Client) Fetch(ctx context.Context, r FetchRequest) ([]Fetched, error) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = c.self
	req.MaxWaitMillis = int32(r.MaxWait / time.Millisecond)
	req.MinBytes, req.MaxBytes = r.MinBytes, r.MaxBytes
	req.IsolationLevel = 0
	req.SessionID, req.SessionEpoch = 0, -1
	idx := map[string]int{}
	for _, p := range r.Partitions {
		i, ok := idx[p.Topic]
		if !ok {
			i = len(req.Topics)
			idx[p.Topic] = i
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = p.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset = p.Partition, p.CurrentLeaderEpoch, p.FetchOffset
		rp.LogStartOffset, rp.PartitionMaxBytes = p.LogStartOffset, p.MaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := c.request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("peer: fetch from %s: %w", c.addr, err)
	}
	var out []Fetched
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, Fetched{Topic: t.Topic, Partition: p.Partition, Err: kerr.ErrorForCode(p.ErrorCode),
				HighWatermark: p.HighWatermark, LogStartOffset: p.LogStartOffset, Records: p.RecordBatches})
		}
	}
	return out, nil
}

// EpochQuery asks where an epoch ends.
type EpochQuery struct {
	Topic              string
	Partition          int32
	CurrentLeaderEpoch int32
	LeaderEpoch        int32
}

// EpochAnswer is the leader's answer: Epoch and EndOffset are -1 when the
// epoch is unknown.
type EpochAnswer struct {
	Topic     string
	Partition int32
	Err       error
	Epoch     int32
	EndOffset int64
}

// EpochEnds sends OffsetForLeaderEpoch as follower.
func (c *Client) EpochEnds(ctx context.Context, qs []EpochQuery) ([]EpochAnswer, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 3
	req.ReplicaID = c.self
	idx := map[string]int{}
	for _, q := range qs {
		i, ok := idx[q.Topic]
		if !ok {
			i = len(req.Topics)
			idx[q.Topic] = i
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = q.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = q.Partition, q.CurrentLeaderEpoch, q.LeaderEpoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := c.request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
	var out []EpochAnswer
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, EpochAnswer{Topic: t.Topic, Partition: p.Partition, Err: kerr.ErrorForCode(p.ErrorCode),
				Epoch: p.LeaderEpoch, EndOffset: p.EndOffset})
		}
	}
	return out, nil
}

func (c *Client) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	resp, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("peer: %s to %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	return resp, nil
}
