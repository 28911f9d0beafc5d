package transport

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-broker/weir/node"
)

// A client that pipelines side-effecting requests and goes away at once
// (closing its writing side, or the whole connection) still has every
// request it sent served: the broker read them, so their appends and commits
// happen even though nobody reads the answers. Before the fix the serving
// goroutine stopped as soon as the reader saw EOF (the two raced in a select)
// or as soon as an answer could not be written.
func TestEveryFrameReadIsServed(t *testing.T) {
	const n = 40
	for _, tc := range []struct {
		name  string
		close func(*rawConn)
	}{
		{"close write side", func(rc *rawConn) { rc.c.(interface{ CloseWrite() error }).CloseWrite() }},
		{"close connection", func(rc *rawConn) { rc.c.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The first request waits until the reader has seen the
			// client go (it cancels the connection's context), so that all
			// n are read before any is served.
			var first sync.Once
			started := make(chan struct{})
			hook := func(ctx context.Context, _ int16) {
				first.Do(func() {
					close(started)
					select {
					case <-ctx.Done():
					case <-time.After(20 * time.Second):
						t.Error("the reader did not see the client go")
					}
				})
			}
			b := startBroker(t, withSeams(&seams{beforeHandle: hook}), func(c *Config, _ *node.Config) {
				c.MaxInFlightRequests = n + 1 // room to read all n, then EOF
			})
			b.createTopic(t, "t", 1, nil)
			b.coord(t) // the committed offsets loaded: commits succeed at once
			// Produce and simple (generation -1) offset commits, alternating.
			var out bytes.Buffer
			for i := range n {
				if i%2 == 0 {
					out.Write(frame(produceReq(7, 1, "t", 0, batch(t, "p", 1)), int32(i), nil))
					continue
				}
				out.Write(frame(commitReq("g", "t", int64(i)), int32(i), nil))
			}
			rc := b.dial(t)
			rc.write(out.Bytes())
			tc.close(rc)

			// The connection goes once it has served what it read.
			<-started
			pollStats(t, b.s, "the connection to go", func(st []ConnStats) bool { return len(st) == 0 })
			p, _ := b.node.Partition("t", 0)
			if end := p.Stats().LogEndOffset; end != n/2 {
				t.Errorf("log end %d after %d produce requests, want %d", end, n/2, n/2)
			}
			fetch := b.dial(t).do(offsetFetchReq("g", "t")).(*kmsg.OffsetFetchResponse)
			if got := fetch.Topics[0].Partitions[0].Offset; got != n-1 {
				t.Errorf("committed offset %d, want the last commit's %d", got, n-1)
			}
		})
	}
}

func commitReq(group, topic string, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 2
	req.Group = group
	req.Generation = -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func offsetFetchReq(group, topic string) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 1
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{0}
	req.Topics = append(req.Topics, rt)
	return req
}
