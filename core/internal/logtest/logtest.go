// Package logtest reads partition logs back for the tests of the packages
// built on core/partlog (not partlog's own, which cannot import it).
package logtest

import (
	"testing"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
)

// Headers returns the header of every batch in the log, in order.
func Headers(t testing.TB, l *partlog.Log) []record.Header {
	t.Helper()
	var hs []record.Header
	for off := l.StartOffset(); off < l.EndOffset(); {
		sl, err := l.Read(off, 1<<20, partlog.NoLimit)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		b, err := sl.Bytes()
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, n, err := record.Next(b, 0)
			if err != nil {
				t.Fatalf("batch at %d: %v", off, err)
			}
			hs = append(hs, h)
			b = b[n:]
		}
		off = sl.NextOffset
	}
	return hs
}
