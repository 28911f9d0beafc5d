package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/acl"
	"github.com/weir-broker/weir/transport/broker"
)

// TestACLCommands adds, lists and removes ACLs with weir acl against a
// broker with the authorizer on (the CLI connects as User:ANONYMOUS, a
// super user here).
func TestACLCommands(t *testing.T) {
	addr := startTestBroker(t, func(c *broker.Config) { c.Authorizer = &acl.Config{SuperUsers: []string{"User:ANONYMOUS"}} })
	out, _ := mustCLI(t, "", "acl", "add", "-b", addr, "--topic", "orders", "--allow-principal", "User:alice",
		"--allow-principal", "User:bob", "--operation", "Read,Describe")
	if n := strings.Count(out, "added "); n != 4 {
		t.Fatalf("acl add: %d added, want 4:\n%s", n, out)
	}
	mustCLI(t, "", "acl", "add", "-b", addr, "--topic", "logs-", "--resource-pattern-type", "prefixed",
		"--deny-principal", "User:*", "--host", "10.0.0.7", "--operation", "write")
	mustCLI(t, "", "acl", "add", "-b", addr, "--cluster", "--allow-principal", "User:admin", "--operation", "All")

	out, _ = mustCLI(t, "", "acl", "list", "-b", addr)
	want := `TYPE     PATTERN   NAME           PRINCIPAL   HOST      OPERATION  PERMISSION
Cluster  LITERAL   kafka-cluster  User:admin  *         All        Allow
Topic    LITERAL   orders         User:alice  *         Describe   Allow
Topic    LITERAL   orders         User:alice  *         Read       Allow
Topic    LITERAL   orders         User:bob    *         Describe   Allow
Topic    LITERAL   orders         User:bob    *         Read       Allow
Topic    PREFIXED  logs-          User:*      10.0.0.7  Write      Deny
`
	if out != want {
		t.Fatalf("acl list:\n%s\nwant:\n%s", out, want)
	}
	// Every ACL that applies to topic logs-app: the prefix.
	out, _ = mustCLI(t, "", "acl", "list", "-b", addr, "--topic", "logs-app", "--resource-pattern-type", "match")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "logs-") {
		t.Fatalf("acl list --topic logs-app --resource-pattern-type match:\n%s", out)
	}

	out, _ = mustCLI(t, "", "acl", "remove", "-b", addr, "--topic", "orders", "--allow-principal", "User:bob")
	if n := strings.Count(out, "removed "); n != 2 {
		t.Fatalf("acl remove: %d removed, want 2:\n%s", n, out)
	}
	out, _ = mustCLI(t, "", "acl", "list", "-b", addr, "--principal", "User:bob")
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("User:bob's ACLs after remove:\n%s", out)
	}

	// Bad input fails before anything is sent.
	for _, args := range [][]string{
		{"acl", "add", "-b", addr, "--topic", "t", "--allow-principal", "alice", "--operation", "Read"},
		{"acl", "add", "-b", addr, "--topic", "t", "--allow-principal", "User:a", "--operation", "Fly"},
		{"acl", "add", "-b", addr, "--topic", "t", "--group", "g", "--allow-principal", "User:a", "--operation", "Read"},
		{"acl", "remove", "-b", addr},
	} {
		if _, _, err := cli(t, "", args...); !errors.Is(err, errBadFlag) {
			t.Errorf("weir %s: %v, want a bad flag", strings.Join(args, " "), err)
		}
	}
}

// TestACLCommandsWithoutAuthorizer: the broker says no authorizer is on.
func TestACLCommandsWithoutAuthorizer(t *testing.T) {
	addr := startTestBroker(t)
	_, _, err := cli(t, "", "acl", "list", "-b", addr)
	if !errors.Is(err, errACL) || !strings.Contains(err.Error(), "SECURITY_DISABLED") {
		t.Fatalf("acl list without an authorizer: %v", err)
	}
}

func TestBrokerAuthorizerSettings(t *testing.T) {
	s := brokerSettings{Authorizer: "kafka.security.authorizer.AclAuthorizer", SuperUsers: "User:a; User:b", AllowEveryoneIfNoACLFound: true}
	cfg, err := s.authorizer()
	if err != nil || cfg == nil || !slices.Equal(cfg.SuperUsers, []string{"User:a", "User:b"}) || !cfg.AllowEveryoneIfNoACLFound {
		t.Fatalf("authorizer() = %+v, %v", cfg, err)
	}
	if cfg, err := (brokerSettings{}).authorizer(); cfg != nil || err != nil {
		t.Fatalf("no --authorizer: %+v, %v", cfg, err)
	}
	for _, s := range []brokerSettings{{Authorizer: "ranger"}, {SuperUsers: "User:a"}} {
		if _, err := s.authorizer(); !errors.Is(err, errBadFlag) {
			t.Errorf("%+v: %v, want a bad flag", s, err)
		}
	}
}
