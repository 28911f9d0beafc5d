package node

import (
	"context"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/partlog"
)

// TestCleanDue: a log is cleaned when its dirty share reaches
// min.cleanable.dirty.ratio, or when some dirty record is past
// max.compaction.lag.ms whatever the ratio; never with nothing dirty.
func TestCleanDue(t *testing.T) {
	for _, tc := range []struct {
		c     partlog.Cleanability
		ratio float64
		due   bool
	}{
		{partlog.Cleanability{}, 0.5, false},
		{partlog.Cleanability{Total: 100, Dirty: 0, Overdue: time.Hour}, 0.5, false},
		{partlog.Cleanability{Total: 100, Dirty: 49}, 0.5, false},
		{partlog.Cleanability{Total: 100, Dirty: 50}, 0.5, true},
		{partlog.Cleanability{Total: 100, Dirty: 1, Overdue: time.Millisecond}, 0.5, true},
		{partlog.Cleanability{Total: 100, Dirty: 1}, 0, true},
	} {
		if got := cleanDue(tc.c, tc.ratio); got != tc.due {
			t.Errorf("%+v at ratio %v: due %v, want %v", tc.c, tc.ratio, got, tc.due)
		}
	}
}

// TestCleanerThrottle: no bound without a rate; with one, a full bucket
// (a second's worth, at most 1 MiB) passes at once, and the next bytes must
// wait for the rate: refused at once by a ctx that ends before they could
// go (the limiter's own check; nothing here waits).
func TestCleanerThrottle(t *testing.T) {
	if newCleanerThrottle(0) != nil || newCleanerThrottle(-1) != nil {
		t.Fatal("a throttle without a rate")
	}
	for _, rate := range []int64{1000, 8 << 20} {
		th := newCleanerThrottle(rate)
		bucket := int(min(rate, 1<<20))
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		if err := th(ctx, bucket); err != nil {
			t.Fatalf("%d B/s: a full bucket: %v", rate, err)
		}
		cancel()
		// A bucket's worth more takes bucket/rate seconds: 1 s, 1/8 s.
		short, cancel := context.WithTimeout(context.Background(), time.Duration(bucket)*time.Second/time.Duration(rate)/2)
		if err := th(short, bucket); err == nil {
			t.Fatalf("%d B/s: %d more bytes passed before they were due", rate, bucket)
		}
		cancel()
	}
}
