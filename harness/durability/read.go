package durability

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/plugins/codec"
)

// Fetch sizes of the read-back: whole batches always come back (a batch
// larger than the limit still does), so these only pace the rounds.
const (
	fetchMaxBytes     = 16 << 20
	fetchPartMaxBytes = 4 << 20
)

// createTopics creates the run's topics through the protocol, with the
// flush policy and durable-ack configs, and fails unless each is created.
func createTopics(ctx context.Context, cl *kgo.Client, names []string, partitions int, configs map[string]string) error {
	return createTopicsRF(ctx, cl, names, partitions, 1, configs)
}

// createTopicsRF is createTopics with a replication factor.
func createTopicsRF(ctx context.Context, cl *kgo.Client, names []string, partitions, rf int, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10_000
	for _, name := range names {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = name
		rt.NumPartitions = int32(partitions)
		rt.ReplicationFactor = int16(rf)
		for _, k := range slices.Sorted(maps.Keys(configs)) {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name = k
			v := configs[k]
			c.Value = &v
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("%w: create topics: %w", ErrClient, err)
	}
	var exist []string
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.TopicAlreadyExists) {
				exist = append(exist, t.Topic)
				continue
			}
			msg := ""
			if t.ErrorMessage != nil {
				msg = ": " + *t.ErrorMessage
			}
			return fmt.Errorf("%w: create topic %s: %w%s", ErrClient, t.Topic, err, msg)
		}
	}
	if len(resp.Topics) != len(names) {
		return fmt.Errorf("%w: create topics: %d answers for %d topics", ErrClient, len(resp.Topics), len(names))
	}
	if len(exist) > 0 {
		// The broker is fresh, so only this request can have created
		// them: franz-go sends a request again when the connection it went
		// on broke before the answer came, and the retry finds what the
		// first attempt created. Accepted when they have the partitions
		// asked for.
		return checkPartitions(ctx, cl, exist, partitions)
	}
	return nil
}

// checkPartitions fails unless every topic exists with partitions
// partitions.
func checkPartitions(ctx context.Context, cl *kgo.Client, topics []string, partitions int) error {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, mt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("%w: metadata of existing topics: %w", ErrClient, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil || len(t.Partitions) != partitions || t.Topic == nil {
			return fmt.Errorf("%w: create topic %v: it existed with %d partitions (%v), want %d", ErrClient,
				topics, len(t.Partitions), err, partitions)
		}
	}
	return nil
}

// tp names a partition by topic index.
type tp struct{ topic, partition int32 }

// servedRecord is one record as the restarted broker served it.
type servedRecord struct {
	offset int64
	id     uint64
	sum    uint32
	size   int32
	bad    string // why the record is corrupt; "" when it checks out
}

// served is one partition as read back: every record from the log start
// to the high watermark, in the order served.
type served struct {
	start, end int64 // log start offset, high watermark
	records    []servedRecord
	badBatches []string // batches that failed their CRC or would not decode
	// gaps and overlaps in the batches' offsets, as read.
	offsetProblems []string
}

// fetcher reads partitions back with raw Fetch requests, so every batch's
// CRC is checked here (franz-go's consumer does not check it) and every
// offset is seen as the broker sent it.
type fetcher struct {
	cl     *kgo.Client
	topics []string
	parts  int
	codec  codec.Codec
	// routed sends each partition's fetch to its leader (a cluster);
	// otherwise every fetch goes to the one broker.
	routed bool
}

func (f *fetcher) fetch(ctx context.Context, offsets map[tp]int64, partMax int32) (*kmsg.FetchResponse, error) {
	if !f.routed {
		return f.fetchFrom(ctx, f.cl, offsets, partMax)
	}
	leaders, err := f.leaders(ctx)
	if err != nil {
		return nil, err
	}
	by := map[int32]map[tp]int64{}
	for k, off := range offsets {
		l, ok := leaders[k]
		if !ok {
			return nil, fmt.Errorf("%d/%d: %w", k.topic, k.partition, errNoLeader)
		}
		if by[l] == nil {
			by[l] = map[tp]int64{}
		}
		by[l][k] = off
	}
	merged := kmsg.NewPtrFetchResponse()
	for _, l := range slices.Sorted(maps.Keys(by)) {
		resp, err := f.fetchFrom(ctx, f.cl.Broker(int(l)), by[l], partMax)
		if err != nil {
			return nil, fmt.Errorf("broker %d: %w", l, err)
		}
		merged.Topics = append(merged.Topics, resp.Topics...)
	}
	return merged, nil
}

// leaders returns each partition's leader, from Metadata.
func (f *fetcher) leaders(ctx context.Context) (map[tp]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range f.topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, f.cl)
	if err != nil {
		return nil, err
	}
	out := map[tp]int32{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		for _, p := range t.Partitions {
			if p.Leader >= 0 {
				out[tp{f.topicIndex(*t.Topic), p.Partition}] = p.Leader
			}
		}
	}
	return out, nil
}

func (f *fetcher) fetchFrom(ctx context.Context, r kmsg.Requestor, offsets map[tp]int64, partMax int32) (*kmsg.FetchResponse, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = fetchMaxBytes
	req.SessionEpoch = -1
	for ti, name := range f.topics {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = name
		for p := range f.parts {
			off, ok := offsets[tp{int32(ti), int32(p)}]
			if !ok {
				continue
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = int32(p)
			rp.FetchOffset = off
			rp.PartitionMaxBytes = partMax
			rp.LogStartOffset = -1
			rp.CurrentLeaderEpoch = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	return resp, nil
}

func (f *fetcher) topicIndex(name string) int32 {
	return int32(slices.Index(f.topics, name))
}

// waitServing polls until every partition answers a fetch at offset 0
// without error, or timeout passes, and returns each partition's high
// watermark then: the end the log recovered to.
func (f *fetcher) waitServing(ctx context.Context, timeout time.Duration) (map[tp]int64, error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	offsets := map[tp]int64{}
	for ti := range f.topics {
		for p := range f.parts {
			offsets[tp{int32(ti), int32(p)}] = 0
		}
	}
	var last error
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := f.fetch(rctx, offsets, 1)
		cancel()
		if err == nil {
			hwm := map[tp]int64{}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if e := kerr.ErrorForCode(rp.ErrorCode); e != nil {
						err = fmt.Errorf("%s/%d: %w", rt.Topic, rp.Partition, e)
						break
					}
					hwm[tp{f.topicIndex(rt.Topic), rp.Partition}] = rp.HighWatermark
				}
			}
			if err == nil && len(hwm) == len(offsets) {
				return hwm, nil
			}
			if err == nil {
				err = fmt.Errorf("%d of %d partitions answered", len(hwm), len(offsets))
			}
		}
		last = err
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: not serving %v after the restart: %w", ErrBroker, timeout, last)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// readAll reads every partition from its log start to its high
// watermark, checking each batch's CRC and each record's checksum.
func (f *fetcher) readAll(ctx context.Context) (map[tp]*served, error) {
	out := map[tp]*served{}
	next := map[tp]int64{} // the partitions still to read, at their next offset
	for ti := range f.topics {
		for p := range f.parts {
			k := tp{int32(ti), int32(p)}
			out[k] = &served{start: -1, end: -1}
			next[k] = 0
		}
	}
	partMax := int32(fetchPartMaxBytes)
	for len(next) > 0 {
		resp, err := f.fetch(ctx, next, partMax)
		if err != nil {
			return nil, fmt.Errorf("%w: fetch: %w", ErrClient, err)
		}
		progress := false
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				k := tp{f.topicIndex(rt.Topic), rp.Partition}
				s, want := out[k], next[k]
				if _, reading := next[k]; !reading || s == nil {
					continue
				}
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					if errors.Is(err, kerr.OffsetOutOfRange) && want == 0 && s.start < 0 {
						// The log does not start at 0: start where it does.
						next[k] = max(rp.LogStartOffset, 0)
						s.start = next[k]
						progress = true
						continue
					}
					return nil, fmt.Errorf("%w: fetch %s/%d at %d: %w", ErrClient, rt.Topic, rp.Partition, want, err)
				}
				if s.start < 0 {
					s.start = max(rp.LogStartOffset, 0)
				}
				s.end = rp.HighWatermark
				to := f.decode(s, want, rp.RecordBatches)
				if to > want {
					progress = true
				}
				next[k] = to
				if to >= rp.HighWatermark {
					delete(next, k)
				}
			}
		}
		if !progress {
			if partMax >= 1<<30 {
				return nil, fmt.Errorf("%w: fetch makes no progress", ErrClient)
			}
			partMax *= 4 // a batch larger than the limit, cut short
		}
	}
	return out, nil
}

// decode walks the batches of one fetched partition from offset want,
// appending its records to s, and returns the offset to fetch next. A
// batch cut short at the end of the response (the size limit) is fetched
// again next round; any other damage is recorded and skipped.
func (f *fetcher) decode(s *served, want int64, b []byte) int64 {
	next := want
	for len(b) > 0 {
		h, n, err := record.Next(b, 0)
		if err != nil {
			if errors.Is(err, record.ErrShort) {
				return next // the rest comes next round
			}
			if h.BatchLength == 0 {
				// Not even a header to skip by: the rest of this response
				// is unreadable, and so is the partition from here.
				s.badBatches = append(s.badBatches, fmt.Sprintf("offset %d: %v", next, err))
				return s.end
			}
			s.badBatches = append(s.badBatches, fmt.Sprintf("batch at %d: %v", h.BaseOffset, err))
			b = b[min(h.Size(), len(b)):]
			next = max(next, h.NextOffset())
			continue
		}
		batch := b[:n]
		b = b[n:]
		if h.NextOffset() <= want {
			continue // a batch before the fetch offset: Kafka may send it whole
		}
		switch {
		case h.BaseOffset > next:
			s.offsetProblems = append(s.offsetProblems, fmt.Sprintf("gap: offsets %d..%d missing", next, h.BaseOffset-1))
		case h.BaseOffset < next && next > want:
			s.offsetProblems = append(s.offsetProblems, fmt.Sprintf("overlap: batch at %d after offset %d", h.BaseOffset, next-1))
		}
		recs, err := record.Records(batch, f.decompress)
		if err != nil {
			s.badBatches = append(s.badBatches, fmt.Sprintf("batch at %d: %v", h.BaseOffset, err))
			next = max(next, h.NextOffset())
			continue
		}
		for _, r := range recs {
			off := h.BaseOffset + int64(r.OffsetDelta)
			if off < want {
				continue
			}
			sr := servedRecord{offset: off, size: int32(len(r.Value))}
			if id, sum, err := open(r.Value); err != nil {
				sr.bad = err.Error()
			} else {
				sr.id, sr.sum = id, sum
			}
			s.records = append(s.records, sr)
		}
		next = max(next, h.NextOffset())
	}
	return next
}

func (f *fetcher) decompress(c record.Codec, section []byte) ([]byte, error) {
	if f.codec == nil || int8(f.codec.ID()) != int8(c) {
		return nil, fmt.Errorf("no codec for id %d", c)
	}
	resp, err := f.codec.Decompress(context.Background(), codec.DecompressRequest{Compressed: section, MaxSize: 64 << 20})
	if err != nil {
		return nil, err
	}
	return resp.Records, nil
}

// producePost produces n records to every partition after recovery with
// acks=all, and returns their ledger: the records whose offsets must
// continue right after the recovered end. cl is the verifying client
// (manual partitioning, acks=all, no compression).
func producePost(ctx context.Context, cl *kgo.Client, topics []string, parts, n, size int) ([]entry, error) {
	out := make([]entry, len(topics)*parts*n)
	var mu sync.Mutex
	var first error
	seq := 0
	for ti, name := range topics {
		for p := range parts {
			for range n {
				v := make([]byte, max(size, headerSize))
				sent := time.Now().UnixNano()
				sum := seal(v, recordID(postProducer, uint64(seq)), sent)
				mu.Lock()
				out[seq] = entry{topic: int32(ti), partition: int32(p), size: int32(len(v)), sum: sum, sent: sent, offset: -1}
				mu.Unlock()
				e := &out[seq]
				cl.Produce(ctx, &kgo.Record{Topic: name, Partition: int32(p), Value: v}, func(r *kgo.Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						if first == nil {
							first = fmt.Errorf("%w: produce after recovery to %s/%d: %w", ErrClient, r.Topic, r.Partition, err)
						}
						return
					}
					e.state, e.ack, e.offset = acked, time.Now().UnixNano(), r.Offset
				})
				seq++
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("%w: produce after recovery: %w", ErrClient, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return out, first
}
