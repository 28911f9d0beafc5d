package tree

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/weir-broker/weir/core/coord"
)

// Txn is a transaction that applied and waits for Commit (its watches fire)
// or Rollback (the tree is as before Apply).
type Txn struct {
	t       *Tree
	zxid    int64    // 0 until the first change
	undo    []func() // run in reverse by Rollback
	events  []event  // fired in order by Commit
	Results []coord.OpResult
}

type event struct {
	path    string
	typ     coord.EventType
	child   bool // a child watch of path; else a node watch
	alsoOut bool // with typ deleted: the child watches of path fire too
}

// Changed reports whether the transaction changed the tree (a Multi of
// CheckOps does not), and so took a zxid.
func (tx *Txn) Changed() bool { return tx.zxid != 0 }

// Commit keeps the changes and fires the watches they trigger.
func (tx *Txn) Commit() {
	t := tx.end()
	for _, e := range tx.events {
		switch {
		case e.child:
			t.fire(t.childWatches, e.path, e.typ)
		default:
			t.fire(t.nodeWatches, e.path, e.typ)
			if e.alsoOut {
				t.fire(t.childWatches, e.path, e.typ)
			}
		}
	}
}

// Rollback undoes the changes; no watch fires.
func (tx *Txn) Rollback() {
	tx.end()
	for i := len(tx.undo) - 1; i >= 0; i-- {
		tx.undo[i]()
	}
}

func (tx *Txn) end() *Tree {
	t := tx.t
	if t.open != tx {
		panic("tree: transaction committed or rolled back twice")
	}
	t.open = nil
	return t
}

// Apply applies ops in order for session, atomically: on success it returns
// the open transaction (with a result per op), which the caller must Commit
// or Rollback before using the tree again; on failure the tree is unchanged
// and it returns the index of the operation that failed and why (a sentinel
// of package coord, wrapped with detail).
func (t *Tree) Apply(session int64, ops []coord.Op) (*Txn, int, error) {
	t.idle()
	tx := &Txn{t: t}
	t.open = tx
	for i, op := range ops {
		res, err := tx.apply(session, op)
		if err != nil {
			tx.Rollback()
			return nil, i, err
		}
		tx.Results = append(tx.Results, res)
	}
	return tx, -1, nil
}

// EndSession deletes session's ephemeral nodes, in one transaction that the
// caller must Commit or Rollback (a session with none changes nothing).
func (t *Tree) EndSession(session int64) *Txn {
	t.idle()
	tx := &Txn{t: t}
	t.open = tx
	for _, path := range slices.Sorted(maps.Keys(t.ephemerals[session])) {
		if err := tx.delete(path, coord.AnyVersion); err != nil {
			panic(fmt.Sprintf("tree: ending session %d: %v", session, err)) // ephemerals have no children
		}
	}
	return tx
}

// next returns the transaction's zxid, taking it at the first change.
func (tx *Txn) next() int64 {
	if tx.zxid == 0 {
		t := tx.t
		t.zxid++
		tx.zxid = t.zxid
		tx.undo = append(tx.undo, func() { t.zxid-- })
	}
	return tx.zxid
}

func (tx *Txn) apply(session int64, op coord.Op) (coord.OpResult, error) {
	if err := coord.ValidatePath(op.OpPath()); err != nil {
		return coord.OpResult{}, err
	}
	switch op := op.(type) {
	case *coord.CreateOp:
		return coord.OpResult{}, tx.create(session, op.Path, op.Data, op.Mode)
	case *coord.SetOp:
		st, err := tx.set(op.Path, op.Data, op.Version)
		return coord.OpResult{Stat: st}, err
	case *coord.DeleteOp:
		return coord.OpResult{}, tx.delete(op.Path, op.Version)
	case *coord.CheckOp:
		n, ok := tx.t.nodes[op.Path]
		if !ok {
			return coord.OpResult{}, coord.ErrNoNode
		}
		return coord.OpResult{}, checkVersion(n, op.Version)
	}
	return coord.OpResult{}, fmt.Errorf("%w: unknown operation %T", coord.ErrInvalidPath, op)
}

func checkVersion(n *node, version int32) error {
	if version != coord.AnyVersion && version != n.stat.Version {
		return fmt.Errorf("%w: version %d, expected %d", coord.ErrBadVersion, n.stat.Version, version)
	}
	return nil
}

func (tx *Txn) create(session int64, path string, data []byte, mode coord.CreateMode) error {
	t := tx.t
	if _, ok := t.nodes[path]; ok {
		return coord.ErrNodeExists
	}
	pp := coord.Parent(path)
	parent, ok := t.nodes[pp]
	switch {
	case !ok:
		return fmt.Errorf("%w: parent %s", coord.ErrNoNode, pp)
	case parent.stat.EphemeralOwner != 0:
		return fmt.Errorf("%w: parent %s", coord.ErrNoChildrenForEphemerals, pp)
	case mode != coord.Persistent && mode != coord.Ephemeral:
		return fmt.Errorf("%w: mode %v", coord.ErrInvalidPath, mode)
	case mode == coord.Ephemeral && session == 0:
		return fmt.Errorf("%w: ephemeral node without a session", coord.ErrInvalidPath)
	}
	z := tx.next()
	var owner int64
	if mode == coord.Ephemeral {
		owner = session
	}
	n := &node{data: bytes.Clone(data), children: map[string]struct{}{},
		stat: coord.Stat{Czxid: z, Mzxid: z, EphemeralOwner: owner}}
	tx.link(path, parent, n)
	tx.events = append(tx.events,
		event{path: path, typ: coord.EventNodeCreated},
		event{path: pp, typ: coord.EventNodeChildrenChanged, child: true})
	return nil
}

func (tx *Txn) set(path string, data []byte, version int32) (coord.Stat, error) {
	n, ok := tx.t.nodes[path]
	if !ok {
		return coord.Stat{}, coord.ErrNoNode
	}
	if err := checkVersion(n, version); err != nil {
		return coord.Stat{}, err
	}
	z := tx.next()
	oldData, oldStat := n.data, n.stat
	tx.undo = append(tx.undo, func() { n.data, n.stat = oldData, oldStat })
	n.data = bytes.Clone(data)
	n.stat.Version++
	n.stat.Mzxid = z
	tx.events = append(tx.events, event{path: path, typ: coord.EventNodeDataChanged})
	return statOf(n), nil
}

func (tx *Txn) delete(path string, version int32) error {
	t := tx.t
	if path == "/" {
		return fmt.Errorf("%w: the root cannot be deleted", coord.ErrInvalidPath)
	}
	n, ok := t.nodes[path]
	if !ok {
		return coord.ErrNoNode
	}
	if err := checkVersion(n, version); err != nil {
		return err
	}
	if len(n.children) > 0 {
		return fmt.Errorf("%w: %d children", coord.ErrNotEmpty, len(n.children))
	}
	tx.next()
	parent := t.nodes[coord.Parent(path)]
	tx.unlink(path, parent, n)
	tx.events = append(tx.events,
		event{path: path, typ: coord.EventNodeDeleted, alsoOut: true},
		event{path: coord.Parent(path), typ: coord.EventNodeChildrenChanged, child: true})
	return nil
}

// link inserts n at path under parent and unlink removes it; both count a
// change of parent's children and record their own inverse.
func (tx *Txn) link(path string, parent, n *node) {
	tx.t.insert(path, parent, n)
	parent.stat.Cversion++
	tx.undo = append(tx.undo, func() { parent.stat.Cversion--; tx.t.remove(path, parent, n) })
}

func (tx *Txn) unlink(path string, parent, n *node) {
	tx.t.remove(path, parent, n)
	parent.stat.Cversion++
	tx.undo = append(tx.undo, func() { parent.stat.Cversion--; tx.t.insert(path, parent, n) })
}

func (t *Tree) insert(path string, parent, n *node) {
	t.nodes[path] = n
	parent.children[base(path)] = struct{}{}
	if o := n.stat.EphemeralOwner; o != 0 {
		if t.ephemerals[o] == nil {
			t.ephemerals[o] = map[string]struct{}{}
		}
		t.ephemerals[o][path] = struct{}{}
	}
}

func (t *Tree) remove(path string, parent, n *node) {
	delete(t.nodes, path)
	delete(parent.children, base(path))
	if o := n.stat.EphemeralOwner; o != 0 {
		delete(t.ephemerals[o], path)
		if len(t.ephemerals[o]) == 0 {
			delete(t.ephemerals, o)
		}
	}
}
