package tree

import (
	"fmt"

	"github.com/weir-broker/weir/core/coord"
)

// Change is one effect of a transaction on the tree's persistent state, the
// tree as Persistent shows it: what filestore journals and Redo re-applies.
type Change struct {
	Kind ChangeKind
	Path string
	// Data is the node's new data for ChangeCreate and ChangeSet. From a
	// transaction it aliases the tree's: read it before the tree changes,
	// never write it.
	Data []byte
}

// ChangeKind says what a Change did.
type ChangeKind int8

// The kinds of change. Sets and deletions of ephemeral nodes change nothing
// persistent (the deletion was already counted, see ChangeEphemeral), though
// their transaction takes a zxid.
const (
	// ChangeCreate created the persistent node Path, with Data.
	ChangeCreate ChangeKind = iota + 1
	// ChangeSet set the data of the persistent node Path.
	ChangeSet
	// ChangeDelete deleted the persistent node Path.
	ChangeDelete
	// ChangeEphemeral created the ephemeral node Path. In the persistent
	// state only its parent shows it: its Cversion counts the creation and
	// the deletion that the end of the session will bring.
	ChangeEphemeral
)

func (k ChangeKind) String() string {
	switch k {
	case ChangeCreate:
		return "create"
	case ChangeSet:
		return "set"
	case ChangeDelete:
		return "delete"
	case ChangeEphemeral:
		return "ephemeral"
	}
	return fmt.Sprintf("change(%d)", int8(k))
}

// Redo re-applies a transaction, given by its zxid and its changes, to a
// tree that holds only persistent nodes (one built by Load and Redo), as the
// transaction applied it: zxid must be the tree's next, and the changes set
// stats from it as Apply did (a node created or set gets zxid as czxid or
// mzxid, a Set counts a version, a child created or deleted a cversion). A
// transaction without changes only takes its zxid. Redo takes ownership of
// the changes' Data. It checks that each change is possible (the parent of a
// node created exists, a node set or deleted exists, a node deleted has no
// children); on error the tree may hold part of the transaction, so the
// caller discards it.
func (t *Tree) Redo(zxid int64, changes []Change) error {
	t.idle()
	if zxid != t.zxid+1 {
		return fmt.Errorf("zxid %d after %d", zxid, t.zxid)
	}
	t.zxid = zxid
	for _, c := range changes {
		if err := t.redo(zxid, c); err != nil {
			return fmt.Errorf("zxid %d: %s %s: %w", zxid, c.Kind, c.Path, err)
		}
	}
	return nil
}

func (t *Tree) redo(zxid int64, c Change) error {
	if err := coord.ValidatePath(c.Path); err != nil {
		return err
	}
	n, exists := t.nodes[c.Path]
	var parent *node
	if c.Path != "/" {
		parent = t.nodes[coord.Parent(c.Path)]
	}
	switch c.Kind {
	case ChangeCreate, ChangeEphemeral:
		switch {
		case exists:
			return coord.ErrNodeExists
		case parent == nil:
			return fmt.Errorf("%w: parent %s", coord.ErrNoNode, coord.Parent(c.Path))
		case c.Kind == ChangeEphemeral:
			parent.stat.Cversion += 2
			return nil
		}
		t.insert(c.Path, parent, &node{data: c.Data, children: map[string]struct{}{},
			stat: coord.Stat{Czxid: zxid, Mzxid: zxid}})
		parent.stat.Cversion++
	case ChangeSet:
		if !exists {
			return coord.ErrNoNode
		}
		n.data = c.Data
		n.stat.Version++
		n.stat.Mzxid = zxid
	case ChangeDelete:
		switch {
		case !exists:
			return coord.ErrNoNode
		case parent == nil:
			return fmt.Errorf("%w: the root cannot be deleted", coord.ErrInvalidPath)
		case len(n.children) > 0:
			return fmt.Errorf("%w: %d children", coord.ErrNotEmpty, len(n.children))
		}
		t.remove(c.Path, parent, n)
		parent.stat.Cversion++
	default:
		return fmt.Errorf("unknown change %s", c.Kind)
	}
	return nil
}
