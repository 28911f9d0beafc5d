// Package tree is the node tree that memstore and filestore share: nodes and
// their stats, one zxid counter, ephemeral nodes per session, one-shot
// watches, and transactions that apply a list of operations atomically and
// can still be rolled back after they applied.
//
// A transaction also records its Changes to the persistent state, which Redo
// re-applies to a tree loaded from a snapshot: filestore's journal.
//
// The two-phase transaction is what lets the stores differ only where they
// must: memstore commits at once; filestore journals the transaction's
// changes first and rolls back when the write fails, so memory never holds a
// change the disk refused. Several requests can be steps of one transaction
// (Begin, Step), so that one fsync makes them all durable. Watches fire at Commit, never for a transaction
// that was rolled back.
//
// The rules are ZooKeeper's (DataTree): a transaction that changes something
// takes the next zxid, and every node it creates or sets gets that zxid as
// czxid or mzxid (so nodes created in one Multi share a czxid); Version counts
// Sets, Cversion counts creations and deletions of children; a node watch
// (GetW, ExistsW) fires on creation, data change or deletion, a child watch
// (ChildrenW) on a child's creation or deletion and on the node's deletion.
//
// A Tree is not safe for concurrent use: the stores hold a lock around it.
// Between Apply and Commit or Rollback, nothing else may use the tree.
package tree

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/weir-broker/weir/core/coord"
)

// Tree is a node tree with watches. The zero value is not usable: call New.
type Tree struct {
	nodes map[string]*node
	zxid  int64
	// ephemerals holds each live session's ephemeral paths.
	ephemerals map[int64]map[string]struct{}
	// nodeWatches (GetW, ExistsW) and childWatches (ChildrenW), by path.
	nodeWatches  map[string][]*watch
	childWatches map[string][]*watch
	// paused sessions do not receive events yet: they are held here, in
	// order, until Resume (a lost connection).
	paused map[int64][]held
	open   *Txn // the transaction between Apply and Commit/Rollback
}

type node struct {
	data     []byte
	stat     coord.Stat // DataLength and NumChildren are derived in statOf
	children map[string]struct{}
}

type watch struct {
	ch      chan coord.Event
	session int64
	path    string
}

type held struct {
	w  *watch
	ev coord.Event
}

// New returns a tree holding only the root "/" (czxid 0) at zxid 0.
func New() *Tree {
	return &Tree{
		nodes:        map[string]*node{"/": {children: map[string]struct{}{}}},
		ephemerals:   map[int64]map[string]struct{}{},
		nodeWatches:  map[string][]*watch{},
		childWatches: map[string][]*watch{},
		paused:       map[int64][]held{},
	}
}

// Zxid returns the zxid of the last transaction that changed the tree.
func (t *Tree) Zxid() int64 { return t.zxid }

// Bump takes the next zxid without changing any node and returns it
// (filestore's session creation, a transaction of its own as in ZooKeeper).
func (t *Tree) Bump() int64 {
	t.idle()
	t.zxid++
	return t.zxid
}

func (t *Tree) idle() {
	if t.open != nil {
		panic("tree: used between Apply and Commit/Rollback")
	}
}

func statOf(n *node) coord.Stat {
	s := n.stat
	s.DataLength = int32(len(n.data))
	s.NumChildren = int32(len(n.children))
	return s
}

// Get returns a copy of the node's data and its stat: coord.ErrNoNode.
func (t *Tree) Get(path string) ([]byte, coord.Stat, error) {
	t.idle()
	if err := coord.ValidatePath(path); err != nil {
		return nil, coord.Stat{}, err
	}
	n, ok := t.nodes[path]
	if !ok {
		return nil, coord.Stat{}, coord.ErrNoNode
	}
	return bytes.Clone(n.data), statOf(n), nil
}

// Exists returns the node's stat and whether it exists.
func (t *Tree) Exists(path string) (bool, coord.Stat, error) {
	t.idle()
	if err := coord.ValidatePath(path); err != nil {
		return false, coord.Stat{}, err
	}
	n, ok := t.nodes[path]
	if !ok {
		return false, coord.Stat{}, nil
	}
	return true, statOf(n), nil
}

// Children returns the sorted names of the node's children and its stat:
// coord.ErrNoNode.
func (t *Tree) Children(path string) ([]string, coord.Stat, error) {
	t.idle()
	if err := coord.ValidatePath(path); err != nil {
		return nil, coord.Stat{}, err
	}
	n, ok := t.nodes[path]
	if !ok {
		return nil, coord.Stat{}, coord.ErrNoNode
	}
	return slices.Sorted(maps.Keys(n.children)), statOf(n), nil
}

// WatchKind says which events a watch wants.
type WatchKind int8

const (
	// WatchNode is GetW's and ExistsW's watch: the node's creation, data
	// change or deletion.
	WatchNode WatchKind = iota
	// WatchChildren is ChildrenW's: a child created or deleted, or the node
	// deleted.
	WatchChildren
)

// Watch registers a one-shot watch of session on path and returns its
// channel (buffered: the one Event never blocks the writer, then it is
// closed). Register it under the same lock as the read it belongs to, so no
// change falls between them.
func (t *Tree) Watch(kind WatchKind, path string, session int64) <-chan coord.Event {
	t.idle()
	w := &watch{ch: make(chan coord.Event, 1), session: session, path: path}
	m := t.nodeWatches
	if kind == WatchChildren {
		m = t.childWatches
	}
	m[path] = append(m[path], w)
	return w.ch
}

func (t *Tree) deliver(w *watch, ev coord.Event) {
	if q, ok := t.paused[w.session]; ok {
		t.paused[w.session] = append(q, held{w, ev})
		return
	}
	w.ch <- ev
	close(w.ch)
}

// Pause holds session's events until Resume: a client that lost its
// connection hears of nothing, though its watches stay set on the server.
func (t *Tree) Pause(session int64) {
	if _, ok := t.paused[session]; !ok {
		t.paused[session] = nil
	}
}

// Resume delivers the events held for session, in order, and ends the pause
// (ZooKeeper's client re-sends its watches on reconnecting and the server
// fires those whose nodes changed meanwhile).
func (t *Tree) Resume(session int64) {
	q, ok := t.paused[session]
	if !ok {
		return
	}
	delete(t.paused, session)
	for _, h := range q {
		t.deliver(h.w, h.ev)
	}
}

// DropWatches ends every watch of session, and every event held for it,
// with EventNotWatching and err (coord.ErrSessionExpired or coord.ErrClosed),
// and ends any pause.
func (t *Tree) DropWatches(session int64, err error) {
	t.idle()
	var drop []*watch
	for _, m := range []map[string][]*watch{t.nodeWatches, t.childWatches} {
		for _, path := range slices.Sorted(maps.Keys(m)) {
			ws := m[path]
			keep := ws[:0]
			for _, w := range ws {
				if w.session == session {
					drop = append(drop, w)
				} else {
					keep = append(keep, w)
				}
			}
			if len(keep) == 0 {
				delete(m, path)
			} else {
				m[path] = keep
			}
		}
	}
	for _, h := range t.paused[session] {
		drop = append(drop, h.w)
	}
	delete(t.paused, session)
	for _, w := range drop {
		w.ch <- coord.Event{Type: coord.EventNotWatching, Path: w.path, Err: err}
		close(w.ch)
	}
}

// fire delivers ev to every watch of path in m and removes them.
func (t *Tree) fire(m map[string][]*watch, path string, typ coord.EventType) {
	ws := m[path]
	delete(m, path)
	for _, w := range ws {
		t.deliver(w, coord.Event{Type: typ, Path: path})
	}
}

// Persisted is one persistent node as filestore stores it.
type Persisted struct {
	Path     string
	Data     []byte
	Czxid    int64
	Mzxid    int64
	Version  int32
	Cversion int32
}

// Persistent returns the tree's zxid and its persistent nodes, sorted by
// path, as they will be once every session has ended: ephemeral nodes are
// left out, and each parent's Cversion counts the deletion of its ephemeral
// children (as the end of their session will). Data aliases the tree's: read
// it before the tree changes, never write it.
func (t *Tree) Persistent() (int64, []Persisted) {
	out := make([]Persisted, 0, len(t.nodes))
	for _, path := range slices.Sorted(maps.Keys(t.nodes)) {
		n := t.nodes[path]
		if n.stat.EphemeralOwner != 0 {
			continue
		}
		cv := n.stat.Cversion
		for name := range n.children {
			if t.nodes[coord.Join(path, name)].stat.EphemeralOwner != 0 {
				cv++
			}
		}
		out = append(out, Persisted{Path: path, Data: n.data, Czxid: n.stat.Czxid, Mzxid: n.stat.Mzxid,
			Version: n.stat.Version, Cversion: cv})
	}
	return t.zxid, out
}

// Load builds a tree from persistent nodes (it takes ownership of their
// Data) and checks that they form one: the root present, every other node's
// parent present, no path twice, zxids within 0..zxid with mzxid >= czxid,
// versions not negative.
func Load(zxid int64, nodes []Persisted) (*Tree, error) {
	if zxid < 0 {
		return nil, fmt.Errorf("negative zxid %d", zxid)
	}
	t := New()
	t.zxid = zxid
	delete(t.nodes, "/")
	for _, p := range nodes {
		if err := coord.ValidatePath(p.Path); err != nil {
			return nil, err
		}
		if _, dup := t.nodes[p.Path]; dup {
			return nil, fmt.Errorf("node %s twice", p.Path)
		}
		switch {
		case p.Czxid < 0 || p.Czxid > zxid || p.Mzxid < p.Czxid || p.Mzxid > zxid:
			return nil, fmt.Errorf("node %s: czxid %d, mzxid %d: want 0 <= czxid <= mzxid <= zxid %d", p.Path, p.Czxid, p.Mzxid, zxid)
		case p.Version < 0 || p.Cversion < 0:
			return nil, fmt.Errorf("node %s: negative version %d or cversion %d", p.Path, p.Version, p.Cversion)
		}
		t.nodes[p.Path] = &node{data: p.Data, children: map[string]struct{}{},
			stat: coord.Stat{Czxid: p.Czxid, Mzxid: p.Mzxid, Version: p.Version, Cversion: p.Cversion}}
	}
	if _, ok := t.nodes["/"]; !ok {
		return nil, fmt.Errorf("no root node")
	}
	for path := range t.nodes {
		if path == "/" {
			continue
		}
		parent, ok := t.nodes[coord.Parent(path)]
		if !ok {
			return nil, fmt.Errorf("node %s: parent %s missing", path, coord.Parent(path))
		}
		parent.children[base(path)] = struct{}{}
	}
	return t, nil
}

// base returns the last component of a valid path other than the root.
func base(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }
