package groups

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/clock/clocktest"
)

var t0 = time.UnixMilli(1_700_000_000_000)

// fakeClock is the manual clock of package clocktest.
type fakeClock = clocktest.Clock

func newClock() *fakeClock { return clocktest.New(t0) }

// counterIDs returns a newMemberID that numbers ids: "<prefix>-1", ...
func counterIDs() func(string) string {
	var mu sync.Mutex
	n := 0
	return func(prefix string) string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("%s-%d", prefix, n)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testOptions are valid Options for the state machine: sessions 6s..30m,
// no initial delay, numbered member ids.
func testOptions() *Options {
	o, err := Options{Logger: quietLogger(), newMemberID: counterIDs()}.validate()
	if err != nil {
		panic(err)
	}
	return &o
}

func str(s string) *string { return &s }

func protos(names ...string) []Protocol {
	ps := make([]Protocol, len(names))
	for i, n := range names {
		ps[i] = Protocol{Name: n, Metadata: []byte("meta-" + n)}
	}
	return ps
}

// wantErr fails unless errors.Is(err, want) (want nil: err nil).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}
