// Package acl is weir's authorizer: Kafka's access control lists as a value
// that does no I/O. An Authorizer holds one immutable snapshot of the ACLs,
// the super users and allow.everyone.if.no.acl.found; it answers
// Authorize(principal, host, operation, resource) from that snapshot alone,
// so the same rules are tested here without a broker, a store or a socket.
// Where the ACLs live (the coordination store, in Kafka's ZooKeeper layout:
// package core/acl/aclstore) and how a broker swaps snapshots as they change
// is the caller's business.
//
// # The rules (Kafka's AclAuthorizer)
//
// A binding is a resource pattern (resource type, pattern type, name) and an
// entry (principal, host, operation, permission):
//
//	Topic:LITERAL:orders   User:alice  *          Read   Allow
//	Topic:PREFIXED:logs-   User:*      10.0.0.7   Write  Deny
//	Cluster:LITERAL:kafka-cluster  User:admin  *  All    Allow
//
// A binding applies to a request for (principal P, host H, operation O,
// resource type T, name N) when its resource type is T; its pattern is the
// LITERAL name N, the LITERAL wildcard "*", or a PREFIXED name that N starts
// with; its principal is P or "User:*"; its host is H or "*"; and its
// operation is O or All. Then:
//
//   - a super user (super.users) is allowed everything, ACLs or not;
//   - if no binding of any principal matches the resource (type, pattern and
//     name alone), allow.everyone.if.no.acl.found decides (default false);
//   - a matching Deny binding denies: deny wins over allow;
//   - a matching Allow binding allows, where Allow of Read, Write, Delete or
//     Alter also allows Describe, and Allow of AlterConfigs also allows
//     DescribeConfigs (Kafka's implications; a Deny implies nothing: Deny
//     Read does not deny Describe);
//   - nothing else is allowed.
//
// Filters (DescribeAcls, DeleteAcls) are Kafka's AclBindingFilter: resource
// type Any, pattern type Any (exact name, any pattern type) or Match (every
// pattern that applies to the name: the literal name, the wildcard, and
// prefixes of it), a nil name or principal or host matching everything,
// operation and permission Any. Entries of a filter are compared exactly:
// the filter principal "User:*" matches the bindings written for "User:*",
// not every principal.
//
// Names and codes are Kafka's: the numeric codes of the wire protocol
// (kmsg's ACLResourceType and the like) and the names of its ZooKeeper JSON
// and command-line tools ("Topic", "Read", "Allow", "LITERAL").
package acl
