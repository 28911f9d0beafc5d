package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceType is a kind of resource, with Kafka's wire codes.
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
)

// PatternType says how a binding's name matches resource names.
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only: any pattern type, exact name
	PatternMatch    PatternType = 2 // filters only: every pattern that applies to the name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is what a request does to a resource.
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// Permission is Allow or Deny.
type Permission int8

const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	Deny              Permission = 2
	Allow             Permission = 3
)

// Wildcards and names Kafka fixes.
const (
	// WildcardResource, as a LITERAL name, matches every resource of its type.
	WildcardResource = "*"
	// WildcardPrincipal matches every principal.
	WildcardPrincipal = "User:*"
	// WildcardHost matches every host.
	WildcardHost = "*"
	// ClusterName is the one Cluster resource's name.
	ClusterName = "kafka-cluster"
)

var resourceNames = map[ResourceType]string{
	ResourceAny: "Any", ResourceTopic: "Topic", ResourceGroup: "Group", ResourceCluster: "Cluster",
	ResourceTransactionalID: "TransactionalId", ResourceDelegationToken: "DelegationToken",
}

var patternNames = map[PatternType]string{
	PatternAny: "ANY", PatternMatch: "MATCH", PatternLiteral: "LITERAL", PatternPrefixed: "PREFIXED",
}

var opNames = map[Operation]string{
	OpAny: "Any", OpAll: "All", OpRead: "Read", OpWrite: "Write", OpCreate: "Create", OpDelete: "Delete",
	OpAlter: "Alter", OpDescribe: "Describe", OpClusterAction: "ClusterAction",
	OpDescribeConfigs: "DescribeConfigs", OpAlterConfigs: "AlterConfigs", OpIdempotentWrite: "IdempotentWrite",
	OpCreateTokens: "CreateTokens", OpDescribeTokens: "DescribeTokens",
}

var permNames = map[Permission]string{PermissionAny: "Any", Deny: "Deny", Allow: "Allow"}

func name[T ~int8](names map[T]string, v T, kind string) string {
	if s, ok := names[v]; ok {
		return s
	}
	return fmt.Sprintf("%s(%d)", kind, int8(v))
}

// parse reads a name case-insensitively, ignoring '_' and '-' (Kafka's
// tools accept "transactional-id", "TRANSACTIONAL_ID" and "TransactionalId").
func parse[T ~int8](names map[T]string, s, kind string) (T, error) {
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s)) }
	for v, n := range names {
		if norm(n) == norm(s) {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown %s %q", ErrInvalid, kind, s)
}

func (t ResourceType) String() string { return name(resourceNames, t, "ResourceType") }
func (p PatternType) String() string  { return name(patternNames, p, "PatternType") }
func (o Operation) String() string    { return name(opNames, o, "Operation") }
func (p Permission) String() string   { return name(permNames, p, "Permission") }

// ParseResourceType reads "Topic", "topic", "TRANSACTIONAL_ID" and the like.
func ParseResourceType(s string) (ResourceType, error) {
	return parse(resourceNames, s, "resource type")
}

// ParsePatternType reads "LITERAL", "prefixed", "any", "match".
func ParsePatternType(s string) (PatternType, error) { return parse(patternNames, s, "pattern type") }

// ParseOperation reads "Read", "describe-configs", "ALL" and the like.
func ParseOperation(s string) (Operation, error) { return parse(opNames, s, "operation") }

// ParsePermission reads "Allow", "deny", "any".
func ParsePermission(s string) (Permission, error) { return parse(permNames, s, "permission") }

// ErrInvalid: a binding or filter that Kafka would reject (a filter-only
// value in a binding, an unknown code, an empty name). The message says which.
var ErrInvalid = errors.New("acl: invalid")

// Resource is a concrete resource a request acts on.
type Resource struct {
	Type ResourceType
	Name string
}

// Pattern is a binding's resource pattern.
type Pattern struct {
	Type    ResourceType
	Pattern PatternType
	Name    string
}

func (p Pattern) String() string { return p.Type.String() + ":" + p.Pattern.String() + ":" + p.Name }

// Entry is who may or may not do what from where.
type Entry struct {
	Principal  string // "User:alice", or WildcardPrincipal
	Host       string // an IP address as the broker sees it, or WildcardHost
	Operation  Operation
	Permission Permission
}

func (e Entry) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s)", e.Principal, e.Host, e.Operation, e.Permission)
}

// Binding is one ACL: an entry on a pattern.
type Binding struct {
	Pattern Pattern
	Entry   Entry
}

func (b Binding) String() string { return b.Pattern.String() + " " + b.Entry.String() }

// Validate checks a binding as CreateAcls does: concrete resource type,
// LITERAL or PREFIXED, a non-empty name ("kafka-cluster" for the cluster),
// a principal of the form "Type:name", a host, a concrete operation and
// permission.
func (b Binding) Validate() error {
	p, e := b.Pattern, b.Entry
	switch {
	case p.Type < ResourceTopic || p.Type > ResourceDelegationToken:
		return fmt.Errorf("%w: resource type %s in a binding", ErrInvalid, p.Type)
	case p.Pattern != PatternLiteral && p.Pattern != PatternPrefixed:
		return fmt.Errorf("%w: pattern type %s in a binding: want LITERAL or PREFIXED", ErrInvalid, p.Pattern)
	case p.Name == "":
		return fmt.Errorf("%w: empty resource name", ErrInvalid)
	case p.Type == ResourceCluster && p.Name != ClusterName:
		return fmt.Errorf("%w: cluster resource %q: the cluster is %q", ErrInvalid, p.Name, ClusterName)
	case p.Pattern == PatternPrefixed && p.Name == WildcardResource:
		return fmt.Errorf("%w: PREFIXED pattern %q: use the LITERAL wildcard", ErrInvalid, p.Name)
	case strings.IndexByte(e.Principal, ':') <= 0:
		return fmt.Errorf("%w: principal %q: want Type:name, as User:alice", ErrInvalid, e.Principal)
	case e.Host == "":
		return fmt.Errorf("%w: empty host (use %q for every host)", ErrInvalid, WildcardHost)
	case e.Operation < OpAll || e.Operation > OpDescribeTokens:
		return fmt.Errorf("%w: operation %s in a binding", ErrInvalid, e.Operation)
	case e.Permission != Allow && e.Permission != Deny:
		return fmt.Errorf("%w: permission %s in a binding", ErrInvalid, e.Permission)
	}
	return nil
}

// Filter selects bindings (DescribeAcls, DeleteAcls): see the package doc.
type Filter struct {
	Type       ResourceType // ResourceAny: every type
	Pattern    PatternType  // PatternAny, PatternMatch, PatternLiteral, PatternPrefixed
	Name       *string      // nil: every name
	Principal  *string      // nil: every principal
	Host       *string      // nil: every host
	Operation  Operation    // OpAny: every operation
	Permission Permission   // PermissionAny: both
}

// Validate checks that a filter uses known codes.
func (f Filter) Validate() error {
	switch {
	case f.Type < ResourceAny || f.Type > ResourceDelegationToken:
		return fmt.Errorf("%w: resource type %s in a filter", ErrInvalid, f.Type)
	case f.Pattern < PatternAny || f.Pattern > PatternPrefixed:
		return fmt.Errorf("%w: pattern type %s in a filter", ErrInvalid, f.Pattern)
	case f.Operation < OpAny || f.Operation > OpDescribeTokens:
		return fmt.Errorf("%w: operation %s in a filter", ErrInvalid, f.Operation)
	case f.Permission != PermissionAny && f.Permission != Allow && f.Permission != Deny:
		return fmt.Errorf("%w: permission %s in a filter", ErrInvalid, f.Permission)
	}
	return nil
}

// MatchesPattern is Kafka's ResourcePatternFilter.matches.
func (f Filter) MatchesPattern(p Pattern) bool {
	if f.Type != ResourceAny && f.Type != p.Type {
		return false
	}
	if f.Pattern != PatternAny && f.Pattern != PatternMatch && f.Pattern != p.Pattern {
		return false
	}
	if f.Name == nil {
		return true
	}
	if f.Pattern != PatternMatch {
		return *f.Name == p.Name
	}
	switch p.Pattern {
	case PatternLiteral:
		return *f.Name == p.Name || p.Name == WildcardResource
	case PatternPrefixed:
		return strings.HasPrefix(*f.Name, p.Name)
	}
	return false
}

// MatchesEntry is Kafka's AccessControlEntryFilter.matches: exact fields.
func (f Filter) MatchesEntry(e Entry) bool {
	return (f.Principal == nil || *f.Principal == e.Principal) &&
		(f.Host == nil || *f.Host == e.Host) &&
		(f.Operation == OpAny || f.Operation == e.Operation) &&
		(f.Permission == PermissionAny || f.Permission == e.Permission)
}

// Matches reports whether the filter selects b.
func (f Filter) Matches(b Binding) bool {
	return f.MatchesPattern(b.Pattern) && f.MatchesEntry(b.Entry)
}
