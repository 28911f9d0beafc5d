package filestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/vfs"
)

func open(t *testing.T, fsys vfs.FS) *Store {
	t.Helper()
	s, err := Open(Options{FS: fsys, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, fsys vfs.FS, name string, b []byte) {
	t.Helper()
	must(t, fsys.MkdirAll(dir, 0o755))
	must(t, vfs.WriteFileSynced(fsys, dir+"/"+name, b))
	must(t, fsys.SyncDir(dir))
}

// TestFileFormat: the file is the documented JSON, one node per line, text
// as text, other bytes as base64, no ephemeral nodes; every byte value
// survives a restart.
func TestFileFormat(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem)
	ctx := t.Context()
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	must(t, s.Create(ctx, "/brokers", nil, coord.Persistent))
	must(t, s.Create(ctx, "/brokers/1", []byte(`{"host":"h<1>"}`), coord.Ephemeral))
	must(t, s.Create(ctx, "/controller_epoch", []byte("2"), coord.Persistent))
	must(t, s.Create(ctx, "/raw", all, coord.Persistent))
	must(t, s.Create(ctx, "/nul", []byte{0, '\n'}, coord.Persistent))
	must(t, s.Close()) // compacts: the snapshot holds everything
	b, err := vfs.ReadFile(mem, dir+"/"+FileName)
	must(t, err)
	text := string(b)
	for _, want := range []string{
		"{\n  \"version\": 1,\n  \"zxid\": 7,\n  \"nodes\": {\n    \"/\": {\"czxid\":0,\"mzxid\":0,\"version\":0,\"cversion\":4},\n",
		"\n    \"/brokers\": {\"czxid\":2,\"mzxid\":2,\"version\":0,\"cversion\":2},\n", // counting its ephemeral child's deletion
		"\n    \"/controller_epoch\": {\"czxid\":4,\"mzxid\":4,\"version\":0,\"cversion\":0,\"data\":\"2\"},\n",
		"\"/nul\": {\"czxid\":6,\"mzxid\":6,\"version\":0,\"cversion\":0,\"data\":\"\\u0000\\n\"},\n",
		"\"/raw\": {\"czxid\":5,\"mzxid\":5,\"version\":0,\"cversion\":0,\"data64\":\"AAECAwQF",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("file lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "/brokers/1") {
		t.Errorf("the file holds an ephemeral node:\n%s", text)
	}
	if !json.Valid(b) || strings.Count(text, "\n") != 11 {
		t.Errorf("not one node per line of valid JSON:\n%s", text)
	}

	r := open(t, mem)
	for path, want := range map[string][]byte{"/raw": all, "/nul": {0, '\n'}, "/controller_epoch": []byte("2")} {
		got, _, err := r.Get(ctx, path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after a restart: %q, %v; want %q", path, got, err, want)
		}
	}
	// The ephemeral's deletion counts as a change of /brokers's children,
	// as it would have when the session ended.
	if _, st, err := r.Get(ctx, "/brokers"); err != nil || st.Cversion != 2 || st.NumChildren != 0 {
		t.Errorf("/brokers after a restart: %+v, %v; want cversion 2, no children", st, err)
	}
	if id := r.Session().ID; id != 8 {
		t.Errorf("session id after a restart %d, want 8 (the zxid after 7, the end of the last session)", id)
	}
}

// TestRestartsTakeLargerZxids: a broker's epoch (its ephemeral
// registration's czxid) grows across restarts of the store.
func TestRestartsTakeLargerZxids(t *testing.T) {
	mem := vfs.NewMem()
	ctx := t.Context()
	var last int64
	for i := range 3 {
		s := open(t, mem)
		if s.Session().ID <= last {
			t.Fatalf("restart %d: session id %d, want > %d", i, s.Session().ID, last)
		}
		must(t, s.Create(ctx, "/broker", nil, coord.Ephemeral))
		_, st, err := s.Get(ctx, "/broker")
		must(t, err)
		if st.Czxid <= last || st.EphemeralOwner != s.Session().ID {
			t.Fatalf("restart %d: registration %+v, want czxid > %d and owned by %d", i, st, last, s.Session().ID)
		}
		last = st.Czxid
		must(t, s.Close())
	}
}

func TestOpenRejects(t *testing.T) {
	valid := []byte(`{"version":1,"zxid":3,"nodes":{"/":{"czxid":0,"mzxid":0,"version":0,"cversion":1},"/a":{"czxid":3,"mzxid":3,"version":0,"cversion":0,"data":"x"}}}`)
	tests := []struct {
		name string
		file string
		want string
	}{
		{"empty", "", "EOF"},
		{"zero bytes", "\x00\x00\x00\x00", "invalid character"},
		{"truncated", string(valid[:len(valid)-10]), "unexpected EOF"},
		{"garbage after", string(valid) + "x", "bytes after the end"},
		{"second object", string(valid) + "{}", "bytes after the end"},
		{"not an object", "[1,2]", "cannot unmarshal"},
		{"null", "null", "no version"},
		{"no version", `{"zxid":0,"nodes":{"/":{}}}`, "no version"},
		{"future version", `{"version":2,"zxid":0,"nodes":{"/":{}}}`, "version 2"},
		{"unknown field", `{"version":1,"zxid":0,"nodes":{"/":{"owner":1}}}`, "unknown field"},
		{"no root", `{"version":1,"zxid":0,"nodes":{}}`, "no root"},
		{"no nodes", `{"version":1,"zxid":0}`, "no root"},
		{"orphan", `{"version":1,"zxid":2,"nodes":{"/":{},"/a/b":{}}}`, "parent /a missing"},
		{"bad path", `{"version":1,"zxid":2,"nodes":{"/":{},"a":{}}}`, "invalid path"},
		{"both data fields", `{"version":1,"zxid":2,"nodes":{"/":{"data":"x","data64":"eA=="}}}`, "both data and data64"},
		{"bad base64", `{"version":1,"zxid":2,"nodes":{"/":{"data64":"!!"}}}`, "illegal base64"},
		{"czxid after zxid", `{"version":1,"zxid":2,"nodes":{"/":{"czxid":3,"mzxid":3}}}`, "czxid 3"},
		{"negative version", `{"version":1,"zxid":2,"nodes":{"/":{"version":-1}}}`, "negative version"},
		{"version overflow", `{"version":1,"zxid":2,"nodes":{"/":{"version":2147483648}}}`, "cannot unmarshal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			writeFile(t, mem, FileName, []byte(tc.file))
			_, err := Open(Options{FS: mem, Dir: dir})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), dir+"/"+FileName) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("open: %v; want ErrCorrupt naming the file and %q", err, tc.want)
			}
			if b, _ := vfs.ReadFile(mem, dir+"/"+FileName); string(b) != tc.file {
				t.Fatal("Open changed a file it could not read")
			}
		})
	}
	mem := vfs.NewMem()
	writeFile(t, mem, FileName, valid)
	s := open(t, mem)
	if got, _, err := s.Get(t.Context(), "/a"); err != nil || string(got) != "x" {
		t.Fatalf("the valid file: /a = %q, %v", got, err)
	}
}

func TestOpenRemovesLeftoverTmp(t *testing.T) {
	mem := vfs.NewMem()
	writeFile(t, mem, tmpFileName, []byte(`{"version":1,"half a fi`))
	writeFile(t, mem, journalTmpName, []byte(journalMagic+"00000009 0"))
	s := open(t, mem)
	names, err := mem.List(dir)
	must(t, err)
	if len(names) != 1 || names[0] != JournalName {
		t.Fatalf("directory after Open: %q, want only %s", names, JournalName)
	}
	if names, _, err := s.Children(t.Context(), "/"); err != nil || len(names) != 0 {
		t.Fatalf("the leftover .tmp was read: %q, %v", names, err)
	}
}

func TestOpenOptions(t *testing.T) {
	if _, err := Open(Options{FS: vfs.NewMem()}); err == nil || !strings.HasPrefix(err.Error(), "filestore: ") {
		t.Fatalf("Open without a Dir: %v", err)
	}
	mem := vfs.NewMem()
	must(t, mem.MkdirAll(dir+"/"+FileName, 0o755)) // a directory where the file should be
	if _, err := Open(Options{FS: mem, Dir: dir}); err == nil || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a directory for a file: %v, want an I/O error", err)
	}
}
