package zk

import (
	"context"
	"errors"
	"fmt"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/weir-broker/weir/core/coord"
)

// createEphemeral is Create for Ephemeral nodes, with Kafka's
// "CheckedEphemeral" resolution of unknown outcomes (KafkaZkClient, 3.8):
// when the connection closes under the create (or its reply would not
// decode, or the session expired with it in flight), the node may or may
// not exist, and if it exists it may be ours. So it reads the node back:
//
//   - owned by the current session: ours, success;
//   - missing: the attempt never happened, or its session has expired
//     since (taking the node with it): create again, in the current session;
//   - owned by a session of an earlier attempt that is no longer current:
//     ours, but that session expired and the node is about to go
//     (ErrSessionExpired);
//   - owned by another session: ErrNodeExists.
//
// Only ctx bounds this; when it ends first the error is ErrConnectionLoss
// and OwnsEphemeral answers later. A plain ErrNodeExists on the first
// attempt is returned as it is, even if the node is ours from an earlier
// Create: coord's contract, and OwnsEphemeral tells.
func (s *Store) createEphemeral(ctx context.Context, path, full string, data []byte) error {
	tried := map[int64]bool{}
	uncertain := false
	for {
		before := s.conn.SessionID()
		err := s.call(ctx, func() error {
			_, err := s.conn.Create(full, data, gozk.FlagEphemeral, worldACL)
			return err
		})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, gozk.ErrNodeExists) && !uncertain:
			return s.mapErr("create", path, err)
		case !errors.Is(err, gozk.ErrNodeExists) && !unknownOutcome(err):
			return s.mapErr("create", path, err)
		}
		uncertain = true
		tried[before], tried[s.conn.SessionID()] = true, true
		s.log.Debug("zk: create ephemeral: outcome unknown, reading back", "path", path, "cause", err)
		exists, owner, err := s.readOwner(ctx, path, full)
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		switch cur := s.conn.SessionID(); {
		case owner == cur && cur != 0:
			return nil
		case tried[owner]:
			return fmt.Errorf("zk: create %s: %w: made by this store's session %#x, which expired", path, coord.ErrSessionExpired, owner)
		default:
			return fmt.Errorf("zk: create %s: %w (owned by session %#x)", path, coord.ErrNodeExists, owner)
		}
	}
}

// unknownOutcome reports whether a request that failed with err may have
// been applied and may be retried: the request ran (call did not give up
// on it) and the error is not a definite answer from the server.
func unknownOutcome(err error) bool {
	if !completed(err) {
		return false
	}
	if errors.Is(err, gozk.ErrSessionExpired) {
		return true // flushed from the dead connection: outcome unknown
	}
	if _, ok := sentinels[err]; ok {
		return false
	}
	for _, d := range definite {
		if errors.Is(err, d) {
			return false
		}
	}
	return true
}

// readOwner reads the node's stat, retrying while the connection is down,
// until ctx ends.
func (s *Store) readOwner(ctx context.Context, path, full string) (exists bool, owner int64, err error) {
	backoff := 20 * time.Millisecond
	for {
		var st *gozk.Stat
		err := s.call(ctx, func() (err error) { exists, st, err = s.conn.Exists(full); return err })
		if err == nil {
			if !exists {
				return false, 0, nil
			}
			return true, st.EphemeralOwner, nil
		}
		if !unknownOutcome(err) {
			return false, 0, s.mapErr("create (read back)", path, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, 0, s.mapErr("create (read back)", path, errAbandoned{ctx.Err()})
		case <-s.done:
			t.Stop()
			return false, 0, s.mapErr("create (read back)", path, errStoreClosed)
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// OwnsEphemeral reports whether path is an ephemeral node owned by the
// store's current session: how to settle a Create or Multi that failed with
// ErrConnectionLoss, or to check that a registration is still ours after a
// reconnect.
func (s *Store) OwnsEphemeral(ctx context.Context, path string) (bool, error) {
	ok, st, err := s.Exists(ctx, path)
	if err != nil || !ok {
		return false, err
	}
	sess := s.Session()
	return sess.State == coord.Connected && st.EphemeralOwner != 0 && st.EphemeralOwner == sess.ID, nil
}
