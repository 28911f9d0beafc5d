package layout

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/weir-broker/weir/core/coord"
)

// A topic's deletion, in weir:
//
//  1. any broker (the DeleteTopics handler) calls RequestDeletion: the
//     empty node /admin/delete_topics/<t> (Kafka's);
//  2. the controller sees it (a watch on /admin/delete_topics), tells the
//     replicas, and watches DeletionAcks;
//  3. each replica broker removes its logs and calls AckDeletion: the empty
//     node /admin/delete_topics/<t>/<broker> (weir's own; Kafka's
//     controller tracks this in memory, from StopReplica answers);
//  4. once every replica acked, the controller calls DeleteTopic.

// RequestDeletion asks for a topic's deletion: it creates the empty
// /admin/delete_topics/<t> (and its parents). A request that exists
// already is success.
func RequestDeletion(ctx context.Context, s coord.Store, topic string) error {
	if err := checkTopicRef(topic); err != nil {
		return fmt.Errorf("layout: request deletion of %q: %w", topic, err)
	}
	err := coord.CreateAll(ctx, s, DeleteTopicPath(topic), nil, coord.Persistent)
	if err != nil && !errors.Is(err, coord.ErrNodeExists) {
		return fmt.Errorf("layout: request deletion of %q: %w", topic, err)
	}
	return nil
}

// AckDeletion records that broker removed its logs of topic: the empty
// /admin/delete_topics/<t>/<broker>. Acking twice is success. When the
// deletion request is gone (the deletion is over) the error wraps
// coord.ErrNoNode: an ack never re-creates a request.
func AckDeletion(ctx context.Context, s coord.Store, topic string, broker int32) error {
	fail := func(err error) error { return fmt.Errorf("layout: ack deletion of %q by %d: %w", topic, broker, err) }
	if err := checkTopicRef(topic); err != nil {
		return fail(err)
	}
	if broker < 0 {
		return fail(fmt.Errorf("%w: broker id %d < 0", ErrInvalid, broker))
	}
	err := s.Create(ctx, DeletionAckPath(topic, broker), nil, coord.Persistent)
	if err != nil && !errors.Is(err, coord.ErrNodeExists) {
		return fail(err)
	}
	return nil
}

// DeletionAcks returns the brokers that acked topic's deletion, in
// ascending order (the child names are sorted as strings; ids are
// returned sorted as numbers), and a watch on the request's children. A
// request that does not exist is coord.ErrNoNode (wrapped); a child whose
// name is not a broker id is ErrMalformed.
func DeletionAcks(ctx context.Context, s coord.Store, topic string) ([]int32, <-chan coord.Event, error) {
	fail := func(err error) ([]int32, <-chan coord.Event, error) {
		return nil, nil, fmt.Errorf("layout: deletion acks of %q: %w", topic, err)
	}
	if err := checkTopicRef(topic); err != nil {
		return fail(err)
	}
	path := DeleteTopicPath(topic)
	names, _, watch, err := s.ChildrenW(ctx, path)
	if err != nil {
		return fail(err)
	}
	acks := make([]int32, 0, len(names))
	for _, name := range names {
		id, ok := parseID(name)
		if !ok {
			return fail(malformed(coord.Join(path, name), "the node's name is not a broker id"))
		}
		acks = append(acks, id)
	}
	slices.Sort(acks)
	return acks, watch, nil
}

// DeleteTopic removes every trace of topic as controller c, in one fenced
// Multi: the nodes under /brokers/topics/<t> (partition states, partition
// nodes, partitions) and the node itself, /config/topics/<t>, the acks and
// the deletion request, whichever exist. It reads them first; when they
// change before the Multi applies (a late ack), it reads again. A failed
// fence is ErrFenced (nothing was deleted). Nothing left to delete is
// success (once the fence holds). One Multi is one ZooKeeper request,
// bounded by the server's jute.maxbuffer (1 MiB by default): tens of
// thousands of partitions.
func DeleteTopic(ctx context.Context, s coord.Store, c Controllership, topic string) error {
	fail := func(err error) error { return fmt.Errorf("layout: delete topic %q: %w", topic, err) }
	if err := checkTopicRef(topic); err != nil {
		return fail(err)
	}
	for {
		ops := []coord.Op{c.Fence()}
		for _, root := range []string{TopicPath(topic), ConfigTopicPath(topic), DeleteTopicPath(topic)} {
			paths, err := subtree(ctx, s, root)
			if err != nil {
				return fail(err)
			}
			for _, p := range paths {
				ops = append(ops, &coord.DeleteOp{Path: p, Version: coord.AnyVersion})
			}
		}
		_, err := s.Multi(ctx, ops...)
		var me *coord.MultiError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &me) && me.Index > 0 && (errors.Is(err, coord.ErrNotEmpty) || errors.Is(err, coord.ErrNoNode)):
			continue // changed since it was read
		default:
			return fail(fenced(c, err))
		}
	}
}

// subtree lists path and every node below it, children before their
// parent (the order to delete them in); nothing when path does not exist.
func subtree(ctx context.Context, s coord.Store, path string) ([]string, error) {
	names, _, err := s.Children(ctx, path)
	if errors.Is(err, coord.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range names {
		below, err := subtree(ctx, s, coord.Join(path, name))
		if err != nil {
			return nil, err
		}
		out = append(out, below...)
	}
	return append(out, path), nil
}

// DropOrphanDeletion removes, as controller c, the deletion request of a
// topic that does not exist (and its acks): a broker with a stale picture
// may ask to delete a topic deleted already, and a request left pending
// would refuse the name to CreateTopic forever (Kafka's controller drops
// such requests too). One fenced Multi that creates and deletes the topic's
// node first, so that it applies only while the topic does not exist: a
// topic that does is ErrTopicExists (wrapped; nothing was deleted). A failed
// fence is ErrFenced. No request left is success: dropped says whether
// this call removed one.
func DropOrphanDeletion(ctx context.Context, s coord.Store, c Controllership, topic string) (dropped bool, err error) {
	fail := func(err error) (bool, error) {
		return false, fmt.Errorf("layout: drop orphan deletion of %q: %w", topic, err)
	}
	if err := checkTopicRef(topic); err != nil {
		return fail(err)
	}
	if err := coord.EnsurePath(ctx, s, TopicsPath); err != nil {
		return fail(err)
	}
	for {
		paths, err := subtree(ctx, s, DeleteTopicPath(topic))
		if err != nil {
			return fail(err)
		}
		if len(paths) == 0 {
			return false, nil
		}
		ops := []coord.Op{c.Fence(),
			&coord.CreateOp{Path: TopicPath(topic), Mode: coord.Persistent},
			&coord.DeleteOp{Path: TopicPath(topic), Version: coord.AnyVersion}}
		for _, p := range paths {
			ops = append(ops, &coord.DeleteOp{Path: p, Version: coord.AnyVersion})
		}
		_, err = s.Multi(ctx, ops...)
		var me *coord.MultiError
		switch {
		case err == nil:
			return true, nil
		case errors.As(err, &me) && me.Index == 1 && errors.Is(err, coord.ErrNodeExists):
			return fail(fmt.Errorf("%w: %s: %w", ErrTopicExists, TopicPath(topic), err))
		case errors.As(err, &me) && me.Index > 2 && (errors.Is(err, coord.ErrNotEmpty) || errors.Is(err, coord.ErrNoNode)):
			continue // an ack came or the request went meanwhile
		default:
			return fail(fenced(c, err))
		}
	}
}
