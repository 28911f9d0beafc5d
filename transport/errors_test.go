package transport

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/node"
	"github.com/weir-broker/weir/transport/fetchsession"
)

func TestErrorTable(t *testing.T) {
	cases := []struct {
		err  error
		want *kerr.Error
	}{
		{record.ErrBadCRC, kerr.CorruptMessage},
		{record.ErrShort, kerr.CorruptMessage},
		{partlog.ErrBatchTooLarge, kerr.MessageTooLarge},
		{partlog.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{partlog.ErrFailed, kerr.KafkaStorageError},
		{partlog.ErrClosed, kerr.NotLeaderForPartition},
		{node.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
		{node.ErrUnknownPartition, kerr.UnknownTopicOrPartition},
		{node.ErrTopicExists, kerr.TopicAlreadyExists},
		{logs.ErrInvalidTopic, kerr.InvalidTopicException},
		{node.ErrInvalidPartitions, kerr.InvalidPartitions},
		{topicconfig.ErrInvalidConfig, kerr.InvalidConfig},
		{producers.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
		{producers.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{producers.ErrUnknownProducerID, kerr.UnknownProducerID},
		{producers.ErrDuplicateSequence, kerr.DuplicateSequenceNumber},
		{producers.ErrInvalidTxnState, kerr.InvalidTxnState},
		{producers.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
		{logs.ErrControlBatch, kerr.InvalidRecord},
		{logs.ErrTransactionalWithoutProducer, kerr.InvalidRecord},
		{node.ErrClosed, kerr.NotLeaderForPartition},
		{node.ErrNotLeader, kerr.NotLeaderForPartition},
		{node.ErrLeaderNotAvailable, kerr.LeaderNotAvailable},
		{node.ErrNotCoordinator, kerr.NotCoordinator},
		{node.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
		{node.ErrWriteToInternalTopic, kerr.InvalidTopicException},
		{groups.ErrUnknownMemberID, kerr.UnknownMemberID},
		{groups.ErrIllegalGeneration, kerr.IllegalGeneration},
		{groups.ErrRebalanceInProgress, kerr.RebalanceInProgress},
		{groups.ErrMemberIDRequired, kerr.MemberIDRequired},
		{groups.ErrInconsistentProtocol, kerr.InconsistentGroupProtocol},
		{groups.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
		{groups.ErrGroupIDNotFound, kerr.GroupIDNotFound},
		{groups.ErrNotEmpty, kerr.NonEmptyGroup},
		{groups.ErrInvalidGroupID, kerr.InvalidGroupID},
		{groups.ErrFencedInstanceID, kerr.FencedInstanceID},
		{groups.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
		{groups.ErrOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge},
		{groups.ErrInvalidCommitSize, kerr.InvalidCommitOffsetSize},
		{node.ErrInvalidAcks, kerr.InvalidRequiredAcks},
		{node.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
		{node.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
		{node.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
		{node.ErrUnknownTopicID, kerr.UnknownTopicID},
		{node.ErrInvalidCoordinatorType, kerr.InvalidRequest},
		{fetchsession.ErrSessionNotFound, kerr.FetchSessionIDNotFound},
		{fetchsession.ErrInvalidEpoch, kerr.InvalidFetchSessionEpoch},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
	}
	for _, c := range cases {
		wrapped := fmt.Errorf("somewhere: %w", fmt.Errorf("deeper: %w", c.err))
		if got := errorCode(wrapped); got != c.want.Code {
			t.Errorf("%v: code %d, want %d (%s)", c.err, got, c.want.Code, c.want.Message)
		}
	}
	if got := errorCode(nil); got != 0 {
		t.Errorf("nil: code %d", got)
	}
	if got := errorCode(errors.New("something else")); got != kerr.UnknownServerError.Code {
		t.Errorf("unknown error: code %d", got)
	}
}

// Group errors reach clients through the table.
func TestGroupErrorsOnTheWire(t *testing.T) {
	b := startBroker(t)
	b.coord(t) // loaded: a group request is answered COORDINATOR_LOAD_IN_PROGRESS before anything else
	rc := b.dial(t)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType = 5, "g", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 1, 1000 // below the minimum
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if resp := rc.do(join).(*kmsg.JoinGroupResponse); resp.ErrorCode != kerr.InvalidSessionTimeout.Code || resp.Generation != -1 {
		t.Fatalf("JoinGroup: error %d generation %d", resp.ErrorCode, resp.Generation)
	}
	join.SessionTimeoutMillis = 10_000
	resp := rc.do(join).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode != kerr.MemberIDRequired.Code || resp.MemberID == "" {
		t.Fatalf("JoinGroup: error %d member %q", resp.ErrorCode, resp.MemberID)
	}
	join.MemberID = resp.MemberID
	resp = rc.do(join).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode != 0 || resp.Generation < 1 || resp.LeaderID != join.MemberID || len(resp.Members) != 1 {
		t.Fatalf("JoinGroup with member ID: %+v", resp)
	}
	hb := &kmsg.HeartbeatRequest{Version: 3, Group: "g", MemberID: join.MemberID, Generation: resp.Generation + 5}
	if r := rc.do(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("Heartbeat with a wrong generation: error %d", r.ErrorCode)
	}
	sync := &kmsg.SyncGroupRequest{Version: 3, Group: "g", MemberID: join.MemberID, Generation: resp.Generation,
		GroupAssignment: []kmsg.SyncGroupRequestGroupAssignment{{MemberID: join.MemberID, MemberAssignment: []byte("assigned")}}}
	if r := rc.do(sync).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 || string(r.MemberAssignment) != "assigned" {
		t.Fatalf("SyncGroup: error %d assignment %q", r.ErrorCode, r.MemberAssignment)
	}
	hb.Generation = resp.Generation
	if r := rc.do(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("Heartbeat: error %d", r.ErrorCode)
	}
	leave := &kmsg.LeaveGroupRequest{Version: 3, Group: "g", Members: []kmsg.LeaveGroupRequestMember{{MemberID: join.MemberID}, {MemberID: "stranger"}}}
	lr := rc.do(leave).(*kmsg.LeaveGroupResponse)
	if lr.ErrorCode != 0 || lr.Members[0].ErrorCode != 0 || lr.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("LeaveGroup: %+v", lr)
	}
}
