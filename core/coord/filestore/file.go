package filestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/weir-broker/weir/core/coord/internal/tree"
	"github.com/weir-broker/weir/core/vfs"
)

// File names in the directory.
const (
	FileName       = "weir-coord.json" // the snapshot
	JournalName    = "weir-coord.log"
	tmpFileName    = FileName + ".tmp"
	journalTmpName = JournalName + ".tmp"
	fileVersion    = 1
)

// ErrCorrupt is wrapped by the error of Open when the snapshot cannot be
// read as a tree, or the journal has damage before its tail or records that
// do not follow the snapshot.
var ErrCorrupt = errors.New("filestore: corrupt file")

type fileJSON struct {
	Version *int                `json:"version"`
	Zxid    int64               `json:"zxid"`
	Nodes   map[string]nodeJSON `json:"nodes"`
}

type nodeJSON struct {
	Czxid    int64  `json:"czxid"`
	Mzxid    int64  `json:"mzxid"`
	Version  int32  `json:"version"`
	Cversion int32  `json:"cversion"`
	Data     string `json:"data,omitempty"`
	Data64   []byte `json:"data64,omitempty"`
}

// encode renders the tree's persistent state in the file format.
func encode(zxid int64, nodes []tree.Persisted) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	put := func(v any) {
		if err := enc.Encode(v); err != nil {
			panic(fmt.Sprintf("filestore: encode: %v", err)) // strings, numbers and byte slices always encode
		}
		b.Truncate(b.Len() - 1) // Encode's newline
	}
	fmt.Fprintf(&b, "{\n  \"version\": %d,\n  \"zxid\": %d,\n  \"nodes\": {", fileVersion, zxid)
	for i, n := range nodes {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n    ")
		put(n.Path)
		b.WriteString(": ")
		nj := nodeJSON{Czxid: n.Czxid, Mzxid: n.Mzxid, Version: n.Version, Cversion: n.Cversion}
		if utf8.Valid(n.Data) {
			nj.Data = string(n.Data)
		} else {
			nj.Data64 = n.Data
		}
		put(nj)
	}
	b.WriteString("\n  }\n}\n")
	return b.Bytes()
}

// decode parses and checks a file; its errors do not name the file.
func decode(b []byte) (*tree.Tree, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f fileJSON
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("bytes after the end at offset %d", dec.InputOffset())
	}
	if f.Version == nil {
		return nil, errors.New("no version")
	}
	if *f.Version != fileVersion {
		return nil, fmt.Errorf("version %d, this weir reads version %d", *f.Version, fileVersion)
	}
	nodes := make([]tree.Persisted, 0, len(f.Nodes))
	for _, path := range slices.Sorted(maps.Keys(f.Nodes)) {
		n := f.Nodes[path]
		p := tree.Persisted{Path: path, Czxid: n.Czxid, Mzxid: n.Mzxid, Version: n.Version, Cversion: n.Cversion}
		switch {
		case n.Data != "" && n.Data64 != nil:
			return nil, fmt.Errorf("node %s has both data and data64", path)
		case n.Data64 != nil:
			p.Data = n.Data64
		case n.Data != "":
			p.Data = []byte(n.Data)
		}
		nodes = append(nodes, p)
	}
	return tree.Load(f.Zxid, nodes)
}

// readTree loads a snapshot and returns its size; a missing file is an
// empty tree.
func readTree(fsys vfs.FS, name string) (*tree.Tree, int64, error) {
	b, err := vfs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return tree.New(), 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("filestore: read %s: %w", name, err)
	}
	t, err := decode(b)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %w", ErrCorrupt, name, err)
	}
	return t, int64(len(b)), nil
}
