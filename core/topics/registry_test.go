package topics

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/vfs"
)

func TestCreateDeleteReopen(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			fsys, dir := fc.new(t)
			r := open(t, fsys, dir, func(o *Options) {
				o.Defaults = map[string]string{"retention.ms": "3600000", "compression.type": "lz4"}
			})
			a, err := r.Create("a", 3, map[string]string{"retention.ms": "60000", "weir.durable.acks": "true"})
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Partitions) != 3 || a.ID == ([16]byte{}) || !a.Partitions[2].DurableAcks {
				t.Fatalf("topic a: %d partitions, id %x, durable %v", len(a.Partitions), a.ID, a.Partitions[2].DurableAcks)
			}
			wantCfg := map[string]string{"retention.ms": "60000", "weir.durable.acks": "true", "compression.type": "lz4"}
			if !mapsEqual(a.Configs, wantCfg) {
				t.Errorf("effective configs %v, want %v", a.Configs, wantCfg)
			}
			if _, err := r.Create("b", -1, nil); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name string
				n    int32
				cfg  map[string]string
				want error
			}{
				{"a", 1, nil, ErrTopicExists},
				{"new", 1, map[string]string{"segment.ms": "0"}, topicconfig.ErrInvalidConfig},
				{"new", 0, nil, ErrInvalidPartitions},
				{"new!", 1, nil, logs.ErrInvalidTopic},
				{"new", -1, map[string]string{"segment.ms": "10"}, nil},
			} {
				if err := r.ValidateCreate(tc.name, tc.n, tc.cfg); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
					t.Errorf("ValidateCreate(%q, %d, %v) = %v, want %v", tc.name, tc.n, tc.cfg, err, tc.want)
				}
			}
			if _, ok := r.Topic("new"); ok {
				t.Error("ValidateCreate created a topic")
			}
			if _, err := r.Create("a", 1, nil); !errors.Is(err, ErrTopicExists) {
				t.Errorf("second Create(a) = %v, want ErrTopicExists", err)
			}
			for _, n := range []int32{0, -2, MaxPartitions + 1} {
				if _, err := r.Create("c", n, nil); !errors.Is(err, ErrInvalidPartitions) {
					t.Errorf("Create(c, %d) = %v, want ErrInvalidPartitions", n, err)
				}
			}
			if _, err := r.Create("c/d", 1, nil); !errors.Is(err, logs.ErrInvalidTopic) {
				t.Errorf("Create(c/d) = %v, want logs.ErrInvalidTopic", err)
			}
			if _, err := r.Create("c", 1, map[string]string{"nope": "1"}); !errors.Is(err, topicconfig.ErrInvalidConfig) {
				t.Errorf("Create with unknown config = %v, want topicconfig.ErrInvalidConfig", err)
			}
			if _, ok := r.Topic("c"); ok {
				t.Error("a failed Create left topic c")
			}
			if got := topicNames(r); !slices.Equal(got, []string{"a", "b"}) {
				t.Errorf("Topics() = %v", got)
			}
			if _, err := r.Partition("a", 3); !errors.Is(err, ErrUnknownPartition) {
				t.Errorf("Partition(a, 3) = %v", err)
			}
			if _, err := r.Partition("a", -1); !errors.Is(err, ErrUnknownPartition) {
				t.Errorf("Partition(a, -1) = %v", err)
			}
			if _, err := r.Partition("zz", 0); !errors.Is(err, ErrUnknownTopic) {
				t.Errorf("Partition(zz, 0) = %v", err)
			}
			p, err := r.Partition("a", 1)
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Append(ctx, batch(t, "x", 3))
			if err != nil || res.BaseOffset != 0 || res.NextOffset != 3 || res.LogAppendTime != -1 || res.Duplicate {
				t.Fatalf("Append = %+v, %v", res, err)
			}
			if p.Log().FlushedOffset() < 3 {
				t.Errorf("durable topic: FlushedOffset %d after append to 3", p.Log().FlushedOffset())
			}
			if err := r.Delete("b"); err != nil {
				t.Fatal(err)
			}
			if err := r.Delete("b"); !errors.Is(err, ErrUnknownTopic) {
				t.Errorf("second Delete(b) = %v", err)
			}
			if _, err := fsys.Stat(filepath.Join(dir, "b-0")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("b-0 after Delete: %v", err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Create("z", 1, nil); !errors.Is(err, ErrClosed) {
				t.Errorf("Create after Close = %v", err)
			}
			if _, err := r.Partition("a", 0); !errors.Is(err, ErrClosed) {
				t.Errorf("Partition after Close = %v", err)
			}
			if _, _, err := r.InitProducerID(); !errors.Is(err, ErrClosed) {
				t.Errorf("InitProducerID after Close = %v", err)
			}
			if err := r.Close(); err != nil {
				t.Errorf("second Close = %v", err)
			}

			// Reopen with other defaults: the topic's own configs stay, the
			// defaults it did not override change.
			r = open(t, fsys, dir, func(o *Options) { o.Defaults = map[string]string{"compression.type": "zstd"} })
			defer r.Close()
			if got := topicNames(r); !slices.Equal(got, []string{"a"}) {
				t.Fatalf("after reopen Topics() = %v", got)
			}
			a2, _ := r.Topic("a")
			if a2.ID != a.ID || len(a2.Partitions) != 3 {
				t.Errorf("reopened a: id %x (was %x), %d partitions", a2.ID, a.ID, len(a2.Partitions))
			}
			wantCfg["compression.type"] = "zstd"
			if !mapsEqual(a2.Configs, wantCfg) {
				t.Errorf("reopened configs %v, want %v", a2.Configs, wantCfg)
			}
			p, _ = r.Partition("a", 1)
			if hs := readAll(t, p.Log()); len(hs) != 1 || hs[0].NextOffset() != 3 {
				t.Errorf("reopened a-1 holds %d batches", len(hs))
			}
			// Re-create after delete starts empty with a new id.
			if err := r.Delete("a"); err != nil {
				t.Fatal(err)
			}
			a3, err := r.Create("a", 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			if a3.ID == a.ID || a3.Partitions[1].Log().EndOffset() != 0 || len(a3.Configs) != 1 {
				t.Errorf("re-created a: id %x (old %x), end %d, configs %v", a3.ID, a.ID, a3.Partitions[1].Log().EndOffset(), a3.Configs)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestOpenOptions(t *testing.T) {
	if _, err := Open(Options{FS: vfs.NewMem()}); err == nil {
		t.Error("Open without Dir succeeded")
	}
	if _, err := Open(Options{FS: vfs.NewMem(), Dir: "/d", DefaultPartitions: -3}); !errors.Is(err, ErrInvalidPartitions) {
		t.Errorf("negative DefaultPartitions: %v", err)
	}
	_, err := Open(Options{FS: vfs.NewMem(), Dir: "/d", Defaults: map[string]string{"segment.bytes": "10"}})
	if !errors.Is(err, topicconfig.ErrInvalidConfig) || !strings.Contains(err.Error(), "segment.bytes") {
		t.Errorf("bad default: %v", err)
	}
	r := open(t, vfs.NewMem(), "/d", func(o *Options) { o.DefaultPartitions = 4 })
	defer r.Close()
	tp, err := r.Create("auto", -1, nil)
	if err != nil || len(tp.Partitions) != 4 {
		t.Fatalf("Create(-1) with DefaultPartitions 4: %v", err)
	}
}

func TestCorruptMetadata(t *testing.T) {
	for _, tc := range []struct{ name, content string }{
		{"not json", "{"},
		{"version", `{"version":2,"topics":[],"nextProducerID":0}`},
		{"unknown field", `{"version":1,"topics":[],"nextProducerID":0,"x":1}`},
		{"bad name", `{"version":1,"topics":[{"name":"a/b","id":"0102030405060708090a0b0c0d0e0f10","partitions":1}]}`},
		{"bad id", `{"version":1,"topics":[{"name":"a","id":"xyz","partitions":1}]}`},
		{"zero id", `{"version":1,"topics":[{"name":"a","id":"00000000000000000000000000000000","partitions":1}]}`},
		{"partitions", `{"version":1,"topics":[{"name":"a","id":"0102030405060708090a0b0c0d0e0f10","partitions":0}]}`},
		{"twice", `{"version":1,"topics":[{"name":"a","id":"0102030405060708090a0b0c0d0e0f10","partitions":1},{"name":"a","id":"0102030405060708090a0b0c0d0e0f11","partitions":1}]}`},
		{"config", `{"version":1,"topics":[{"name":"a","id":"0102030405060708090a0b0c0d0e0f10","partitions":1,"configs":{"x":"1"}}]}`},
		{"pid", `{"version":1,"topics":[],"nextProducerID":-1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			if err := mem.MkdirAll("/d", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := vfs.WriteFileSynced(mem, "/d/weir-meta.json", []byte(tc.content)); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(Options{FS: mem, Dir: "/d"}); !errors.Is(err, ErrCorruptMetadata) {
				t.Errorf("Open = %v, want ErrCorruptMetadata", err)
			}
		})
	}
}

// TestLeftoverDirs: Open removes the directories of topics the metadata does
// not hold, if they are weir partitions; Create clears them too; foreign
// directories are never removed.
func TestLeftoverDirs(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			fsys, dir := fc.new(t)
			r := open(t, fsys, dir)
			for _, n := range []string{"gone", "kept"} {
				if _, err := r.Create(n, 2, nil); err != nil {
					t.Fatal(err)
				}
			}
			p, _ := r.Partition("gone", 1)
			if _, err := p.Append(ctx, batch(t, "old", 2)); err != nil {
				t.Fatal(err)
			}
			gone, _ := r.Topic("gone")
			// An interrupted Delete: the metadata no longer holds "gone",
			// its directories are still there.
			r.metaMu.Lock()
			err := r.writeMetaLocked(nil, "gone")
			r.metaMu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			// Foreign directories that look like partitions, and an empty one.
			mustMkdir(t, fsys, filepath.Join(dir, "foreign-0"))
			if err := vfs.WriteFileSynced(fsys, filepath.Join(dir, "foreign-0", "data"), []byte("keep me")); err != nil {
				t.Fatal(err)
			}
			mustMkdir(t, fsys, filepath.Join(dir, "notatopic"))
			mustMkdir(t, fsys, filepath.Join(dir, "empty-3"))
			if err := vfs.WriteFileSynced(fsys, filepath.Join(dir, "file-0"), []byte("a file")); err != nil {
				t.Fatal(err)
			}

			r = open(t, fsys, dir)
			for _, n := range []string{"gone-0", "gone-1", "empty-3"} {
				if _, err := fsys.Stat(filepath.Join(dir, n)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s survived Open: %v", n, err)
				}
			}
			for _, n := range []string{"kept-0", "kept-1", "foreign-0/data", "notatopic", "file-0"} {
				if _, err := fsys.Stat(filepath.Join(dir, n)); err != nil {
					t.Errorf("%s removed: %v", n, err)
				}
			}
			if got := topicNames(r); !slices.Equal(got, []string{"kept"}) {
				t.Errorf("Topics() = %v", got)
			}
			// Re-creating "gone" starts empty, with a new id.
			g, err := r.Create("gone", 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			if g.ID == gone.ID || g.Partitions[1].Log().EndOffset() != 0 {
				t.Errorf("re-created gone: id %x (old %x), end %d", g.ID, gone.ID, g.Partitions[1].Log().EndOffset())
			}
			// A topic whose directory is foreign cannot be created.
			if _, err := r.Create("foreign", 1, nil); !errors.Is(err, logs.ErrInvalidTopic) {
				t.Errorf("Create(foreign) = %v, want logs.ErrInvalidTopic", err)
			}
			if _, err := r.Create("file", 1, nil); !errors.Is(err, logs.ErrInvalidTopic) {
				t.Errorf("Create(file) = %v, want logs.ErrInvalidTopic", err)
			}
			if _, ok := r.Topic("foreign"); ok {
				t.Error("failed Create left a topic")
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}

			// Stale directories of a topic of the same name (a Delete whose
			// RemoveAll failed) are cleared by Create.
			r = open(t, fsys, dir)
			defer r.Close()
			p, _ = r.Partition("gone", 0)
			if _, err := p.Append(ctx, batch(t, "stale", 1)); err != nil {
				t.Fatal(err)
			}
			r.metaMu.Lock()
			err = r.writeMetaLocked(nil, "gone")
			r.mu.Lock()
			old := r.topics["gone"]
			delete(r.topics, "gone")
			r.mu.Unlock()
			r.metaMu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if err := closeTopic(old); err != nil {
				t.Fatal(err)
			}
			g, err = r.Create("gone", 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if g.Partitions[0].Log().EndOffset() != 0 {
				t.Errorf("Create reused stale data: end %d", g.Partitions[0].Log().EndOffset())
			}
			if _, err := fsys.Stat(filepath.Join(dir, "gone-1")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("stale gone-1 survived Create: %v", err)
			}
		})
	}
}

func mustMkdir(t *testing.T, fsys vfs.FS, dir string) {
	t.Helper()
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestForeignTopicID: a partition directory whose marker names another topic
// id is refused, not served.
func TestForeignTopicID(t *testing.T) {
	mem := vfs.NewMem()
	r := open(t, mem, "/d")
	if _, err := r.Create("a", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := logs.WriteMarker(mem, "/d/a-0", [16]byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{FS: mem, Dir: "/d"}); !errors.Is(err, ErrCorruptMetadata) {
		t.Errorf("Open = %v, want ErrCorruptMetadata", err)
	}
	// A torn marker is rewritten: no log data can exist without a marker.
	if err := vfs.WriteFileSynced(mem, "/d/a-0/partition.metadata", []byte("vers")); err != nil {
		t.Fatal(err)
	}
	r = open(t, mem, "/d")
	defer r.Close()
	a, _ := r.Topic("a")
	if id, ok, err := logs.ReadMarker(mem, "/d/a-0"); err != nil || !ok || id != a.ID {
		t.Errorf("marker after Open: %x %v %v, want %x", id, ok, err, a.ID)
	}
}

func TestInitProducerID(t *testing.T) {
	mem := vfs.NewMem()
	r := open(t, mem, "/d")
	seen := map[int64]bool{}
	var last int64 = -1
	for range 2*producerIDBlock + 10 {
		id, epoch, err := r.InitProducerID()
		if err != nil {
			t.Fatal(err)
		}
		if epoch != 0 || id <= last || seen[id] {
			t.Fatalf("InitProducerID = %d, %d after %d", id, epoch, last)
		}
		seen[id], last = true, id
	}
	m, _, err := readMeta(mem, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if m.NextProducerID != 3*producerIDBlock {
		t.Errorf("nextProducerID on disk %d, want %d (blocks of %d)", m.NextProducerID, 3*producerIDBlock, producerIDBlock)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = open(t, mem, "/d")
	defer r.Close()
	id, _, err := r.InitProducerID()
	if err != nil || id <= last {
		t.Errorf("after reopen InitProducerID = %d, %v; want > %d", id, err, last)
	}
}
