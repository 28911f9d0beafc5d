package durability

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/kgoadapt"
)

// Producer tuning.
const (
	// chunkSize records go to one partition before the next: enough for
	// franz-go to build real batches, few enough that every partition gets
	// records in a short run.
	chunkSize = 16
	// corpusSize is the random bytes payloads are cut from.
	corpusSize = 1 << 20
	// maxBufferedBytes is the Java producer's buffer.memory, as in package
	// load: at full speed the client runs at most this far ahead.
	maxBufferedBytes = 32 << 20
)

// requiredAcks maps a spec's acks to franz-go's; acks=0 is refused, as
// nothing is acknowledged to check.
func requiredAcks(acks string) (kgo.Acks, error) {
	switch acks {
	case "1":
		return kgo.LeaderAck(), nil
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	case "0":
		return kgo.NoAck(), fmt.Errorf("%w: acks 0: the broker acknowledges nothing, so there is nothing to check; use 1 or all", ErrConfig)
	}
	return kgo.NoAck(), fmt.Errorf("%w: acks %q: want 1 or all", ErrConfig, acks)
}

// producerOpts are the franz-go options of the experiment's producers.
func producerOpts(addr string, w spec.Workload, c codec.Codec) ([]kgo.Opt, error) {
	acks, err := requiredAcks(w.Acks)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(addr, ",")...),
		kgo.RequiredAcks(acks),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedBytes(maxBufferedBytes),
		// Records the dead broker cannot take fail when the client closes
		// after the fault; before it, none should wait this long.
		kgo.RecordDeliveryTimeout(defaultDrainTimeout),
	}
	if w.Linger > 0 {
		opts = append(opts, kgo.ProducerLinger(w.Linger))
	}
	if w.BatchMaxBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(w.BatchMaxBytes)))
	}
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite()) // franz-go's idempotence needs acks=all
	}
	if c == nil || c.ID() == codec.None {
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	} else {
		opts = append(opts, kgo.WithCompressor(kgoadapt.Compressor(c)))
	}
	return opts, nil
}

// producer is one producing client: it sends until stop closes, writing
// every record into its ledger before handing it to the client.
type producer struct {
	id     int
	cl     *kgo.Client
	topics []string
	parts  int
	w      spec.Workload
	rng    *rand.Rand
	corpus []byte
	led    ledger
	acked  func() // called on every acknowledgement
}

func newProducer(id int, opts []kgo.Opt, topics []string, w spec.Workload, seed int64, corpus []byte) (*producer, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClient, err)
	}
	return &producer{id: id, cl: cl, topics: topics, parts: w.Partitions, w: w,
		rng: rand.New(rand.NewPCG(uint64(seed), uint64(id)+1)), corpus: corpus}, nil
}

// size draws a value size from the workload's distribution.
func (p *producer) size() int {
	m := p.w.MessageSize
	var v float64
	switch m.Distribution {
	case spec.Uniform:
		return int(int64(m.Min) + p.rng.Int64N(int64(m.Max-m.Min)+1))
	case spec.Normal:
		v = float64(m.Mean) + float64(m.Stddev)*p.rng.NormFloat64()
	case spec.Exponential:
		v = float64(m.Mean) * p.rng.ExpFloat64()
	default:
		return int(m.Size)
	}
	return int(min(max(math.Round(v), float64(m.Min)), float64(m.Max)))
}

// record builds the next record for (topic, partition) and enters it in
// the ledger.
func (p *producer) record(topic, partition int) *kgo.Record {
	n := p.size()
	v := make([]byte, n)
	if body := n - headerSize; body > 0 {
		off := p.rng.IntN(len(p.corpus) - body + 1)
		copy(v[headerSize:], p.corpus[off:off+body])
	}
	p.led.mu.Lock()
	seq := uint64(len(p.led.entries))
	sent := time.Now().UnixNano()
	sum := seal(v, recordID(p.id, seq), sent)
	p.led.entries = append(p.led.entries, entry{topic: int32(topic), partition: int32(partition), size: int32(n),
		sum: sum, sent: sent, offset: -1})
	p.led.mu.Unlock()
	return &kgo.Record{Topic: p.topics[topic], Partition: int32(partition), Value: v}
}

func (p *producer) promise(r *kgo.Record, err error) {
	now := time.Now().UnixNano()
	id, _, verr := open(r.Value)
	if verr != nil {
		return // our own value: cannot happen
	}
	_, seq := splitID(id)
	p.led.resolve(seq, r.Offset, now, err)
	if err == nil {
		p.acked()
	}
}

// run produces until stop closes (or ctx ends), at perSec records per
// second when positive, else as fast as the client takes them. Records go
// round robin over the topics' partitions, chunkSize at a time, starting
// at the producer's own offset so producers spread out.
func (p *producer) run(ctx context.Context, stop <-chan struct{}, perSec float64, start time.Time) {
	var tick *time.Ticker
	if perSec > 0 {
		tick = time.NewTicker(time.Millisecond)
		defer tick.Stop()
	}
	slots := len(p.topics) * p.parts
	slot := p.id % slots
	var sent int64
	for {
		n := int64(chunkSize)
		if perSec > 0 {
			// A token bucket refilled at millisecond ticks, as package load
			// paces: what the rate allows by now, less what was sent.
			due := int64(perSec*time.Since(start).Seconds()) - sent
			if due <= 0 {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				continue
			}
			n = min(n, due)
		}
		topic, partition := slot/p.parts, slot%p.parts
		for range n {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			p.cl.Produce(ctx, p.record(topic, partition), p.promise)
			sent++
		}
		slot = (slot + 1) % slots
	}
}

// producers runs the experiment's producers.
type producers struct {
	ps   []*producer
	stop chan struct{}
	ctx  context.Context // cancelled at the fault: a Produce blocked on a full buffer returns
	cxl  context.CancelFunc
	wg   sync.WaitGroup

	closeOnce sync.Once
	firstOnce sync.Once
	first     chan struct{} // closed by the first acknowledgement
	firstAt   time.Time     // when; written before first closes
}

// newProducers makes the producers' clients without producing anything
// yet: the first one also creates the topics.
func newProducers(ctx context.Context, addr string, topics []string, w spec.Workload, c codec.Codec, seed int64, extra ...kgo.Opt) (*producers, error) {
	opts, err := producerOpts(addr, w, c)
	if err != nil {
		return nil, err
	}
	opts = append(opts, extra...)
	corpus := make([]byte, corpusSize)
	crng := rand.New(rand.NewPCG(uint64(seed), 0))
	for i := 0; i < len(corpus); i += 8 {
		v := crng.Uint64()
		for j := 0; j < 8 && i+j < len(corpus); j++ {
			corpus[i+j] = byte(v >> (8 * j))
		}
	}
	pctx, cancel := context.WithCancel(ctx)
	ps := &producers{stop: make(chan struct{}), ctx: pctx, cxl: cancel, first: make(chan struct{})}
	for i := range w.Producers {
		p, err := newProducer(i, opts, topics, w, seed, corpus)
		if err != nil {
			ps.close()
			return nil, err
		}
		p.acked = ps.acked
		ps.ps = append(ps.ps, p)
	}
	return ps, nil
}

func (ps *producers) acked() {
	ps.firstOnce.Do(func() {
		ps.firstAt = time.Now()
		close(ps.first)
	})
}

// start starts producing, at w.Rate over all producers.
func (ps *producers) start(w spec.Workload) {
	start := time.Now()
	perSec := w.Rate / float64(w.Producers)
	for _, p := range ps.ps {
		ps.wg.Go(func() { p.run(ps.ctx, ps.stop, perSec, start) })
	}
}

// halt stops producing new records and waits for the producing goroutines.
func (ps *producers) halt() {
	select {
	case <-ps.stop:
	default:
		close(ps.stop)
	}
	ps.cxl()
	ps.wg.Wait()
}

// close halts and closes the clients: every promise still pending fails,
// so the ledgers are final when it returns.
func (ps *producers) close() {
	ps.closeOnce.Do(func() {
		ps.halt()
		var wg sync.WaitGroup
		for _, p := range ps.ps {
			wg.Go(p.cl.Close)
		}
		wg.Wait()
	})
}

// failures counts the records that failed, over every producer, by error.
func (ps *producers) failures() map[string]int64 {
	out := map[string]int64{}
	for _, p := range ps.ps {
		p.led.mu.Lock()
		for msg, n := range p.led.errors {
			out[msg] += n
		}
		p.led.mu.Unlock()
	}
	return out
}

// entries returns every producer's ledger, indexed by producer.
func (ps *producers) entries() [][]entry {
	out := make([][]entry, len(ps.ps))
	for i, p := range ps.ps {
		out[i] = p.led.snapshot()
	}
	return out
}
