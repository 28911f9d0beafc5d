package groups

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/vfs"
)

// The offsets store of weir before __consumer_offsets: one log per broker in
// a directory of its own (the broker's <data>/__groups), in the same record
// formats:
//
//	<dir>/CURRENT            "offsets-000002\n": the live log directory
//	<dir>/offsets-000002/    partition log of offset records
//
// Other offsets-<n> directories are what an interrupted compaction left;
// CURRENT names the one that counts.
const (
	legacyCurrent = "CURRENT"
	legacyPrefix  = "offsets-"
)

func legacyLogDir(seq int) string { return fmt.Sprintf("%s%06d", legacyPrefix, seq) }

// parseLegacyLogDir returns the number of an offsets-<seq> directory name.
func parseLegacyLogDir(name string) (int, bool) {
	num, ok := strings.CutPrefix(name, legacyPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 || legacyLogDir(n) != name {
		return 0, false
	}
	return n, true
}

// Legacy is the content of an offsets store of the old layout, read by
// ReadLegacy for Import.
type Legacy struct {
	Dir     string
	offsets map[string]map[TopicPartition]stored
}

// Groups returns the number of groups and offsets it holds.
func (l *Legacy) Groups() (groups, offsets int) {
	for _, m := range l.offsets {
		offsets += len(m)
	}
	return len(l.offsets), offsets
}

// ReadLegacy reads the offsets store of the old layout in dir (see above).
// A directory without CURRENT is fs.ErrNotExist when it holds no log either,
// and ErrCorrupt, naming the path, when it does; so is a CURRENT that does not
// name a log directory.
func ReadLegacy(fsys vfs.FS, dir string, logger *slog.Logger) (*Legacy, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("groups: list %s: %w", dir, err)
	}
	b, err := vfs.ReadFile(fsys, path.Join(dir, legacyCurrent))
	if errors.Is(err, fs.ErrNotExist) {
		for _, name := range names {
			if _, ok := parseLegacyLogDir(name); ok {
				return nil, fmt.Errorf("%w: %s without %s", ErrCorrupt, path.Join(dir, name), legacyCurrent)
			}
		}
		return nil, fmt.Errorf("groups: %s: %w", dir, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("groups: read %s: %w", path.Join(dir, legacyCurrent), err)
	}
	name, ok := strings.CutSuffix(string(b), "\n")
	seq, valid := parseLegacyLogDir(name)
	if !ok || !valid {
		return nil, fmt.Errorf("%w: %s holds %q", ErrCorrupt, path.Join(dir, legacyCurrent), b)
	}
	l, _, err := partlog.Open(fsys, path.Join(dir, legacyLogDir(seq)), partlog.Config{RetentionAge: -1, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("groups: open %s: %w", path.Join(dir, legacyLogDir(seq)), err)
	}
	s := newStore(readOnly{l})
	err = s.replay(context.Background(), l.EndOffset())
	if cerr := l.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("groups: close %s: %w", l.Dir(), cerr)
	}
	if err != nil {
		return nil, fmt.Errorf("groups: %s: %w", l.Dir(), err)
	}
	return &Legacy{Dir: dir, offsets: s.offsets}, nil
}

// readOnly is a partlog.Log as a Log that refuses appends.
type readOnly struct{ *partlog.Log }

func (r readOnly) Append(context.Context, []byte) (func(context.Context) error, error) {
	return nil, fmt.Errorf("groups: %s is read only", r.Dir())
}

func (r readOnly) AppendVerified(ctx context.Context, b []byte, _ producers.Guard) (func(context.Context) error, error) {
	return r.Append(ctx, b)
}

// LegacyLeft returns the number of groups of the old-layout store handed
// to Import that wait for their partitions to load (0 without one).
func (c *Coordinator) LegacyLeft() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.legacy == nil {
		return 0
	}
	return len(c.legacy.offsets)
}

// Import hands the coordinator an old-layout store: the offsets of its
// groups whose partitions are loaded are written into those partitions at
// once, and those of every other group when its partition loads, before the
// partition serves (so no group is ever served without its old offsets). An
// offset the partition already holds is kept (a commit made since is newer).
// It returns how many groups it imported now; LegacyLeft tells how many wait.
func (c *Coordinator) Import(l *Legacy) (imported int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, errClosed
	}
	c.legacy = l
	for _, p := range slices.Sorted(maps.Keys(c.shards)) {
		sh := c.shards[p]
		if sh.store == nil {
			continue // imported when its load ends
		}
		n, err := c.importLocked(p, sh.store)
		imported += n
		if err != nil {
			return imported, err
		}
	}
	return imported, nil
}

// importLocked writes the legacy offsets of partition p's groups into
// store. Called with mu held.
func (c *Coordinator) importLocked(p int32, store *offsetStore) (imported int, err error) {
	l := c.legacy
	if l == nil {
		return 0, nil
	}
	for _, g := range slices.Sorted(maps.Keys(l.offsets)) {
		if c.o.PartitionFor(g) != p {
			continue
		}
		var entries []entry
		for tp, v := range l.offsets[g] {
			if _, ok := store.offsets[g][tp]; ok {
				continue
			}
			entries = append(entries, entry{k: offsetKey{group: g, TopicPartition: tp}, v: &v})
		}
		if err := store.write(entries, c.o.Clock.Now()); err != nil {
			return imported, fmt.Errorf("groups: import the offsets of group %q from %s: %w", g, l.Dir, err)
		}
		if c.groups[g] == nil && store.offsets[g] != nil {
			c.groups[g] = newGroup(g, &c.o)
		}
		delete(l.offsets, g)
		imported++
	}
	if imported > 0 {
		c.o.Logger.Info("imported offsets of the old layout", "partition", p, "groups", imported,
			"from", l.Dir, "groups_left", len(l.offsets))
	}
	return imported, nil
}
