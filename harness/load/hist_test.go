package load

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHistQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h hist
	var vs []int64
	for range 100_000 {
		// Log-normal around 1 ms, like latencies: most small, a long tail.
		v := int64(math.Exp(r.NormFloat64()*1.5 + math.Log(1e6)))
		vs = append(vs, v)
		h.add(v)
	}
	slices.Sort(vs)
	for _, q := range []float64{0, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
		rank := max(int(math.Ceil(q*float64(len(vs)))), 1)
		exact := vs[rank-1]
		got := h.quantile(q)
		if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 1.0/histSub {
			t.Errorf("quantile(%v) = %d, exact %d: off by %.2f%%", q, got, exact, 100*rel)
		}
	}
	if h.quantile(1) != vs[len(vs)-1] {
		t.Errorf("quantile(1) = %d, want the maximum %d", h.quantile(1), vs[len(vs)-1])
	}
	prev := int64(-1)
	for q := 0.0; q <= 1; q += 0.001 {
		if v := h.quantile(q); v < prev {
			t.Fatalf("quantile(%v) = %d < quantile below it %d", q, v, prev)
		} else {
			prev = v
		}
	}
}

func TestHistSmallValuesExact(t *testing.T) {
	var h hist
	for v := range int64(histSub) {
		h.add(v)
	}
	h.add(-5) // a clock step counts as 0
	if h.n != histSub+1 || h.min != 0 || h.max != histSub-1 {
		t.Fatalf("n %d min %d max %d", h.n, h.min, h.max)
	}
	if got := h.quantile(0.5); got != 63 {
		t.Errorf("median of 0,0..127 = %d, want 63", got)
	}
}

func TestHistMerge(t *testing.T) {
	var a, b, all hist
	for i := range int64(10_000) {
		v := i*i + 17
		all.add(v)
		if i%3 == 0 {
			a.add(v)
		} else {
			b.add(v)
		}
	}
	var empty hist
	a.merge(&empty)
	a.merge(&b)
	if a != all {
		t.Error("merging two halves differs from adding everything to one")
	}
	var e hist
	if e.quantile(0.5) != 0 {
		t.Error("an empty histogram's quantile is not 0")
	}
}

func TestHistBuckets(t *testing.T) {
	// Every value lies in its bucket, and buckets tile the line.
	for _, v := range []int64{0, 1, 127, 128, 129, 255, 256, 1000, 1 << 20, 123456789, math.MaxInt64} {
		i := histIndex(v)
		lo, w := histBounds(i)
		if v < lo || v-lo >= w {
			t.Errorf("value %d in bucket %d = [%d, %d+%d)", v, i, lo, lo, w)
		}
		if i >= histBuckets {
			t.Errorf("value %d: bucket %d of %d", v, i, histBuckets)
		}
	}
	for i := 1; i < histBuckets; i++ {
		lo, _ := histBounds(i)
		plo, pw := histBounds(i - 1)
		if plo+pw != lo {
			t.Fatalf("bucket %d starts at %d, bucket %d ends at %d", i, lo, i-1, plo+pw)
		}
	}
}

func BenchmarkHistAdd(b *testing.B) {
	var h hist
	for i := range b.N {
		h.add(int64(i) * 7919)
	}
}
