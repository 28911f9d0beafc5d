package vfs

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"slices"
)

// CrashClone returns a new, independent MemFS holding what would survive a power cut now: for each directory only
// the entries as of its last SyncDir (directories made by MkdirAll count as synced into their parent), and for
// each surviving file only its contents as of its last File.Sync (later writes and truncations are undone). In
// the clone everything present is durable. The original is not changed and keeps working.
func (m *MemFS) CrashClone() *MemFS { return m.crashClone(nil) }

// CrashCloneTorn is like CrashClone but models torn writes: for each surviving file, if its current contents
// extend its synced contents (synced is a prefix of current), it keeps the synced contents plus a random-length
// prefix (0..all) of the bytes written since, chosen with rng; otherwise just the synced contents. Files are
// visited in sorted path order, so a seeded rng gives a reproducible clone.
func (m *MemFS) CrashCloneTorn(rng *rand.Rand) *MemFS { return m.crashClone(rng) }

func (m *MemFS) crashClone(rng *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &MemFS{}
	c.now.Store(m.now.Load())
	cl := cloner{rng: rng, files: map[*memNode]*memNode{}, dirs: map[*memNode]bool{}}
	c.root = cl.dir(m.root)
	return c
}

type cloner struct {
	rng   *rand.Rand
	files map[*memNode]*memNode // a file reachable under two names stays one node
	dirs  map[*memNode]bool     // a directory is cloned at most once, so the clone is a tree
}

func (cl *cloner) dir(d *memNode) *memNode {
	cl.dirs[d] = true
	c := newDirNode(d.mode, d.dirMod)
	for _, name := range slices.Sorted(maps.Keys(d.durable)) {
		child := d.durable[name]
		switch {
		case !child.isDir:
			c.children[name] = cl.file(child)
		case !cl.dirs[child]:
			c.children[name] = cl.dir(child)
		}
	}
	c.durable = maps.Clone(c.children)
	return c
}

func (cl *cloner) file(n *memNode) *memNode {
	if c, ok := cl.files[n]; ok {
		return c
	}
	n.mu.RLock()
	src := n.synced
	if cl.rng != nil && len(n.data) > len(n.synced) && bytes.Equal(n.data[:len(n.synced)], n.synced) {
		src = n.data[:len(n.synced)+cl.rng.IntN(len(n.data)-len(n.synced)+1)]
	}
	data := bytes.Clone(src)
	c := &memNode{mode: n.mode, data: data, synced: data[:len(data):len(data)], modTime: n.syncedMod, syncedMod: n.syncedMod}
	n.mu.RUnlock()
	cl.files[n] = c
	return c
}
