package transport

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionCase builds a meaningful request of one API at version v and says
// which error code the answer must carry (checked by errorOf).
type versionCase struct {
	build   func(t testing.TB, v int16) kmsg.Request
	errorOf func(resp kmsg.Response) int16
	want    func(v int16) int16
}

func noError(int16) int16 { return 0 }

// versionCases covers every served API; TestEveryServedVersion fails when
// the registry serves an API missing here, so ApiVersions cannot claim an
// untested range.
var versionCases = map[int16]versionCase{
	23: {
		// Where epoch 0 (the only one of "t") ends: the log end, for the
		// current epoch of a single node.
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.Version = v
			req.ReplicaID = -2
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, -1, 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			return r.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
		},
	},
	0: {
		build: func(t testing.TB, v int16) kmsg.Request { return produceReq(v, -1, "t", 0, batch(t, "v", 2)) },
		errorOf: func(r kmsg.Response) int16 {
			return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
		},
		// v0-v2 are listed only for librdkafka's sake and refused.
		want: func(v int16) int16 {
			if v < 3 {
				return kerr.UnsupportedForMessageFormat.Code
			}
			return 0
		},
	},
	42: {
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Version, req.Groups = v, []string{"never-seen"}
			return req
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode },
		want:    func(int16) int16 { return kerr.GroupIDNotFound.Code },
	},
	1: {
		build: func(t testing.TB, v int16) kmsg.Request { return fetchReq(v, 0, 1, 1<<20, "t", map[int32]int64{0: 0}) },
		errorOf: func(r kmsg.Response) int16 {
			return r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
		},
	},
	2: {
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrListOffsetsRequest()
			req.Version = v
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp, rp.MaxNumOffsets = -1, 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
		},
	},
	3: {
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = v
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr("t")
			req.Topics = append(req.Topics, mt)
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.MetadataResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || len(resp.Brokers) != 1 {
				return -100
			}
			return resp.Topics[0].ErrorCode
		},
	},
	8: {
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version, req.Group, req.Generation = v, "simple", -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset = int64(v)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		},
	},
	9: {
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Version, req.Group = v, "simple"
			req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
			req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "simple", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.OffsetFetchResponse)
			if resp.Version >= 8 {
				if p := resp.Groups[0].Topics[0].Partitions[0]; p.Offset < 0 {
					return -100
				}
				return resp.Groups[0].ErrorCode
			}
			if p := resp.Topics[0].Partitions[0]; p.Offset < 0 {
				return -100
			}
			return resp.ErrorCode
		},
	},
	28: {
		// A transactional commit without a member (v0-v2 name none), for
		// producer 1000 + v: each its own producer, so every version
		// starts its sequences at 0.
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.Version, req.TransactionalID, req.Group = v, "tx", "txn-simple"
			req.ProducerID, req.ProducerEpoch, req.Generation = 1000+int64(v), 0, -1
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Offset = int64(v)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		},
	},
	10: {
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorKey, req.CoordinatorKeys = v, "g", []string{"g", "h"}
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.FindCoordinatorResponse)
			if resp.Version >= 4 {
				if len(resp.Coordinators) != 2 || resp.Coordinators[1].Port == 0 {
					return -100
				}
				return resp.Coordinators[0].ErrorCode
			}
			if resp.Port == 0 {
				return -100
			}
			return resp.ErrorCode
		},
	},
	11: {
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version, req.Group, req.ProtocolType = v, fmt.Sprintf("join-v%d", v), "consumer"
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10_000, 10_000
			req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.JoinGroupResponse)
			if resp.MemberID == "" {
				return -100
			}
			return resp.ErrorCode
		},
		want: func(v int16) int16 {
			if v >= 4 {
				return kerr.MemberIDRequired.Code
			}
			return 0
		},
	},
	12: {
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.HeartbeatRequest{Version: v, Group: "none", MemberID: "m", Generation: 1}
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode },
		want:    func(int16) int16 { return kerr.UnknownMemberID.Code },
	},
	13: {
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.LeaveGroupRequest{Version: v, Group: "none", MemberID: "m", Members: []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}}
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.LeaveGroupResponse)
			if resp.Version >= 3 {
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				return resp.Members[0].ErrorCode
			}
			return resp.ErrorCode
		},
		want: func(int16) int16 { return kerr.UnknownMemberID.Code },
	},
	14: {
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.SyncGroupRequest{Version: v, Group: "none", MemberID: "m", Generation: 1}
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode },
		want:    func(int16) int16 { return kerr.UnknownMemberID.Code },
	},
	15: {
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.DescribeGroupsRequest{Version: v, Groups: []string{"simple"}}
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode },
	},
	16: {
		build:   func(t testing.TB, v int16) kmsg.Request { return &kmsg.ListGroupsRequest{Version: v} },
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.ListGroupsResponse).ErrorCode },
	},
	18: {
		build: func(t testing.TB, v int16) kmsg.Request { return apiVersionsReq(v) },
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.ApiVersionsResponse)
			if len(resp.ApiKeys) != len(apis) {
				return -100
			}
			return resp.ErrorCode
		},
	},
	19: {
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version, req.TimeoutMillis = v, 5000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("created-v%d", v), 2, 1
			rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("3600000")}}
			req.Topics = append(req.Topics, rt)
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.CreateTopicsResponse)
			st := resp.Topics[0]
			if resp.Version >= 5 && (st.NumPartitions != 2 || len(st.Configs) == 0) {
				return -100
			}
			if resp.Version >= 7 && st.TopicID == [16]byte{} {
				return -100
			}
			return st.ErrorCode
		},
	},
	20: {
		build: func(t testing.TB, v int16) kmsg.Request {
			name := fmt.Sprintf("created-v%d", min(v, 7))
			return &kmsg.DeleteTopicsRequest{Version: v, TimeoutMillis: 5000, TopicNames: []string{name},
				Topics: []kmsg.DeleteTopicsRequestTopic{{Topic: &name}}}
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode },
	},
	22: {
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.InitProducerIDRequest{Version: v, TransactionTimeoutMillis: 60_000, ProducerID: -1, ProducerEpoch: -1}
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.InitProducerIDResponse)
			if resp.ProducerID < 0 {
				return -100
			}
			return resp.ErrorCode
		},
	},
}

// Every version of every API that ApiVersions reports is served: a real
// request at that version gets a response that kmsg decodes at that version,
// with the expected outcome.
func TestEveryServedVersion(t *testing.T) {
	b := startBroker(t, withoutTxnVerification) // TxnOffsetCommit of a made-up producer
	b.createTopic(t, "t", 1, nil)
	b.coord(t) // the committed offsets loaded, so the group APIs answer at once
	// helper txncoord: likewise the transaction log.
	b.txnLoaded(t)
	rc := b.dial(t)
	// Order matters: produce and commit before fetching them, create before
	// delete.
	for _, a := range apis {
		c, ok := versionCases[a.key]
		if !ok {
			t.Errorf("%s (key %d) is served but has no version test", kmsg.NameForKey(a.key), a.key)
			continue
		}
		want := c.want
		if want == nil {
			want = noError
		}
		for v := a.min; v <= a.max; v++ {
			resp := rc.do(c.build(t, v))
			if got := c.errorOf(resp); got != want(v) {
				t.Errorf("%s v%d: outcome %d, want %d", kmsg.NameForKey(a.key), v, got, want(v))
			}
		}
	}
	for key := range versionCases {
		if lookupAPI(key) == nil {
			t.Errorf("version test for key %d, which is not served", key)
		}
	}
}
