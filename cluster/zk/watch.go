package zk

import (
	gozk "github.com/go-zookeeper/zk"

	"github.com/weir-broker/weir/core/coord"
)

// forward turns one of go-zookeeper's one-shot watch channels into a
// coord one: one Event with the caller's path (not the chrooted one), then
// closed. One goroutine per live watch: go-zookeeper's channels cannot be
// translated without one. When the store closes first, the watch fires
// EventNotWatching with ErrClosed.
//
// go-zookeeper fires its watches with EventNotWatching in two places only:
// when it reconnects and the server says the session expired (ErrSessionExpired,
// before it creates the new session, so no watch of the old session
// survives into the new one) and when its loop ends after Close
// (ErrClosing). A lost connection fires nothing; the watches are re-set
// on the next connection of the same session (setWatches, with the last
// zxid seen, so changes made meanwhile still fire).
func (s *Store) forward(path string, ch <-chan gozk.Event) <-chan coord.Event {
	out := make(chan coord.Event, 1)
	closed := coord.Event{Type: coord.EventNotWatching, Path: path, Err: coord.ErrClosed}
	// Close marks the store closed under s.mu before it waits for the
	// forwarders, so no Add can race with its Wait.
	s.mu.Lock()
	if s.isClosed() {
		s.mu.Unlock()
		out <- closed
		close(out)
		return out
	}
	s.watches.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.watches.Done()
		defer close(out)
		select {
		case ev, ok := <-ch:
			if !ok || s.isClosed() {
				// An event that arrives once Close has begun (the server
				// deletes the session's ephemerals while Close waits for
				// its reply) is not passed on: after Close, every watch
				// fires not-watching, as coord's Close promises.
				out <- closed
				return
			}
			out <- toEvent(path, ev)
		case <-s.done:
			out <- closed
		}
	}()
	return out
}

func toEvent(path string, ev gozk.Event) coord.Event {
	switch ev.Type {
	case gozk.EventNodeCreated:
		return coord.Event{Type: coord.EventNodeCreated, Path: path}
	case gozk.EventNodeDeleted:
		return coord.Event{Type: coord.EventNodeDeleted, Path: path}
	case gozk.EventNodeDataChanged:
		return coord.Event{Type: coord.EventNodeDataChanged, Path: path}
	case gozk.EventNodeChildrenChanged:
		return coord.Event{Type: coord.EventNodeChildrenChanged, Path: path}
	}
	return coord.Event{Type: coord.EventNotWatching, Path: path, Err: eventErr(ev.Err)}
}
