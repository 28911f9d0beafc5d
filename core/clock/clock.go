// Package clock is the time seam of the broker's core: the storage engine,
// the topic registry and the group coordinator read the time and schedule
// deadlines only through Clock, so tests drive them with a manual clock
// (package clocktest) instead of sleeping.
package clock

import "time"

// Clock tells the time and runs deadlines.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f in its own goroutine after d, unless stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not started; false if it has.
	Stop() bool
}

// System is the real clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (System) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
