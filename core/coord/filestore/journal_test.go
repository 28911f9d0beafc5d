package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

var errNotExist = fs.ErrNotExist

func readJournal(t *testing.T, fsys vfs.FS) []byte {
	t.Helper()
	b, err := vfs.ReadFile(fsys, dir+"/"+JournalName)
	must(t, err)
	return b
}

// TestJournalFormat: the journal is the documented magic line and one
// framed JSON record per transaction, including a session's creation and a
// Set of an ephemeral node; text data as text, other bytes as base64.
func TestJournalFormat(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem)
	ctx := t.Context()
	must(t, s.Create(ctx, "/brokers", nil, coord.Persistent))
	must(t, s.Create(ctx, "/brokers/1", []byte(`{"host":"h<1>"}`), coord.Ephemeral))
	_, err := s.Set(ctx, "/brokers/1", []byte("x"), 0)
	must(t, err)
	_, err = s.Multi(ctx, &coord.CreateOp{Path: "/raw", Data: []byte{0xff, '\n'}}, &coord.SetOp{Path: "/brokers", Data: []byte("b"), Version: 0},
		&coord.CheckOp{Path: "/raw", Version: 0}, &coord.DeleteOp{Path: "/raw", Version: 0})
	must(t, err)
	payloads := []string{
		`{"zxid":1}`,
		`{"zxid":2,"ops":[{"op":"create","path":"/brokers"}]}`,
		`{"zxid":3,"ops":[{"op":"ephemeral","path":"/brokers/1"}]}`,
		`{"zxid":4}`,
		`{"zxid":5,"ops":[{"op":"create","path":"/raw","data64":"/wo="},{"op":"set","path":"/brokers","data":"b"},{"op":"delete","path":"/raw"}]}`,
	}
	want := journalMagic
	for _, p := range payloads {
		want += fmt.Sprintf("%08x %08x %s\n", len(p), crc32c([]byte(p)), p)
	}
	if got := string(readJournal(t, mem)); got != want {
		t.Fatalf("journal:\n%s\nwant\n%s", got, want)
	}
	if _, err := mem.Stat(dir + "/" + FileName); !errors.Is(err, errNotExist) {
		t.Fatalf("a snapshot before any compaction: %v", err)
	}
}

// TestTornTail: a journal whose last record is incomplete or damaged (a
// crash during its append) opens without it, and the journal is cut there
// before the new session's record is appended.
func TestTornTail(t *testing.T) {
	base := vfs.NewMem()
	s := open(t, base)
	ctx := t.Context()
	must(t, s.Create(ctx, "/a", []byte("x"), coord.Persistent))
	good := readJournal(t, base)
	rec := appendRecord(nil, 3, nil)
	garbage := map[string][]byte{
		"half a header":    rec[:5],
		"header only":      rec[:frameHeader],
		"half the payload": rec[:len(rec)-4],
		"no newline":       rec[:len(rec)-1],
		"bad checksum":     append(bytes.Clone(rec[:len(rec)-3]), '4', '}', '\n'),
		"zeros":            make([]byte, 100),
		"zeros and a line": append(make([]byte, 10), '\n', 0, 0),
	}
	for name, tail := range garbage {
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewMem()
			writeFile(t, mem, JournalName, append(bytes.Clone(good), tail...))
			s := open(t, mem)
			if got, _, err := s.Get(ctx, "/a"); err != nil || string(got) != "x" {
				t.Fatalf("/a after a torn tail: %q, %v", got, err)
			}
			if id := s.Session().ID; id != 3 {
				t.Fatalf("session %d, want 3: the torn record took nothing", id)
			}
			want := append(bytes.Clone(good), appendRecord(nil, 3, nil)...)
			if got := readJournal(t, mem.CrashClone()); !bytes.Equal(got, want) {
				t.Fatalf("journal after Open:\n%q\nwant the tail cut and the session's record\n%q", got, want)
			}
		})
	}
}

// TestCorruptMiddle: damage before the journal's tail (a bad record with
// intact ones after it) is refused with ErrCorrupt naming the file and the
// offset, and nothing is written.
func TestCorruptMiddle(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem)
	ctx := t.Context()
	must(t, s.Create(ctx, "/a", []byte("x"), coord.Persistent))
	must(t, s.Create(ctx, "/b", []byte("y"), coord.Persistent))
	b := readJournal(t, mem)
	second := len(journalMagic) + len(appendRecord(nil, 1, nil))
	for _, tc := range []struct {
		name string
		at   int // byte to change
		want string
	}{
		{"checksum", second + 40, "checksum"},
		{"length", second + 3, ""},
		{"newline", second + len(appendRecord(nil, 2, nil)) - 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := bytes.Clone(b)
			bad[tc.at] ^= 0x01
			m := vfs.NewMem()
			writeFile(t, m, JournalName, bad)
			_, err := Open(Options{FS: m, Dir: dir})
			wantMsg := fmt.Sprintf("%s/%s: at offset %d: ", dir, JournalName, second)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), wantMsg) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "an intact record follows") {
				t.Fatalf("open: %v\nwant ErrCorrupt containing %q and %q", err, wantMsg, tc.want)
			}
			if got := readJournal(t, m); !bytes.Equal(got, bad) {
				t.Fatal("Open changed a journal it could not read")
			}
		})
	}
}

// TestJournalRejects: records that pass their checksum but cannot be what
// the store wrote, or do not follow the snapshot, are ErrCorrupt naming the
// file and offset.
func TestJournalRejects(t *testing.T) {
	frame := func(p string) string { return fmt.Sprintf("%08x %08x %s\n", len(p), crc32c([]byte(p)), p) }
	snap := `{"version":1,"zxid":3,"nodes":{"/":{"cversion":1},"/a":{"czxid":3,"mzxid":3,"data":"x"}}}`
	off := fmt.Sprint(len(journalMagic))
	tests := []struct {
		name, snap, journal, want string
	}{
		{"no magic", "", "weir-coord journal 2\n", "at offset 0: not a journal"},
		{"empty", "", "", "at offset 0: not a journal"},
		{"not json", "", journalMagic + frame(`{zxid:1}`), "at offset " + off + ": invalid character"},
		{"unknown field", "", journalMagic + frame(`{"zxid":1,"session":1}`), "unknown field"},
		{"no zxid", "", journalMagic + frame(`{"ops":[]}`), "no zxid"},
		{"unknown op", "", journalMagic + frame(`{"zxid":1,"ops":[{"op":"touch","path":"/a"}]}`), `unknown op "touch"`},
		{"data on a delete", "", journalMagic + frame(`{"zxid":1,"ops":[{"op":"delete","path":"/a","data":"x"}]}`), "has data"},
		{"two data", "", journalMagic + frame(`{"zxid":1,"ops":[{"op":"set","path":"/a","data":"x","data64":"eA=="}]}`), "both data and data64"},
		{"trailing", "", journalMagic + frame(`{"zxid":1} {}`), "bytes after the record"},
		{"zxid backwards", "", journalMagic + frame(`{"zxid":2}`) + frame(`{"zxid":1}`), "zxid 1 after 2"},
		{"gap after the snapshot", snap, journalMagic + frame(`{"zxid":5}`), "zxid 5 after 3"},
		{"does not apply", snap, journalMagic + frame(`{"zxid":4,"ops":[{"op":"create","path":"/a"}]}`), "after the snapshot at zxid 3: zxid 4: create /a: coord: node exists"},
		{"orphan", snap, journalMagic + frame(`{"zxid":4,"ops":[{"op":"create","path":"/x/y"}]}`), "parent /x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			if tc.snap != "" {
				writeFile(t, mem, FileName, []byte(tc.snap))
			}
			writeFile(t, mem, JournalName, []byte(tc.journal))
			_, err := Open(Options{FS: mem, Dir: dir})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), dir+"/"+JournalName) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("open: %v; want ErrCorrupt naming the journal and %q", err, tc.want)
			}
			if got := string(readJournal(t, mem)); got != tc.journal {
				t.Fatal("Open changed a journal it could not read")
			}
		})
	}
	// Records up to the snapshot's zxid are skipped, whatever they did.
	mem := vfs.NewMem()
	writeFile(t, mem, FileName, []byte(snap))
	writeFile(t, mem, JournalName, []byte(journalMagic+frame(`{"zxid":2,"ops":[{"op":"delete","path":"/zz"}]}`)+frame(`{"zxid":3}`)+
		frame(`{"zxid":4,"ops":[{"op":"set","path":"/a","data":"y"}]}`)))
	s := open(t, mem)
	if got, st, err := s.Get(t.Context(), "/a"); err != nil || string(got) != "y" || st.Mzxid != 4 || st.Version != 1 {
		t.Fatalf("/a = %q %+v, %v; want y set at zxid 4", got, st, err)
	}
}

// TestOldFormatDirectory: a directory written before the journal (the
// snapshot alone) opens as it is, and goes on with a journal beside it.
func TestOldFormatDirectory(t *testing.T) {
	mem := vfs.NewMem()
	old := "{\n  \"version\": 1,\n  \"zxid\": 7,\n  \"nodes\": {\n" +
		"    \"/\": {\"czxid\":0,\"mzxid\":0,\"version\":0,\"cversion\":2},\n" +
		"    \"/brokers\": {\"czxid\":2,\"mzxid\":2,\"version\":0,\"cversion\":0},\n" +
		"    \"/controller_epoch\": {\"czxid\":3,\"mzxid\":5,\"version\":1,\"cversion\":0,\"data\":\"2\"},\n" +
		"    \"/raw\": {\"czxid\":6,\"mzxid\":6,\"version\":0,\"cversion\":0,\"data64\":\"AP8=\"}\n  }\n}\n"
	writeFile(t, mem, FileName, []byte(old))
	s := open(t, mem)
	ctx := t.Context()
	if s.Session().ID != 8 {
		t.Fatalf("session %d, want 8", s.Session().ID)
	}
	if got, st, err := s.Get(ctx, "/controller_epoch"); err != nil || string(got) != "2" || st.Mzxid != 5 || st.Version != 1 {
		t.Fatalf("/controller_epoch = %q %+v, %v", got, st, err)
	}
	if got, _, err := s.Get(ctx, "/raw"); err != nil || !bytes.Equal(got, []byte{0, 0xff}) {
		t.Fatalf("/raw = %q, %v", got, err)
	}
	if b, _ := vfs.ReadFile(mem, dir+"/"+FileName); string(b) != old {
		t.Fatal("Open rewrote the snapshot")
	}
	must(t, s.Create(ctx, "/brokers/topics", nil, coord.Persistent))
	// A crash now: the snapshot and the journal hold everything.
	r := open(t, mem.CrashClone())
	if ok, st, err := r.Exists(ctx, "/brokers/topics"); !ok || err != nil || st.Czxid != 9 {
		t.Fatalf("/brokers/topics after a crash: %v %+v %v", ok, st, err)
	}
}

// TestCompaction: a journal past its bound is folded into a new snapshot
// and started afresh, so neither file grows with the number of writes, and
// a restart (clean or not) finds everything.
func TestCompaction(t *testing.T) {
	mem := vfs.NewMem()
	s, err := Open(Options{FS: mem, Dir: dir, CompactBytes: 1024})
	must(t, err)
	ctx := t.Context()
	must(t, s.Create(ctx, "/p", nil, coord.Persistent))
	for i := range 20 {
		must(t, s.Create(ctx, fmt.Sprintf("/p/%d", i), []byte("state"), coord.Persistent))
	}
	maxJournal := 0
	for i := range 500 {
		_, err := s.Set(ctx, fmt.Sprintf("/p/%d", i%20), []byte(fmt.Sprint(i)), coord.AnyVersion)
		must(t, err)
		maxJournal = max(maxJournal, len(readJournal(t, mem)))
	}
	snap, err := vfs.ReadFile(mem, dir+"/"+FileName)
	must(t, err)
	rec := len(appendRecord(nil, 1000, nil)) + 60 // a Set's record is under this
	if bound := max(1024, len(snap)); maxJournal > bound+rec {
		t.Fatalf("journal grew to %d bytes, want at most the bound %d and one record", maxJournal, bound)
	}
	want := s.snap()
	for _, fsys := range []*vfs.MemFS{mem.CrashClone()} {
		r := open(t, fsys)
		if got := r.snap(); fmt.Sprint(got.nodes) != fmt.Sprint(want.nodes) || got.zxid != want.zxid+1 {
			t.Fatalf("after a crash: zxid %d\n%+v\nwant zxid %d\n%+v", got.zxid, got.nodes, want.zxid+1, want.nodes)
		}
	}
	must(t, s.Close())
	if j := readJournal(t, mem); string(j) != journalMagic {
		t.Fatalf("journal after Close: %q, want it compacted away", j)
	}
	r := open(t, mem)
	if got := r.snap(); fmt.Sprint(got.nodes) != fmt.Sprint(want.nodes) {
		t.Fatalf("after Close:\n%+v\nwant\n%+v", got.nodes, want.nodes)
	}
}

// TestGroupCommit: while one append waits for its fsync, reads go on (and
// see only what is durable) and the writes that arrive share the next fsync.
func TestGroupCommit(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	armed := false
	syncs := 0
	hold, held := make(chan struct{}), make(chan struct{})
	inj := errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		mu.Lock()
		if op != errorfs.OpSync || !armed {
			mu.Unlock()
			return nil
		}
		syncs++
		first := syncs == 1
		mu.Unlock()
		if first {
			close(held)
			<-hold
		}
		return nil
	})
	s := open(t, errorfs.Wrap(mem, inj))
	mu.Lock()
	armed = true
	mu.Unlock()
	ctx := t.Context()
	const n = 8
	errs := make(chan error, n+1)
	go func() { errs <- s.Create(ctx, "/first", nil, coord.Persistent) }()
	<-held
	if ok, _, err := s.Exists(ctx, "/first"); ok || err != nil {
		t.Fatalf("a read during the fsync: exists %v, %v; want it to answer, without the write in flight", ok, err)
	}
	for i := range n {
		go func() { errs <- s.Create(ctx, fmt.Sprintf("/n%d", i), nil, coord.Persistent) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		queued := len(s.queue)
		s.mu.Unlock()
		if queued == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", queued, n)
		}
		runtime.Gosched() // polling with a deadline
	}
	close(hold)
	for range n + 1 {
		must(t, <-errs)
	}
	mu.Lock()
	defer mu.Unlock()
	if syncs != 2 {
		t.Fatalf("%d fsyncs, want 2: the first write's, and one for the %d that queued behind it", syncs, n)
	}
	names, _, err := s.Children(ctx, "/")
	if err != nil || len(names) != n+1 {
		t.Fatalf("children %q, %v", names, err)
	}
	if got := onDisk(t, mem.CrashClone()); len(got.nodes) != n+2 {
		t.Fatalf("durable nodes %d, want %d", len(got.nodes), n+2)
	}
}

// TestDocExample: the journal in the package doc is one this weir reads.
func TestDocExample(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	must(t, err)
	var j []byte
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "//\t"); ok && strings.HasSuffix(rest, `\n`) {
			j = append(j, strings.TrimSuffix(rest, `\n`)+"\n"...)
		}
	}
	sc, err := scanJournal(j)
	if err != nil || sc.tornWhy != nil || len(sc.records) != 3 || sc.records[2].zxid != 10 {
		t.Fatalf("the doc's journal:\n%s\nscans to %+v, %v, torn %v", j, sc.records, err, sc.tornWhy)
	}
}
