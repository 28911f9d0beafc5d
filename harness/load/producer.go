package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/kgoadapt"
	"github.com/weir-broker/weir/plugins/partitioner"
)

// chunkSize is how many records a producer builds (and a partitioner
// assigns) at once: one partitioner call per chunk, as the plugin rules ask.
const chunkSize = 256

// maxBufferedBytes is the Java producer's default buffer.memory.
const maxBufferedBytes = 32 << 20

// deliveryTimeout bounds how long a record may wait for its
// acknowledgement, retries included.
const deliveryTimeout = 30 * time.Second

// batchHeaderSize is a RecordBatch v2 header: what the broker stores on top
// of the records section of each batch.
const batchHeaderSize = 61

// producer is one producing client and what its promises saw.
type producer struct {
	r  *rep
	id int

	mu       sync.Mutex
	ack      hist
	msgs     int64   // window records acknowledged
	bytes    int64   // their key+value bytes
	window   []int64 // window records acknowledged, per partition
	all      []int64 // all records acknowledged, per partition
	failed   int64
	firstErr error

	// From franz-go's batch hook: every batch written.
	batchBytes atomic.Int64 // uncompressed records sections + headers
	sentBytes  atomic.Int64 // compressed records sections + headers
}

// OnProduceBatchWritten implements kgo.HookProduceBatchWritten.
func (p *producer) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	p.batchBytes.Add(int64(m.UncompressedBytes + batchHeaderSize))
	p.sentBytes.Add(int64(m.CompressedBytes + batchHeaderSize))
}

// promise records an acknowledgement (or failure).
func (p *producer) promise(rec *kgo.Record, err error) {
	now := time.Now().UnixNano()
	ts, _ := timestamp(rec.Value)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.firstErr == nil || errors.Is(p.firstErr, context.Canceled) {
			p.firstErr = err
		}
		p.failed++
		return
	}
	i := p.r.part(rec.Topic, rec.Partition)
	p.all[i]++
	if p.r.inWindow(ts) {
		p.window[i]++
		p.msgs++
		p.bytes += int64(len(rec.Key) + len(rec.Value))
		p.ack.add(now - ts)
	}
}

// producerTotals merges the producers' figures.
type producerTotals struct {
	ack                   hist
	msgs, bytes           int64
	window, all           []int64
	failed                int64
	firstErr              error
	batchBytes, sentBytes int64
}

func (t *producerTotals) err() error {
	if t.failed == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d records failed, the first with: %w", ErrProduce, t.failed, t.firstErr)
}

// runProducers runs the workload's producers from start to the window's
// end, then flushes them, and returns their merged figures.
func runProducers(ctx context.Context, r *rep, start time.Time) *producerTotals {
	w := r.cfg.Workload
	n := w.Topics * w.Partitions
	prods := make([]*producer, w.Producers)
	var wg sync.WaitGroup
	for i := range prods {
		p := &producer{r: r, id: i, window: make([]int64, n), all: make([]int64, n)}
		prods[i] = p
		wg.Go(func() {
			if err := p.run(ctx, start); err != nil {
				p.mu.Lock()
				if p.firstErr == nil {
					p.firstErr = err
				}
				p.failed++
				p.mu.Unlock()
			}
		})
	}
	wg.Wait()
	t := &producerTotals{window: make([]int64, n), all: make([]int64, n)}
	for _, p := range prods {
		// Flush returns once every promise was called; after a
		// cancellation franz-go may still be failing records.
		p.mu.Lock()
		t.ack.merge(&p.ack)
		t.msgs += p.msgs
		t.bytes += p.bytes
		for i := range n {
			t.window[i] += p.window[i]
			t.all[i] += p.all[i]
		}
		if t.firstErr == nil {
			t.firstErr = p.firstErr
		}
		t.failed += p.failed
		p.mu.Unlock()
		t.batchBytes += p.batchBytes.Load()
		t.sentBytes += p.sentBytes.Load()
	}
	return t
}

// clientOpts are a producer's franz-go options.
func (p *producer) clientOpts(part partitioner.Partitioner) ([]kgo.Opt, error) {
	w := p.r.cfg.Workload
	acks, err := requiredAcks(w.Acks)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		p.r.cfg.seeds(),
		kgo.RequiredAcks(acks),
		kgo.ProducerLinger(w.Linger),
		kgo.ProducerBatchMaxBytes(int32(w.BatchMaxBytes)),
		kgo.WithHooks(p),
		// A record not acknowledged by then fails (and fails the
		// repetition) instead of hanging the run on a dead broker.
		kgo.RecordDeliveryTimeout(max(deliveryTimeout, p.r.cfg.DrainTimeout)),
		// At full speed the producer runs as far ahead of the broker as
		// the client lets it: bound the queue by bytes like the Java
		// producer (buffer.memory), not only by franz-go's 50,000 records
		// (5 GB of 100 KB records).
		kgo.MaxBufferedBytes(maxBufferedBytes),
	}
	if w.Acks != "all" && w.Acks != "-1" {
		opts = append(opts, kgo.DisableIdempotentWrite()) // franz-go's idempotence needs acks=all
	}
	if c := p.r.cfg.Codec; c == nil || c.ID() == codec.None {
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	} else {
		opts = append(opts, kgo.WithCompressor(kgoadapt.Compressor(c)))
	}
	if part != nil {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	return append(opts, p.r.cfg.ClientOpts...), nil
}

// run produces until the window ends (or ctx does), then flushes.
func (p *producer) run(ctx context.Context, start time.Time) error {
	cfg := p.r.cfg
	w := cfg.Workload
	var part partitioner.Partitioner
	if cfg.NewPartitioner != nil {
		var err error
		if part, err = cfg.NewPartitioner(); err != nil {
			return err
		}
	}
	opts, err := p.clientOpts(part)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer cl.Close()

	g := newGen(w, p.r.corpus, uint64(cfg.Seed), p.id)
	perSec := w.Rate / float64(w.Producers)
	var tick *time.Ticker
	if perSec > 0 {
		tick = time.NewTicker(time.Millisecond)
		defer tick.Stop()
	}
	var sent int64
	recs := make([]*kgo.Record, 0, chunkSize)
	for chunk := 0; ; chunk++ {
		n := int64(chunkSize)
		if perSec > 0 {
			// The token bucket: what the rate allows by now, less what
			// was sent; wait for a tick when nothing is due.
			due := int64(perSec*time.Since(start).Seconds()) - sent
			if due <= 0 {
				if time.Now().UnixNano() >= p.r.t1 {
					break
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-tick.C:
				}
				chunk--
				continue
			}
			n = min(n, due)
		}
		topic := p.r.topics[(p.id+chunk)%len(p.r.topics)]
		recs = recs[:0]
		for range n {
			recs = append(recs, &kgo.Record{Topic: topic, Key: g.key(), Value: g.value(g.size())})
		}
		if part != nil {
			if err := kgoadapt.Assign(ctx, part, topic, int32(w.Partitions), recs); err != nil {
				return err
			}
		}
		done := false
		for _, rec := range recs {
			now := time.Now().UnixNano()
			if now >= p.r.t1 {
				done = true
				break
			}
			putTimestamp(rec.Value, now)
			cl.Produce(ctx, rec, p.promise)
			sent++
		}
		if done || ctx.Err() != nil {
			break
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return ctx.Err()
}
