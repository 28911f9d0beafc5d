package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortFloats checks the radix sort against slices.Sort on inputs above
// and below the radix threshold: mixed signs, zeros, infinities, subnormals,
// duplicates and values that differ only in their low bits.
func TestSortFloats(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	gens := map[string]func(i int) float64{
		"latency-like": func(int) float64 { return r.ExpFloat64() * 1000 },
		"mixed signs":  func(int) float64 { return r.NormFloat64() * 1e6 },
		"specials": func(i int) float64 {
			vals := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64,
				-math.SmallestNonzeroFloat64, math.MaxFloat64, -math.MaxFloat64, 1, -1}
			return vals[i%len(vals)]
		},
		"low bits":  func(int) float64 { return math.Float64frombits(math.Float64bits(1.5) + uint64(r.IntN(1<<20))) },
		"constant":  func(int) float64 { return 42 },
		"integers":  func(int) float64 { return float64(r.IntN(100) - 50) },
		"two peaks": func(i int) float64 { return float64(i%2)*1e9 + r.Float64() },
	}
	for name, gen := range gens {
		for _, n := range []int{1, 7, radixThreshold - 1, radixThreshold, 50_000} {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = gen(i)
			}
			want := slices.Clone(xs)
			slices.Sort(want)
			sortFloats(xs)
			for i := range xs {
				// -0 == +0, and slices.Sort may order them either way.
				if xs[i] != want[i] {
					t.Fatalf("%s, n=%d: index %d = %v, slices.Sort has %v", name, n, i, xs[i], want[i])
				}
			}
			if !slices.IsSorted(xs) {
				t.Fatalf("%s, n=%d: not sorted", name, n)
			}
		}
	}
}

func BenchmarkSortFloats(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	orig := make([]float64, 1_000_000)
	for i := range orig {
		orig[i] = r.ExpFloat64() * 1000
	}
	xs := make([]float64, len(orig))
	b.Run("radix", func(b *testing.B) {
		for b.Loop() {
			copy(xs, orig)
			sortFloats(xs)
		}
	})
	b.Run("slices.Sort", func(b *testing.B) {
		for b.Loop() {
			copy(xs, orig)
			slices.Sort(xs)
		}
	})
}
