package transport

// Produce: v0-v10, of which v0-v2 are advertised but refused.
//
// v0-v2 carry the old message sets (magic 0 and 1), which weir does not store:
// every partition of such a request gets UNSUPPORTED_FOR_MESSAGE_FORMAT. They
// are advertised anyway because librdkafka 2.0.2 (Debian 12's kcat) turns
// gzip, snappy and lz4 off unless the broker lists Produce v0 (librdkafka
// issue 4956; Kafka 4.0 keeps v0 in ApiVersions for the same reason,
// KAFKA-18659). librdkafka still sends v7.
//
// v3 is the first version carrying record batches v2 (and the transactional
// ID: the node verifies transactional batches with their coordinator, and
// refuses control batches, INVALID_RECORD: only brokers write transaction
// markers); v7 is the first that
// may carry zstd; v9 made the request flexible; v10 only adds tagged fields the
// broker sets when it is not the leader.
//
// acks 0 gets no response at all (and, as in Kafka, a failed acks-0 request
// closes the connection so the producer notices); acks 1 and -1 answer once
// the node says the write is done (see node.Node.Produce: auto-creation,
// min.insync.replicas and durable acks are its decisions).

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

func handleProduce(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)

	pr := node.ProduceRequest{TransactionalID: req.TransactionID, Acks: req.Acks,
		Timeout: time.Duration(req.TimeoutMillis) * time.Millisecond}
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	pr.Partitions = make([]node.ProducePartition, 0, n)
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			pr.Partitions = append(pr.Partitions, node.ProducePartition{Topic: rt.Topic, Partition: rp.Partition, Records: rp.Records})
		}
	}
	if r.version < 3 {
		for i := range pr.Partitions {
			pr.Partitions[i].Err = errOldMessageFormat
			pr.Partitions[i].BaseOffset, pr.Partitions[i].LogAppendTime, pr.Partitions[i].LogStartOffset = -1, -1, -1
		}
	} else {
		s.node.Produce(ctx, &pr)
	}

	failed := false
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	k := 0
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			w := &pr.Partitions[k]
			k++
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = w.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = w.BaseOffset, w.LogAppendTime, w.LogStartOffset
			if w.Err != nil {
				sp.ErrorCode = s.code(w.Err)
				failed = true
			}
		}
	}
	if req.Acks == 0 {
		if failed {
			return nil, fmt.Errorf("%w: acks=0 produce failed", errClose)
		}
		return nil, nil
	}
	return resp, nil
}
