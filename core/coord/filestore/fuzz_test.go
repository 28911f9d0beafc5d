package filestore

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/weir-broker/weir/core/coord/internal/tree"
)

// FuzzDecode: decoding any bytes never panics, and whatever decodes encodes
// to a file that decodes to the same tree and encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	valid := encode(5, []tree.Persisted{
		{Path: "/", Cversion: 2},
		{Path: "/a", Data: []byte(`{"v":1}`), Czxid: 1, Mzxid: 4, Version: 3, Cversion: 1},
		{Path: "/a/b", Data: []byte{0, 0xff}, Czxid: 2, Mzxid: 2},
		{Path: "/c", Czxid: 5, Mzxid: 5},
	})
	for _, seed := range [][]byte{
		nil,
		make([]byte, 64),
		valid,
		append(bytes.Clone(valid), "garbage"...),
		valid[:len(valid)/2],
		[]byte(`{"version":1,"zxid":0,"nodes":{"/":{}}}`),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := decode(b)
		if err != nil {
			return
		}
		zxid, nodes := tr.Persistent()
		enc := encode(zxid, nodes)
		tr2, err := decode(enc)
		if err != nil {
			t.Fatalf("the encoding of a decoded file does not decode: %v\n%s", err, enc)
		}
		zxid2, nodes2 := tr2.Persistent()
		if zxid2 != zxid || !reflect.DeepEqual(normal(nodes2), normal(nodes)) {
			t.Fatalf("round trip changed the tree:\n%+v\n%+v", nodes, nodes2)
		}
		if enc2 := encode(zxid2, nodes2); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not a fixed point:\n%s\n%s", enc, enc2)
		}
	})
}

// normal makes empty data nil, as the file does not tell them apart.
func normal(nodes []tree.Persisted) []tree.Persisted {
	for i := range nodes {
		if len(nodes[i].Data) == 0 {
			nodes[i].Data = nil
		}
	}
	return nodes
}
