package node

import "github.com/weir-broker/weir/core/coord"

// CoordStore returns the broker's session on the coordination store, for
// what lives there beside the cluster state and is not the node's to decide:
// the ACLs (core/acl/aclstore), which the transport's authorizer reads and
// watches. Valid once Open has returned; closed by Close.
func (n *Node) CoordStore() coord.Store { return n.store }
