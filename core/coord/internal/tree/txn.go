package tree

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/weir-broker/weir/core/coord"
)

// Txn is a transaction that applied and waits for Commit (its watches fire)
// or Rollback (the tree is as before Apply or Begin).
type Txn struct {
	t       *Tree
	zxid    int64    // the current step's, 0 until its first change
	changed bool     // some step took a zxid
	undo    []func() // run in reverse by Rollback
	events  []event  // fired in order by Commit
	changes []Change // the current step's
	Results []coord.OpResult
	// Changes is what Apply's operations did to the persistent state.
	Changes []Change
}

type event struct {
	path    string
	typ     coord.EventType
	child   bool // a child watch of path; else a node watch
	alsoOut bool // with typ deleted: the child watches of path fire too
}

// Changed reports whether the transaction changed the tree (a Multi of
// CheckOps does not), and so took a zxid.
func (tx *Txn) Changed() bool { return tx.changed }

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
	tx := t.Begin()
	st, i, err := tx.Step(session, ops)
	if err != nil {
		tx.Rollback()
		return nil, i, err
	}
	tx.Results, tx.Changes = st.Results, st.Changes
	return tx, -1, nil
}

// Begin opens an empty transaction for Step; the caller must Commit or
// Rollback it before using the tree again.
func (t *Tree) Begin() *Txn {
	t.idle()
	tx := &Txn{t: t}
	t.open = tx
	return tx
}

// StepResult is what one step of a transaction did.
type StepResult struct {
	Results []coord.OpResult // one per operation
	// Zxid is the zxid the step took, 0 if it changed nothing; steps that
	// change something take consecutive zxids.
	Zxid int64
	// Changes are the step's effects on the persistent state, in order (none
	// for a step that only checked, or only set or deleted ephemeral nodes,
	// though such a step still takes a zxid).
	Changes []Change
}

// Step applies ops for session after the transaction's earlier steps, as a
// request of its own: atomically, with a zxid of its own if it changes
// anything. On failure the step changes nothing (the earlier steps stay) and
// it returns the index of the operation that failed and why, as Apply does.
// Commit fires the watches of every step in order; Rollback undoes them all.
func (tx *Txn) Step(session int64, ops []coord.Op) (StepResult, int, error) {
	if tx.t.open != tx {
		panic("tree: step of a transaction committed or rolled back")
	}
	undo, events := len(tx.undo), len(tx.events)
	tx.zxid, tx.changes = 0, nil
	var st StepResult
	for i, op := range ops {
		res, err := tx.apply(session, op)
		if err != nil {
			for j := len(tx.undo) - 1; j >= undo; j-- {
				tx.undo[j]()
			}
			tx.undo, tx.events = tx.undo[:undo], tx.events[:events]
			tx.zxid, tx.changes = 0, nil
			return StepResult{}, i, err
		}
		st.Results = append(st.Results, res)
	}
	st.Zxid, st.Changes = tx.zxid, tx.changes
	tx.changed = tx.changed || tx.zxid != 0
	tx.zxid, tx.changes = 0, nil
	return st, -1, nil
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
	tx.changed = tx.zxid != 0
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
	if owner != 0 {
		tx.changes = append(tx.changes, Change{Kind: ChangeEphemeral, Path: path})
	} else {
		tx.changes = append(tx.changes, Change{Kind: ChangeCreate, Path: path, Data: n.data})
	}
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
	if n.stat.EphemeralOwner == 0 {
		tx.changes = append(tx.changes, Change{Kind: ChangeSet, Path: path, Data: n.data})
	}
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
	if n.stat.EphemeralOwner == 0 {
		tx.changes = append(tx.changes, Change{Kind: ChangeDelete, Path: path})
	}
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
