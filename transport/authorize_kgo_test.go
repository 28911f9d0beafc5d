package transport

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/acl"
	"github.com/weir-broker/weir/core/acl/aclstore"
	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/node"
)

func withAuthorizer(cfg acl.Config) brokerOpt {
	return func(c *Config, _ *node.Config) { c.Authorizer = &cfg }
}

const anonymous = "User:ANONYMOUS"

func withAuthorizerNoACLs(c *Config, o *node.Config) { withAuthorizer(acl.Config{})(c, o) }

// TestACLsThroughKgo runs real clients (kgo, kadm) as User:ANONYMOUS
// against a broker with the authorizer on: ACLs written to the
// coordination store by another session are picked up by the watch;
// Metadata hides what may not be described; Produce to a topic with Read
// only, or denied by a Deny on a prefix, fails with TOPIC_AUTHORIZATION_FAILED
// while an allowed one is written; a group without Read answers
// GROUP_AUTHORIZATION_FAILED; ACLs created and deleted with kadm take effect
// before the call returns.
func TestACLsThroughKgo(t *testing.T) {
	b := startBroker(t, withAuthorizer(acl.Config{}))
	ctx := testCtx(t)
	for _, name := range []string{"readable", "pub-a", "pub-secret", "hidden"} {
		b.createTopic(t, name, 1, nil)
	}
	allow := func(rt acl.ResourceType, pt acl.PatternType, name string, op acl.Operation) acl.Binding {
		return acl.Binding{Pattern: acl.Pattern{Type: rt, Pattern: pt, Name: name},
			Entry: acl.Entry{Principal: anonymous, Host: "*", Operation: op, Permission: acl.Allow}}
	}
	deny := allow(acl.ResourceTopic, acl.PatternLiteral, "pub-secret", acl.OpWrite)
	deny.Entry.Permission, deny.Entry.Principal = acl.Deny, acl.WildcardPrincipal
	seed := []acl.Binding{
		allow(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, acl.OpAlter),
		allow(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, acl.OpDescribe),
		allow(acl.ResourceTopic, acl.PatternLiteral, "readable", acl.OpRead),
		allow(acl.ResourceTopic, acl.PatternPrefixed, "pub-", acl.OpWrite),
		allow(acl.ResourceGroup, acl.PatternLiteral, "g", acl.OpRead),
		deny,
	}
	// Written by another session on the same store, as another broker or
	// tool would: the broker's watch must see them.
	if err := aclstore.Add(ctx, b.node.CoordStore(), seed); err != nil {
		t.Fatal(err)
	}
	_, adm := kadmClient(t, b)
	pollUntil(t, "the broker to see the seeded ACLs", func() bool {
		res, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
		if err != nil || len(res) != 1 || res[0].Err != nil {
			return false
		}
		return len(res[0].Described) == len(seed)
	})

	// Metadata: every topic lists only what ANONYMOUS may describe.
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := topics.Names(); !slices.Equal(got, []string{"pub-a", "pub-secret", "readable"}) {
		t.Fatalf("ListTopics = %v, want pub-a, pub-secret, readable (hidden hidden)", got)
	}

	produce := func(topic string) error {
		cl := kgoClient(t, b, kgo.RecordRetries(1), kgo.UnknownTopicRetries(1))
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	if err := produce("pub-a"); err != nil {
		t.Fatalf("produce to pub-a (Write on prefix pub-): %v", err)
	}
	for _, topic := range []string{"readable", "pub-secret", "hidden"} {
		if err := produce(topic); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("produce to %s: %v, want TOPIC_AUTHORIZATION_FAILED", topic, err)
		}
	}

	// An ACL created with kadm applies once CreateACLs returns; deleted,
	// it no longer does.
	writeReadable := kadm.NewACLs().Allow(anonymous).AllowHosts().Topics("readable").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctx, writeReadable); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %+v", err, res)
	}
	if err := produce("readable"); err != nil {
		t.Fatalf("produce to readable after CreateACLs: %v", err)
	}
	if res, err := adm.DeleteACLs(ctx, writeReadable); err != nil || res[0].Err != nil || len(res[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs: %v %+v", err, res)
	}
	if err := produce("readable"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to readable after DeleteACLs: %v", err)
	}
	if data, _, err := b.node.CoordStore().Get(ctx, "/kafka-acl/Topic/readable"); err != nil ||
		string(data) != `{"version":1,"acls":[{"principal":"User:ANONYMOUS","permissionType":"Allow","operation":"Read","host":"*"}]}` {
		t.Fatalf("/kafka-acl/Topic/readable = %s, %v", data, err)
	}

	// Consume readable in group g (Read on both); group other has no ACL.
	cons := kgoClient(t, b, kgo.ConsumeTopics("readable"), kgo.ConsumerGroup("g"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	fs := cons.PollRecords(pctx, 10)
	if err := fs.Err(); err != nil || fs.NumRecords() != 1 {
		t.Fatalf("consume readable in g: %d records, %v", fs.NumRecords(), err)
	}
	if err := cons.CommitUncommittedOffsets(pctx); err != nil {
		t.Fatalf("commit in g: %v", err)
	}
	other := kgoClient(t, b, kgo.ConsumeTopics("readable"), kgo.ConsumerGroup("other"))
	fs = other.PollFetches(pctx)
	var gerr error
	fs.EachError(func(_ string, _ int32, err error) { gerr = err })
	if !errors.Is(gerr, kerr.GroupAuthorizationFailed) {
		t.Fatalf("consume in group other: %v, want GROUP_AUTHORIZATION_FAILED", gerr)
	}
	// Reading hidden (no ACL) is refused at Fetch too: a direct assignment.
	direct := kgoClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"hidden": {0: kgo.NewOffset().AtStart()}}))
	fs = direct.PollFetches(pctx)
	gerr = nil
	fs.EachError(func(_ string, _ int32, err error) { gerr = err })
	if !errors.Is(gerr, kerr.TopicAuthorizationFailed) {
		t.Fatalf("fetch hidden: %v, want TOPIC_AUTHORIZATION_FAILED", gerr)
	}

	// Read revoked while the consumer fetches (in a fetch session): the
	// next records of the partition are not sent, its fetch fails instead.
	// (An incremental fetch answers only partitions that changed: the
	// error comes with the first change after the revocation.)
	revoke := kadm.NewACLs().Allow(anonymous).AllowHosts().Topics("readable").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.DeleteACLs(ctx, revoke); err != nil || res[0].Err != nil || len(res[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs of Read on readable: %v %+v", err, res)
	}
	b.produce(t, "readable", 0, batch(t, "after-revoke", 1))
	var rerr error
	for rerr == nil && pctx.Err() == nil {
		fs := cons.PollFetches(pctx)
		if fs.NumRecords() > 0 {
			t.Fatalf("consumer read %d records after Read was revoked", fs.NumRecords())
		}
		fs.EachError(func(_ string, _ int32, err error) { rerr = err })
	}
	if !errors.Is(rerr, kerr.TopicAuthorizationFailed) {
		t.Fatalf("consume readable after Read was revoked: %v, want TOPIC_AUTHORIZATION_FAILED", rerr)
	}
	// Creating a topic needs Create on the cluster or the topic.
	if res, err := adm.CreateTopics(ctx, 1, 1, nil, "fresh"); err != nil || !errors.Is(res["fresh"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("CreateTopics fresh: %v %+v", err, res)
	}
}

// TestACLsSuperUserAndDisabled: a super user passes with no ACLs at all;
// without an authorizer the ACL APIs answer SECURITY_DISABLED.
func TestACLsSuperUserAndDisabled(t *testing.T) {
	b := startBroker(t, withAuthorizer(acl.Config{SuperUsers: []string{anonymous}}))
	b.createTopic(t, "t", 1, nil)
	cl := kgoClient(t, b)
	ctx := testCtx(t)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("super user produce: %v", err)
	}

	off := startBroker(t)
	_, adm := kadmClient(t, off)
	res, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny))
	if err == nil && len(res) == 1 {
		err = res[0].Err
	}
	if !errors.Is(err, kerr.SecurityDisabled) {
		t.Fatalf("DescribeACLs without an authorizer: %v, want SECURITY_DISABLED", err)
	}
}

// TestACLGarbageStopsTheServer: a malformed ACL node in the store fails
// NewServer, naming the node.
func TestACLGarbageStopsTheServer(t *testing.T) {
	ctx := testCtx(t)
	store := memstore.NewServer().Connect()
	if err := coord.CreateAll(ctx, store, "/kafka-acl/Topic/t", []byte(`{"version":1,"acls":[{"operation":"Fly"}]}`), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Config{FS: vfs.Default, DataDir: t.TempDir(), Advertised: "127.0.0.1:9092", Coord: store})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	_, err = NewServer(Config{Authorizer: &acl.Config{}}, n)
	if !errors.Is(err, aclstore.ErrMalformed) || !strings.Contains(err.Error(), "/kafka-acl/Topic/t") {
		t.Fatalf("NewServer with garbage in /kafka-acl/Topic/t: %v", err)
	}
}

// TestACLsAcrossBrokers: two brokers on one coordination store; an ACL
// created through one is enforced by the other once its watch fires, and
// deleted likewise.
func TestACLsAcrossBrokers(t *testing.T) {
	srv := memstore.NewServer()
	on := func(id int32) brokerOpt {
		return func(c *Config, o *node.Config) {
			o.Coord, o.NodeID = srv.Connect(), id
			c.Authorizer = &acl.Config{SuperUsers: []string{"User:admin"}}
		}
	}
	a, b := startBroker(t, on(1)), startBroker(t, on(2))
	describeOn := func(br *testBroker) int {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		rc := br.dial(t)
		defer rc.c.Close()
		resp := rc.do(req).(*kmsg.DescribeACLsResponse)
		if resp.ErrorCode != 0 {
			return -int(resp.ErrorCode)
		}
		n := 0
		for _, r := range resp.Resources {
			n += len(r.ACLs)
		}
		return n
	}
	// ANONYMOUS may not even describe the ACLs yet.
	if got := describeOn(b); got != -int(errClusterAuth) {
		t.Fatalf("DescribeAcls on broker 2 before any ACL: %d, want CLUSTER_AUTHORIZATION_FAILED", got)
	}
	// Written through broker 1 (by a super user's session: the store).
	grant := acl.Binding{Pattern: acl.Pattern{Type: acl.ResourceCluster, Pattern: acl.PatternLiteral, Name: acl.ClusterName},
		Entry: acl.Entry{Principal: anonymous, Host: "*", Operation: acl.OpAll, Permission: acl.Allow}}
	if err := aclstore.Add(testCtx(t), a.node.CoordStore(), []acl.Binding{grant}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "broker 2 to enforce the ACL written through broker 1", func() bool { return describeOn(b) == 1 })

	// Deleted through broker 2's DeleteAcls: broker 1 follows.
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	req.Filters = append(req.Filters, f)
	rc := b.dial(t)
	if resp := rc.do(req).(*kmsg.DeleteACLsResponse); resp.Results[0].ErrorCode != 0 || len(resp.Results[0].MatchingACLs) != 1 {
		t.Fatalf("DeleteAcls on broker 2: %+v", resp.Results)
	}
	rc.c.Close()
	pollUntil(t, "broker 1 to drop the ACL deleted through broker 2", func() bool { return describeOn(a) == -int(errClusterAuth) })
}
