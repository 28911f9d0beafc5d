package model

import (
	"sync"
	"time"
)

// Clock serves a Device on a clock, for callers that run concurrently (the FUSE file system's operations): one
// mutex around the Device value, whose member states are the per-disk queues. In simulated time the clock is
// virtual: it starts at 0 and Do moves it to each request's completion, so a workload issued one request at a time
// accounts exactly the device time the model gives it, in no real time. In real time the clock is the wall clock
// since NewClock, and Do sleeps until the request's completion.
type Clock struct {
	mu    sync.Mutex
	dev   Device
	real  bool
	start time.Time
	virt  time.Duration
	// waited sums the modelled time callers waited for their requests
	// (WaitUntil): the device time a workload issuing one request at a
	// time was charged, in real and simulated time alike.
	waited time.Duration
}

// NewClock returns a clock serving d, in real time (sleeping) if real, else in simulated time.
func NewClock(d Device, real bool) *Clock {
	return &Clock{dev: d, real: real, start: time.Now()}
}

// Real reports whether the clock sleeps.
func (c *Clock) Real() bool { return c.real }

// Now is the device's clock.
func (c *Clock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now()
}

func (c *Clock) now() time.Duration {
	if c.real {
		return time.Since(c.start)
	}
	return c.virt
}

// Submit queues r at the device's now and returns its result without waiting for it (writeback in the background).
func (c *Clock) Submit(r Request) Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	var res Result
	c.dev, res = c.dev.Serve(c.now(), r)
	return res
}

// Do serves r and waits for its completion: sleeping in real time, moving the virtual clock in simulated time.
// It returns the result and how long the caller waited.
func (c *Clock) Do(r Request) (Result, time.Duration) {
	c.mu.Lock()
	var res Result
	c.dev, res = c.dev.Serve(c.now(), r)
	c.mu.Unlock()
	return res, c.WaitUntil(res.Done)
}

// DoSince is Do for a caller that has been waiting for the device since an earlier time of the clock: an fsync that
// submitted its writeback (Submit) at since and then served its flush. In real time the device works on the
// submitted requests while the caller builds and queues the rest, so that time is the caller's wait too: it is
// counted (Waited) and returned with the flush's own wait. In simulated time the clock does not move between the
// two, and DoSince is Do.
func (c *Clock) DoSince(r Request, since time.Duration) (Result, time.Duration) {
	c.mu.Lock()
	now := c.now()
	var res Result
	c.dev, res = c.dev.Serve(now, r)
	before := max(0, min(res.Done, now)-since)
	c.waited += before
	c.mu.Unlock()
	return res, before + c.WaitUntil(res.Done)
}

// WaitUntil waits until the device's clock reads t and returns how long that was from now.
func (c *Clock) WaitUntil(t time.Duration) time.Duration {
	c.mu.Lock()
	now := c.now()
	if !c.real {
		if t > c.virt {
			c.virt = t
		}
		c.waited += max(0, t-now)
		c.mu.Unlock()
		return max(0, t-now)
	}
	c.waited += max(0, t-now)
	c.mu.Unlock()
	if t > now {
		time.Sleep(t - now)
	}
	return max(0, t-now)
}

// Waited is the modelled time callers have waited for the device (Do, WaitUntil), summed: for a workload that
// issues one request at a time, the device time it was charged, whatever the time mode and whatever the callers
// spent between requests (in real time, a FUSE round trip). Concurrent waits are each counted.
func (c *Clock) Waited() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waited
}

// Device returns the device's current state.
func (c *Clock) Device() Device {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dev
}
