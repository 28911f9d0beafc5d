package load

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/plugins/codec/payload"
)

// corpusMin is the smallest corpus values are cut from: large enough that
// the records of one batch (up to ~1 MB) rarely share bytes, which would
// flatter the codecs.
const corpusMin = 4 << 20

// makeCorpus returns the bytes record values are cut from (after their
// 8-byte timestamp): random bytes (incompressible), JSON log lines (which
// compress 5-10x, like real log topics), English-like text, or the payload
// file's bytes repeated to the corpus size.
func makeCorpus(w spec.Workload, file []byte, seed int64) ([]byte, error) {
	_, hi := w.MessageSize.Bounds()
	n := max(corpusMin, 2*int(hi))
	switch {
	case len(file) > 0:
		out := make([]byte, 0, n)
		for len(out) < n {
			out = append(out, file...)
		}
		return out[:n], nil
	case w.Payload == "random":
		return payload.RandomPayload(seed, n), nil
	case w.Payload == "json":
		return payload.JSONLogPayload(seed, n), nil
	case w.Payload == "text":
		return textPayload(seed, n), nil
	}
	return nil, fmt.Errorf("%w: unknown payload %q", ErrConfig, w.Payload)
}

var textWords = []string{
	"the", "of", "and", "a", "to", "in", "is", "was", "that", "for", "it", "with", "as", "on", "be", "at",
	"by", "this", "had", "not", "are", "but", "from", "or", "have", "an", "they", "which", "one", "you",
	"were", "all", "her", "she", "there", "would", "their", "we", "him", "been", "has", "when", "who",
	"will", "no", "more", "if", "out", "so", "said", "what", "up", "its", "about", "than", "into", "them",
	"can", "only", "other", "time", "new", "some", "could", "these", "two", "may", "first", "then", "do",
	"any", "like", "my", "now", "over", "such", "our", "man", "me", "even", "most", "made", "after", "also",
	"log", "broker", "partition", "segment", "offset", "record", "batch", "replica", "leader", "commit",
}

// textPayload is n bytes of words drawn with a skew towards the common ones,
// in sentences: compresses about like prose (2-3x).
func textPayload(seed int64, n int) []byte {
	r := rand.New(rand.NewPCG(uint64(seed), 0x7e57))
	z := rand.NewZipf(r, 1.1, 4, uint64(len(textWords)-1))
	out := make([]byte, 0, n+16)
	for first := true; len(out) < n; {
		w := textWords[z.Uint64()]
		if first {
			out = append(out, w[0]-'a'+'A')
			out = append(out, w[1:]...)
			first = false
		} else {
			out = append(append(out, ' '), w...)
		}
		if r.IntN(12) == 0 {
			out = append(out, ". "...)
			first = true
		}
	}
	return out[:n]
}

// gen draws record keys, value sizes and values for one producer. It is
// deterministic for a seed.
type gen struct {
	r      *rand.Rand
	w      spec.Workload
	corpus []byte
	zipf   *rand.Zipf
	seq    uint64
}

func newGen(w spec.Workload, corpus []byte, seed uint64, producer int) *gen {
	g := &gen{r: rand.New(rand.NewPCG(seed, uint64(producer)+1)), w: w, corpus: corpus}
	g.seq = uint64(producer)
	if w.Keys.Kind == "zipf" {
		g.zipf = rand.NewZipf(g.r, w.Keys.ZipfS, 1, uint64(w.Keys.Count-1))
	}
	return g
}

// key returns the next key, nil for keys: none.
func (g *gen) key() []byte {
	var k uint64
	switch g.w.Keys.Kind {
	case "uniform":
		k = g.r.Uint64N(uint64(g.w.Keys.Count))
	case "zipf":
		k = g.zipf.Uint64()
	case "sequential":
		k = g.seq % uint64(g.w.Keys.Count)
		g.seq++
	default:
		return nil
	}
	return strconv.AppendUint([]byte("key-"), k, 10)
}

// size returns the next value size, in [min, max] of the distribution.
func (g *gen) size() int {
	m := g.w.MessageSize
	var v float64
	switch m.Distribution {
	case spec.Fixed:
		return int(m.Size)
	case spec.Uniform:
		return int(int64(m.Min) + g.r.Int64N(int64(m.Max-m.Min)+1))
	case spec.Normal:
		v = float64(m.Mean) + float64(m.Stddev)*g.r.NormFloat64()
	case spec.Exponential:
		v = float64(m.Mean) * g.r.ExpFloat64()
	}
	return int(min(max(math.Round(v), float64(m.Min)), float64(m.Max)))
}

// value returns a fresh value of n >= 8 bytes: room for the send timestamp,
// then bytes cut from the corpus at a random offset.
func (g *gen) value(n int) []byte {
	v := make([]byte, n)
	if body := n - timestampSize; body > 0 {
		off := g.r.IntN(len(g.corpus) - body + 1)
		copy(v[timestampSize:], g.corpus[off:off+body])
	}
	return v
}

// timestampSize is the size of the send time every value starts with.
const timestampSize = 8

// putTimestamp stores the send time (Unix nanoseconds, big-endian) in the
// first 8 bytes of a value.
func putTimestamp(v []byte, unixNano int64) {
	binary.BigEndian.PutUint64(v, uint64(unixNano))
}

// timestamp reads a value's send time; ok is false for a value too short
// to carry one (not written by this package).
func timestamp(v []byte) (unixNano int64, ok bool) {
	if len(v) < timestampSize {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v)), true
}
