package transport

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// api is one served Kafka API: its key, the versions served, and its handler.
// Exactly one of handle and raw is set.
type api struct {
	key      int16
	min, max int16
	// handle answers with a message kmsg encodes; a nil response means no
	// response at all (Produce with acks=0).
	handle func(ctx context.Context, s *Server, r *request) (kmsg.Response, error)
	// raw answers with a response written by hand (Fetch, whose record bytes
	// go from the segment file to the socket).
	raw func(ctx context.Context, s *Server, r *request) (rawResponse, error)
}

// apis is the one registry of served APIs: ApiVersions reports exactly these
// ranges, and the dispatcher refuses everything else. Each handler's file
// opens with the versions it serves and why.
var apis = []api{
	{key: 0, min: 0, max: 10, handle: handleProduce},                 // api_produce.go
	{key: 1, min: 4, max: 11, raw: handleFetch},                      // api_fetch.go
	{key: 2, min: 0, max: 7, handle: handleListOffsets},              // api_list_offsets.go
	{key: 3, min: 0, max: 12, handle: handleMetadata},                // api_metadata.go
	{key: 8, min: 0, max: 9, handle: handleOffsetCommit},             // api_offset_commit.go
	{key: 9, min: 0, max: 9, handle: handleOffsetFetch},              // api_offset_fetch.go
	{key: 10, min: 0, max: 4, handle: handleFindCoordinator},         // api_find_coordinator.go
	{key: 11, min: 0, max: 9, handle: handleJoinGroup},               // api_join_group.go
	{key: 12, min: 0, max: 4, handle: handleHeartbeat},               // api_heartbeat.go
	{key: 13, min: 0, max: 5, handle: handleLeaveGroup},              // api_leave_group.go
	{key: 14, min: 0, max: 5, handle: handleSyncGroup},               // api_sync_group.go
	{key: 15, min: 0, max: 5, handle: handleDescribeGroups},          // api_describe_groups.go
	{key: 16, min: 0, max: 5, handle: handleListGroups},              // api_list_groups.go
	{key: 17, min: 0, max: 1, handle: handleSaslHandshake},           // api_sasl_handshake.go
	{key: 18, min: 0, max: 4, handle: handleApiVersions},             // api_api_versions.go
	{key: 19, min: 0, max: 7, handle: handleCreateTopics},            // api_create_topics.go
	{key: 20, min: 0, max: 6, handle: handleDeleteTopics},            // api_delete_topics.go
	{key: 21, min: 0, max: 2, handle: handleDeleteRecords},           // api_delete_records.go
	{key: 22, min: 0, max: 4, handle: handleInitProducerID},          // api_init_producer_id.go
	{key: 23, min: 0, max: 4, handle: handleOffsetForLeaderEpoch},    // api_offset_for_leader_epoch.go
	{key: 24, min: 0, max: 4, handle: handleAddPartitionsToTxn},      // api_add_partitions_to_txn.go
	{key: 25, min: 0, max: 3, handle: handleAddOffsetsToTxn},         // api_add_offsets_to_txn.go
	{key: 26, min: 0, max: 3, handle: handleEndTxn},                  // api_end_txn.go
	{key: 27, min: 0, max: 1, handle: handleWriteTxnMarkers},         // api_write_txn_markers.go
	{key: 28, min: 0, max: 3, handle: handleTxnOffsetCommit},         // api_txn_offset_commit.go
	{key: 29, min: 0, max: 3, handle: handleDescribeACLs},            // api_describe_acls.go
	{key: 30, min: 0, max: 3, handle: handleCreateACLs},              // api_create_acls.go
	{key: 31, min: 0, max: 3, handle: handleDeleteACLs},              // api_delete_acls.go
	{key: 32, min: 0, max: 4, handle: handleDescribeConfigs},         // api_describe_configs.go
	{key: 33, min: 0, max: 2, handle: handleAlterConfigs},            // api_alter_configs.go
	{key: 35, min: 0, max: 4, handle: handleDescribeLogDirs},         // api_describe_log_dirs.go
	{key: 36, min: 0, max: 2, handle: handleSaslAuthenticate},        // api_sasl_authenticate.go
	{key: 37, min: 0, max: 3, handle: handleCreatePartitions},        // api_create_partitions.go
	{key: 42, min: 0, max: 2, handle: handleDeleteGroups},            // api_delete_groups.go
	{key: 44, min: 0, max: 1, handle: handleIncrementalAlterConfigs}, // api_incremental_alter_configs.go
	{key: 47, min: 0, max: 0, handle: handleOffsetDelete},            // api_offset_delete.go
	{key: 50, min: 0, max: 0, handle: handleDescribeUserScram},       // api_user_scram_credentials.go
	{key: 51, min: 0, max: 0, handle: handleAlterUserScram},          // api_user_scram_credentials.go
	{key: 60, min: 0, max: 1, handle: handleDescribeCluster},         // api_describe_cluster.go
	{key: 61, min: 0, max: 0, handle: handleDescribeProducers},       // api_describe_producers.go
	{key: 65, min: 0, max: 0, handle: handleDescribeTransactions},    // api_describe_transactions.go
	{key: 66, min: 0, max: 1, handle: handleListTransactions},        // api_list_transactions.go
	{key: 68, min: 0, max: 1, handle: handleConsumerGroupHeartbeat},  // api_consumer_group_heartbeat.go
	{key: 69, min: 0, max: 1, handle: handleConsumerGroupDescribe},   // api_consumer_group_describe.go
}

const (
	produceKey     = 0
	apiVersionsKey = 18
)

// numKeys bounds the API keys served (the registry is an array indexed by key).
const numKeys = 128

// apiByKey indexes apis by key (nil: not served); apiKeys is the ApiVersions
// answer. Both are built once from apis.
var (
	apiByKey [numKeys]*api
	apiKeys  []kmsg.ApiVersionsResponseApiKey
)

func init() {
	for i := range apis {
		a := &apis[i]
		if int(a.key) >= len(apiByKey) || apiByKey[a.key] != nil || a.min < 0 || a.max < a.min ||
			(a.handle == nil) == (a.raw == nil) || a.max > kmsg.RequestForKey(a.key).MaxVersion() {
			panic("transport: bad api registration")
		}
		apiByKey[a.key] = a
		apiKeys = append(apiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: a.key, MinVersion: a.min, MaxVersion: a.max})
	}
}

// lookupAPI returns the served API for key, or nil.
func lookupAPI(key int16) *api {
	if key < 0 || int(key) >= len(apiByKey) {
		return nil
	}
	return apiByKey[key]
}
