package broker

import (
	"time"

	"github.com/weir-broker/weir/core/clock/clocktest"
)

// fakeClock is the manual clock of package clocktest.
type fakeClock = clocktest.Clock

func newFakeClock() *fakeClock { return clocktest.New(time.Now()) }
