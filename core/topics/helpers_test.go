package topics

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/clock/clocktest"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

var ctx = context.Background()

// fakeClock is the manual clock of package clocktest.
type fakeClock = clocktest.Clock

func newClock() *fakeClock { return clocktest.New(time.UnixMilli(1_700_000_000_000)) }

// fsCase is one file system the registry tests run on.
type fsCase struct {
	name string
	new  func(t *testing.T) (vfs.FS, string)
}

var fsCases = []fsCase{
	{"mem", func(t *testing.T) (vfs.FS, string) { return vfs.NewMem(), "/data" }},
	{"os", func(t *testing.T) (vfs.FS, string) { return vfs.Default, filepath.Join(t.TempDir(), "data") }},
}

// open opens a registry on fsys/dir with a fake clock, failing the test on error.
func open(t *testing.T, fsys vfs.FS, dir string, mod ...func(*Options)) *Registry {
	t.Helper()
	o := Options{FS: fsys, Dir: dir, Clock: newClock()}
	for _, m := range mod {
		m(&o)
	}
	r, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return r
}

// batch builds a non-idempotent batch of n records with values "<tag>-<i>".
func batch(t testing.TB, tag string, n int) []byte {
	t.Helper()
	return build(t, record.DefaultBuildOptions(), tag, n)
}

// idem builds a batch of n records from producer pid at epoch and base
// sequence seq.
func idem(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	o := record.DefaultBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence = pid, epoch, seq
	return build(t, o, fmt.Sprintf("p%d-e%d-s%d", pid, epoch, seq), n)
}

func build(t testing.TB, o record.BuildOptions, tag string, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte(fmt.Sprintf("%s-%d", tag, i)), Timestamp: 1_700_000_000_000 + int64(i)}
	}
	b, err := record.Build(o, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readAll returns the headers and first record values of every batch in the log.
func readAll(t testing.TB, l *partlog.Log) []record.Header {
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

func topicNames(r *Registry) []string {
	var names []string
	for _, t := range r.Topics() {
		names = append(names, t.Name)
	}
	return names
}

var partlogErrBatchTooLarge = partlog.ErrBatchTooLarge
