package topics

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/clock/clocktest"
	"github.com/weir-broker/weir/core/internal/logtest"
	"github.com/weir-broker/weir/core/internal/testbatch"

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
func batch(t testing.TB, tag string, n int) []byte { return testbatch.Tagged(tag, n) }

// idem builds a batch of n records from producer pid at epoch and base
// sequence seq.
func idem(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	return testbatch.Idempotent(pid, epoch, seq, n)
}

// readAll returns the headers of every batch in the log.
func readAll(t testing.TB, l *partlog.Log) []record.Header { return logtest.Headers(t, l) }

func topicNames(r *Registry) []string {
	var names []string
	for _, t := range r.Topics() {
		names = append(names, t.Name)
	}
	return names
}
