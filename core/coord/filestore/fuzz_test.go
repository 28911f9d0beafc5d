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

// FuzzJournal: scanning any bytes as a journal never panics; what scans is
// a prefix of intact records (then perhaps a torn tail with nothing intact
// after it); the records re-encode to a journal that scans to the same
// records and encodes to the same bytes; a record appended after the cut
// scans; and replaying the records from an empty tree never panics and
// leaves a tree the snapshot format can hold.
func FuzzJournal(f *testing.F) {
	valid := []byte(journalMagic)
	valid = appendRecord(valid, 1, nil)
	valid = appendRecord(valid, 2, []tree.Change{{Kind: tree.ChangeCreate, Path: "/a", Data: []byte(`{"v":1}`)}})
	valid = appendRecord(valid, 3, []tree.Change{{Kind: tree.ChangeEphemeral, Path: "/a/e"}, {Kind: tree.ChangeSet, Path: "/a", Data: []byte{0, 0xff}}})
	valid = appendRecord(valid, 4, []tree.Change{{Kind: tree.ChangeCreate, Path: "/a/b"}, {Kind: tree.ChangeDelete, Path: "/a/b"}})
	middle := bytes.Clone(valid)
	middle[len(journalMagic)+25] ^= 1
	for _, seed := range [][]byte{
		nil,
		[]byte(journalMagic),
		make([]byte, 64),
		valid,
		append(bytes.Clone(valid), "garbage"...),
		append(bytes.Clone(valid), make([]byte, 40)...),
		valid[:len(valid)-7],
		middle,
		[]byte(journalMagic + "ffffffff 00000000 {}\n"),
		[]byte(journalMagic + "00000002 00000000 {}\n"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sc, err := scanJournal(b)
		if err != nil {
			return
		}
		if sc.end > len(b) || (sc.tornWhy == nil) != (sc.end == len(b)) {
			t.Fatalf("end %d of %d bytes, torn %v", sc.end, len(b), sc.tornWhy)
		}
		if again, err := scanJournal(b[:sc.end]); err != nil || again.tornWhy != nil || !reflect.DeepEqual(again.records, sc.records) {
			t.Fatalf("the intact prefix scans differently: %v, %v", err, again.tornWhy)
		}
		enc := []byte(journalMagic)
		for _, r := range sc.records {
			enc = appendRecord(enc, r.zxid, r.changes)
		}
		re, err := scanJournal(enc)
		if err != nil || re.tornWhy != nil || !reflect.DeepEqual(normalRecords(re.records), normalRecords(sc.records)) {
			t.Fatalf("re-encoded records scan to %+v, %v, %v; want %+v", re.records, err, re.tornWhy, sc.records)
		}
		enc2 := []byte(journalMagic)
		for _, r := range re.records {
			enc2 = appendRecord(enc2, r.zxid, r.changes)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not a fixed point:\n%s\n%s", enc, enc2)
		}
		next := int64(1)
		if n := len(sc.records); n > 0 {
			next = sc.records[n-1].zxid + 1
		}
		if next > 0 {
			more, err := scanJournal(appendRecord(bytes.Clone(b[:sc.end]), next, nil))
			if err != nil || more.tornWhy != nil || len(more.records) != len(sc.records)+1 {
				t.Fatalf("a record appended after the cut: %d records, %v, %v", len(more.records), err, more.tornWhy)
			}
		}
		tr := tree.New()
		for _, r := range sc.records {
			if r.zxid <= tr.Zxid() {
				continue
			}
			if err := tr.Redo(r.zxid, r.changes); err != nil {
				return
			}
		}
		zxid, nodes := tr.Persistent()
		if _, err := decode(encode(zxid, nodes)); err != nil {
			t.Fatalf("the replayed tree does not make a snapshot: %v", err)
		}
	})
}

func normalRecords(rs []record) []record {
	for i := range rs {
		for j := range rs[i].changes {
			if len(rs[i].changes[j].Data) == 0 {
				rs[i].changes[j].Data = nil
			}
		}
	}
	return rs
}
