package transport

// IncrementalAlterConfigs: v0-v1.
//
// v1 is flexible. Each config is SET, DELETE (back to the default), APPEND
// or SUBTRACT (list-typed keys only, such as cleanup.policy: items added or
// removed, starting from the default when the key is not set, as Kafka
// does); keys not named stay as they are. Resources, validation and
// ValidateOnly as AlterConfigs (api_alter_configs.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

func handleIncrementalAlterConfigs(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	resp.Resources = make([]kmsg.IncrementalAlterConfigsResponseResource, len(req.Resources))
	for i, rr := range req.Resources {
		res := &resp.Resources[i]
		res.Default()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		changes := make([]node.ConfigChange, len(rr.Configs))
		for j, c := range rr.Configs {
			changes[j] = node.ConfigChange{Name: c.Name, Op: node.ConfigOp(c.Op), Value: c.Value}
		}
		err := alterConfigs(ctx, s, rr.ResourceType, rr.ResourceName, changes, false, req.ValidateOnly)
		res.ErrorCode, res.ErrorMessage = s.code(err), errorMessage(err)
	}
	return resp, nil
}
