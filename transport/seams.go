package transport

import (
	"context"
	"time"
)

// seams are this package's tests' hooks into a Server (Config.seams); nil
// everywhere else, where a Server reads the system clock and calls no hook.
type seams struct {
	// now is the clock of idle closes and of the log's rate limits (socket
	// deadlines always use the system clock). Default time.Now.
	now func() time.Time
	// beforeHandle, when set, is called by a connection's serving goroutine
	// before it handles each request, with the connection's context and the
	// request's API key.
	beforeHandle func(ctx context.Context, key int16)
	// tick, when set, replaces the ticker of the server's housekeeping
	// (idle closes, suppressed-warning counts): each receive is one round.
	tick chan time.Time
}
