// Package coord is the coordination store: the small, ZooKeeper-shaped
// interface through which weir's brokers share cluster state (who is alive,
// who is controller, which broker holds which partition, topic configs), and
// the rules every implementation keeps.
//
// There are three implementations, and one conformance suite (coordtest) that
// every one of them passes:
//
//   - filestore: the default for a single node. The tree lives in one file in
//     the data directory, replaced atomically on every change; no ZooKeeper to
//     install or run. A single node runs the same code as a cluster of one.
//   - cluster/zk: a real ZooKeeper ensemble (go-zookeeper/zk), with Kafka's
//     ZooKeeper-mode layout (see package coord/layout).
//   - memstore: in memory, for deterministic tests: many sessions on one
//     tree, and faults on demand (failed requests, CAS conflicts, lost
//     connections, session expiry).
//
// # The model
//
// The store is a tree of nodes named by absolute paths ("/brokers/ids/1").
// Each node holds a byte slice and a Stat. A node is persistent, or ephemeral:
// an ephemeral node belongs to the session that created it and disappears when
// that session ends (expires or is closed); ephemeral nodes have no children.
// A node is created only under an existing parent (CreateAll creates missing
// parents) and deleted only when it has no children.
//
// Every write is conditional where it matters: Set and Delete take the
// version the caller last read (Stat.Version; AnyVersion to skip the check)
// and fail with ErrBadVersion when the node has moved on, so two writers never
// silently overwrite each other. Multi applies several operations atomically:
// all of them or none. A controller fences its writes by including a Check of
// /controller_epoch's version in each Multi, so a deposed controller can write
// nothing (see layout).
//
// Watches are one-shot, as in ZooKeeper: GetW, ChildrenW and ExistsW return a
// channel that receives exactly one Event and is then closed. A watch fires
// when the node's data changes or it is deleted (GetW), its children change
// (ChildrenW), or it is created, changed or deleted (ExistsW). When the
// session expires, every watch of the session fires with EventNotWatching and
// ErrSessionExpired. A lost connection does not fire watches (ZooKeeper's
// behaviour; go-zookeeper/zk#83): "no event" never means "nothing changed",
// which is why state is fenced by versions and epochs rather than trusted
// from watches.
//
// # Sessions
//
// A Store is one client session. Session reports its state and a channel
// closed at the next change, so a loop can wait for changes without ever
// missing one (the state is read, not queued). After expiry the store goes on
// with a new session (a new id): its ephemeral nodes are gone and its
// watches fired; the owner re-registers and re-reads everything.
//
// # Errors
//
// Methods return the sentinels below, wrapped (errors.Is): the path is always
// in the message. ErrConnectionLoss means the outcome is unknown: the request
// may or may not have been applied (ZooKeeper's CONNECTIONLOSS, or a ctx that
// ended first; ZooKeeper requests have no timeout of their own, so every
// implementation honours ctx). Callers resolve it by reading back, for
// example by comparing an ephemeral node's owner with their session id.
//
// # Ownership
//
// Byte slices passed in are copied before a method returns; slices returned
// belong to the caller. Returned child names are sorted.
package coord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// AnyVersion, as the version of Set, Delete or Check, matches every version.
const AnyVersion int32 = -1

// Stat describes a node.
type Stat struct {
	// Czxid orders creations: a node created after another has a larger
	// czxid (ZooKeeper's creation zxid), except that the nodes one Multi
	// creates share one (a transaction takes one zxid). The czxid of a
	// broker's registration is its broker epoch (KIP-380): a broker that
	// bounced has a larger one.
	Czxid int64
	// Mzxid orders changes: it is the zxid of the node's last data change
	// (its creation or a Set), larger after every Set. A change of the
	// node's children does not move it.
	Mzxid int64
	// Version counts Sets of the node's data, from 0 at creation.
	Version int32
	// Cversion counts changes of the node's children.
	Cversion int32
	// EphemeralOwner is the id of the session owning an ephemeral node, 0 for
	// a persistent one.
	EphemeralOwner int64
	// DataLength is len(data); NumChildren the number of children.
	DataLength  int32
	NumChildren int32
}

// CreateMode says what kind of node Create makes.
type CreateMode int8

const (
	// Persistent nodes live until deleted.
	Persistent CreateMode = iota
	// Ephemeral nodes are deleted when the creating session ends.
	Ephemeral
)

func (m CreateMode) String() string {
	switch m {
	case Persistent:
		return "persistent"
	case Ephemeral:
		return "ephemeral"
	}
	return fmt.Sprintf("CreateMode(%d)", int8(m))
}

// EventType says what a watch saw.
type EventType int8

const (
	EventNodeCreated         EventType = 1
	EventNodeDeleted         EventType = 2
	EventNodeDataChanged     EventType = 3
	EventNodeChildrenChanged EventType = 4
	// EventNotWatching: the watch was dropped without seeing a change (the
	// session expired, or the store was closed); Err says why.
	EventNotWatching EventType = -2
)

func (t EventType) String() string {
	switch t {
	case EventNodeCreated:
		return "created"
	case EventNodeDeleted:
		return "deleted"
	case EventNodeDataChanged:
		return "data-changed"
	case EventNodeChildrenChanged:
		return "children-changed"
	case EventNotWatching:
		return "not-watching"
	}
	return fmt.Sprintf("EventType(%d)", int8(t))
}

// Event is what a watch delivers, once.
type Event struct {
	Type EventType
	Path string
	Err  error // with EventNotWatching: ErrSessionExpired or ErrClosed
}

// SessionState is a session's connection state.
type SessionState int8

const (
	// Connecting: no session yet, or the connection was lost and the client
	// is reconnecting; the session (and its ephemeral nodes) may still be
	// alive on the server. Requests wait or fail with ErrConnectionLoss.
	Connecting SessionState = iota
	// Connected: the session is established and requests are served.
	Connected
	// Expired: the server ended the session; its ephemeral nodes are gone.
	// The store establishes a new session (Connecting, then Connected with
	// a new id) on its own.
	Expired
	// Closed: Close was called; every request fails with ErrClosed.
	Closed
)

func (s SessionState) String() string {
	switch s {
	case Connecting:
		return "connecting"
	case Connected:
		return "connected"
	case Expired:
		return "expired"
	case Closed:
		return "closed"
	}
	return fmt.Sprintf("SessionState(%d)", int8(s))
}

// Session is a snapshot of a store's session.
type Session struct {
	// ID is the current session's id (0 before the first session). It
	// changes when an expired session is replaced.
	ID    int64
	State SessionState
	// Changed is closed at the next change of ID or State: read the
	// snapshot, act on it, then wait on Changed, and no change is missed.
	Changed <-chan struct{}
}

// Store is one session on a coordination store. Its methods are safe for
// concurrent use. Paths are absolute, '/'-separated, without a trailing
// slash or empty, "." or ".." components (ValidatePath); "/" is the root,
// which always exists.
type Store interface {
	// Get returns the node's data and stat: ErrNoNode when it does not exist.
	Get(ctx context.Context, path string) ([]byte, Stat, error)
	// GetW is Get plus a watch that fires when the node's data changes or
	// it is deleted. No watch is set when it returns an error.
	GetW(ctx context.Context, path string) ([]byte, Stat, <-chan Event, error)
	// Exists returns the node's stat and whether it exists.
	Exists(ctx context.Context, path string) (bool, Stat, error)
	// ExistsW is Exists plus a watch that fires when the node is created,
	// changed or deleted.
	ExistsW(ctx context.Context, path string) (bool, Stat, <-chan Event, error)
	// Children returns the names (not paths) of the node's children, sorted:
	// ErrNoNode when the node does not exist.
	Children(ctx context.Context, path string) ([]string, Stat, error)
	// ChildrenW is Children plus a watch that fires when a child is created
	// or deleted, or the node itself is deleted.
	ChildrenW(ctx context.Context, path string) ([]string, Stat, <-chan Event, error)

	// Create makes a node: ErrNodeExists when there is one, ErrNoNode when
	// its parent is missing, ErrNoChildrenForEphemerals when the parent is
	// ephemeral.
	Create(ctx context.Context, path string, data []byte, mode CreateMode) error
	// Set replaces the node's data if its version is version (or version is
	// AnyVersion), returning the new stat: ErrNoNode, ErrBadVersion.
	Set(ctx context.Context, path string, data []byte, version int32) (Stat, error)
	// Delete deletes the node if its version is version (or AnyVersion):
	// ErrNoNode, ErrBadVersion, ErrNotEmpty.
	Delete(ctx context.Context, path string, version int32) error
	// Multi applies ops atomically, in order: either all succeed (each
	// operation's result is returned, a SetOp's Stat as of that operation)
	// or none is applied and the error wraps a *MultiError (errors.As)
	// naming the first operation that failed and why.
	Multi(ctx context.Context, ops ...Op) ([]OpResult, error)

	// Session returns the session's current state.
	Session() Session
	// Close ends the session (its ephemeral nodes are deleted, its watches
	// fire with EventNotWatching/ErrClosed, watches of its own ephemeral
	// nodes too) and releases the store. Later calls fail with ErrClosed;
	// Close again returns nil.
	Close() error
}

// Op is one operation of a Multi: *CreateOp, *SetOp, *DeleteOp or *CheckOp.
type Op interface {
	OpPath() string
	isOp()
}

// CreateOp is Create inside a Multi.
type CreateOp struct {
	Path string
	Data []byte
	Mode CreateMode
}

// SetOp is Set inside a Multi.
type SetOp struct {
	Path    string
	Data    []byte
	Version int32
}

// DeleteOp is Delete inside a Multi.
type DeleteOp struct {
	Path    string
	Version int32
}

// CheckOp succeeds only if the node exists with version Version (or exists
// at all, with AnyVersion): the fence of a controller's writes.
type CheckOp struct {
	Path    string
	Version int32
}

func (o *CreateOp) OpPath() string { return o.Path }
func (o *SetOp) OpPath() string    { return o.Path }
func (o *DeleteOp) OpPath() string { return o.Path }
func (o *CheckOp) OpPath() string  { return o.Path }
func (*CreateOp) isOp()            {}
func (*SetOp) isOp()               {}
func (*DeleteOp) isOp()            {}
func (*CheckOp) isOp()             {}

// OpResult is one operation's result in a successful Multi: the new stat for
// a SetOp, zero for the others.
type OpResult struct {
	Stat Stat
}

// MultiError is why a Multi applied nothing: operation Index (of Op, on
// Path) failed with Err. errors.Is(err, ErrBadVersion) and the like see Err.
type MultiError struct {
	Index int
	Op    Op
	Err   error
}

func (e *MultiError) Error() string {
	return fmt.Sprintf("coord: multi: operation %d (%T on %s): %v", e.Index, e.Op, e.Op.OpPath(), e.Err)
}

func (e *MultiError) Unwrap() error { return e.Err }

var (
	// ErrNoNode: the node (or, for Create, its parent) does not exist.
	ErrNoNode = errors.New("coord: no such node")
	// ErrNodeExists: Create found a node at the path.
	ErrNodeExists = errors.New("coord: node exists")
	// ErrBadVersion: the node's version is not the one the write expected.
	ErrBadVersion = errors.New("coord: version mismatch")
	// ErrNotEmpty: Delete of a node that has children.
	ErrNotEmpty = errors.New("coord: node has children")
	// ErrNoChildrenForEphemerals: Create under an ephemeral node.
	ErrNoChildrenForEphemerals = errors.New("coord: ephemeral nodes have no children")
	// ErrInvalidPath: the path breaks ValidatePath's rules.
	ErrInvalidPath = errors.New("coord: invalid path")
	// ErrConnectionLoss: the outcome of the request is unknown (the
	// connection was lost, or ctx ended, while it was in flight, or the
	// store could not be reached before ctx ended).
	ErrConnectionLoss = errors.New("coord: connection lost, outcome unknown")
	// ErrSessionExpired: the session ended; its ephemeral nodes are gone.
	ErrSessionExpired = errors.New("coord: session expired")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("coord: store closed")
)

// ValidatePath checks a path: absolute, '/'-separated, no trailing slash
// (except the root "/"), no empty, "." or ".." component, no NUL, valid
// UTF-8 (ZooKeeper's paths are strings, and the file store's file is JSON:
// other bytes would not come back as they went in).
func ValidatePath(path string) error {
	if path == "/" {
		return nil
	}
	if !strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") || strings.ContainsRune(path, 0) ||
		!utf8.ValidString(path) {
		return fmt.Errorf("%w: %q", ErrInvalidPath, path)
	}
	for _, c := range strings.Split(path[1:], "/") {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("%w: %q", ErrInvalidPath, path)
		}
	}
	return nil
}

// Parent returns the parent of a valid path ("/" for a top-level node and
// for the root itself).
func Parent(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

// Join joins a parent path and a child name.
func Join(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}

// CreateAll creates path with data and mode, first creating every missing
// ancestor as an empty persistent node (racing creators of an ancestor are
// fine). It returns ErrNodeExists when path itself exists.
func CreateAll(ctx context.Context, s Store, path string, data []byte, mode CreateMode) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	err := s.Create(ctx, path, data, mode)
	if !errors.Is(err, ErrNoNode) {
		return err
	}
	if perr := EnsurePath(ctx, s, Parent(path)); perr != nil {
		return perr
	}
	return s.Create(ctx, path, data, mode)
}

// WatchNode reads a node that may not exist, with a watch that fires on
// its next change: creation, data change or deletion. Existing nodes take
// one request (GetW); a missing one an ExistsW, and a Get if it was
// created in between (an exists watch set on an existing node fires on its
// next change, not on the creation that already happened).
func WatchNode(ctx context.Context, s Store, path string) (data []byte, exists bool, st Stat, watch <-chan Event, err error) {
	data, st, watch, err = s.GetW(ctx, path)
	if err == nil {
		return data, true, st, watch, nil
	}
	if !errors.Is(err, ErrNoNode) {
		return nil, false, st, nil, err
	}
	exists, _, watch, err = s.ExistsW(ctx, path)
	if err != nil || !exists {
		return nil, false, Stat{}, watch, err
	}
	// Created since: the ExistsW watch covers its changes and deletion.
	data, st, err = s.Get(ctx, path)
	if errors.Is(err, ErrNoNode) {
		return nil, false, Stat{}, watch, nil
	}
	if err != nil {
		return nil, false, Stat{}, nil, err
	}
	return data, true, st, watch, nil
}

// EnsurePath creates path and its missing ancestors as empty persistent
// nodes; existing ones are left as they are.
func EnsurePath(ctx context.Context, s Store, path string) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	if path == "/" {
		return nil
	}
	cur := ""
	for _, c := range strings.Split(path[1:], "/") {
		cur += "/" + c
		if err := s.Create(ctx, cur, nil, Persistent); err != nil && !errors.Is(err, ErrNodeExists) {
			return err
		}
	}
	return nil
}
