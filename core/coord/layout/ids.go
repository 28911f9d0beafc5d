package layout

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/weir-broker/weir/core/coord"
)

// AllocateProducerIDs hands broker a fresh block of n producer ids and
// returns its first: Kafka's ZooKeeper-mode ProducerIdManager
// (ZkProducerIdManager.getNewProducerIdBlock). It reads
// /latest_producer_id_block, the last block handed out, and writes the
// next one, [last+1, last+n], by CAS on the node's version, retrying on a
// conflict; the first block is [0, n-1] (the node missing or empty, as
// Kafka creates it). Blocks never overlap, whichever brokers allocate
// concurrently.
//
// ErrConnectionLoss is returned as it is: the block may have been written,
// and a retry allocates another, so ids may be skipped but never handed
// out twice. Kafka's brokers take blocks of 1000.
func AllocateProducerIDs(ctx context.Context, s coord.Store, broker int32, n int64) (first int64, err error) {
	fail := func(err error) (int64, error) {
		return 0, fmt.Errorf("layout: allocate %d producer ids for broker %d: %w", n, broker, err)
	}
	if n < 1 {
		return fail(fmt.Errorf("%w: block size %d < 1", ErrInvalid, n))
	}
	for {
		data, st, err := s.Get(ctx, ProducerIDBlockPath)
		exists := err == nil
		if err != nil && !errors.Is(err, coord.ErrNoNode) {
			return fail(err)
		}
		next := int64(0)
		if len(data) > 0 {
			last, err := DecodeProducerIDBlock(ProducerIDBlockPath, data)
			if err != nil {
				return fail(err)
			}
			if last.Last > math.MaxInt64-n {
				return fail(fmt.Errorf("producer ids exhausted: the last block ends at %d", last.Last))
			}
			next = last.Last + 1
		}
		block := EncodeProducerIDBlock(ProducerIDBlock{Broker: broker, First: next, Last: next + n - 1})
		if exists {
			_, err = s.Set(ctx, ProducerIDBlockPath, block, st.Version)
		} else {
			err = s.Create(ctx, ProducerIDBlockPath, block, coord.Persistent)
		}
		switch {
		case err == nil:
			return next, nil
		case errors.Is(err, coord.ErrBadVersion), errors.Is(err, coord.ErrNodeExists), errors.Is(err, coord.ErrNoNode):
			continue // another broker allocated meanwhile
		default:
			return fail(err)
		}
	}
}

// ClusterID returns the cluster's id, /cluster/id, creating it with
// proposed when it is missing (Kafka's getOrGenerateClusterId): the first
// broker's proposal wins, and every later call returns it.
func ClusterID(ctx context.Context, s coord.Store, proposed string) (string, error) {
	fail := func(err error) (string, error) { return "", fmt.Errorf("layout: cluster id: %w", err) }
	if proposed == "" {
		return fail(fmt.Errorf("%w: empty cluster id", ErrInvalid))
	}
	for {
		data, _, err := s.Get(ctx, ClusterIDPath)
		if err == nil {
			id, err := DecodeClusterID(ClusterIDPath, data)
			if err != nil {
				return fail(err)
			}
			return id, nil
		}
		if !errors.Is(err, coord.ErrNoNode) {
			return fail(err)
		}
		err = coord.CreateAll(ctx, s, ClusterIDPath, EncodeClusterID(proposed), coord.Persistent)
		switch {
		case err == nil:
			return proposed, nil
		case errors.Is(err, coord.ErrNodeExists), errors.Is(err, coord.ErrConnectionLoss):
			continue // read what is there
		default:
			return fail(err)
		}
	}
}
