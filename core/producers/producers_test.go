package producers

import (
	"math"
	"testing"
)

func TestSequenceArithmetic(t *testing.T) {
	const M = math.MaxInt32
	for _, tc := range []struct{ first, delta, last int32 }{
		{0, 0, 0}, {0, 9, 9}, {M, 0, M}, {M - 1, 1, M}, {M, 1, 0}, {M - 1, 3, 1}, {M, M, M - 1},
	} {
		if got := LastSequence(tc.first, tc.delta); got != tc.last {
			t.Errorf("LastSequence(%d, %d) = %d, want %d", tc.first, tc.delta, got, tc.last)
		}
	}
	for _, tc := range []struct {
		last, first int32
		want        bool
	}{{0, 1, true}, {M, 0, true}, {M - 1, M, true}, {5, 5, false}, {5, 7, false}, {M, 1, false}} {
		if got := inSequence(tc.last, tc.first); got != tc.want {
			t.Errorf("inSequence(%d, %d) = %v", tc.last, tc.first, got)
		}
	}
	for _, tc := range []struct {
		seen, first, last int32
		want              bool
	}{
		{10, 0, 4, true}, {10, 10, 10, true}, {10, 8, 10, true},
		{10, 9, 11, false}, {10, 11, 12, false}, {10, 12, 9, false},
		{2, M - 1, 1, true}, {2, M, 3, false}, {0, M - 5, M, true},
		{M, 0, 3, false},               // just ahead across the wrap
		{5, 1 << 30, 1<<30 + 1, false}, // half the space away: ahead, not behind
	} {
		if got := behind(tc.seen, tc.first, tc.last); got != tc.want {
			t.Errorf("behind(%d, %d..%d) = %v, want %v", tc.seen, tc.first, tc.last, got, tc.want)
		}
	}
}
