package acl

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// model is the rules of the package doc, written as plainly as possible:
// a list of bindings scanned whole.
type model struct {
	bindings    []Binding
	super       []string
	allowIfNone bool
}

// grants is what an Allow of op grants, written from the other side of
// Authorize's implied.
func grants(op Operation) []Operation {
	switch op {
	case OpAll:
		return []Operation{OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpClusterAction,
			OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpCreateTokens, OpDescribeTokens}
	case OpRead, OpWrite, OpDelete, OpAlter:
		return []Operation{op, OpDescribe}
	case OpAlterConfigs:
		return []Operation{op, OpDescribeConfigs}
	}
	return []Operation{op}
}

func (m *model) authorize(principal, host string, op Operation, r Resource) bool {
	if slices.Contains(m.super, principal) {
		return true
	}
	var matching []Binding
	for _, b := range m.bindings {
		p := b.Pattern
		if p.Type == r.Type && (p.Pattern == PatternLiteral && (p.Name == r.Name || p.Name == "*") ||
			p.Pattern == PatternPrefixed && strings.HasPrefix(r.Name, p.Name)) {
			matching = append(matching, b)
		}
	}
	if len(matching) == 0 {
		return m.allowIfNone
	}
	who := func(e Entry) bool {
		return (e.Principal == principal || e.Principal == "User:*") && (e.Host == host || e.Host == "*")
	}
	for _, b := range matching {
		if b.Entry.Permission == Deny && who(b.Entry) && (b.Entry.Operation == op || b.Entry.Operation == OpAll) {
			return false
		}
	}
	for _, b := range matching {
		if b.Entry.Permission == Allow && who(b.Entry) && slices.Contains(grants(b.Entry.Operation), op) {
			return true
		}
	}
	return false
}

var (
	testNames      = []string{"a", "ab", "abc", "b", "ba", "*", "hardcode"}
	testPrincipals = []string{"User:alice", "User:bob", "User:*"}
	testHosts      = []string{"10.0.0.1", "10.0.0.2", "*"}
	testTypes      = []ResourceType{ResourceTopic, ResourceGroup, ResourceTransactionalID}
)

func randBinding(rng *rand.Rand) Binding {
	pt := PatternLiteral
	name := testNames[rng.IntN(len(testNames))]
	if rng.IntN(3) == 0 && name != "*" {
		pt = PatternPrefixed
	}
	perm := Allow
	if rng.IntN(4) == 0 {
		perm = Deny
	}
	return Binding{
		Pattern: Pattern{Type: testTypes[rng.IntN(len(testTypes))], Pattern: pt, Name: name},
		Entry: Entry{Principal: testPrincipals[rng.IntN(len(testPrincipals))], Host: testHosts[rng.IntN(len(testHosts))],
			Operation: Operation(2 + rng.IntN(13)), Permission: perm},
	}
}

// TestAuthorizeMatchesModel checks Authorize against the model on random
// ACL sets (built whole, and one pattern at a time with With) and random
// questions.
func TestAuthorizeMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 29))
	allowed, denied := 0, 0
	for round := 0; round < 400; round++ {
		m := &model{allowIfNone: rng.IntN(2) == 0}
		if rng.IntN(3) == 0 {
			m.super = []string{"User:bob"}
		}
		for n := rng.IntN(12); n > 0; n-- {
			m.bindings = append(m.bindings, randBinding(rng))
		}
		whole := New(Config{SuperUsers: m.super, AllowEveryoneIfNoACLFound: m.allowIfNone}, NewSet(m.bindings...))
		// The same set, pattern by pattern.
		inc := NewSet()
		for _, b := range m.bindings {
			inc = inc.With(b.Pattern, append(slices.Clone(inc.Entries(b.Pattern)), b.Entry))
		}
		if !slices.Equal(inc.Bindings(), whole.ACLs().Bindings()) {
			t.Fatalf("round %d: With built %v, NewSet %v", round, inc.Bindings(), whole.ACLs().Bindings())
		}
		// And with the last binding's pattern emptied again, then restored.
		incA := whole.WithACLs(inc)
		if len(m.bindings) > 0 {
			last := m.bindings[len(m.bindings)-1].Pattern
			es := inc.Entries(last)
			incA = whole.WithACLs(inc.With(last, nil).With(last, es))
		}
		for q := 0; q < 200; q++ {
			principal := []string{"User:alice", "User:bob", "User:carol"}[rng.IntN(3)]
			host := []string{"10.0.0.1", "10.0.0.2"}[rng.IntN(2)]
			op := Operation(3 + rng.IntN(12))
			r := Resource{Type: testTypes[rng.IntN(len(testTypes))], Name: testNames[rng.IntN(len(testNames)-1)] + []string{"", "c", "x"}[rng.IntN(3)]}
			want := m.authorize(principal, host, op, r)
			if got := whole.Authorize(principal, host, op, r); got != want {
				t.Fatalf("round %d: Authorize(%s, %s, %s, %v) = %v, model says %v; ACLs:\n%s",
					round, principal, host, op, r, got, want, dump(m.bindings))
			}
			if got := incA.Authorize(principal, host, op, r); got != want {
				t.Fatalf("round %d: over a set built with With: Authorize(%s, %s, %s, %v) = %v, model says %v; ACLs:\n%s",
					round, principal, host, op, r, got, want, dump(m.bindings))
			}
			if want {
				allowed++
			} else {
				denied++
			}
		}
	}
	// The test means something only if both answers came up often.
	if allowed < 1000 || denied < 1000 {
		t.Fatalf("skewed sample: %d allowed, %d denied", allowed, denied)
	}
}

func dump(bs []Binding) string {
	var sb strings.Builder
	for _, b := range bs {
		sb.WriteString("  " + b.String() + "\n")
	}
	return sb.String()
}

// TestAuthorizeAnyAgreesWithSomeResource checks AuthorizeAny on random sets
// against Authorize: it says yes exactly when one of the names the ACLs use,
// their extensions, or a name no ACL names is allowed (which covers every
// case: a resource allowed is allowed through one of those names).
func TestAuthorizeAnyAgreesWithSomeResource(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	yes, no := 0, 0
	for round := 0; round < 2000; round++ {
		var bs []Binding
		for n := 1 + rng.IntN(6); n > 0; n-- {
			bs = append(bs, randBinding(rng))
		}
		a := New(Config{AllowEveryoneIfNoACLFound: rng.IntN(4) == 0}, NewSet(bs...))
		op := []Operation{OpWrite, OpRead, OpDescribe}[rng.IntN(3)]
		principal, host := "User:alice", "10.0.0.1"
		got := a.AuthorizeAny(principal, host, op, ResourceTopic)
		some := false
		for _, n := range append(testNames, "unnamed") {
			for _, ext := range []string{"", "c", "zz"} {
				if a.Authorize(principal, host, op, Resource{Type: ResourceTopic, Name: n + ext}) {
					some = true
				}
			}
		}
		if got != some {
			t.Fatalf("round %d: AuthorizeAny(%s) = %v, some resource allowed = %v; ACLs:\n%s", round, op, got, some, dump(bs))
		}
		if got {
			yes++
		} else {
			no++
		}
	}
	if yes < 100 || no < 100 {
		t.Fatalf("skewed sample: %d yes, %d no", yes, no)
	}
}

func TestAuthorizeKafkaCases(t *testing.T) {
	topic := func(pt PatternType, name string) Pattern {
		return Pattern{Type: ResourceTopic, Pattern: pt, Name: name}
	}
	allow := func(p Pattern, who string, op Operation) Binding {
		return Binding{p, Entry{Principal: who, Host: "*", Operation: op, Permission: Allow}}
	}
	deny := func(p Pattern, who string, op Operation) Binding {
		return Binding{p, Entry{Principal: who, Host: "*", Operation: op, Permission: Deny}}
	}
	alice, t1 := "User:alice", Resource{Type: ResourceTopic, Name: "orders"}
	cases := []struct {
		name string
		acls []Binding
		cfg  Config
		op   Operation
		r    Resource
		want bool
	}{
		{"no acls, default deny", nil, Config{}, OpRead, t1, false},
		{"no acls, allow everyone", nil, Config{AllowEveryoneIfNoACLFound: true}, OpRead, t1, true},
		{"acls of another principal still count", []Binding{allow(topic(PatternLiteral, "orders"), "User:bob", OpRead)},
			Config{AllowEveryoneIfNoACLFound: true}, OpRead, t1, false},
		{"literal allow", []Binding{allow(topic(PatternLiteral, "orders"), alice, OpRead)}, Config{}, OpRead, t1, true},
		{"read implies describe", []Binding{allow(topic(PatternLiteral, "orders"), alice, OpRead)}, Config{}, OpDescribe, t1, true},
		{"read does not imply write", []Binding{allow(topic(PatternLiteral, "orders"), alice, OpRead)}, Config{}, OpWrite, t1, false},
		{"alter configs implies describe configs", []Binding{allow(topic(PatternLiteral, "orders"), alice, OpAlterConfigs)}, Config{}, OpDescribeConfigs, t1, true},
		{"deny read does not deny describe", []Binding{allow(topic(PatternLiteral, "orders"), alice, OpAll),
			deny(topic(PatternLiteral, "orders"), alice, OpRead)}, Config{}, OpDescribe, t1, true},
		{"deny wins", []Binding{allow(topic(PatternLiteral, "*"), alice, OpAll),
			deny(topic(PatternPrefixed, "ord"), "User:*", OpWrite)}, Config{}, OpWrite, t1, false},
		{"prefixed", []Binding{allow(topic(PatternPrefixed, "ord"), alice, OpWrite)}, Config{}, OpWrite, t1, true},
		{"prefix longer than the name", []Binding{allow(topic(PatternPrefixed, "orders-"), alice, OpWrite)}, Config{}, OpWrite, t1, false},
		{"wildcard principal", []Binding{allow(topic(PatternLiteral, "orders"), "User:*", OpRead)}, Config{}, OpRead, t1, true},
		{"super user beats deny", []Binding{deny(topic(PatternLiteral, "orders"), alice, OpAll)},
			Config{SuperUsers: []string{alice}}, OpDelete, t1, true},
		{"other resource type", []Binding{allow(Pattern{ResourceGroup, PatternLiteral, "orders"}, alice, OpRead)}, Config{}, OpRead, t1, false},
		{"host", []Binding{{topic(PatternLiteral, "orders"), Entry{alice, "10.9.9.9", OpRead, Allow}}}, Config{}, OpRead, t1, false},
	}
	for _, c := range cases {
		a := New(c.cfg, NewSet(c.acls...))
		if got := a.Authorize(alice, "10.0.0.1", c.op, c.r); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFilterMatches(t *testing.T) {
	s := func(v string) *string { return &v }
	p := func(pt PatternType, name string) Pattern {
		return Pattern{Type: ResourceTopic, Pattern: pt, Name: name}
	}
	cases := []struct {
		f    Filter
		p    Pattern
		want bool
	}{
		{Filter{Type: ResourceAny, Pattern: PatternAny}, p(PatternPrefixed, "a"), true},
		{Filter{Type: ResourceGroup, Pattern: PatternAny}, p(PatternLiteral, "a"), false},
		{Filter{Type: ResourceTopic, Pattern: PatternAny, Name: s("ab")}, p(PatternPrefixed, "a"), false},
		{Filter{Type: ResourceTopic, Pattern: PatternAny, Name: s("a")}, p(PatternPrefixed, "a"), true},
		{Filter{Type: ResourceTopic, Pattern: PatternLiteral, Name: s("a")}, p(PatternPrefixed, "a"), false},
		{Filter{Type: ResourceTopic, Pattern: PatternMatch, Name: s("ab")}, p(PatternPrefixed, "a"), true},
		{Filter{Type: ResourceTopic, Pattern: PatternMatch, Name: s("ab")}, p(PatternLiteral, "*"), true},
		{Filter{Type: ResourceTopic, Pattern: PatternMatch, Name: s("ab")}, p(PatternLiteral, "a"), false},
		{Filter{Type: ResourceTopic, Pattern: PatternLiteral, Name: s("ab")}, p(PatternLiteral, "*"), false},
	}
	for i, c := range cases {
		if got := c.f.MatchesPattern(c.p); got != c.want {
			t.Errorf("case %d: %+v matches %v = %v, want %v", i, c.f, c.p, got, c.want)
		}
	}
	f := Filter{Type: ResourceAny, Pattern: PatternAny, Principal: s("User:*"), Operation: OpAny, Permission: PermissionAny}
	if f.MatchesEntry(Entry{Principal: "User:alice", Host: "*", Operation: OpRead, Permission: Allow}) {
		t.Error("filter principal User:* matched User:alice: filters compare exactly")
	}
}

func TestParseNames(t *testing.T) {
	for in, want := range map[string]Operation{"Read": OpRead, "describe-configs": OpDescribeConfigs,
		"IDEMPOTENT_WRITE": OpIdempotentWrite, "all": OpAll} {
		if got, err := ParseOperation(in); err != nil || got != want {
			t.Errorf("ParseOperation(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if rt, err := ParseResourceType("transactional-id"); err != nil || rt != ResourceTransactionalID || rt.String() != "TransactionalId" {
		t.Errorf("ParseResourceType: %v, %v", rt, err)
	}
	if _, err := ParsePermission("maybe"); err == nil {
		t.Error("ParsePermission(maybe) accepted")
	}
	if got := ParseSuperUsers(" User:a ;User:b;; "); !slices.Equal(got, []string{"User:a", "User:b"}) {
		t.Errorf("ParseSuperUsers = %q", got)
	}
}

func TestBindingValidate(t *testing.T) {
	ok := Binding{Pattern{ResourceTopic, PatternLiteral, "t"}, Entry{"User:a", "*", OpRead, Allow}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Binding{
		{Pattern{ResourceAny, PatternLiteral, "t"}, ok.Entry},
		{Pattern{ResourceTopic, PatternMatch, "t"}, ok.Entry},
		{Pattern{ResourceTopic, PatternLiteral, ""}, ok.Entry},
		{Pattern{ResourceCluster, PatternLiteral, "c"}, ok.Entry},
		{ok.Pattern, Entry{"alice", "*", OpRead, Allow}},
		{ok.Pattern, Entry{"User:a", "", OpRead, Allow}},
		{ok.Pattern, Entry{"User:a", "*", OpAny, Allow}},
		{ok.Pattern, Entry{"User:a", "*", OpRead, PermissionAny}},
	}
	for _, b := range bad {
		if err := b.Validate(); err == nil {
			t.Errorf("%v: accepted", b)
		}
	}
}
