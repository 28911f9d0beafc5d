package transport

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The version cases of the KIP-848 APIs (TestEveryServedVersion): a join
// at each version (v0 with the member id left to the coordinator), then a
// describe of the group they joined.
func init() {
	versionCases[68] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version, req.Group, req.RebalanceTimeoutMillis = v, "kip848", 30000
			if v > 0 {
				req.MemberID = fmt.Sprintf("member-v%d", v)
			}
			req.SubscribedTopicNames = []string{"t"}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.ConsumerGroupHeartbeatResponse)
			if resp.ErrorCode == 0 && (resp.MemberID == nil || *resp.MemberID == "" || resp.MemberEpoch <= 0 ||
				resp.HeartbeatIntervalMillis <= 0 || resp.Assignment == nil) {
				return -100
			}
			return resp.ErrorCode
		},
	}
	versionCases[69] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrConsumerGroupDescribeRequest()
			req.Version, req.Groups = v, []string{"kip848", "never-seen"}
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.ConsumerGroupDescribeResponse)
			if len(resp.Groups) != 2 || resp.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
				return -100
			}
			g := resp.Groups[0]
			if g.ErrorCode == 0 && (len(g.Members) == 0 || g.Epoch == 0 || g.AssignorName != "uniform") {
				return -101
			}
			return g.ErrorCode
		},
	}
}
