// Package logtest reads partition logs back for the tests of the packages
// built on core/partlog (not partlog's own, which cannot import it).
package logtest

import (
	"testing"

	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
)

// Headers returns the header of every batch in the log, in order.
func Headers(t testing.TB, l *partlog.Log) []record.Header {
	t.Helper()
	var hs []record.Header
	for _, b := range Batches(t, l) {
		h, err := record.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	return hs
}

// Batches returns every batch in the log, whole (copied out of the log), in
// order, each checked completely (testbatch.Split).
func Batches(t testing.TB, l *partlog.Log) [][]byte {
	t.Helper()
	var out [][]byte
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
		bs, err := testbatch.Split(b)
		if err != nil {
			t.Fatalf("batches from %d: %v", off, err)
		}
		out = append(out, bs...)
		off = sl.NextOffset
	}
	return out
}
