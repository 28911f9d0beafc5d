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

// TestConsumerGroupHeartbeatErrors: requests breaking KIP-848's rules get
// the codes Kafka answers, and the connection stays usable.
func TestConsumerGroupHeartbeatErrors(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 2, nil)
	b.coord(t)
	rc := b.dial(t)
	str := func(s string) *string { return &s }
	join := func(mod func(*kmsg.ConsumerGroupHeartbeatRequest)) *kmsg.ConsumerGroupHeartbeatRequest {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis = 1, "errs", "m", 30000
		req.SubscribedTopicNames, req.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		mod(req)
		return req
	}
	// A classic group with a member, for the protocol clash.
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version, jg.Group, jg.MemberID, jg.ProtocolType, jg.SessionTimeoutMillis = 3, "classic", "", "consumer", 10000
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
	if resp := rc.do(jg).(*kmsg.JoinGroupResponse); resp.ErrorCode != 0 {
		t.Fatalf("classic join: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, c := range []struct {
		name string
		mod  func(*kmsg.ConsumerGroupHeartbeatRequest)
		want *kerr.Error
	}{
		{"empty member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest},
		{"epoch -3", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest},
		{"join owning partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: [16]byte{1}, Partitions: []int32{-5}}}
		}, kerr.InvalidRequest},
		{"bad regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = str("((") }, kerr.InvalidRegularExpression},
		{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = str("sticky") }, kerr.UnsupportedAssignor},
		{"unknown member", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 5 }, kerr.UnknownMemberID},
		{"classic group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "classic" }, kerr.GroupIDNotFound},
		{"fenced epoch", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group, r.MemberEpoch = "kept", 9 }, kerr.FencedMemberEpoch},
	} {
		if c.name == "fenced epoch" {
			if resp := rc.do(join(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "kept" })).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != 0 {
				t.Fatalf("join: %v", kerr.ErrorForCode(resp.ErrorCode))
			}
		}
		resp := rc.do(join(c.mod)).(*kmsg.ConsumerGroupHeartbeatResponse)
		if resp.ErrorCode != c.want.Code || resp.ErrorMessage == nil {
			t.Errorf("%s: %v (%v), want %v", c.name, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, c.want)
		}
	}
	b.checkAlive(t)
}
