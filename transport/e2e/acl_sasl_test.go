package e2e_test

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-broker/weir/core/acl"
	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/tlsfiles"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// aclBroker is a broker with the ACL authorizer on and the principals
// SASL and mTLS give: a SASL_PLAINTEXT listener (PLAIN user admin, the
// super user; SCRAM users alice, SHA-512, and bob, SHA-256) and an SSL
// listener requiring client certificates.
type aclBroker struct {
	b   *broker.Broker
	ca  *tlstest.CA
	adm *kadm.Client // admin, over PLAIN
}

func startACLBroker(t *testing.T) *aclBroker {
	t.Helper()
	ca := tlstest.NewCA(t, "weir acl CA")
	srv := ca.Issue("broker", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	users := writeFile(t, "jaas.conf", []byte(`user_admin="admin-secret"`))
	b := brokertest.Start(t, "", func(c *broker.Config) {
		c.Security = broker.Security{
			Listeners: "SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
			CertFile:  srv.CertFile, KeyFile: srv.KeyFile, CAFile: ca.File, ClientAuth: "required",
			PlainUsersFile: users,
		}
		c.Authorizer = &acl.Config{SuperUsers: []string{"User:admin"}}
	})
	adm := kadm.NewClient(secClient(t, b.ListenerAddr("SASL_PLAINTEXT"), kgo.SASL(plainAuth("admin", "admin-secret"))))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pass"},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-pass"},
	})
	if err != nil || res["alice"].Err != nil || res["bob"].Err != nil {
		t.Fatalf("alter SCRAM credentials: %v %v", err, res)
	}
	return &aclBroker{b: b, ca: ca, adm: adm}
}

// create creates the ACLs built by b (kadm's builder) through the admin.
func (ab *aclBroker) create(t *testing.T, b *kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := ab.adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL %s %s %s: %v", r.Principal, r.Name, r.Operation, r.Err)
		}
	}
}

// scramClient is a franz-go client of the SASL_PLAINTEXT listener as user.
func (ab *aclBroker) scramClient(t *testing.T, user, pass string, sha512 bool, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	a := scram.Auth{User: user, Pass: pass}
	m := a.AsSha256Mechanism()
	if sha512 {
		m = a.AsSha512Mechanism()
	}
	return secClient(t, ab.b.ListenerAddr("SASL_PLAINTEXT"), append([]kgo.Opt{kgo.SASL(m),
		kgo.RecordRetries(2), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
}

// produceErr produces one record to topic and returns the error.
func produceErr(cl *kgo.Client, topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v-" + topic)}).FirstErr()
}

// metadataTopics lists every topic cl's principal may see (Metadata for
// all topics).
func metadataTopics(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range resp.Topics {
		names = append(names, *tp.Topic)
	}
	slices.Sort(names)
	return names
}

// ACLs enforced for the principals SASL (SCRAM) and mTLS give, with
// franz-go: Read without Write, topics hidden from Metadata, a group
// without Read refused and then joined once Read is granted, a prefixed
// Write, a Deny for everyone winning over it, a super user with no ACLs,
// and a certificate subject's ACL.
func TestACLsWithSASLPrincipals(t *testing.T) {
	ab := startACLBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	for _, topic := range []string{"a", "b", "logs-app", "log", "logs-secret"} {
		if _, err := ab.adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatalf("admin (super user, no ACLs) creating %s: %v", topic, err)
		}
	}
	// The super user bypasses: no ACL names admin, yet it writes and sees
	// everything.
	admin := ab.adminClient(t)
	if err := produceErr(admin, "a"); err != nil {
		t.Fatalf("admin producing to a: %v", err)
	}
	if got := metadataTopics(t, admin); !slices.Equal(got, []string{"a", "b", "log", "logs-app", "logs-secret"}) {
		t.Errorf("admin sees %v, want every topic", got)
	}

	ab.create(t, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("a").Operations(kadm.OpRead).
		ResourcePatternType(kadm.ACLPatternLiteral))
	ab.create(t, kadm.NewACLs().Allow("User:bob").AllowHosts().Topics("logs-").Operations(kadm.OpWrite).
		ResourcePatternType(kadm.ACLPatternPrefixed))
	ab.create(t, kadm.NewACLs().Deny("User:*").DenyHosts().Topics("logs-secret").Operations(kadm.OpAll).
		ResourcePatternType(kadm.ACLPatternLiteral))

	t.Run("alice", func(t *testing.T) {
		// franz-go's default, idempotent, producer first asks for a
		// producer id, which needs IdempotentWrite on the cluster or Write
		// on some topic (KIP-679): alice has neither.
		idem := ab.scramClient(t, "alice", "alice-pass", true)
		if err := produceErr(idem, "a"); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Errorf("alice's idempotent producer: %v, want CLUSTER_AUTHORIZATION_FAILED (InitProducerId)", err)
		}
		alice := ab.scramClient(t, "alice", "alice-pass", true, kgo.DisableIdempotentWrite())
		if err := produceErr(alice, "a"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("alice (Read on a) producing to a: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		if got := metadataTopics(t, alice); !slices.Equal(got, []string{"a"}) {
			t.Errorf("alice sees %v in Metadata, want only a (b hidden)", got)
		}
		member := func() *kgo.Client {
			return ab.scramClient(t, "alice", "alice-pass", true, kgo.ConsumerGroup("alice-g"), kgo.ConsumeTopics("a"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		}
		refused := member()
		if err := pollGroupErr(refused); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Errorf("alice joining alice-g without Read on it: %v, want GROUP_AUTHORIZATION_FAILED", err)
		}
		refused.Close()
		ab.create(t, kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("alice-g").Operations(kadm.OpRead).
			ResourcePatternType(kadm.ACLPatternLiteral))
		joined := member()
		pctx, pcancel := context.WithTimeout(ctx, waitTimeout)
		defer pcancel()
		fs := joined.PollFetches(pctx)
		if err := fs.Err(); err != nil || len(fs.Records()) == 0 || string(fs.Records()[0].Value) != "v-a" {
			t.Errorf("alice in alice-g with Read on it: records %v, error %v; want admin's v-a", fs.Records(), err)
		}
	})

	// KIP-848's ConsumerGroupHeartbeat needs, besides Read on the group,
	// Describe on every topic it subscribes to.
	t.Run("alice-848", func(t *testing.T) {
		ab.create(t, kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("alice-848").Operations(kadm.OpRead).
			ResourcePatternType(kadm.ACLPatternLiteral))
		// franz-go's member would stop at Metadata for b first: the
		// heartbeat itself, through alice's client.
		raw := ab.scramClient(t, "alice", "alice-pass", true)
		heartbeat := func(epoch int32, topics ...string) int16 {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Group, req.RebalanceTimeoutMillis, req.SubscribedTopicNames = "alice-848", 5000, topics
			req.MemberID, req.MemberEpoch = "alice-raw-member", epoch // v1: the client names itself (KIP-1082)
			if epoch == 0 {
				req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			}
			resp, err := req.RequestWith(ctx, raw)
			if err != nil {
				t.Fatalf("ConsumerGroupHeartbeat %v: %v", topics, err)
			}
			return resp.ErrorCode
		}
		if code := heartbeat(0, "a", "b"); code != kerr.TopicAuthorizationFailed.Code {
			t.Errorf("alice's ConsumerGroupHeartbeat subscribing to a and b (b not describable): error %d, want TOPIC_AUTHORIZATION_FAILED", code)
		}
		if code := heartbeat(0, "a"); code != 0 {
			t.Errorf("alice's ConsumerGroupHeartbeat subscribing to a: error %d", code)
		}
		if code := heartbeat(-1); code != 0 { // leaves, so franz-go's member gets a
			t.Errorf("alice's ConsumerGroupHeartbeat leaving: error %d", code)
		}
		joined := ab.scramClient(t, "alice", "alice-pass", true, kgo.ConsumerGroup("alice-848"), kgo.ConsumeTopics("a"),
			kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		pctx, pcancel := context.WithTimeout(ctx, waitTimeout)
		defer pcancel()
		fs := joined.PollFetches(pctx)
		if err := fs.Err(); err != nil || len(fs.Records()) == 0 || string(fs.Records()[0].Value) != "v-a" {
			t.Errorf("alice's KIP-848 member (franz-go) subscribing to a: records %v, error %v; want admin's v-a", fs.Records(), err)
		}
	})

	t.Run("bob", func(t *testing.T) {
		bob := ab.scramClient(t, "bob", "bob-pass", false)
		if err := produceErr(bob, "logs-app"); err != nil {
			t.Errorf("bob (Write on prefix logs-) producing to logs-app: %v", err)
		}
		if err := produceErr(bob, "log"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("bob producing to log (not under the prefix): %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		if err := produceErr(bob, "logs-secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("bob producing to logs-secret (Deny User:*): %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		if got := metadataTopics(t, bob); !slices.Equal(got, []string{"logs-app"}) {
			t.Errorf("bob sees %v in Metadata, want logs-app (Write implies Describe; Deny All on logs-secret)", got)
		}
	})

	t.Run("mtls", func(t *testing.T) {
		const principal = "User:CN=svc,OU=ingest,O=acme"
		ab.create(t, kadm.NewACLs().Allow(principal).AllowHosts().Topics("b").Operations(kadm.OpWrite).
			ResourcePatternType(kadm.ACLPatternLiteral))
		cert := ab.ca.Issue("svc", pkix.Name{CommonName: "svc", OrganizationalUnit: []string{"ingest"}, Organization: []string{"acme"}},
			tlstest.Options{Client: true})
		tcfg, err := tlsfiles.ClientConfig(tlsfiles.Client{CAFile: ab.ca.File, CertFile: cert.CertFile, KeyFile: cert.KeyFile})
		if err != nil {
			t.Fatal(err)
		}
		svc := secClient(t, ab.b.ListenerAddr("SSL"), kgo.DialTLSConfig(tcfg), kgo.RecordRetries(2), kgo.RetryTimeout(5*time.Second))
		if err := produceErr(svc, "b"); err != nil {
			t.Errorf("%s (Write on b) producing to b: %v", principal, err)
		}
		if err := produceErr(svc, "a"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("%s producing to a: %v, want TOPIC_AUTHORIZATION_FAILED", principal, err)
		}
		if got := metadataTopics(t, svc); !slices.Equal(got, []string{"b"}) {
			t.Errorf("%s sees %v in Metadata, want only b", principal, got)
		}
	})
}

// adminClient is the super user's producer (PLAIN admin).
func (ab *aclBroker) adminClient(t *testing.T) *kgo.Client {
	return secClient(t, ab.b.ListenerAddr("SASL_PLAINTEXT"), kgo.SASL(plainAuth("admin", "admin-secret")))
}

// pollGroupErr polls a group consumer until it reports an error (the
// group's join failing), or returns nil after waitTimeout.
func pollGroupErr(cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				return e.Err
			}
		}
	}
	return nil
}

// kcat (librdkafka) as alice over SCRAM-SHA-512: it lists only topic a,
// reads a, and producing to a fails with Topic authorization failed.
func TestACLsWithSASLPrincipalsKcat(t *testing.T) {
	kcatPath(t)
	ab := startACLBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, topic := range []string{"a", "b"} {
		if _, err := ab.adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	if err := produceErr(ab.adminClient(t), "a"); err != nil {
		t.Fatal(err)
	}
	ab.create(t, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("a").Operations(kadm.OpRead).
		ResourcePatternType(kadm.ACLPatternLiteral))
	alice := []string{"-b", ab.b.ListenerAddr("SASL_PLAINTEXT"), "-X", "security.protocol=SASL_PLAINTEXT",
		"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice", "-X", "sasl.password=alice-pass"}

	md := string(runKcat(t, nil, append(alice, "-L")...))
	if !strings.Contains(md, `topic "a"`) || strings.Contains(md, `topic "b"`) {
		t.Errorf("kcat -L as alice:\n%s\nwant topic a listed and b hidden", md)
	}
	if out := runKcat(t, nil, append(alice, "-C", "-t", "a", "-o", "beginning", "-e", "-q")...); strings.TrimSpace(string(out)) != "v-a" {
		t.Errorf("kcat consuming a as alice: %q, want v-a", out)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), waitTimeout)
	defer pcancel()
	cmd := exec.CommandContext(pctx, kcatPath(t), append(alice, "-P", "-t", "a")...)
	cmd.Stdin = strings.NewReader("denied\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	if !strings.Contains(strings.ToLower(out.String()), "topic authorization failed") {
		t.Errorf("kcat producing to a as alice: %q, want Topic authorization failed", out.String())
	}
	ends, err := ab.adm.ListEndOffsets(ctx, "a")
	if o, ok := ends.Lookup("a", 0); err != nil || !ok || o.Offset != 1 {
		t.Errorf("a ends at %+v (%v) after alice's refused produce, want 1 (admin's record only)", o, err)
	}
}
