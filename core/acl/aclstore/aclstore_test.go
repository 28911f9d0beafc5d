package aclstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/acl"
	"github.com/weir-broker/weir/core/acl/aclstore"
	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/memstore"
)

func binding(rt acl.ResourceType, pt acl.PatternType, name, who string, op acl.Operation, perm acl.Permission) acl.Binding {
	return acl.Binding{Pattern: acl.Pattern{Type: rt, Pattern: pt, Name: name},
		Entry: acl.Entry{Principal: who, Host: "*", Operation: op, Permission: perm}}
}

func TestAddReadRemoveInKafkasLayout(t *testing.T) {
	ctx := context.Background()
	s := memstore.NewServer().Connect()
	defer s.Close()
	bs := []acl.Binding{
		binding(acl.ResourceTopic, acl.PatternLiteral, "orders", "User:alice", acl.OpRead, acl.Allow),
		binding(acl.ResourceTopic, acl.PatternLiteral, "orders", "User:bob", acl.OpWrite, acl.Deny),
		binding(acl.ResourceTopic, acl.PatternPrefixed, "logs-", "User:*", acl.OpDescribe, acl.Allow),
		binding(acl.ResourceCluster, acl.PatternLiteral, "kafka-cluster", "User:admin", acl.OpAll, acl.Allow),
		binding(acl.ResourceTransactionalID, acl.PatternLiteral, "tx", "User:alice", acl.OpWrite, acl.Allow),
	}
	if err := aclstore.Add(ctx, s, bs); err != nil {
		t.Fatal(err)
	}
	// Kafka's layout, byte for byte where Kafka's tools read it.
	data, _, err := s.Get(ctx, "/kafka-acl/Topic/orders")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},` +
		`{"principal":"User:bob","permissionType":"Deny","operation":"Write","host":"*"}]}`
	if string(data) != want {
		t.Fatalf("/kafka-acl/Topic/orders = %s, want %s", data, want)
	}
	for _, p := range []string{"/kafka-acl-extended/prefixed/Topic/logs-", "/kafka-acl/Cluster/kafka-cluster", "/kafka-acl/TransactionalId/tx"} {
		if ok, _, err := s.Exists(ctx, p); err != nil || !ok {
			t.Fatalf("%s: exists %v, %v", p, ok, err)
		}
	}
	changes, _, _ := s.Children(ctx, aclstore.LiteralChangesPath)
	ext, _, _ := s.Children(ctx, aclstore.ExtendedChangesPath)
	if len(changes) != 3 || len(ext) != 1 || changes[0] != "acl_changes_0000000000" {
		t.Fatalf("change nodes %v and %v, want 3 literal and 1 extended", changes, ext)
	}
	if data, _, _ := s.Get(ctx, aclstore.LiteralChangesPath+"/"+changes[0]); string(data) != "Topic:orders" {
		t.Fatalf("literal change note %q", data)
	}

	got, err := aclstore.Read(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Bindings(), acl.NewSet(bs...).Bindings()) {
		t.Fatalf("read back %v, want %v", got.Bindings(), acl.NewSet(bs...).Bindings())
	}

	// Remove every Topic binding that applies to "orders" (MATCH), plus
	// everything of User:admin.
	orders, admin := "orders", "User:admin"
	removed, err := aclstore.Remove(ctx, s, []acl.Filter{
		{Type: acl.ResourceTopic, Pattern: acl.PatternMatch, Name: &orders, Operation: acl.OpAny, Permission: acl.PermissionAny},
		{Type: acl.ResourceAny, Pattern: acl.PatternAny, Principal: &admin, Operation: acl.OpAny, Permission: acl.PermissionAny},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed[0]) != 2 || len(removed[1]) != 1 {
		t.Fatalf("removed %v", removed)
	}
	if ok, _, _ := s.Exists(ctx, "/kafka-acl/Topic/orders"); ok {
		t.Fatal("/kafka-acl/Topic/orders left with no entries")
	}
	got, _ = aclstore.Read(ctx, s)
	if got.Len() != 2 {
		t.Fatalf("after remove: %v", got.Bindings())
	}
}

func TestGarbageNamesThePath(t *testing.T) {
	ctx := context.Background()
	s := memstore.NewServer().Connect()
	defer s.Close()
	for path, data := range map[string]string{
		"/kafka-acl/Topic/t":      `{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Fly","host":"*"}]}`,
		"/kafka-acl/Topic/u":      `not json`,
		"/kafka-acl/Topic/v":      `{"version":2,"acls":[]}`,
		"/kafka-acl/Planet/earth": `{"version":1,"acls":[]}`,
		"/kafka-acl/Group/g":      `{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","operation":"Read","host":"*"}]}`,
		"/kafka-acl/Topic/w":      `{"version":1,"acls":[{"principal":"User:a","permissionType":"Any","operation":"Read","host":"*"}]}`,
	} {
		srv := memstore.NewServer()
		s := srv.Connect()
		if err := coord.CreateAll(ctx, s, path, []byte(data), coord.Persistent); err != nil {
			t.Fatal(err)
		}
		_, err := aclstore.Read(ctx, s)
		if !errors.Is(err, aclstore.ErrMalformed) || !strings.Contains(err.Error(), strings.TrimSuffix(path, "/earth")) {
			t.Errorf("%s = %s: Read error %v, want ErrMalformed naming the path", path, data, err)
		}
		s.Close()
	}
}

// TestConcurrentWritersLoseNothing: writers adding to the same pattern at
// once all land (compare-and-set, change nodes raced for by name).
func TestConcurrentWritersLoseNothing(t *testing.T) {
	ctx := context.Background()
	srv := memstore.NewServer()
	const writers, each = 4, 10
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		s := srv.Connect()
		defer s.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				b := binding(acl.ResourceGroup, acl.PatternLiteral, "g", fmt.Sprintf("User:w%d-%d", w, i), acl.OpRead, acl.Allow)
				if err := aclstore.Add(ctx, s, []acl.Binding{b}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := srv.Connect()
	defer s.Close()
	got, err := aclstore.Read(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != writers*each {
		t.Fatalf("%d bindings, want %d", got.Len(), writers*each)
	}
	changes, _, _ := s.Children(ctx, aclstore.LiteralChangesPath)
	if len(changes) != writers*each {
		t.Fatalf("%d change nodes, want one per change (%d)", len(changes), writers*each)
	}
}

func TestPruneKeepsTheNewestChanges(t *testing.T) {
	ctx := context.Background()
	s := memstore.NewServer().Connect()
	defer s.Close()
	defer aclstore.SetKeepChanges(10)()
	for i := 0; i < 10+5; i++ {
		b := binding(acl.ResourceTopic, acl.PatternLiteral, "t", fmt.Sprintf("User:u%d", i), acl.OpRead, acl.Allow)
		if err := aclstore.Add(ctx, s, []acl.Binding{b}); err != nil {
			t.Fatal(err)
		}
	}
	changes, _, _ := s.Children(ctx, aclstore.LiteralChangesPath)
	if len(changes) != 10 || changes[0] != fmt.Sprintf("acl_changes_%010d", 5) {
		t.Fatalf("%d change nodes from %s, want 10 from 5", len(changes), changes[0])
	}
}

// TestWatchSeesEveryChange: a broker's watch (its own session) sees adds
// and removes made through another session.
func TestWatchSeesEveryChange(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := memstore.NewServer()
	broker, admin := srv.Connect(), srv.Connect()
	defer broker.Close()
	defer admin.Close()
	sets := make(chan *acl.Set, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		aclstore.Watch(ctx, broker, time.Millisecond, func(s *acl.Set, _ aclstore.Version, err error) {
			if err != nil {
				t.Error(err)
				return
			}
			sets <- s
		})
	}()
	next := func(want int) {
		t.Helper()
		for s := range sets {
			if s.Len() == want {
				return
			}
		}
	}
	next(0)
	b := binding(acl.ResourceTopic, acl.PatternPrefixed, "p", "User:a", acl.OpRead, acl.Allow)
	if err := aclstore.Add(ctx, admin, []acl.Binding{b}); err != nil {
		t.Fatal(err)
	}
	next(1)
	if _, err := aclstore.Remove(ctx, admin, []acl.Filter{{Type: acl.ResourceAny, Pattern: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}}); err != nil {
		t.Fatal(err)
	}
	next(0)
	cancel()
	<-done
}
