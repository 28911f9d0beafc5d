package transport

// AlterConfigs: v0-v2.
//
// v1 is v0 (throttling moved); v2 is flexible. Kafka's legacy alter: each
// resource's configs are replaced whole by those given (keys left out go
// back to their defaults). TOPIC resources write /config/topics/<t>; BROKER
// resources the dynamic broker defaults ("" for every broker, an id for
// one), in Kafka's broker names (log.retention.ms). ValidateOnly checks
// everything and writes nothing. Each resource answers on its own: a bad
// value fails its resource with INVALID_CONFIG naming the key and value.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

func handleAlterConfigs(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	resp.Resources = make([]kmsg.AlterConfigsResponseResource, len(req.Resources))
	for i, rr := range req.Resources {
		res := &resp.Resources[i]
		res.Default()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		changes := make([]node.ConfigChange, len(rr.Configs))
		for j, c := range rr.Configs {
			changes[j] = node.ConfigChange{Name: c.Name, Op: node.ConfigSet, Value: c.Value}
		}
		err := alterConfigs(ctx, s, rr.ResourceType, rr.ResourceName, changes, true, req.ValidateOnly)
		res.ErrorCode, res.ErrorMessage = s.code(err), errorMessage(err)
	}
	return resp, nil
}

// alterConfigs alters one resource, for both alter APIs.
func alterConfigs(ctx context.Context, s *Server, typ kmsg.ConfigResourceType, name string, changes []node.ConfigChange,
	replace, validateOnly bool) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		return s.node.AlterTopicConfigs(ctx, name, changes, replace, validateOnly)
	case kmsg.ConfigResourceTypeBroker:
		return s.node.AlterBrokerConfigs(ctx, name, changes, replace, validateOnly)
	}
	return fmt.Errorf("%w: %v %q", errUnsupportedResource, typ, name)
}
