package partlog

import "github.com/weir-broker/weir/core/wakeup"

// Watch registers w with the log under key (package wakeup): whatever closes
// Wait's channel fires it too (every append, a reset, a recovery, Close), at
// a cost per fire of the waiters registered with this log only, where a
// channel per wait would have every waiter take and select on a new channel
// after every wake-up. Register, then read EndOffset, then wait, and no
// append is missed. It reports false when the log is closed already (no
// fire will come): look now. w.Close unregisters.
func (l *Log) Watch(w *wakeup.Waiter, key int) bool {
	w.Watch(&l.watchers, key)
	// Close sets closed before it fires: a registration it missed sees it.
	return !l.closed.Load()
}
