package layout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/weir-broker/weir/core/coord"
)

// ShuttingDownPath holds one ephemeral child per broker in controlled
// shutdown, /weir/controlled_shutdown/<id>: weir's stand-in for Kafka's
// ControlledShutdown request to the controller, which in weir's design
// hears only from the store. The broker creates it before it stops and the
// controller, watching the children, moves the broker's leaderships away
// (core/controller's SetShuttingDown); the node goes with the broker's
// session.
const ShuttingDownPath = "/weir/controlled_shutdown"

// AnnounceShutdown creates broker id's node under ShuttingDownPath (and
// the parents when missing), owned by the store's session. An existing
// node of the same session counts as success.
func AnnounceShutdown(ctx context.Context, s coord.Store, id int32) error {
	path := ShuttingDownPath + "/" + strconv.FormatInt(int64(id), 10)
	if err := createOwnEphemeral(ctx, s, path); err != nil {
		return fmt.Errorf("layout: announce the shutdown of broker %d: %w", id, err)
	}
	return nil
}

// createOwnEphemeral creates an empty ephemeral node at path (and its
// parents when missing), owned by the store's session; one that exists
// already, owned by the same session, counts as created (a retry after an
// unknown outcome).
func createOwnEphemeral(ctx context.Context, s coord.Store, path string) error {
	err := coord.CreateAll(ctx, s, path, nil, coord.Ephemeral)
	if errors.Is(err, coord.ErrNodeExists) {
		_, st, gerr := s.Get(ctx, path)
		if gerr == nil && st.EphemeralOwner == s.Session().ID {
			return nil
		}
	}
	return err
}

// ReadShuttingDown returns the brokers in controlled shutdown, sorted, and
// a watch on the list. Children that are not broker ids are errors naming
// the path.
func ReadShuttingDown(ctx context.Context, s coord.Store) ([]int32, <-chan coord.Event, error) {
	if err := coord.CreateAll(ctx, s, ShuttingDownPath, nil, coord.Persistent); err != nil && !errors.Is(err, coord.ErrNodeExists) {
		return nil, nil, fmt.Errorf("layout: %s: %w", ShuttingDownPath, err)
	}
	names, _, watch, err := s.ChildrenW(ctx, ShuttingDownPath)
	if err != nil {
		return nil, nil, fmt.Errorf("layout: %s: %w", ShuttingDownPath, err)
	}
	var ids []int32
	for _, n := range names {
		id, err := strconv.ParseInt(n, 10, 32)
		if err != nil || id < 0 || strconv.FormatInt(id, 10) != n {
			return nil, watch, fmt.Errorf("%w: %s/%s is not a broker id", ErrMalformed, ShuttingDownPath, n)
		}
		ids = append(ids, int32(id))
	}
	slices.Sort(ids)
	return ids, watch, nil
}
