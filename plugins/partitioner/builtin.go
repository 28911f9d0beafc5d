package partitioner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/weir-broker/weir/plugins/spec"
)

func init() {
	RegisterInfo(Info{
		Name:    "murmur2",
		Usage:   "murmur2[:seed=N]",
		Example: "murmur2:seed=1",
		Summary: "Kafka's Java default: murmur2(key)&0x7fffffff mod n; null keys stick to one partition per call (KIP-480)",
	}, seeded("murmur2", NewMurmur2))
	RegisterInfo(Info{
		Name:    "crc32",
		Usage:   "crc32[:seed=N]",
		Example: "crc32:seed=1",
		Summary: "librdkafka's default (consistent_random): CRC-32 (IEEE) of the key mod n; null and empty keys go to random partitions",
	}, seeded("crc32", NewCRC32))
	RegisterInfo(Info{
		Name:    "fnv1a",
		Usage:   "fnv1a[:seed=N]",
		Example: "fnv1a:seed=1",
		Summary: "sarama's default (NewHashPartitioner): |int32(FNV-1a(key)) mod n|; null keys go to random partitions",
	}, seeded("fnv1a", NewFNV1a))
	RegisterInfo(Info{
		Name:    "round-robin",
		Usage:   "round-robin",
		Example: "round-robin",
		Summary: "the i-th record of a topic goes to partition i mod n, keys ignored (franz-go's RoundRobinPartitioner)",
	}, func(params map[string]string) (Partitioner, error) {
		if err := spec.OnlyParams(params); err != nil {
			return nil, err
		}
		return NewRoundRobin(), nil
	})
	RegisterInfo(Info{
		Name:    "sticky",
		Usage:   "sticky[:seed=N]",
		Example: "sticky:seed=1",
		Summary: "all records of a call to one random partition, never the previous call's; keys ignored",
	}, seeded("sticky", NewSticky))
	RegisterInfo(Info{
		Name:    "random",
		Usage:   "random[:seed=N]",
		Example: "random:seed=1",
		Summary: "each record to a uniformly random partition, keys ignored",
	}, seeded("random", NewRandom))
}

// seeded is the factory of a built-in whose only parameter is seed. Without
// one, each instance draws its own seed, as real producers do (so that many
// producers built from one spec do not move in lockstep); String reports the
// seed drawn, so a recorded spec replays the exact same choices.
func seeded(name string, mk func(seed uint64) Partitioner) Factory {
	return func(params map[string]string) (Partitioner, error) {
		if err := spec.OnlyParams(params, "seed"); err != nil {
			return nil, err
		}
		s, ok := params["seed"]
		if !ok {
			return mk(rand.Uint64()), nil
		}
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seed=%q: want a whole number from 0 to %d (e.g. %q)", s, uint64(1<<64-1), name+":seed=42")
		}
		return mk(seed), nil
	}
}

// begin rejects calls a built-in must not answer: ctx already done (the
// built-ins do no I/O, so they check once, before touching any state) and
// invalid requests.
func begin(ctx context.Context, name string, req Request) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("partitioner: %s: %w", name, err)
	}
	return req.Validate()
}

// chooser is the randomness of a built-in: a PCG generator from the seed
// (math/rand/v2's PCG, a fixed algorithm, with the bounded draw done here so
// that a seed means the same choices in every Go version), and the sticky
// partition each topic got last.
type chooser struct {
	seed uint64
	src  *rand.PCG
	last map[string]int32
}

func newChooser(seed uint64) chooser {
	return chooser{seed: seed, src: rand.NewPCG(seed, 0x9e3779b97f4a7c15), last: make(map[string]int32)}
}

// intn returns a partition in [0, n), n >= 1, by multiply-shift of 32 random
// bits (bias below n/2^32: 5e-7 for 2000 partitions).
func (c *chooser) intn(n int32) int32 {
	return int32((c.src.Uint64() >> 32) * uint64(n) >> 32)
}

// sticky picks this call's partition for topic: uniform over the n
// partitions other than the previous call's when n > 1 (Java's
// StickyPartitionCache and franz-go's sticky partitioner also avoid it).
func (c *chooser) sticky(topic string, n int32) int32 {
	last, ok := c.last[topic]
	var p int32
	if !ok || last >= n || n == 1 {
		p = c.intn(n)
	} else if p = c.intn(n - 1); p >= last {
		p++
	}
	c.last[topic] = p
	return p
}

func (c *chooser) spec(name string) string { return name + ":seed=" + strconv.FormatUint(c.seed, 10) }

// NewMurmur2 returns Kafka's Java default partitioner (DefaultPartitioner
// since 2.4, KIP-480, which franz-go's StickyKeyPartitioner(nil) and
// librdkafka's murmur2_random reproduce): a record with a key, even an empty
// one, goes to toPositive(murmur2(key)) % n; records with a nil key all go to
// one partition per call, chosen at random but never the previous call's
// (Java sticks per batch; a call is weir's batch). seed makes the keyless
// choices reproducible. Spec: "murmur2:seed=N".
func NewMurmur2(seed uint64) Partitioner { return &murmur2P{newChooser(seed)} }

type murmur2P struct{ chooser }

func (p *murmur2P) Partition(ctx context.Context, req Request) (Response, error) {
	if err := begin(ctx, "murmur2", req); err != nil {
		return Response{}, err
	}
	out := make([]int32, len(req.Keys))
	sticky := int32(-1)
	for i, k := range req.Keys {
		if k != nil {
			out[i] = murmur2Partition(k, req.Partitions)
			continue
		}
		if sticky < 0 {
			sticky = p.sticky(req.Topic, req.Partitions)
		}
		out[i] = sticky
	}
	return Response{Partitions: out}, nil
}

func (*murmur2P) KeyConsistent() bool { return true }
func (p *murmur2P) String() string    { return p.spec("murmur2") }

// NewCRC32 returns librdkafka's default partitioner, consistent_random: a
// record with a non-empty key goes to crc32(key) % n (CRC-32, IEEE
// polynomial, unsigned modulo); a record with a nil or empty key goes to a
// random partition, drawn per record. librdkafka 1.6 and later put a sticky
// layer in front of it for keyless messages (sticky.partitioning.linger.ms,
// default 10 ms), which a batch-at-a-time partitioner cannot see; use
// "sticky" for that behaviour. Spec: "crc32:seed=N".
func NewCRC32(seed uint64) Partitioner { return &crc32P{newChooser(seed)} }

type crc32P struct{ chooser }

func (p *crc32P) Partition(ctx context.Context, req Request) (Response, error) {
	if err := begin(ctx, "crc32", req); err != nil {
		return Response{}, err
	}
	out := make([]int32, len(req.Keys))
	for i, k := range req.Keys {
		if len(k) == 0 {
			out[i] = p.intn(req.Partitions)
		} else {
			out[i] = crc32Partition(k, req.Partitions)
		}
	}
	return Response{Partitions: out}, nil
}

func (*crc32P) KeyConsistent() bool { return true }
func (p *crc32P) String() string    { return p.spec("crc32") }

// NewFNV1a returns sarama's default partitioner (NewHashPartitioner): a
// record with a key, even an empty one, goes to |int32(fnv1a(key)) % n|; a
// record with a nil key goes to a random partition, drawn per record. Spec:
// "fnv1a:seed=N".
func NewFNV1a(seed uint64) Partitioner { return &fnv1aP{newChooser(seed)} }

type fnv1aP struct{ chooser }

func (p *fnv1aP) Partition(ctx context.Context, req Request) (Response, error) {
	if err := begin(ctx, "fnv1a", req); err != nil {
		return Response{}, err
	}
	out := make([]int32, len(req.Keys))
	for i, k := range req.Keys {
		if k == nil {
			out[i] = p.intn(req.Partitions)
		} else {
			out[i] = fnv1aPartition(k, req.Partitions)
		}
	}
	return Response{Partitions: out}, nil
}

func (*fnv1aP) KeyConsistent() bool { return true }
func (p *fnv1aP) String() string    { return p.spec("fnv1a") }

// NewRoundRobin returns a partitioner that ignores keys and sends the i-th
// record it partitions for a topic (counting from 0, across calls) to
// partition i % n, as franz-go's RoundRobinPartitioner and Java's
// RoundRobinPartitioner do: per topic, the record counts of any two
// partitions differ by at most one. It draws nothing at random, so it takes
// no seed. Spec: "round-robin".
func NewRoundRobin() Partitioner { return &roundRobin{next: make(map[string]uint64)} }

type roundRobin struct{ next map[string]uint64 }

func (p *roundRobin) Partition(ctx context.Context, req Request) (Response, error) {
	if err := begin(ctx, "round-robin", req); err != nil {
		return Response{}, err
	}
	out := make([]int32, len(req.Keys))
	next, n := p.next[req.Topic], uint64(req.Partitions)
	for i := range out {
		out[i] = int32(next % n)
		next++
	}
	if len(out) > 0 {
		p.next[req.Topic] = next
	}
	return Response{Partitions: out}, nil
}

func (*roundRobin) String() string { return "round-robin" }

// NewSticky returns a partitioner that ignores keys and sends every record of
// a call to one partition, chosen at random and, when n > 1, never the one
// the previous call for the same topic chose: Kafka's sticky strategy
// (KIP-480) without key hashing, like franz-go's StickyPartitioner, which
// switches per batch where this switches per call. A call with no records
// chooses nothing. Spec: "sticky:seed=N".
func NewSticky(seed uint64) Partitioner { return &stickyP{newChooser(seed)} }

type stickyP struct{ chooser }

func (p *stickyP) Partition(ctx context.Context, req Request) (Response, error) {
	if err := begin(ctx, "sticky", req); err != nil {
		return Response{}, err
	}
	out := make([]int32, len(req.Keys))
	if len(out) > 0 {
		part := p.sticky(req.Topic, req.Partitions)
		for i := range out {
			out[i] = part
		}
	}
	return Response{Partitions: out}, nil
}

func (p *stickyP) String() string { return p.spec("sticky") }

// NewRandom returns a partitioner that ignores keys and draws each record's
// partition uniformly at random. Spec: "random:seed=N".
func NewRandom(seed uint64) Partitioner { return &randomP{newChooser(seed)} }

type randomP struct{ chooser }

func (p *randomP) Partition(ctx context.Context, req Request) (Response, error) {
	if err := begin(ctx, "random", req); err != nil {
		return Response{}, err
	}
	out := make([]int32, len(req.Keys))
	for i := range out {
		out[i] = p.intn(req.Partitions)
	}
	return Response{Partitions: out}, nil
}

func (p *randomP) String() string { return p.spec("random") }
