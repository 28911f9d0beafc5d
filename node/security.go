package node

import "github.com/weir-broker/weir/core/coord"

// CoordStore returns the node's coordination store (the file store on one
// node, ZooKeeper in a cluster), for the broker's parts that keep their own
// state there and watch it: the SCRAM credentials (core/credentials). Callers
// must not close it.
func (n *Node) CoordStore() coord.Store { return n.store }
