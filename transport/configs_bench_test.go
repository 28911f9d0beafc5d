package transport

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkConfigs1000Topics measures, on a broker with 1,000 topics of one
// partition each, the latency of DescribeConfigs of every config of one
// topic, of every config of all 1,000 topics in one request (synonyms and
// documentation included, as kadm asks), and of Metadata for all topics:
// requests one after another on one connection over loopback, the decoding
// of the answer by the client included. ns/op is the latency of one request;
// cpu-us/op the CPU time the process (broker and client) spent per request,
// which a loaded machine inflates less than the latency.
//
//	go test -run '^$' -bench Configs1000Topics -count 5 ./transport
func BenchmarkConfigs1000Topics(b *testing.B) {
	const topics = 1000
	br := startBroker(b, withMemCoord)
	rc := br.dial(b)
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version, create.TimeoutMillis = 7, 0 // answered once written; the leaders are waited for below
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("topic-%04d", i)
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = names[i], 1, 1
		create.Topics = append(create.Topics, t)
	}
	for _, t := range rc.do(create).(*kmsg.CreateTopicsResponse).Topics {
		if t.ErrorCode != 0 {
			b.Fatalf("create %s: error %d", t.Topic, t.ErrorCode)
		}
	}
	led := func() (int, int) {
		n := 0
		ts := br.node.Topics()
		for _, ti := range ts {
			if ti.Partitions[0].Leader >= 0 {
				n++
			}
		}
		return n, len(ts)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		n, all := led()
		if n == topics && all == topics {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("after 3 minutes, %d of %d topics led, want %d", n, all, topics)
		}
	}
	describe := func(names ...string) *kmsg.DescribeConfigsRequest {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version, req.IncludeSynonyms, req.IncludeDocumentation = 4, true, true
		for _, n := range names {
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, n
			req.Resources = append(req.Resources, r)
		}
		return req
	}
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 12
	for _, bc := range []struct {
		name string
		req  kmsg.Request
		want int
	}{
		{"describe-one-topic", describe(names[500]), 1},
		{"describe-all-topics", describe(names...), topics},
		{"metadata-all-topics", metadata, topics},
	} {
		b.Run(bc.name, func(b *testing.B) {
			before := cpuTime()
			for b.Loop() {
				switch resp := rc.do(bc.req).(type) {
				case *kmsg.DescribeConfigsResponse:
					if len(resp.Resources) != bc.want || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) == 0 {
						b.Fatalf("%d resources", len(resp.Resources))
					}
				case *kmsg.MetadataResponse:
					if len(resp.Topics) != bc.want {
						b.Fatalf("%d topics", len(resp.Topics))
					}
				}
			}
			b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}
