package topics

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// crashModel is what the registry should hold between operations.
type crashModel struct {
	topics map[string]int32    // name -> partitions
	ids    map[string][16]byte // name -> id, once Create returned
	data   map[string]int64    // "topic-p" -> durable end offset, for topics whose id is in ids
	maxPID int64               // largest producer id handed out
}

func (m crashModel) clone() crashModel {
	return crashModel{topics: maps.Clone(m.topics), ids: maps.Clone(m.ids), data: maps.Clone(m.data), maxPID: m.maxPID}
}

// snapshot is a crash clone taken while operation op was running (or, with
// after set, once it had returned).
type snapshot struct {
	fs     *vfs.MemFS
	op     int
	after  bool
	label  string
	maxPID int64 // largest producer id handed out when the clone was taken
}

// TestCrashSafety runs a workload of creates, deletes, producer ids and
// durable appends, cutting the power (MemFS.CrashClone) before every file
// operation and after every registry operation, then reopens each clone and
// checks that the registry is consistent: the topics are those before or after
// the operation that was running, every partition opens and belongs to its
// topic, no leftover directories remain, producer ids are never reused, and
// durable data survives.
func TestCrashSafety(t *testing.T) {
	mem := vfs.NewMem()
	var (
		mu     sync.Mutex
		snaps  []snapshot
		cur    = -1 // operation running
		states []crashModel
	)
	var model crashModel
	take := func(after bool, label string) {
		snaps = append(snaps, snapshot{fs: mem.CrashClone(), op: cur, after: after, label: label, maxPID: model.maxPID})
	}
	inj := errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		switch op {
		case errorfs.OpCreate, errorfs.OpWrite, errorfs.OpSync, errorfs.OpRename, errorfs.OpRemove, errorfs.OpMkdir, errorfs.OpTruncate:
			mu.Lock()
			if cur >= 0 {
				take(false, fmt.Sprintf("%v %s", op, path))
			}
			mu.Unlock()
		}
		return nil
	})
	fsys := errorfs.Wrap(mem, inj)
	r, err := Open(Options{FS: fsys, Dir: "/d", Clock: newClock()})
	if err != nil {
		t.Fatal(err)
	}
	model = crashModel{topics: map[string]int32{}, ids: map[string][16]byte{}, data: map[string]int64{}, maxPID: -1}
	states = append(states, model.clone())

	type step struct {
		name string
		run  func() error
	}
	create := func(name string, n int32, cfg map[string]string) step {
		return step{"create " + name, func() error {
			tp, err := r.Create(name, n, cfg)
			if err == nil {
				model.topics[name], model.ids[name] = n, tp.ID
			}
			return err
		}}
	}
	del := func(name string) step {
		return step{"delete " + name, func() error {
			err := r.Delete(name)
			delete(model.topics, name)
			delete(model.ids, name)
			for k := range model.data {
				if t, _, _ := logs.ParseDirName(k); t == name {
					delete(model.data, k)
				}
			}
			return err
		}}
	}
	pids := func(n int) step {
		return step{fmt.Sprintf("%d producer ids", n), func() error {
			for range n {
				id, _, err := r.InitProducerID()
				if err != nil {
					return err
				}
				mu.Lock()
				model.maxPID = max(model.maxPID, id)
				mu.Unlock()
			}
			return nil
		}}
	}
	appendTo := func(topic string, part int32, recs int) step {
		return step{fmt.Sprintf("append %s-%d", topic, part), func() error {
			p, err := r.Partition(topic, part)
			if err != nil {
				return err
			}
			res, err := p.Append(ctx, batch(t, topic, recs))
			if err != nil {
				return err
			}
			if err := p.Log().Flush(res.NextOffset); err != nil {
				return err
			}
			model.data[logs.DirName(topic, part)] = res.NextOffset
			return nil
		}}
	}
	steps := []step{
		create("a", 2, map[string]string{"retention.ms": "60000"}),
		pids(3),
		create("b", 1, nil),
		appendTo("a", 0, 3),
		appendTo("b", 0, 2),
		del("a"),
		pids(producerIDBlock),
		create("a", 1, map[string]string{"weir.durable.acks": "true"}),
		appendTo("a", 0, 1),
		del("b"),
		create("c", 3, nil),
		pids(2),
	}
	for i, s := range steps {
		mu.Lock()
		cur = i
		mu.Unlock()
		if err := s.run(); err != nil {
			t.Fatalf("step %d (%s): %v", i, s.name, err)
		}
		mu.Lock()
		states = append(states, model.clone())
		take(true, "after")
		cur = -1
		mu.Unlock()
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d crash clones", len(snaps))
	for _, s := range snaps {
		before, after := states[s.op], states[s.op+1]
		what := fmt.Sprintf("crash during step %d (%s) at %s", s.op, steps[s.op].name, s.label)
		if s.after {
			what = fmt.Sprintf("crash after step %d (%s)", s.op, steps[s.op].name)
			before = after
		}
		checkCrashClone(t, what, s.fs, before, after, s.maxPID)
	}
}

func checkCrashClone(t *testing.T, what string, mem *vfs.MemFS, before, after crashModel, maxPID int64) {
	t.Helper()
	r, err := Open(Options{FS: mem, Dir: "/d", Clock: newClock()})
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("%s: Close: %v", what, err)
		}
	}()
	got := map[string]int32{}
	for _, tp := range r.Topics() {
		got[tp.Name] = int32(len(tp.Partitions))
	}
	if !maps.Equal(got, before.topics) && !maps.Equal(got, after.topics) {
		t.Fatalf("%s: topics %v, want %v or %v", what, got, before.topics, after.topics)
	}
	for _, tp := range r.Topics() {
		id, known := before.ids[tp.Name]
		if aid, ok := after.ids[tp.Name]; !known && ok {
			id, known = aid, true
		}
		for _, p := range tp.Partitions {
			mid, ok, err := logs.ReadMarker(mem, p.Log().Dir())
			if err != nil || !ok || mid != tp.ID {
				t.Errorf("%s: %s marker %x %v %v, topic id %x", what, p.Log().Dir(), mid, ok, err, tp.ID)
			}
			end, durable := before.data[logs.DirName(tp.Name, p.Index)]
			if !known || tp.ID != id || !durable {
				continue
			}
			if p.Log().EndOffset() < end {
				t.Errorf("%s: %s ends at %d, %d were durable", what, p.Log().Dir(), p.Log().EndOffset(), end)
			}
		}
	}
	names, err := mem.List("/d")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		topic, p, ok := logs.ParseDirName(n)
		if !ok {
			if !slices.Contains([]string{metaFile}, n) {
				t.Errorf("%s: unexpected entry %s", what, n)
			}
			continue
		}
		if tp, exists := r.Topic(topic); !exists || p >= int32(len(tp.Partitions)) {
			t.Errorf("%s: leftover directory %s after Open", what, n)
		}
	}
	id, _, err := r.InitProducerID()
	if err != nil {
		t.Fatalf("%s: InitProducerID: %v", what, err)
	}
	if id <= maxPID {
		t.Errorf("%s: producer id %d handed out again (ids up to %d were in use)", what, id, maxPID)
	}
}
