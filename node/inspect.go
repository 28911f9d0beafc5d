package node

import (
	"fmt"
	"slices"

	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/partlog"
)

// The methods of this file look at what a broker holds, whatever its role,
// for tests and tools (the data path goes through Partition).

// ReplicaLog returns this broker's log of partition index of topic, led or
// followed.
func (n *Node) ReplicaLog(topic string, index int32) (*partlog.Log, error) {
	rp, err := n.replicaOf(topic, index)
	if err != nil {
		return nil, err
	}
	return rp.Log(), nil
}

// ReplicaHighWatermark returns this broker's high watermark of the
// partition, led or followed.
func (n *Node) ReplicaHighWatermark(topic string, index int32) (int64, error) {
	rp, err := n.replicaOf(topic, index)
	if err != nil {
		return -1, err
	}
	return rp.highWatermark(), nil
}

// LeaderOf returns the partition's leader as this broker's image has it
// (-1: none, or no such partition).
func (n *Node) LeaderOf(topic string, index int32) int32 {
	im, _ := n.image.load()
	t := im.Topics[topic]
	if t == nil || index < 0 || int(index) >= len(t.Assignment) {
		return meta.NoLeader
	}
	return im.View(t, int(index)).Leader
}

// ISROf returns the partition's ISR as this broker's image has it (nil:
// no state, or no such partition).
func (n *Node) ISROf(topic string, index int32) []int32 {
	im, _ := n.image.load()
	t := im.Topics[topic]
	if t == nil || index < 0 || int(index) >= len(t.States) || t.States[index] == nil {
		return nil
	}
	return slices.Clone(t.States[index].ISR)
}

func (n *Node) replicaOf(topic string, index int32) (*replicated, error) {
	im, _ := n.image.load()
	t := im.Topics[topic]
	if t == nil {
		return nil, unknownTopic(topic)
	}
	rp, ok := n.localPartition(topic, t.ID, index)
	if !ok {
		return nil, fmt.Errorf("%w: broker %d holds no replica of %s-%d", ErrUnknownPartition, n.cfg.NodeID, topic, index)
	}
	return rp, nil
}
