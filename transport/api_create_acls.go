package transport

// CreateAcls: v0-v3.
//
// v1 added the pattern type (v0 creations are LITERAL); v2 made it
// flexible; v3 added the User resource type (INVALID_REQUEST here). Needs
// Alter on the cluster (authorize_apis.go); SECURITY_DISABLED without an
// authorizer. Each creation is checked as Kafka checks it (acl.Binding's
// Validate: LITERAL or PREFIXED, "kafka-cluster" for the cluster, a
// principal "Type:name") and written to the coordination store
// (core/acl/aclstore) on its own, so one bad creation fails alone; the
// broker then re-reads the ACLs, so it enforces them before it answers.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/acl"
	"github.com/weir-broker/weir/core/acl/aclstore"
)

func handleCreateACLs(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i, c := range req.Creations {
		res := &resp.Results[i]
		res.Default()
		if s.acls == nil {
			res.ErrorCode, res.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr("no authorizer is configured on the broker")
			continue
		}
		b := acl.Binding{
			Pattern: acl.Pattern{Type: acl.ResourceType(c.ResourceType), Pattern: acl.PatternType(c.ResourcePatternType), Name: c.ResourceName},
			Entry: acl.Entry{Principal: c.Principal, Host: c.Host, Operation: acl.Operation(c.Operation),
				Permission: acl.Permission(c.PermissionType)},
		}
		err := b.Validate()
		if err == nil {
			err = aclstore.Add(ctx, s.node.CoordStore(), []acl.Binding{b})
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = aclErrorCode(s, err), kmsg.StringPtr(err.Error())
		}
	}
	s.reloadACLs(ctx)
	return resp, nil
}

// aclErrorCode: INVALID_REQUEST for what Kafka would refuse, the store's
// errors through the table.
func aclErrorCode(s *Server, err error) int16 {
	if errors.Is(err, acl.ErrInvalid) || errors.Is(err, aclstore.ErrInvalid) {
		return kerr.InvalidRequest.Code
	}
	return s.code(err)
}
