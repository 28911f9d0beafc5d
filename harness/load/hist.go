package load

import (
	"math"
	"math/bits"
	"time"
)

// histSubBits sets the histogram's precision: 2^histSubBits buckets per
// power of two, so a bucket is at most 1/128 (0.8%) of its values wide.
const histSubBits = 7

const (
	histSub     = 1 << histSubBits
	histBuckets = (64 - histSubBits) * histSub
)

// hist is a log-linear histogram of non-negative durations in nanoseconds,
// the shape of HdrHistogram: values below 128 ns are exact, larger ones land
// in buckets 0.8% wide. It keeps latency quantiles of any number of records
// in constant memory (57 KiB), and histograms of several producers merge
// exactly. The zero value is empty and ready; it is not safe for concurrent
// use.
type hist struct {
	counts   [histBuckets]uint64
	n        uint64
	min, max int64
}

func histIndex(v int64) int {
	if v < histSub {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - histSubBits - 1
	return (shift+1)<<histSubBits + int(uint64(v)>>shift) - histSub
}

// histBounds returns the smallest value of bucket i and its width.
func histBounds(i int) (lo, width int64) {
	if i < histSub {
		return int64(i), 1
	}
	shift := i>>histSubBits - 1
	return int64(histSub+i&(histSub-1)) << shift, 1 << shift
}

// add records one value; negative values (clock steps) count as 0.
func (h *hist) add(v int64) {
	v = max(v, 0)
	if h.n == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.n++
	h.counts[histIndex(v)]++
}

func (h *hist) merge(o *hist) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// quantile returns the value at quantile q in [0, 1]: the middle of the
// bucket holding the ceil(q*n)-th smallest value, clamped to the observed
// minimum and maximum, so quantile(1) is the exact maximum and quantiles
// never decrease with q.
func (h *hist) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	if rank == h.n {
		return h.max
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, w := histBounds(i)
			return min(max(lo+w/2, h.min), h.max)
		}
	}
	return h.max
}

// quantileMicros is quantile in microseconds.
func (h *hist) quantileMicros(q float64) float64 {
	return float64(h.quantile(q)) / float64(time.Microsecond)
}
