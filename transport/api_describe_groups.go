package transport

// DescribeGroups: v0-v5.
//
// v3 added authorized operations (not computed: reported as not asked for),
// v4 instance IDs, v5 made it flexible. An unknown group is described, as in
// Kafka before v6, as state "Dead" with no members and no error.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups"
)

func handleDescribeGroups(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	resp.Groups = make([]kmsg.DescribeGroupsResponseGroup, len(req.Groups))
	for i, name := range req.Groups {
		g := &resp.Groups[i]
		g.Default()
		g.Group = name
		var d groups.Description
		coord, err := s.node.GroupCoordinator(name)
		if err == nil {
			d, err = coord.Describe(name)
		}
		if errors.Is(err, groups.ErrGroupIDNotFound) {
			g.State = "Dead"
			g.Members = []kmsg.DescribeGroupsResponseGroupMember{}
			continue
		}
		if err != nil {
			g.ErrorCode = s.code(err)
			g.Members = []kmsg.DescribeGroupsResponseGroupMember{}
			continue
		}
		g.State, g.ProtocolType, g.Protocol = d.State, d.ProtocolType, d.Protocol
		g.Members = make([]kmsg.DescribeGroupsResponseGroupMember, len(d.Members))
		for j, m := range d.Members {
			gm := &g.Members[j]
			gm.Default()
			gm.MemberID, gm.InstanceID, gm.ClientID, gm.ClientHost = m.MemberID, m.InstanceID, m.ClientID, m.ClientHost
			gm.ProtocolMetadata, gm.MemberAssignment = nonNil(m.Metadata), nonNil(m.Assignment)
		}
	}
	return resp, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
