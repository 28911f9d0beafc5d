package acl

import "strings"

// Config is what an authorizer decides beyond the ACLs.
type Config struct {
	// SuperUsers are allowed everything (Kafka's super.users: principals
	// such as "User:admin", compared exactly).
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows a request on a resource that no
	// binding of any principal matches (Kafka's
	// allow.everyone.if.no.acl.found; default false).
	AllowEveryoneIfNoACLFound bool
}

// ParseSuperUsers reads Kafka's super.users value: principals separated by
// ';' ("User:admin;User:broker"), blanks ignored.
func ParseSuperUsers(s string) []string {
	var us []string
	for _, u := range strings.Split(s, ";") {
		if u = strings.TrimSpace(u); u != "" {
			us = append(us, u)
		}
	}
	return us
}

// Authorizer answers whether a principal may do an operation on a resource,
// from one snapshot of the ACLs. It is immutable and safe for concurrent use;
// WithACLs returns the authorizer of a newer snapshot.
type Authorizer struct {
	cfg   Config
	super map[string]bool
	acls  *Set
}

// New returns an authorizer of cfg over acls (nil: none).
func New(cfg Config, acls *Set) *Authorizer {
	a := &Authorizer{cfg: cfg, super: map[string]bool{}, acls: acls}
	for _, u := range cfg.SuperUsers {
		a.super[u] = true
	}
	if a.acls == nil {
		a.acls = NewSet()
	}
	return a
}

// WithACLs returns an authorizer with the same config over acls.
func (a *Authorizer) WithACLs(acls *Set) *Authorizer {
	if acls == nil {
		acls = NewSet()
	}
	return &Authorizer{cfg: a.cfg, super: a.super, acls: acls}
}

// ACLs returns the snapshot the authorizer answers from.
func (a *Authorizer) ACLs() *Set { return a.acls }

// Config returns the authorizer's config.
func (a *Authorizer) Config() Config { return a.cfg }

// IsSuperUser reports whether principal is a super user.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.super[principal] }

// implied returns the operations whose Allow allows op.
func implied(op Operation) []Operation {
	switch op {
	case OpDescribe:
		return []Operation{OpDescribe, OpRead, OpWrite, OpDelete, OpAlter, OpAll}
	case OpDescribeConfigs:
		return []Operation{OpDescribeConfigs, OpAlterConfigs, OpAll}
	}
	return []Operation{op, OpAll}
}

// Authorize reports whether principal, connected from host (an IP address as
// "10.0.0.7"), may do op on r: the rules of the package doc.
func (a *Authorizer) Authorize(principal, host string, op Operation, r Resource) bool {
	if a.super[principal] {
		return true
	}
	var buf [8][]Entry
	matching := a.acls.matching(r, buf[:0])
	if len(matching) == 0 {
		return a.cfg.AllowEveryoneIfNoACLFound
	}
	for _, es := range matching {
		for _, e := range es {
			if e.Permission == Deny && (e.Operation == op || e.Operation == OpAll) && e.appliesTo(principal, host) {
				return false
			}
		}
	}
	ops := implied(op)
	for _, es := range matching {
		for _, e := range es {
			if e.Permission == Allow && containsOp(ops, e.Operation) && e.appliesTo(principal, host) {
				return true
			}
		}
	}
	return false
}

func containsOp(ops []Operation, op Operation) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

func (e Entry) appliesTo(principal, host string) bool {
	return (e.Principal == principal || e.Principal == WildcardPrincipal) && (e.Host == host || e.Host == WildcardHost)
}

// AuthorizeAny reports whether principal may do op on at least one
// resource of type t (Kafka's authorizeByResourceType, which InitProducerId
// uses: Write on any topic stands for IdempotentWrite on the cluster). A
// super user may; with allow.everyone.if.no.acl.found, so may everyone
// unless a literal wildcard binding exists (otherwise some name matches no
// binding: prefixes are never empty); then an Allow binding of op on a
// literal or prefixed pattern counts unless a Deny binding of op covers all
// of it: the literal wildcard, a prefix of the pattern's name, or (for a
// literal) the same name.
func (a *Authorizer) AuthorizeAny(principal, host string, op Operation, t ResourceType) bool {
	if a.super[principal] {
		return true
	}
	lit, pre := a.acls.literal[t], a.acls.prefixed[t]
	if _, wild := lit[WildcardResource]; !wild && a.cfg.AllowEveryoneIfNoACLFound {
		return true
	}
	matches := func(e Entry, perm Permission) bool {
		if e.Permission != perm || !e.appliesTo(principal, host) {
			return false
		}
		if perm == Deny {
			return e.Operation == op || e.Operation == OpAll
		}
		return containsOp(implied(op), e.Operation)
	}
	has := func(es []Entry, perm Permission) bool {
		for _, e := range es {
			if matches(e, perm) {
				return true
			}
		}
		return false
	}
	if has(lit[WildcardResource], Deny) {
		return false
	}
	deniedPrefix := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if has(pre[name[:i]], Deny) {
				return true
			}
		}
		return false
	}
	if has(lit[WildcardResource], Allow) {
		return true
	}
	for name, es := range pre {
		if has(es, Allow) && !deniedPrefix(name) {
			return true
		}
	}
	for name, es := range lit {
		if name != WildcardResource && has(es, Allow) && !has(es, Deny) && !deniedPrefix(name) {
			return true
		}
	}
	return false
}
