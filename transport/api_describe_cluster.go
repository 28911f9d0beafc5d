package transport

// DescribeCluster: v0-v1.
//
// The live brokers, the controller and the cluster id, as Metadata has
// them (the Java admin's describeCluster asks this; kadm's BrokerMetadata
// asks Metadata). v1 added the endpoint type: only brokers (1) are described;
// asking for controllers (2) is UNSUPPORTED_ENDPOINT_TYPE, as a ZooKeeper-mode
// Kafka answers. Cluster authorized operations are not computed (there is
// no ACL): INT32_MIN, "not requested or unknown".

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeCluster(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterAuthorizedOperations = math.MinInt32
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "only brokers (endpoint type 1) are described"
		resp.ErrorMessage = &msg
		return resp, nil
	}
	resp.EndpointType = 1
	resp.ClusterID = s.node.ClusterID()
	resp.ControllerID = s.node.ControllerID()
	brokers, _ := r.c.brokersOn() // listener_advertise.go
	for _, b := range brokers {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.ID, b.Host, b.Port
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil
}
