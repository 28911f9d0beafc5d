package filestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/weir-broker/weir/core/coord/internal/tree"
)

// The journal's framing (see the package doc): a magic line, then records
// "LLLLLLLL CCCCCCCC payload\n", L the payload's length and C its CRC-32C,
// both 8 hex digits.
const (
	journalMagic = "weir-coord journal 1\n"
	frameHeader  = 18      // "LLLLLLLL CCCCCCCC "
	maxPayload   = 1 << 30 // far above any request ZooKeeper would take
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type recordJSON struct {
	Zxid *int64       `json:"zxid"`
	Ops  []changeJSON `json:"ops,omitempty"`
}

type changeJSON struct {
	Op     string `json:"op"`
	Path   string `json:"path"`
	Data   string `json:"data,omitempty"`
	Data64 []byte `json:"data64,omitempty"`
}

var kindByName = map[string]tree.ChangeKind{
	"create": tree.ChangeCreate, "set": tree.ChangeSet, "delete": tree.ChangeDelete, "ephemeral": tree.ChangeEphemeral,
}

// record is one journaled transaction: the zxid it took and its changes to
// the persistent tree (none for a session's creation, or a Set or Delete of
// an ephemeral node).
type record struct {
	zxid    int64
	changes []tree.Change
}

// appendRecord appends the framed record to b.
func appendRecord(b []byte, zxid int64, changes []tree.Change) []byte {
	r := recordJSON{Zxid: &zxid}
	for _, c := range changes {
		cj := changeJSON{Op: c.Kind.String(), Path: c.Path}
		if utf8.Valid(c.Data) {
			cj.Data = string(c.Data)
		} else {
			cj.Data64 = c.Data
		}
		r.Ops = append(r.Ops, cj)
	}
	var p bytes.Buffer
	enc := json.NewEncoder(&p)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		panic(fmt.Sprintf("filestore: encode a record: %v", err)) // strings, numbers and byte slices always encode
	}
	payload := bytes.TrimSuffix(p.Bytes(), []byte{'\n'}) // JSON escapes every newline inside
	b = fmt.Appendf(b, "%08x %08x ", len(payload), crc32.Checksum(payload, castagnoli))
	b = append(b, payload...)
	return append(b, '\n')
}

// frameAt checks the frame at off and returns its payload and where it
// ends. errIncomplete: the bytes end inside it.
func frameAt(b []byte, off int) (payload []byte, end int, err error) {
	h := b[off:]
	if len(h) < frameHeader {
		return nil, 0, errIncomplete
	}
	n, err1 := strconv.ParseUint(string(h[0:8]), 16, 32)
	sum, err2 := strconv.ParseUint(string(h[9:17]), 16, 32)
	switch {
	case err1 != nil || err2 != nil || h[8] != ' ' || h[17] != ' ':
		return nil, 0, errors.New("bad frame header")
	case n > maxPayload:
		return nil, 0, fmt.Errorf("length %d too large", n)
	case len(h) < frameHeader+int(n)+1:
		return nil, 0, errIncomplete
	}
	payload = h[frameHeader : frameHeader+n]
	if h[frameHeader+n] != '\n' {
		return nil, 0, errors.New("no newline after the record")
	}
	if got := crc32.Checksum(payload, castagnoli); got != uint32(sum) {
		return nil, 0, fmt.Errorf("checksum %08x, the record says %08x", got, sum)
	}
	return payload, off + frameHeader + int(n) + 1, nil
}

var errIncomplete = errors.New("incomplete record")

// decodeRecord parses a payload whose checksum matched.
func decodeRecord(payload []byte) (record, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	var rj recordJSON
	if err := dec.Decode(&rj); err != nil {
		return record{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return record{}, errors.New("bytes after the record")
	}
	if rj.Zxid == nil || *rj.Zxid <= 0 {
		return record{}, errors.New("no zxid, or not positive")
	}
	r := record{zxid: *rj.Zxid}
	for _, cj := range rj.Ops {
		k, ok := kindByName[cj.Op]
		c := tree.Change{Kind: k, Path: cj.Path}
		switch {
		case !ok:
			return record{}, fmt.Errorf("unknown op %q", cj.Op)
		case cj.Data != "" && cj.Data64 != nil:
			return record{}, fmt.Errorf("%s %s has both data and data64", cj.Op, cj.Path)
		case (cj.Data != "" || cj.Data64 != nil) && k != tree.ChangeCreate && k != tree.ChangeSet:
			return record{}, fmt.Errorf("%s %s has data", cj.Op, cj.Path)
		case cj.Data64 != nil:
			c.Data = cj.Data64
		case cj.Data != "":
			c.Data = []byte(cj.Data)
		}
		r.changes = append(r.changes, c)
	}
	return r, nil
}

// scanned is a journal file read through.
type scanned struct {
	records []record
	offsets []int // each record's
	// end is where the intact records end; a torn tail, if any, is b[end:]
	// and tornWhy says what was wrong with it.
	end     int
	tornWhy error
}

// scanJournal reads a journal file: its records, in order, with strictly
// growing zxids. A damaged or incomplete record with no intact record after
// it is a torn tail (a crash during an append): scanned says where it starts.
// One with an intact record after it is an error, as is a record that passed
// its checksum but does not decode. Errors name the offset, not the file.
func scanJournal(b []byte) (scanned, error) {
	if !bytes.HasPrefix(b, []byte(journalMagic)) {
		return scanned{}, fmt.Errorf("at offset 0: not a journal (no %q)", journalMagic[:len(journalMagic)-1])
	}
	var s scanned
	off := len(journalMagic)
	for off < len(b) {
		payload, end, err := frameAt(b, off)
		if err != nil {
			if next := nextFrame(b, off); next >= 0 {
				return scanned{}, fmt.Errorf("at offset %d: %w, and an intact record follows at offset %d", off, err, next)
			}
			s.end, s.tornWhy = off, err
			return s, nil
		}
		r, err := decodeRecord(payload)
		if err != nil {
			return scanned{}, fmt.Errorf("at offset %d: %w", off, err)
		}
		if n := len(s.records); n > 0 && r.zxid <= s.records[n-1].zxid {
			return scanned{}, fmt.Errorf("at offset %d: zxid %d after %d", off, r.zxid, s.records[n-1].zxid)
		}
		s.records = append(s.records, r)
		s.offsets = append(s.offsets, off)
		off = end
	}
	s.end = len(b)
	return s, nil
}

// nextFrame returns the offset of the first intact frame that starts after
// a newline at or after off, or -1. Payloads hold no newline, so every
// record starts right after one.
func nextFrame(b []byte, off int) int {
	for {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return -1
		}
		off += i + 1
		if _, _, err := frameAt(b, off); err == nil {
			return off
		}
	}
}
