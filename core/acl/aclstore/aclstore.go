// Package aclstore keeps ACLs in the coordination store, in Kafka's
// ZooKeeper-mode layout (ZkData.scala, AclEntry, ZkAclChangeStore), so
// Kafka's own tools could read them and weir reads what they wrote:
//
//	/kafka-acl/<ResourceType>/<name>                       LITERAL patterns
//	/kafka-acl-extended/prefixed/<ResourceType>/<name>     PREFIXED patterns
//	    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
//	                          "operation":"Read","host":"*"}, ...]}
//	/kafka-acl-changes/acl_changes_<10 digits>             "Topic:orders" (a LITERAL pattern changed)
//	/kafka-acl-extended-changes/acl_changes_<10 digits>    {"version":1,"resourceType":"Topic",
//	                                                        "name":"logs-","patternType":"PREFIXED"}
//
// ResourceType is Kafka's name (Topic, Group, Cluster, TransactionalId,
// DelegationToken); a pattern with no entries has no node (Kafka deletes it).
//
// Every change of a pattern's node is a compare-and-set on the version read,
// in one Multi with a new change node, so two writers never lose each
// other's change and every change is announced. The coordination store has
// no sequential nodes: a writer names its change node one past the highest
// it saw, and a race for the name (ErrNodeExists) is retried like a version
// conflict. Writers prune all but the newest KeepChanges change nodes.
//
// Brokers watch the children of both change paths (Watch): every change
// re-reads the whole tree into a new acl.Set (ACL sets are small; a full
// read is simple and never misses a change, also after a lost session or
// connection, when Watch reads again anyway). A node that is not what the
// layout says is an error naming its path (ErrMalformed), never a silently
// partial set: a dropped Deny would allow what it denied.
package aclstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/core/acl"
	"github.com/weir-broker/weir/core/coord"
)

// The paths, Kafka's.
const (
	LiteralPath         = "/kafka-acl"
	PrefixedPath        = "/kafka-acl-extended/prefixed"
	LiteralChangesPath  = "/kafka-acl-changes"
	ExtendedChangesPath = "/kafka-acl-extended-changes"
	changePrefix        = "acl_changes_"
)

// KeepChanges is how many change nodes of each kind writers keep.
const KeepChanges = 100

// keepChanges is KeepChanges, lowered by tests.
var keepChanges = KeepChanges

var (
	// ErrMalformed: a node is not what the layout says; the message names
	// the path and what is wrong.
	ErrMalformed = errors.New("aclstore: malformed node")
	// ErrInvalid: a pattern whose name cannot be a node's name.
	ErrInvalid = errors.New("aclstore: invalid")
)

// resourceTypes are the types a layout path names, in Kafka's spelling.
var resourceTypes = []acl.ResourceType{acl.ResourceTopic, acl.ResourceGroup, acl.ResourceCluster,
	acl.ResourceTransactionalID, acl.ResourceDelegationToken}

// PatternPath is the node of a pattern's entries.
func PatternPath(p acl.Pattern) (string, error) {
	if p.Name == "" || strings.Contains(p.Name, "/") || p.Name == "." || p.Name == ".." {
		return "", fmt.Errorf("%w: resource name %q cannot name a node", ErrInvalid, p.Name)
	}
	root := LiteralPath
	if p.Pattern == acl.PatternPrefixed {
		root = PrefixedPath
	}
	path := root + "/" + p.Type.String() + "/" + p.Name
	if err := coord.ValidatePath(path); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return path, nil
}

type jsonEntry struct {
	Principal      string `json:"principal"`
	PermissionType string `json:"permissionType"`
	Operation      string `json:"operation"`
	Host           string `json:"host"`
}

type jsonACLs struct {
	Version int         `json:"version"`
	ACLs    []jsonEntry `json:"acls"`
}

// Encode is a pattern node's data.
func Encode(es []acl.Entry) []byte {
	j := jsonACLs{Version: 1, ACLs: make([]jsonEntry, len(es))}
	for i, e := range es {
		j.ACLs[i] = jsonEntry{Principal: e.Principal, PermissionType: e.Permission.String(),
			Operation: e.Operation.String(), Host: e.Host}
	}
	b, _ := json.Marshal(j) // strings only: never fails
	return b
}

// Decode reads a pattern node's data; path is for errors.
func Decode(path string, data []byte) ([]acl.Entry, error) {
	var j jsonACLs
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrMalformed, path, err)
	}
	if j.Version != 1 {
		return nil, fmt.Errorf("%w %s: version %d, want 1", ErrMalformed, path, j.Version)
	}
	es := make([]acl.Entry, 0, len(j.ACLs))
	for i, je := range j.ACLs {
		op, err := acl.ParseOperation(je.Operation)
		if err == nil && (op == acl.OpAny || op == acl.OpUnknown) {
			err = fmt.Errorf("operation %q in a binding", je.Operation)
		}
		if err != nil {
			return nil, fmt.Errorf("%w %s: acls[%d]: %v", ErrMalformed, path, i, err)
		}
		perm, err := acl.ParsePermission(je.PermissionType)
		if err == nil && perm != acl.Allow && perm != acl.Deny {
			err = fmt.Errorf("permissionType %q: want Allow or Deny", je.PermissionType)
		}
		if err != nil {
			return nil, fmt.Errorf("%w %s: acls[%d]: %v", ErrMalformed, path, i, err)
		}
		e := acl.Entry{Principal: je.Principal, Host: je.Host, Operation: op, Permission: perm}
		if strings.IndexByte(e.Principal, ':') <= 0 || e.Host == "" {
			return nil, fmt.Errorf("%w %s: acls[%d]: principal %q, host %q: want Type:name and a host", ErrMalformed, path, i, e.Principal, e.Host)
		}
		es = append(es, e)
	}
	return es, nil
}

// Version orders reads of one store session: the newest change node of
// each kind seen before the ACLs were read (-1: none). A read whose Version
// is at least another's in both fields saw everything the other saw.
type Version struct{ Literal, Extended int64 }

// AtLeast reports whether v saw everything o saw.
func (v Version) AtLeast(o Version) bool { return v.Literal >= o.Literal && v.Extended >= o.Extended }

// ReadVersioned reads the newest change node of each kind, then every
// binding: so the set is at least as new as the Version returned.
func ReadVersioned(ctx context.Context, s coord.Store) (*acl.Set, Version, error) {
	v := Version{-1, -1}
	for _, c := range []struct {
		path string
		seq  *int64
	}{{LiteralChangesPath, &v.Literal}, {ExtendedChangesPath, &v.Extended}} {
		seqs, err := changeSeqs(ctx, s, c.path)
		if errors.Is(err, coord.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, v, err
		}
		if len(seqs) > 0 {
			*c.seq = seqs[len(seqs)-1]
		}
	}
	set, err := Read(ctx, s)
	return set, v, err
}

// Read reads every binding in the store.
func Read(ctx context.Context, s coord.Store) (*acl.Set, error) {
	var bs []acl.Binding
	for _, root := range []struct {
		path string
		pt   acl.PatternType
	}{{LiteralPath, acl.PatternLiteral}, {PrefixedPath, acl.PatternPrefixed}} {
		types, _, err := s.Children(ctx, root.path)
		if errors.Is(err, coord.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("aclstore: read %s: %w", root.path, err)
		}
		for _, tn := range types {
			tpath := root.path + "/" + tn
			if root.pt == acl.PatternLiteral && tn == "extended" { // not ours (an older layout's parent)
				continue
			}
			rt, err := acl.ParseResourceType(tn)
			if err != nil || rt == acl.ResourceAny || tn != rt.String() {
				return nil, fmt.Errorf("%w %s: not a resource type (want one of Topic, Group, Cluster, TransactionalId, DelegationToken)", ErrMalformed, tpath)
			}
			names, _, err := s.Children(ctx, tpath)
			if errors.Is(err, coord.ErrNoNode) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("aclstore: read %s: %w", tpath, err)
			}
			for _, name := range names {
				path := tpath + "/" + name
				data, _, err := s.Get(ctx, path)
				if errors.Is(err, coord.ErrNoNode) { // deleted meanwhile
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("aclstore: read %s: %w", path, err)
				}
				es, err := Decode(path, data)
				if err != nil {
					return nil, err
				}
				p := acl.Pattern{Type: rt, Pattern: root.pt, Name: name}
				for _, e := range es {
					bs = append(bs, acl.Binding{Pattern: p, Entry: e})
				}
			}
		}
	}
	return acl.NewSet(bs...), nil
}

// Update changes the entries of pattern p to fn(entries now), by
// compare-and-set with a change node (retried on conflicts until ctx ends).
// fn may be called several times; it must not keep or change its argument.
// No entries deletes the node. It returns what fn returned last.
func Update(ctx context.Context, s coord.Store, p acl.Pattern, fn func([]acl.Entry) []acl.Entry) ([]acl.Entry, error) {
	path, err := PatternPath(p)
	if err != nil {
		return nil, err
	}
	changes := LiteralChangesPath
	note := []byte(p.Type.String() + ":" + p.Name)
	if p.Pattern == acl.PatternPrefixed {
		changes = ExtendedChangesPath
		note, _ = json.Marshal(map[string]any{"version": 1, "resourceType": p.Type.String(), "name": p.Name,
			"patternType": p.Pattern.String()})
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("aclstore: update %s: %w", path, err)
		}
		// Each round: a conflict may have been a parent deleted meanwhile.
		if err := coord.EnsurePath(ctx, s, changes); err != nil {
			return nil, fmt.Errorf("aclstore: %s: %w", changes, err)
		}
		var (
			cur     []acl.Entry
			version int32 = -1
		)
		data, st, err := s.Get(ctx, path)
		switch {
		case errors.Is(err, coord.ErrNoNode):
		case err != nil:
			return nil, fmt.Errorf("aclstore: read %s: %w", path, err)
		default:
			if cur, err = Decode(path, data); err != nil {
				return nil, err
			}
			version = st.Version
		}
		next := fn(cur)
		if sameEntries(cur, next) {
			return next, nil
		}
		var ops []coord.Op
		switch {
		case len(next) == 0:
			ops = append(ops, &coord.DeleteOp{Path: path, Version: version})
		case version < 0:
			if err := coord.EnsurePath(ctx, s, coord.Parent(path)); err != nil {
				return nil, fmt.Errorf("aclstore: %s: %w", coord.Parent(path), err)
			}
			ops = append(ops, &coord.CreateOp{Path: path, Data: Encode(next), Mode: coord.Persistent})
		default:
			ops = append(ops, &coord.SetOp{Path: path, Data: Encode(next), Version: version})
		}
		seqs, err := changeSeqs(ctx, s, changes)
		if err != nil {
			return nil, err
		}
		seq := int64(0)
		if len(seqs) > 0 {
			seq = seqs[len(seqs)-1] + 1
		}
		ops = append(ops, &coord.CreateOp{Path: changePath(changes, seq), Data: note, Mode: coord.Persistent})
		_, err = s.Multi(ctx, ops...)
		if errors.Is(err, coord.ErrBadVersion) || errors.Is(err, coord.ErrNodeExists) || errors.Is(err, coord.ErrNoNode) {
			continue // someone else changed p or announced a change first: again
		}
		if err != nil {
			return nil, fmt.Errorf("aclstore: write %s: %w", path, err)
		}
		prune(ctx, s, changes, append(seqs, seq))
		return next, nil
	}
}

func sameEntries(a, b []acl.Entry) bool {
	sa, sb := acl.NewSet(bindings(a)...), acl.NewSet(bindings(b)...)
	x, y := sa.Bindings(), sb.Bindings()
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

func bindings(es []acl.Entry) []acl.Binding {
	bs := make([]acl.Binding, len(es))
	for i, e := range es {
		bs[i] = acl.Binding{Entry: e}
	}
	return bs
}

func changePath(parent string, seq int64) string {
	return fmt.Sprintf("%s/%s%010d", parent, changePrefix, seq)
}

// changeSeqs returns the sequence numbers of the change nodes, sorted
// (names not of the form acl_changes_<n> are ignored: not ours).
func changeSeqs(ctx context.Context, s coord.Store, parent string) ([]int64, error) {
	names, _, err := s.Children(ctx, parent)
	if err != nil {
		return nil, fmt.Errorf("aclstore: read %s: %w", parent, err)
	}
	var seqs []int64
	for _, n := range names {
		if rest, ok := strings.CutPrefix(n, changePrefix); ok {
			if v, err := strconv.ParseInt(rest, 10, 64); err == nil && v >= 0 {
				seqs = append(seqs, v)
			}
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs, nil
}

// prune deletes all but the newest KeepChanges change nodes (best effort:
// another writer may be pruning too).
func prune(ctx context.Context, s coord.Store, parent string, seqs []int64) {
	for len(seqs) > keepChanges {
		_ = s.Delete(ctx, changePath(parent, seqs[0]), coord.AnyVersion)
		seqs = seqs[1:]
	}
}

// Add adds bindings (already validated), one pattern at a time.
func Add(ctx context.Context, s coord.Store, bs []acl.Binding) error {
	byPattern := map[acl.Pattern][]acl.Entry{}
	var order []acl.Pattern
	for _, b := range bs {
		if _, ok := byPattern[b.Pattern]; !ok {
			order = append(order, b.Pattern)
		}
		byPattern[b.Pattern] = append(byPattern[b.Pattern], b.Entry)
	}
	for _, p := range order {
		add := byPattern[p]
		if _, err := Update(ctx, s, p, func(cur []acl.Entry) []acl.Entry {
			return append(append([]acl.Entry(nil), cur...), add...)
		}); err != nil {
			return err
		}
	}
	return nil
}

// Remove deletes the bindings each filter matches and returns them, per
// filter (a binding two filters match is reported for the first only, as
// Kafka does not promise otherwise). Filters are validated already.
func Remove(ctx context.Context, s coord.Store, fs []acl.Filter) ([][]acl.Binding, error) {
	all, err := Read(ctx, s)
	if err != nil {
		return nil, err
	}
	out := make([][]acl.Binding, len(fs))
	for _, p := range all.Patterns() {
		match := false
		for _, f := range fs {
			match = match || f.MatchesPattern(p)
		}
		if !match {
			continue
		}
		var removed [][]acl.Binding
		if _, err := Update(ctx, s, p, func(cur []acl.Entry) []acl.Entry {
			removed = make([][]acl.Binding, len(fs))
			var keep []acl.Entry
		entries:
			for _, e := range cur {
				for i, f := range fs {
					if f.Matches(acl.Binding{Pattern: p, Entry: e}) {
						removed[i] = append(removed[i], acl.Binding{Pattern: p, Entry: e})
						continue entries
					}
				}
				keep = append(keep, e)
			}
			return keep
		}); err != nil {
			return out, err
		}
		for i := range removed {
			out[i] = append(out[i], removed[i]...)
		}
	}
	return out, nil
}
