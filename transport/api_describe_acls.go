package transport

// DescribeAcls: v0-v3.
//
// v1 added the pattern type (v0 filters are LITERAL, kmsg's default); v2
// made it flexible; v3 added the User resource type, which weir's ACLs do
// not have (INVALID_REQUEST, as for any filter Kafka would reject). Needs
// Describe on the cluster (authorize_apis.go). Without an authorizer the
// answer is SECURITY_DISABLED, as Kafka's. The bindings come from the
// broker's current snapshot of the ACLs (see authorize.go), grouped by
// resource pattern.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/acl"
)

func handleDescribeACLs(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if s.acls == nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr("no authorizer is configured on the broker")
		return resp, nil
	}
	f := acl.Filter{Type: acl.ResourceType(req.ResourceType), Pattern: acl.PatternType(req.ResourcePatternType),
		Name: req.ResourceName, Principal: req.Principal, Host: req.Host,
		Operation: acl.Operation(req.Operation), Permission: acl.Permission(req.PermissionType)}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		return resp, nil
	}
	var cur *kmsg.DescribeACLsResponseResource
	for _, b := range s.acls.cur.Load().ACLs().Select(f) {
		p := b.Pattern
		if cur == nil || cur.ResourceName != p.Name || acl.ResourceType(cur.ResourceType) != p.Type ||
			acl.PatternType(cur.ResourcePatternType) != p.Pattern {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName = kmsg.ACLResourceType(p.Type), p.Name
			res.ResourcePatternType = kmsg.ACLResourcePatternType(p.Pattern)
			resp.Resources = append(resp.Resources, res)
			cur = &resp.Resources[len(resp.Resources)-1]
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = b.Entry.Principal, b.Entry.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(b.Entry.Operation), kmsg.ACLPermissionType(b.Entry.Permission)
		cur.ACLs = append(cur.ACLs, e)
	}
	return resp, nil
}
