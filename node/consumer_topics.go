package node

import (
	"github.com/weir-broker/weir/core/groups/assignor"
)

// consumerTopics is the topic metadata KIP-848 consumer groups assign from:
// the current cluster image, read at every call (topics being deleted do
// not exist for them).
type consumerTopics struct{ n *Node }

func (c consumerTopics) Topic(name string) (assignor.Topic, bool) {
	im, _ := c.n.image.load()
	t := im.Topics[name]
	if t == nil || t.Deleting {
		return assignor.Topic{}, false
	}
	return assignor.Topic{ID: t.ID, Name: t.Name, Partitions: int32(len(t.Assignment))}, true
}

func (c consumerTopics) Names() []string {
	im, _ := c.n.image.load()
	out := make([]string, 0, len(im.Topics))
	for _, t := range im.SortedTopics() {
		if !t.Deleting {
			out = append(out, t.Name)
		}
	}
	return out
}
