package transport

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// advertise gives this broker's address as the connection's listener
// advertises it, in the responses that name brokers (Metadata,
// FindCoordinator, DescribeCluster), as Kafka answers each listener with
// that listener's endpoints. A listener without its own Advertised address
// leaves the node's, so the default single listener changes nothing.
//
// Other brokers keep the address they registered: the broker registration
// carries one endpoint today, so in a cluster every broker's clients should
// use the listener whose address the brokers register (the first one).
func (c *conn) advertise(resp kmsg.Response) kmsg.Response {
	l := c.listener()
	if l.Advertised == "" {
		return resp
	}
	host, portS, err := net.SplitHostPort(l.Advertised)
	if err != nil {
		return resp
	}
	p, err := strconv.ParseInt(portS, 10, 32)
	if err != nil {
		return resp
	}
	port := int32(p)
	self := c.s.node.ID()
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			if r.Brokers[i].NodeID == self {
				r.Brokers[i].Host, r.Brokers[i].Port = host, port
			}
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			if r.Brokers[i].NodeID == self {
				r.Brokers[i].Host, r.Brokers[i].Port = host, port
			}
		}
	case *kmsg.FindCoordinatorResponse:
		if r.NodeID == self && r.ErrorCode == 0 && r.Host != "" {
			r.Host, r.Port = host, port
		}
		for i := range r.Coordinators {
			if r.Coordinators[i].NodeID == self && r.Coordinators[i].ErrorCode == 0 {
				r.Coordinators[i].Host, r.Coordinators[i].Port = host, port
			}
		}
	}
	return resp
}
