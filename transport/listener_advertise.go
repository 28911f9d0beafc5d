package transport

import (
	"net"
	"strconv"

	"github.com/weir-broker/weir/node"
)

// The responses that name brokers (Metadata, FindCoordinator,
// DescribeCluster) answer each listener with that listener's endpoints, as
// Kafka does: every broker registers all its advertised listeners, and a
// client of listener X is told each broker's listener-X endpoint. A broker
// without a listener of that name is left out (a partition it leads has
// no leader for that listener's clients, a group or transaction it
// coordinates no coordinator), as Kafka's metadata cache leaves it out.

// addrOn returns where the connection's clients reach broker b: this
// broker's own address is its listener's Advertised when set (a transport
// configured without a broker), else its registered endpoint of the
// listener's name, else its node address (this broker always answers for
// itself); another broker's is its endpoint of the listener's name, and ok
// is false when it has none.
func (c *conn) addrOn(b node.Broker) (host string, port int32, ok bool) {
	l := c.listener()
	self := b.ID == c.s.node.ID()
	if self && l.Advertised != "" {
		if h, p, err := net.SplitHostPort(l.Advertised); err == nil {
			if n, err := strconv.ParseInt(p, 10, 32); err == nil {
				return h, int32(n), true
			}
		}
	}
	if e, ok := b.Endpoint(l.Name); ok {
		return e.Host, e.Port, true
	}
	if self {
		return b.Host, b.Port, true
	}
	return "", 0, false
}

// brokersOn returns the live brokers as the connection's listener
// advertises them (Host and Port that listener's), and the ids of the live
// brokers left out for lacking it.
func (c *conn) brokersOn() (brokers []node.Broker, without map[int32]bool) {
	all := c.s.node.Brokers()
	brokers = make([]node.Broker, 0, len(all))
	for _, b := range all {
		host, port, ok := c.addrOn(b)
		if !ok {
			if without == nil {
				without = map[int32]bool{}
			}
			without[b.ID] = true
			continue
		}
		b.Host, b.Port = host, port
		brokers = append(brokers, b)
	}
	return brokers, without
}
