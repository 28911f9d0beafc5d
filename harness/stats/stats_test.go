package stats

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func near(a, b float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b))
}

// The expected values are worked by hand (shown in the comments).
func TestSummarize(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name string
		xs   []float64
		want Summary
	}{
		{
			// |x-3| = 2,1,1,2,0 -> median 1; var = (4+1+1+4+0)/4 = 2.5.
			// Five values are too few for a 95% interval of the median.
			name: "five unsorted",
			xs:   []float64{5, 1, 4, 2, 3},
			want: Summary{N: 5, Median: 3, Min: 1, Max: 5, Mean: 3, StdDev: math.Sqrt(2.5), MAD: 1, Lo: -inf, Hi: inf},
		},
		{
			// median (3+4)/2; |x-3.5| sorted .5,.5,1.5,2.5,6.5,16.5 -> 2;
			// mean 40/6; var = sum((x-mean)^2)/5. Six values: the interval is
			// [x(1), x(6)] with confidence 1 - 2*(1/2)^6 = 0.96875.
			name: "six with outlier",
			xs:   []float64{20, 1, 3, 2, 10, 4},
			want: Summary{N: 6, Median: 3.5, Min: 1, Max: 20, Mean: 40.0 / 6, MAD: 2, Lo: 1, Hi: 20, CIConfidence: 0.96875,
				StdDev: math.Sqrt((sq(1-40.0/6) + sq(2-40.0/6) + sq(3-40.0/6) + sq(4-40.0/6) + sq(10-40.0/6) + sq(20-40.0/6)) / 5)},
		},
		{
			// 1..10: the classical order-statistic interval is [x(2), x(9)],
			// confidence 1 - 2*P(Binomial(10, 1/2) <= 1) = 1 - 2*11/1024.
			// |x-5.5| = .5,.5,1.5,1.5,...,4.5,4.5 -> MAD 2.5.
			name: "one to ten",
			xs:   []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1},
			want: Summary{N: 10, Median: 5.5, Min: 1, Max: 10, Mean: 5.5, StdDev: math.Sqrt(82.5 / 9), MAD: 2.5, Lo: 2, Hi: 9,
				CIConfidence: 1 - 2*11.0/1024},
		},
		{
			name: "single",
			xs:   []float64{42},
			want: Summary{N: 1, Median: 42, Min: 42, Max: 42, Mean: 42, Lo: -inf, Hi: inf},
		},
		{
			name: "constant",
			xs:   []float64{7, 7, 7, 7, 7, 7, 7},
			want: Summary{N: 7, Median: 7, Min: 7, Max: 7, Mean: 7, Lo: 7, Hi: 7},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.xs)
			got, err := Summarize(tc.xs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tc.xs, orig) {
				t.Errorf("Summarize modified its input: %v, was %v", tc.xs, orig)
			}
			check := func(field string, got, want float64) {
				t.Helper()
				if !near(got, want) {
					t.Errorf("%s = %v, want %v", field, got, want)
				}
			}
			if got.N != tc.want.N {
				t.Errorf("N = %d, want %d", got.N, tc.want.N)
			}
			check("Median", got.Median, tc.want.Median)
			check("Min", got.Min, tc.want.Min)
			check("Max", got.Max, tc.want.Max)
			check("Mean", got.Mean, tc.want.Mean)
			check("StdDev", got.StdDev, tc.want.StdDev)
			check("MAD", got.MAD, tc.want.MAD)
			// Too few values: at least one bound is infinite (which one
			// depends on how the order statistics round), and CIFinite says so.
			if wantFinite := !math.IsInf(tc.want.Lo, 0); got.CIFinite() != wantFinite {
				t.Errorf("CIFinite = %v for [%v, %v], want %v", got.CIFinite(), got.Lo, got.Hi, wantFinite)
			} else if wantFinite {
				check("Lo", got.Lo, tc.want.Lo)
				check("Hi", got.Hi, tc.want.Hi)
			}
			if tc.want.CIConfidence != 0 {
				check("CIConfidence", got.CIConfidence, tc.want.CIConfidence)
			}
		})
	}
}

func sq(x float64) float64 { return x * x }

func TestSpreadPct(t *testing.T) {
	tests := []struct {
		s    Summary
		want float64
	}{
		{Summary{Median: 200, MAD: 5}, 2.5},
		{Summary{Median: -200, MAD: 5}, 2.5},
		{Summary{Median: 0, MAD: 0}, 0},
		{Summary{Median: 3, MAD: 0}, 0},
		{Summary{Median: 0, MAD: 1}, math.Inf(1)},
	}
	for _, tc := range tests {
		if got := tc.s.SpreadPct(); !near(got, tc.want) {
			t.Errorf("SpreadPct(median %v, MAD %v) = %v, want %v", tc.s.Median, tc.s.MAD, got, tc.want)
		}
	}
}

func TestMinSamples(t *testing.T) {
	// 2*(1/2)^5 = 0.0625 > 0.05 but 2*(1/2)^6 = 0.03125: six values.
	if got := MinSamplesCI(); got != 6 {
		t.Errorf("MinSamplesCI() = %d, want 6", got)
	}
	// 2/C(6,3) = 0.1, 2/C(8,4) = 0.0286: four reps a side (benchstat's
	// "need >= 4 samples to detect a difference at alpha level 0.05").
	if got := MinSamplesU(0.05); got != 4 {
		t.Errorf("MinSamplesU(0.05) = %d, want 4", got)
	}
	if got := MinSamplesU(0.01); got != 5 { // 2/C(10,5) = 0.0079
		t.Errorf("MinSamplesU(0.01) = %d, want 5", got)
	}
}

func TestPercentiles(t *testing.T) {
	oneToTen := []float64{7, 3, 10, 1, 5, 2, 9, 4, 8, 6}
	tests := []struct {
		name    string
		samples []float64
		ps      []float64
		want    []float64
	}{
		// h = 9p/100: p50 -> 4.5 -> 5.5; p25 -> 2.25 -> 3.25; p95 -> 8.55 ->
		// 9.55; p99 -> 9.91; p99.9 -> 8.991 -> 9.991.
		{"one to ten", oneToTen, []float64{0, 25, 50, 95, 99, 99.9, 100}, []float64{1, 3.25, 5.5, 9.55, 9.91, 9.991, 10}},
		{"asked out of order", oneToTen, []float64{100, 0, 50}, []float64{10, 1, 5.5}},
		{"single", []float64{7}, LatencyPercentiles, []float64{7, 7, 7, 7, 7}},
		// h = 0.999 -> 10 + 0.999*10.
		{"two", []float64{20, 10}, []float64{50, 99.9}, []float64{15, 19.99}},
		{"ties", []float64{1, 1, 1, 1, 100}, []float64{50, 75, 87.5}, []float64{1, 1, 50.5}},
		{"none asked", oneToTen, nil, []float64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.samples)
			got, err := Percentiles(tc.samples, tc.ps...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tc.samples, orig) {
				t.Errorf("Percentiles modified its input")
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if !near(got[i], tc.want[i]) {
					t.Errorf("p%v = %v, want %v", tc.ps[i], got[i], tc.want[i])
				}
			}
			sorted := slices.Sorted(slices.Values(tc.samples))
			again, err := PercentilesSorted(sorted, tc.ps...)
			if err != nil || !slices.Equal(again, got) {
				t.Errorf("PercentilesSorted = %v, %v; want %v", again, err, got)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	if _, err := Summarize(nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("Summarize(nil) err = %v, want ErrEmpty", err)
	}
	if _, err := Summarize([]float64{1, math.NaN()}); !errors.Is(err, ErrNaN) {
		t.Errorf("Summarize(NaN) err = %v, want ErrNaN", err)
	}
	if _, err := Percentiles(nil, 50); !errors.Is(err, ErrEmpty) {
		t.Errorf("Percentiles(nil) err = %v, want ErrEmpty", err)
	}
	if _, err := PercentilesSorted(nil, 50); !errors.Is(err, ErrEmpty) {
		t.Errorf("PercentilesSorted(nil) err = %v, want ErrEmpty", err)
	}
	if _, err := Percentiles([]float64{math.NaN()}, 50); !errors.Is(err, ErrNaN) {
		t.Errorf("Percentiles(NaN) err = %v, want ErrNaN", err)
	}
	for _, p := range []float64{-1, 100.0001, math.NaN(), math.Inf(1)} {
		if _, err := Percentiles([]float64{1, 2}, 50, p); !errors.Is(err, ErrPercentile) {
			t.Errorf("Percentiles(p=%v) err = %v, want ErrPercentile", p, err)
		}
	}
	if _, err := Compare(nil, []float64{1}); !errors.Is(err, ErrEmpty) {
		t.Errorf("Compare(nil, x) err = %v, want ErrEmpty", err)
	}
	if _, err := Compare([]float64{1}, []float64{math.NaN()}); !errors.Is(err, ErrNaN) {
		t.Errorf("Compare(x, NaN) err = %v, want ErrNaN", err)
	}
}

// exactUTestP is the two-sided exact Mann-Whitney p-value by brute force:
// over every way to split the pooled values into groups of len(a) and
// len(b), the fraction whose U is at least as far from its mean as the
// observed one. Only for samples without ties.
func exactUTestP(a, b []float64) float64 {
	pooled := append(slices.Clone(a), b...)
	n1, n := len(a), len(pooled)
	u := func(inA []bool) float64 {
		var u float64
		for i := range pooled {
			for j := range pooled {
				if inA[i] && !inA[j] && pooled[i] > pooled[j] {
					u++
				}
			}
		}
		return u
	}
	mean := float64(n1*(n-n1)) / 2
	obs := make([]bool, n)
	for i := range n1 {
		obs[i] = true
	}
	dObs := math.Abs(u(obs) - mean)
	var total, extreme int
	inA := make([]bool, n)
	var walk func(i, left int)
	walk = func(i, left int) {
		if left == 0 {
			total++
			if math.Abs(u(inA)-mean) >= dObs-1e-9 {
				extreme++
			}
			return
		}
		if n-i < left {
			return
		}
		inA[i] = true
		walk(i+1, left-1)
		inA[i] = false
		walk(i+1, left)
	}
	walk(0, n1)
	return float64(extreme) / float64(total)
}

func TestCompare(t *testing.T) {
	// The example of R's wilcox.test documentation (Hollander and Wolfe):
	// W = 35, one-sided p = 0.1272, so two-sided 0.2544.
	rx := []float64{0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46}
	ry := []float64{1.15, 0.88, 0.90, 0.74, 1.21}
	tests := []struct {
		name        string
		a, b        []float64
		p           float64 // -1: check only the range
		significant bool
		needN       int
	}{
		// Complete separation of 5 and 5: p = 2/C(10,5) = 2/252.
		{"separated five", []float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}, 2.0 / 252, true, 0},
		{"separated reversed", []float64{10, 9, 8, 7, 6}, []float64{5, 4, 3, 2, 1}, 2.0 / 252, true, 0},
		{"R wilcox.test example", rx, ry, 0.2544, false, 0},
		{"interleaved", []float64{1, 3, 5, 7, 9}, []float64{2, 4, 6, 8, 10}, exactUTestP([]float64{1, 3, 5, 7, 9}, []float64{2, 4, 6, 8, 10}), false, 0},
		{"identical", []float64{1, 2, 3, 4, 5}, []float64{1, 2, 3, 4, 5}, 1, false, 0},
		{"all equal", []float64{3, 3, 3, 3, 3}, []float64{3, 3, 3, 3, 3}, 1, false, 0},
		// Three a side can reach only p = 2/C(6,3) = 0.1.
		{"three a side", []float64{1, 2, 3}, []float64{4, 5, 6}, 0.1, false, 4},
		{"unequal sizes", []float64{1, 2, 3, 4, 5, 6, 7}, []float64{8, 9, 10}, 2.0 / 120, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Compare(tc.a, tc.b)
			if err != nil {
				t.Fatal(err)
			}
			tol := 1e-9
			if tc.name == "R wilcox.test example" {
				tol = 5e-5 // R prints four digits
			}
			if math.Abs(got.P-tc.p) > tol {
				t.Errorf("P = %v, want %v", got.P, tc.p)
			}
			if got.Significant != tc.significant || got.NeedN != tc.needN {
				t.Errorf("Significant %v NeedN %d, want %v %d", got.Significant, got.NeedN, tc.significant, tc.needN)
			}
			if got.N1 != len(tc.a) || got.N2 != len(tc.b) {
				t.Errorf("N1, N2 = %d, %d; want %d, %d", got.N1, got.N2, len(tc.a), len(tc.b))
			}
		})
	}
}

// TestCompareMatchesBruteForce checks the exact U test on random tie-free
// samples against enumeration of every split.
func TestCompareMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		n1, n2 := 2+r.IntN(5), 2+r.IntN(5)
		a, b := make([]float64, n1), make([]float64, n2)
		for j := range a {
			a[j] = r.Float64() + float64(i%3)*0.3 // some pairs shifted
		}
		for j := range b {
			b[j] = r.Float64()
		}
		got, err := Compare(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if want := exactUTestP(a, b); math.Abs(got.P-want) > 1e-9 {
			t.Errorf("case %d (%d+%d): P = %v, brute force %v", i, n1, n2, got.P, want)
		}
	}
}

// TestCompareLarge runs the normal approximation (samples above the exact
// limit): a clear shift is significant, two draws of one distribution are not.
func TestCompareLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	draw := func(shift float64) []float64 {
		xs := make([]float64, 80)
		for i := range xs {
			xs[i] = 100 + shift + r.NormFloat64()*5
		}
		return xs
	}
	base := draw(0)
	shifted, err := Compare(base, draw(10))
	if err != nil {
		t.Fatal(err)
	}
	if !shifted.Significant || shifted.P > 1e-6 {
		t.Errorf("shift of two sigma: P = %v, want significant", shifted.P)
	}
	same, err := Compare(base, draw(0))
	if err != nil {
		t.Fatal(err)
	}
	if same.Significant || same.P <= 0 || same.P > 1 {
		t.Errorf("same distribution: P = %v, want not significant", same.P)
	}
}

func BenchmarkPercentiles(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	samples := make([]float64, 1_000_000)
	for i := range samples {
		samples[i] = r.ExpFloat64() * 1000 // latency-like, in µs
	}
	b.SetBytes(int64(len(samples) * 8))
	b.ResetTimer()
	for b.Loop() {
		if _, err := Percentiles(samples, LatencyPercentiles...); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSummarize(b *testing.B) {
	xs := []float64{101, 99, 103, 98, 100, 250, 102}
	for b.Loop() {
		if _, err := Summarize(xs); err != nil {
			b.Fatal(err)
		}
	}
}
