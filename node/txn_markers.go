package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-broker/weir/core/logs"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// errNoMarkers: this build cannot write transaction markers yet.
//
// (helper txncoord: a stub of helper txndata's writeTxnMarkers, with its
// signature; txndata's file replaces this one at the merge.)
var errNoMarkers = errors.New("node: transaction markers cannot be written yet")

// writeTxnMarkers writes the markers of one transaction to every partition
// listed, returning one error per partition (nil: done).
func (n *Node) writeTxnMarkers(ctx context.Context, m logs.Marker, parts []TopicPartition) []error {
	errs := make([]error, len(parts))
	for i, p := range parts {
		errs[i] = fmt.Errorf("%w: %s-%d", errNoMarkers, p.Topic, p.Partition)
	}
	return errs
}
