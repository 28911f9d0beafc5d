package filestore

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/weir-broker/weir/core/coord/internal/tree"
	"github.com/weir-broker/weir/core/vfs"
)

// DefaultCompactBytes is the journal size past which a write compacts when
// Options.CompactBytes is 0 (and the snapshot is smaller).
const DefaultCompactBytes = 4 << 20

// files is the snapshot and the open journal of a directory. Only the
// store's leader uses it (see Store), without the store's lock.
type files struct {
	fs      vfs.FS
	dir     string
	snap    string // the snapshot's path
	log     string // the journal's path
	compact int64  // Options.CompactBytes

	f        vfs.File // the journal, open for appending
	size     int64    // the journal's intact bytes: all durable
	snapSize int64    // the snapshot's size, 0 before there is one
	// dirty: the journal may hold bytes past size (an append failed and
	// cutting it off failed too); they are cut before the next append.
	dirty bool
	// dirUnsynced: a new journal was renamed into place but the directory's
	// fsync failed; the next append syncs it first, or the records it adds
	// could vanish with the journal's name in a crash.
	dirUnsynced bool
	retryAt     int64 // after a failed compaction, the journal size to try again at
}

// bound is the journal size past which a write compacts.
func (j *files) bound() int64 {
	return max(j.compact, j.snapSize, j.retryAt)
}

// load reads the snapshot and the journal (a missing file is empty) and
// replays the journal's records after the snapshot's zxid. It writes
// nothing; errors name the file.
func (j *files) load() (*tree.Tree, scanned, bool, error) {
	t, size, err := readTree(j.fs, j.snap)
	if err != nil {
		return nil, scanned{}, false, err
	}
	j.snapSize = size
	b, err := vfs.ReadFile(j.fs, j.log)
	if errors.Is(err, fs.ErrNotExist) {
		return t, scanned{}, false, nil
	}
	if err != nil {
		return nil, scanned{}, false, fmt.Errorf("filestore: read %s: %w", j.log, err)
	}
	sc, err := scanJournal(b)
	if err != nil {
		return nil, scanned{}, false, fmt.Errorf("%w: %s: %w", ErrCorrupt, j.log, err)
	}
	snapZxid := t.Zxid()
	for i, r := range sc.records {
		if r.zxid <= snapZxid {
			continue // in the snapshot
		}
		if err := t.Redo(r.zxid, r.changes); err != nil {
			return nil, scanned{}, false, fmt.Errorf("%w: %s: at offset %d: after the snapshot at zxid %d: %w",
				ErrCorrupt, j.log, sc.offsets[i], snapZxid, err)
		}
	}
	return t, sc, true, nil
}

// openJournal opens the journal that load read, cutting off its torn tail,
// or creates an empty one. The caller closes j.f.
func (j *files) openJournal(sc scanned, exists bool) error {
	if !exists {
		return j.startJournal()
	}
	f, err := j.fs.OpenReadWrite(j.log)
	if err != nil {
		return fmt.Errorf("open %s: %w", JournalName, err)
	}
	j.f, j.size = f, int64(sc.end)
	if sc.tornWhy == nil {
		return nil
	}
	if err := f.Truncate(j.size); err != nil {
		return fmt.Errorf("cut the torn tail of %s at offset %d (%v): %w", JournalName, sc.end, sc.tornWhy, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cut the torn tail of %s at offset %d (%v): %w", JournalName, sc.end, sc.tornWhy, err)
	}
	return nil
}

// append writes b, whole records, at the end of the journal and fsyncs it.
// On failure it cuts the journal back to its size before; cut says whether
// that worked (truncate and fsync), so that the append left nothing.
func (j *files) append(b []byte) (err error, cut bool) {
	if j.dirUnsynced {
		if err := j.fs.SyncDir(j.dir); err != nil {
			return fmt.Errorf("sync %s: %w", j.dir, err), true
		}
		j.dirUnsynced = false
	}
	if j.dirty {
		if err := j.cut(); err != nil {
			return fmt.Errorf("cut %s back to %d bytes: %w", JournalName, j.size, err), true
		}
	}
	_, err = j.f.Write(b)
	if err == nil {
		err = j.f.Sync()
	}
	if err == nil {
		j.size += int64(len(b))
		return nil, true
	}
	err = fmt.Errorf("append to %s: %w", JournalName, err)
	if cerr := j.cut(); cerr != nil {
		j.dirty = true
		return fmt.Errorf("%w; cutting it back: %w", err, cerr), false
	}
	return err, true
}

func (j *files) cut() error {
	if err := j.f.Truncate(j.size); err != nil {
		return err
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.dirty = false
	return nil
}

// writeSnapshot replaces the snapshot with the tree's persistent state
// (tmp, fsync, rename, directory fsync). durable says whether the new
// snapshot is in place and durable; on error without it, the old snapshot
// and the journal still hold everything.
func (j *files) writeSnapshot(zxid int64, nodes []tree.Persisted) (durable bool, err error) {
	b := encode(zxid, nodes)
	tmp := filepath.Join(j.dir, tmpFileName)
	if err := vfs.WriteFileSynced(j.fs, tmp, b); err != nil {
		_ = j.fs.Remove(tmp)
		return false, fmt.Errorf("write %s: %w", tmpFileName, err)
	}
	if err := j.fs.Rename(tmp, j.snap); err != nil {
		_ = j.fs.Remove(tmp)
		return false, fmt.Errorf("replace %s: %w", FileName, err)
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		return false, fmt.Errorf("replace %s: sync %s: %w", FileName, j.dir, err)
	}
	j.snapSize = int64(len(b))
	return true, nil
}

// startJournal replaces the journal with an empty one (tmp, fsync, rename,
// directory fsync) and appends to it from then on. Call it only once the
// snapshot holds every record of the old journal (or there is none): a
// crash leaves the old journal or the new one. On error before the rename
// the old journal stays in use.
func (j *files) startJournal() error {
	tmp := filepath.Join(j.dir, journalTmpName)
	f, err := j.fs.Create(tmp)
	if err == nil {
		if _, err = f.Write([]byte(journalMagic)); err == nil {
			err = f.Sync()
		}
		if err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		_ = j.fs.Remove(tmp)
		return fmt.Errorf("write %s: %w", journalTmpName, err)
	}
	if err := j.fs.Rename(tmp, j.log); err != nil {
		_ = f.Close()
		_ = j.fs.Remove(tmp)
		return fmt.Errorf("replace %s: %w", JournalName, err)
	}
	if j.f != nil {
		_ = j.f.Close() // the old journal, replaced
	}
	j.f, j.size, j.dirty = f, int64(len(journalMagic)), false
	if err := j.fs.SyncDir(j.dir); err != nil {
		j.dirUnsynced = true
		return fmt.Errorf("replace %s: sync %s: %w", JournalName, j.dir, err)
	}
	return nil
}

// compact writes a snapshot of the tree and starts a fresh journal. durable
// says whether the snapshot is in place and durable, and so holds every
// change made so far, whatever became of the journal.
func (j *files) compactTo(zxid int64, nodes []tree.Persisted) (durable bool, err error) {
	if durable, err = j.writeSnapshot(zxid, nodes); err != nil {
		j.retryAt = j.size + max(j.compact, j.snapSize)
		return durable, err
	}
	if err := j.startJournal(); err != nil {
		j.retryAt = j.size + max(j.compact, j.snapSize)
		return true, err
	}
	j.retryAt = 0
	return true, nil
}

func (j *files) close() error {
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}
