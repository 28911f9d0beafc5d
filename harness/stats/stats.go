// Package stats turns the raw figures of an experiment run into the numbers
// a report prints: a Summary of the repetitions of one point, percentiles of
// per-record latencies, and a significance test between two sets of
// repetitions.
//
// The choices follow benchstat (golang.org/x/perf), so a table printed by
// weir and one printed by benchstat over bench.txt agree:
//
//   - The centre of a sample is its median, not its mean: benchmark figures
//     are skewed (a slow repetition is common, a fast outlier is not), and the
//     median does not move when one repetition hiccups.
//   - The spread the reports print beside a median is the median absolute
//     deviation (MAD, unscaled: the median of |x - median|), the robust
//     partner of the median. It stays finite with the default five
//     repetitions, where a 95% confidence interval does not exist yet.
//   - The 95% confidence interval of the median is distribution-free: two
//     order statistics chosen from the binomial distribution (benchmath's
//     AssumeNothing, the one benchstat prints). It needs at least six values;
//     below that a bound is infinite and Summary.CIFinite is false.
//   - Two samples are compared with the Mann-Whitney U test (exact for small
//     samples), two-sided, at alpha = 0.05. It assumes no distribution, only
//     that repetitions are independent.
//
// Percentiles of raw latency samples use linear interpolation between the
// closest ranks (type 7 of Hyndman and Fan, the default of R's quantile,
// NumPy's percentile and a spreadsheet's PERCENTILE.INC): the p-th
// percentile of n sorted values x[0..n-1] is x[h] interpolated at
// h = (n-1)*p/100, so p=0 is the minimum and p=100 the maximum. One sort
// serves every percentile asked for, and above a few thousand samples it is
// a radix sort over the float bits (four linear passes, about three times
// faster than slices.Sort on a million latencies; see BenchmarkSortFloats).
package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"

	mstats "github.com/montanaflynn/stats"
	"golang.org/x/perf/benchmath"
)

// Errors returned by this package.
var (
	// ErrEmpty: a sample has no values.
	ErrEmpty = errors.New("stats: empty sample")
	// ErrNaN: a sample holds NaN, which has no rank.
	ErrNaN = errors.New("stats: sample holds NaN")
	// ErrPercentile: a percentile outside [0, 100] (or NaN) was asked for.
	ErrPercentile = errors.New("stats: percentile out of range [0, 100]")
)

// Confidence is the level of the confidence interval Summarize computes.
const Confidence = 0.95

// Alpha is the significance level of Compare: a p-value at or below it
// rejects "both samples come from the same distribution".
const Alpha = 0.05

// LatencyPercentiles are the percentiles the harness reports for per-record
// latencies: p50, p95, p99, p99.9 and the maximum.
var LatencyPercentiles = []float64{50, 95, 99, 99.9, 100}

// Summary describes one sample: the repetitions of one metric at one point.
type Summary struct {
	N      int
	Median float64
	Min    float64
	Max    float64
	Mean   float64
	// StdDev is the sample standard deviation (n-1 denominator); 0 when N is 1.
	StdDev float64
	// MAD is the median absolute deviation, unscaled: the spread reports
	// print beside the median.
	MAD float64
	// Lo and Hi bound the distribution-free confidence interval of the
	// median; Lo is -Inf or Hi +Inf (or both) when N is too small for one.
	Lo, Hi float64
	// CIConfidence is the level the order statistics actually achieve
	// (at least Confidence when the interval is finite).
	CIConfidence float64
}

// CIFinite reports whether the sample was large enough for a finite
// confidence interval of the median (at least MinSamplesCI values).
func (s Summary) CIFinite() bool {
	return !math.IsInf(s.Lo, 0) && !math.IsInf(s.Hi, 0)
}

// SpreadPct is MAD as a percentage of |Median|: the "± x%" of the reports.
// It is 0 when MAD is 0, and +Inf when the median is 0 but MAD is not.
func (s Summary) SpreadPct() float64 {
	if s.MAD == 0 {
		return 0
	}
	if s.Median == 0 {
		return math.Inf(1)
	}
	return s.MAD / math.Abs(s.Median) * 100
}

// Summarize describes xs, which it does not modify. It fails with ErrEmpty
// for no values and ErrNaN when a value is NaN.
func Summarize(xs []float64) (Summary, error) {
	sorted, err := sortedCopy(xs)
	if err != nil {
		return Summary{}, err
	}
	thresholds := benchmath.DefaultThresholds
	sum := benchmath.AssumeNothing.Summary(benchmath.NewSample(sorted, &thresholds), Confidence)
	s := Summary{
		N:            len(sorted),
		Median:       sum.Center,
		Min:          sorted[0],
		Max:          sorted[len(sorted)-1],
		Lo:           sum.Lo,
		Hi:           sum.Hi,
		CIConfidence: sum.Confidence,
	}
	// The inputs are non-empty and NaN-free, so these cannot fail.
	s.Mean, _ = mstats.Mean(sorted)
	s.MAD, _ = mstats.MedianAbsoluteDeviationPopulation(sorted)
	if len(sorted) > 1 {
		s.StdDev, _ = mstats.StandardDeviationSample(sorted)
	}
	return s, nil
}

// MinSamplesCI is the fewest values for which Summarize finds a finite
// confidence interval of the median at level Confidence.
func MinSamplesCI() int {
	for n := 1; ; n++ {
		s, _ := Summarize(make([]float64, n))
		if s.CIFinite() {
			return n
		}
	}
}

// Percentiles returns the ps-th percentiles of samples (each p in [0, 100]),
// in the order asked, interpolating linearly between closest ranks (see the
// package documentation). It sorts a copy of samples once and leaves samples
// untouched; PercentilesSorted skips the copy and the sort.
func Percentiles(samples []float64, ps ...float64) ([]float64, error) {
	if err := checkPercentiles(ps); err != nil {
		return nil, err
	}
	sorted, err := sortedCopy(samples)
	if err != nil {
		return nil, err
	}
	return percentiles(sorted, ps), nil
}

// PercentilesSorted is Percentiles for samples already sorted in ascending
// order, without NaN (as slices.Sort leaves them). It does not check the
// order; unsorted input gives meaningless results, not an error.
func PercentilesSorted(sorted []float64, ps ...float64) ([]float64, error) {
	if err := checkPercentiles(ps); err != nil {
		return nil, err
	}
	if len(sorted) == 0 {
		return nil, ErrEmpty
	}
	return percentiles(sorted, ps), nil
}

func percentiles(sorted, ps []float64) []float64 {
	out := make([]float64, len(ps))
	last := len(sorted) - 1
	for i, p := range ps {
		h := float64(last) * p / 100
		lo := int(math.Floor(h))
		if lo >= last {
			out[i] = sorted[last]
			continue
		}
		frac := h - float64(lo)
		out[i] = sorted[lo] + frac*(sorted[lo+1]-sorted[lo])
	}
	return out
}

func checkPercentiles(ps []float64) error {
	for _, p := range ps {
		if !(p >= 0 && p <= 100) { // also rejects NaN
			return fmt.Errorf("%w: %v", ErrPercentile, p)
		}
	}
	return nil
}

func sortedCopy(xs []float64) ([]float64, error) {
	if len(xs) == 0 {
		return nil, ErrEmpty
	}
	sorted := slices.Clone(xs)
	for i, x := range sorted {
		if math.IsNaN(x) {
			return nil, fmt.Errorf("%w: value %d of %d", ErrNaN, i, len(xs))
		}
	}
	sortFloats(sorted)
	return sorted, nil
}

// Comparison is the outcome of a two-sample Mann-Whitney U test.
type Comparison struct {
	// P is the two-sided p-value of "both samples come from the same
	// distribution"; 1 when every value of both samples is equal.
	P      float64
	N1, N2 int
	// Significant reports P <= Alpha, benchstat's rule: the samples differ.
	Significant bool
	// NeedN is set when the test could not have found a difference at
	// Alpha however far apart the samples were, because both are smaller
	// than NeedN values (the benchstat warning "need >= N samples").
	NeedN int
}

// Compare tests whether a and b (repetitions of the same metric, say before
// and after a change) come from the same distribution, with the two-sided
// Mann-Whitney U test at Alpha. It fails with ErrEmpty when either sample is
// empty and ErrNaN when a value is NaN; neither slice is modified.
func Compare(a, b []float64) (Comparison, error) {
	sa, err := sortedCopy(a)
	if err != nil {
		return Comparison{}, fmt.Errorf("first sample: %w", err)
	}
	sb, err := sortedCopy(b)
	if err != nil {
		return Comparison{}, fmt.Errorf("second sample: %w", err)
	}
	thresholds := benchmath.DefaultThresholds
	thresholds.CompareAlpha = Alpha
	c := benchmath.AssumeNothing.Compare(
		benchmath.NewSample(sa, &thresholds), benchmath.NewSample(sb, &thresholds))
	// benchmath reports P=1 with a warning when all values are equal (the
	// U test's ErrSamplesEqual): no difference, which is the right answer.
	out := Comparison{P: c.P, N1: len(sa), N2: len(sb), Significant: c.P <= Alpha}
	if !out.Significant {
		if need := MinSamplesU(Alpha); len(sa) < need && len(sb) < need {
			out.NeedN = need
		}
	}
	return out, nil
}

// MinSamplesU is the smallest n for which two samples of n values each can
// reach a two-sided Mann-Whitney p-value below alpha: the smallest possible
// p-value with n+n values and no ties is 2/C(2n, n).
func MinSamplesU(alpha float64) int {
	for n := 1; n < 64; n++ {
		if 2/binomial(2*n, n) <= alpha {
			return n
		}
	}
	return 64
}

func binomial(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}
