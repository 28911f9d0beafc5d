package topics

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
)

// A data directory whose weir-meta.json is gone (deleted by hand, a restore
// that missed it) still holds every partition's data: Open refuses to start,
// naming the directories, and removes nothing. (Before, it deleted them all as
// leftovers of unknown topics.)
func TestMissingMetadataRefusesToStart(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			fsys, dir := fc.new(t)
			r := open(t, fsys, dir)
			if _, err := r.Create("orders", 2, nil); err != nil {
				t.Fatal(err)
			}
			p, _ := r.Partition("orders", 1)
			if _, err := p.Append(ctx, batch(t, "precious", 3)); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Remove(filepath.Join(dir, metaFile)); err != nil {
				t.Fatal(err)
			}
			_, err := Open(Options{FS: fsys, Dir: dir})
			if !errors.Is(err, ErrMissingMetadata) || !strings.Contains(err.Error(), "orders-0") || !strings.Contains(err.Error(), "orders-1") {
				t.Fatalf("Open without %s = %v, want ErrMissingMetadata naming orders-0 and orders-1", metaFile, err)
			}
			if size := logBytes(t, fsys, filepath.Join(dir, "orders-1")); size == 0 {
				t.Fatal("orders-1 lost its data")
			}
			// An empty data directory (a first start) is fine.
			if _, err := Open(Options{FS: fsys, Dir: filepath.Join(dir, "fresh")}); err != nil {
				t.Fatalf("Open of a fresh directory: %v", err)
			}
		})
	}
}

// A partition directory no topic owns (the metadata lost the topic) is set
// aside with its data, not deleted; a re-created topic of the name starts
// empty beside it.
func TestStrayPartitionSetAside(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			fsys, dir := fc.new(t)
			r := open(t, fsys, dir)
			gone, err := r.Create("gone", 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := gone.Partitions[0].Append(ctx, batch(t, "old", 2)); err != nil {
				t.Fatal(err)
			}
			r.metaMu.Lock()
			err = r.writeMetaLocked(nil, "gone") // the metadata forgets the topic
			r.metaMu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			r = open(t, fsys, dir)
			defer r.Close()
			stray := filepath.Join(dir, "gone-0."+hex.EncodeToString(gone.ID[:])+"-stray")
			if size := logBytes(t, fsys, stray); size == 0 {
				t.Fatalf("%s holds no data", stray)
			}
			if _, err := fsys.Stat(filepath.Join(dir, "gone-0")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("gone-0 still there: %v", err)
			}
			g, err := r.Create("gone", 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if end := g.Partitions[0].Log().EndOffset(); end != 0 {
				t.Fatalf("re-created topic starts at %d", end)
			}
			if size := logBytes(t, fsys, stray); size == 0 {
				t.Fatal("the stray directory lost its data")
			}
		})
	}
}

// A deletion interrupted after its metadata write (a crash, or a removal that
// failed) is finished by the next Open, which removes only the deleted
// topic's directories.
func TestInterruptedDeleteFinishedByOpen(t *testing.T) {
	mem := vfs.NewMem()
	r := open(t, mem, "/d")
	tp, err := r.Create("doomed", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Partitions[0].Append(ctx, batch(t, "x", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create("kept", 1, nil); err != nil {
		t.Fatal(err)
	}
	// The deletion is recorded, then the power goes before any directory
	// is removed.
	r.metaMu.Lock()
	r.deleting = append(r.deleting, metaTopic{Name: "doomed", ID: hex.EncodeToString(tp.ID[:]), Partitions: 2})
	err = r.writeMetaLocked(nil, "doomed")
	r.metaMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone()
	r.Close()

	r = open(t, crashed, "/d")
	defer r.Close()
	names, err := crashed.List("/d")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "doomed") {
			t.Errorf("%s survived the finished deletion", n)
		}
	}
	if got := topicNames(r); len(got) != 1 || got[0] != "kept" {
		t.Errorf("topics %v, want [kept]", got)
	}
	m, _, err := readMeta(crashed, "/d")
	if err != nil || len(m.Deleting) != 0 {
		t.Errorf("metadata still records deletions: %+v, %v", m.Deleting, err)
	}
}

// logBytes is the size of the .log files in a partition directory.
func logBytes(t *testing.T, fsys vfs.FS, dir string) int64 {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, name := range names {
		if strings.HasSuffix(name, ".log") {
			st, err := fsys.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			n += st.Size()
		}
	}
	return n
}
