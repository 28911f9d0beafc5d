package zk

import (
	"errors"
	"fmt"

	gozk "github.com/go-zookeeper/zk"

	"github.com/weir-broker/weir/core/coord"
)

// ErrUnsupported: a request coord allows but this store cannot serve (an
// unknown CreateMode or Op type).
var ErrUnsupported = errors.New("zk: unsupported")

// errAbandoned marks a request given up on because its ctx ended; the
// request itself may still be applied.
type errAbandoned struct{ ctxErr error }

func (e errAbandoned) Error() string { return "abandoned: " + e.ctxErr.Error() }
func (e errAbandoned) Unwrap() error { return e.ctxErr }

// errStoreClosed: Close was called before the request finished.
var errStoreClosed = errors.New("store closed")

// sentinels maps go-zookeeper's errors whose meaning is certain to coord's.
var sentinels = map[error]error{
	gozk.ErrNoNode:                  coord.ErrNoNode,
	gozk.ErrNodeExists:              coord.ErrNodeExists,
	gozk.ErrBadVersion:              coord.ErrBadVersion,
	gozk.ErrNotEmpty:                coord.ErrNotEmpty,
	gozk.ErrNoChildrenForEphemerals: coord.ErrNoChildrenForEphemerals,
	gozk.ErrInvalidPath:             coord.ErrInvalidPath,
	// The server's answer to a path it will not take (for example a create
	// under /zookeeper, or a delete of "/").
	gozk.ErrBadArguments: coord.ErrInvalidPath,
}

// definite are go-zookeeper errors with a certain outcome (nothing applied)
// that coord has no sentinel for: they are passed on wrapped.
var definite = []error{
	gozk.ErrNoAuth, gozk.ErrInvalidACL, gozk.ErrAuthFailed, gozk.ErrInvalidFlags,
	gozk.ErrReconfigDisabled, gozk.ErrAPIError,
}

// mapErr turns a go-zookeeper error from request op on path (the caller's
// path, not the chrooted one) into coord's terms. Everything it does not
// know to be definite is ErrConnectionLoss: the connection closed under the
// request (ErrConnectionClosed), no server could be reached (ErrNoServer),
// the session moved, a reply that would not decode, a write that failed
// half-way. Claiming "outcome unknown" is always safe: the caller reads back.
func (s *Store) mapErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var ab errAbandoned
	switch {
	case errors.As(err, &ab):
		return fmt.Errorf("zk: %s %s: %w (%w)", op, path, coord.ErrConnectionLoss, ab.ctxErr)
	case errors.Is(err, errStoreClosed), errors.Is(err, gozk.ErrClosing) && s.isClosed():
		return fmt.Errorf("zk: %s %s: %w", op, path, coord.ErrClosed)
	}
	if errors.Is(err, gozk.ErrSessionExpired) {
		// go-zookeeper fails the requests in flight on a connection with
		// ErrSessionExpired when the reconnect finds the session gone: they
		// may have been applied before it ended.
		return fmt.Errorf("zk: %s %s: %w: %w", op, path, coord.ErrConnectionLoss, coord.ErrSessionExpired)
	}
	if sentinel, ok := sentinels[err]; ok {
		return fmt.Errorf("zk: %s %s: %w", op, path, sentinel)
	}
	for _, d := range definite {
		if errors.Is(err, d) {
			return fmt.Errorf("zk: %s %s: %w", op, path, err)
		}
	}
	return fmt.Errorf("zk: %s %s: %w: %w", op, path, coord.ErrConnectionLoss, err)
}

// eventErr maps the error of a go-zookeeper EventNotWatching to the bare
// sentinel coord.Event carries.
func eventErr(err error) error {
	if errors.Is(err, gozk.ErrSessionExpired) {
		return coord.ErrSessionExpired
	}
	return coord.ErrClosed
}

// completed reports whether err came from the request itself, so that its
// results may be read (call did not give up on it).
func completed(err error) bool {
	var ab errAbandoned
	return !errors.As(err, &ab) && !errors.Is(err, errStoreClosed)
}
