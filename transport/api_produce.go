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
// ID, which must be null: weir has no transactions); v7 is the first that may
// carry zstd; v9 made the request flexible; v10 only adds tagged fields the
// broker sets when it is not the leader, which on one node it always is.
//
// acks 0 gets no response at all (and, as in Kafka, a failed acks-0 request
// closes the connection so the producer notices); acks 1 and -1 (all in-sync
// replicas: on one node, the leader) answer after the append, and after the
// covering fsync on topics with durable acks (the topics package waits).
// Partitions with durable acks are appended concurrently so that one request's
// partitions share fsync rounds instead of queueing for them.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/topics"
)

func handleProduce(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)

	var reqErr error
	switch {
	case r.version < 3:
		reqErr = errOldMessageFormat
	case req.TransactionID != nil:
		reqErr = errTransactions
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		reqErr = errInvalidAcks
	}

	var (
		wg     sync.WaitGroup
		failed bool
		dctx   context.Context // for durable appends: ctx within the request's timeout
		cancel context.CancelFunc

		panicMu  sync.Mutex
		panicked []any
	)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			if reqErr != nil {
				sp.ErrorCode = s.code(reqErr)
				failed = true
				continue
			}
			p, err := s.producePartition(rt.Topic, rp.Partition)
			if err != nil {
				sp.ErrorCode = s.code(err)
				failed = true
				continue
			}
			if req.Acks == -1 && p.MinInsyncReplicas > 1 {
				sp.ErrorCode = s.code(errNotEnoughReplicas)
				failed = true
				continue
			}
			if !p.DurableAcks {
				s.appendTo(ctx, p, rp.Records, sp)
				continue
			}
			// Durable: wait for the fsync concurrently with the request's
			// other partitions, within the request's timeout.
			if dctx == nil {
				dctx, cancel = ctx, func() {}
				if req.TimeoutMillis > 0 {
					dctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A panic here is handed to the serving goroutine, whose
				// recovery closes just this connection.
				defer func() {
					if p := recover(); p != nil {
						panicMu.Lock()
						panicked = append(panicked, p)
						panicMu.Unlock()
					}
				}()
				s.appendTo(dctx, p, rp.Records, sp)
			}()
		}
	}
	wg.Wait()
	if cancel != nil {
		cancel()
	}
	if len(panicked) > 0 {
		panic(panicked[0])
	}

	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			failed = failed || sp.ErrorCode != 0
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

// appendTo appends one partition's records and fills its response.
func (s *Server) appendTo(ctx context.Context, p *topics.Partition, records []byte, sp *kmsg.ProduceResponseTopicPartition) {
	res, err := p.Append(ctx, records)
	sp.LogStartOffset = p.Log.StartOffset()
	if err != nil {
		sp.ErrorCode = s.code(err)
		s.log.Debug("transport: produce failed", "topic", p.Topic, "partition", p.Index, "err", err)
		return
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = res.LogAppendTime
}

// producePartition finds a partition to produce to, creating its topic first
// when auto-creation is on.
func (s *Server) producePartition(topic string, partition int32) (*topics.Partition, error) {
	p, err := s.topics.Partition(topic, partition)
	if errors.Is(err, topics.ErrUnknownTopic) && s.cfg.AutoCreateTopics {
		if _, err := s.autoCreate(topic); err != nil {
			return nil, err
		}
		p, err = s.topics.Partition(topic, partition)
	}
	return p, err
}

// autoCreate creates topic with the registry's default partition count and
// configs; a concurrent creation of the same topic counts as success.
func (s *Server) autoCreate(topic string) (*topics.Topic, error) {
	t, err := s.topics.Create(topic, -1, nil)
	if errors.Is(err, topics.ErrTopicExists) {
		if t, ok := s.topics.Topic(topic); ok {
			return t, nil
		}
	}
	if err == nil {
		s.log.Info("transport: auto-created topic", "topic", topic, "partitions", len(t.Partitions))
	}
	return t, err
}
