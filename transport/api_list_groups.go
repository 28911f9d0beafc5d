package transport

// ListGroups: v0-v5.
//
// v3 made it flexible; v4 filters by state (case-insensitive, as Kafka) and
// answers each group's state; v5 filters by group type ("classic" or
// "consumer" for KIP-848 groups, case-insensitive) and answers each group's.

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleListGroups(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.Groups = []kmsg.ListGroupsResponseGroup{}
	for _, l := range s.node.ListGroups() {
		if len(req.StatesFilter) > 0 && !containsFold(req.StatesFilter, l.State) {
			continue
		}
		typ := l.Type
		if typ == "" {
			typ = "classic"
		}
		if len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, typ) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.Group, l.ProtocolType, l.State, typ
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
