package transport

// DeleteAcls: v0-v3.
//
// v1 added the pattern type (v0 filters are LITERAL); v2 made it flexible;
// v3 added the User resource type (INVALID_REQUEST here). Needs Alter on
// the cluster (authorize_apis.go); SECURITY_DISABLED without an authorizer.
// Each filter (Kafka's AclBindingFilter, package core/acl) answers the
// bindings it deleted; a binding two filters match is reported under the
// first. The broker re-reads the ACLs before it answers.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/acl"
	"github.com/weir-broker/weir/core/acl/aclstore"
)

func handleDeleteACLs(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	var (
		filters []acl.Filter
		at      []int // the result of each filter in filters
	)
	for i, f := range req.Filters {
		res := &resp.Results[i]
		res.Default()
		if s.acls == nil {
			res.ErrorCode, res.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr("no authorizer is configured on the broker")
			continue
		}
		af := acl.Filter{Type: acl.ResourceType(f.ResourceType), Pattern: acl.PatternType(f.ResourcePatternType),
			Name: f.ResourceName, Principal: f.Principal, Host: f.Host,
			Operation: acl.Operation(f.Operation), Permission: acl.Permission(f.PermissionType)}
		if err := af.Validate(); err != nil {
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		filters, at = append(filters, af), append(at, i)
	}
	if len(filters) == 0 {
		return resp, nil
	}
	removed, err := aclstore.Remove(ctx, s.node.CoordStore(), filters)
	for j, i := range at {
		res := &resp.Results[i]
		if err != nil {
			res.ErrorCode, res.ErrorMessage = aclErrorCode(s, err), kmsg.StringPtr(err.Error())
			continue
		}
		for _, b := range removed[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.Pattern.Type), b.Pattern.Name
			m.ResourcePatternType = kmsg.ACLResourcePatternType(b.Pattern.Pattern)
			m.Principal, m.Host = b.Entry.Principal, b.Entry.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(b.Entry.Operation), kmsg.ACLPermissionType(b.Entry.Permission)
			res.MatchingACLs = append(res.MatchingACLs, m)
		}
	}
	s.reloadACLs(ctx)
	return resp, nil
}
