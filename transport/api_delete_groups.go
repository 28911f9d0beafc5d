package transport

// DeleteGroups: v0-v2.
//
// v2 made it flexible. A group can be deleted only when it has no members
// (NON_EMPTY_GROUP otherwise); deleting it drops its committed offsets, which
// is how tools clean up after consumers that used a throw-away group id.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDeleteGroups(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, 0, len(req.Groups))
	for _, g := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = g
		coord, err := s.node.GroupCoordinator(g)
		if err == nil {
			err = coord.Delete(g)
		}
		rg.ErrorCode = s.code(err)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
