package producers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
)

// A snapshot is the table as of a log offset: the remembered batches below
// it, those ending past it left out (a replay of the log from the offset
// brings them back), an open transaction only if it began below it, and
// the producers left with nothing (no batch, no marker, no transaction)
// left out. Big-endian throughout:
//
//	magic      4 bytes "WPSN"
//	version    u16  2 (1: before transactions, still read)
//	offset     i64  the log offset the state is as of
//	count      u32  producers
//	producers  count times, by ascending id:
//	    id       i64  >= 0
//	    epoch    i16  >= 0
//	    used     i64  unix ms of its last append (expiry counts from it)
//	    version 2 only:
//	    flags      u8   bit 0: a marker set the epoch; bit 1: a transaction is open
//	    coordEpoch i32  the coordinator epoch of its latest marker
//	    txnFirst   i64  the open transaction's first offset (0 when none), below offset
//	    batches  u8   1..Remembered (version 2: 0..Remembered, 0 only with a flag set)
//	    batches times, oldest first:
//	        firstSeq i32, lastSeq i32, base i64, next i64
//	crc        u32  CRC-32C of every byte before it
//
// The same table encodes to the same bytes. A snapshot that fails any check
// (ErrBadSnapshot) restores nothing.

// ErrBadSnapshot: snapshot bytes that are not a whole, valid snapshot.
var ErrBadSnapshot = errors.New("producers: bad snapshot")

const (
	snapshotVersion = 2
	snapshotHeader  = 4 + 2 + 8 + 4
	producerHeader  = 8 + 2 + 8 + 1 // version 1
	txnFields       = 1 + 4 + 8     // version 2: flags, coordEpoch, txnFirst
	batchSize       = 4 + 4 + 8 + 8
)

// Version 2 producer flags.
const (
	flagMarked = 1 << 0
	flagTxn    = 1 << 1
)

var (
	snapshotMagic = [4]byte{'W', 'P', 'S', 'N'}
	castagnoli    = crc32.MakeTable(crc32.Castagnoli)
)

// AppendSnapshot appends the snapshot of the table as of log offset offset
// to dst: the batches ending at or below it (see the format above). The
// caller keeps appends away meanwhile (no entry may be locked), as for
// Reset; Expire may run.
func (ps *Table) AppendSnapshot(dst []byte, offset int64) []byte {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ids := slices.Sorted(maps.Keys(ps.m))
	start := len(dst)
	dst = append(dst, snapshotMagic[:]...)
	dst = binary.BigEndian.AppendUint16(dst, snapshotVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	countAt := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	n := uint32(0)
	for _, id := range ids {
		e := ps.m[id]
		k := e.State.n
		for k > 0 && e.State.batches[k-1].Next > offset {
			k--
		}
		txn := e.State.txnOpen && e.State.txnFirst < offset
		if k == 0 && !txn && !e.State.marked {
			continue
		}
		n++
		dst = binary.BigEndian.AppendUint64(dst, uint64(id))
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.State.epoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Used))
		var flags byte
		first := int64(0)
		if e.State.marked {
			flags |= flagMarked
		}
		if txn {
			flags |= flagTxn
			first = e.State.txnFirst
		}
		dst = append(dst, flags)
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.State.coordEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(first))
		dst = append(dst, byte(k))
		for _, b := range e.State.batches[:k] {
			dst = binary.BigEndian.AppendUint32(dst, uint32(b.FirstSeq))
			dst = binary.BigEndian.AppendUint32(dst, uint32(b.LastSeq))
			dst = binary.BigEndian.AppendUint64(dst, uint64(b.Base))
			dst = binary.BigEndian.AppendUint64(dst, uint64(b.Next))
		}
	}
	binary.BigEndian.PutUint32(dst[countAt:], n)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// Restore replaces every producer of the table by those of the snapshot b,
// returning the offset it is as of. b is checked whole first (length,
// magic, version, CRC, every field in range, ids ascending, each producer's
// batches in offset order and below the offset); a bad snapshot is
// ErrBadSnapshot and leaves the table as it was. The caller keeps Lock from being called meanwhile, as
// for Reset.
func (ps *Table) Restore(b []byte) (offset int64, err error) {
	m, offset, err := decodeSnapshot(b)
	if err != nil {
		return 0, err
	}
	ps.mu.Lock()
	ps.m = m
	ps.mu.Unlock()
	return offset, nil
}

func decodeSnapshot(b []byte) (map[int64]*Entry, int64, error) {
	bad := func(format string, args ...any) (map[int64]*Entry, int64, error) {
		return nil, 0, fmt.Errorf("%w: %s", ErrBadSnapshot, fmt.Sprintf(format, args...))
	}
	if len(b) < snapshotHeader+4 {
		return bad("%d bytes", len(b))
	}
	if [4]byte(b[:4]) != snapshotMagic {
		return bad("magic %q", b[:4])
	}
	be := binary.BigEndian
	version := be.Uint16(b[4:])
	if version != 1 && version != snapshotVersion {
		return bad("version %d", version)
	}
	ph := producerHeader
	if version >= 2 {
		ph += txnFields
	}
	body := b[:len(b)-4]
	if sum := crc32.Checksum(body, castagnoli); sum != be.Uint32(b[len(b)-4:]) {
		return bad("CRC mismatch")
	}
	offset := int64(be.Uint64(b[6:]))
	if offset < 0 {
		return bad("offset %d", offset)
	}
	n := be.Uint32(b[14:])
	if uint64(n)*uint64(ph) > uint64(len(body)) {
		return bad("%d producers in %d bytes", n, len(body))
	}
	m := make(map[int64]*Entry, n)
	p := body[snapshotHeader:]
	last := int64(-1)
	for i := uint32(0); i < n; i++ {
		if len(p) < ph {
			return bad("producer %d cut short", i)
		}
		id, epoch, used := int64(be.Uint64(p)), int16(be.Uint16(p[8:])), int64(be.Uint64(p[10:]))
		e := &Entry{Used: used}
		minBatches := 1
		if version >= 2 {
			flags, coord, first := p[18], int32(be.Uint32(p[19:])), int64(be.Uint64(p[23:]))
			e.State.marked, e.State.txnOpen = flags&flagMarked != 0, flags&flagTxn != 0
			e.State.coordEpoch = coord
			if e.State.txnOpen {
				e.State.txnFirst = first
			}
			if flags&^(flagMarked|flagTxn) != 0 || first < 0 || e.State.txnOpen && first >= offset || !e.State.txnOpen && first != 0 {
				return bad("producer %d: flags %#x, transaction from %d", id, flags, first)
			}
			if flags != 0 {
				minBatches = 0
			}
		}
		k := int(p[ph-1])
		p = p[ph:]
		if id <= last || epoch < 0 || k < minBatches || k > Remembered || len(p) < k*batchSize {
			return bad("producer %d: id %d (after %d), epoch %d, %d batches", i, id, last, epoch, k)
		}
		last = id
		e.State.epoch, e.State.n = epoch, k
		for j := range k {
			bt := Batch{FirstSeq: int32(be.Uint32(p)), LastSeq: int32(be.Uint32(p[4:])),
				Base: int64(be.Uint64(p[8:])), Next: int64(be.Uint64(p[16:]))}
			p = p[batchSize:]
			if bt.FirstSeq < 0 || bt.LastSeq < 0 || bt.Base < 0 || bt.Next <= bt.Base || bt.Next > offset ||
				j > 0 && bt.Base < e.State.batches[j-1].Next {
				return bad("producer %d batch %d: %+v", id, j, bt)
			}
			e.State.batches[j] = bt
		}
		m[id] = e
	}
	if len(p) != 0 {
		return bad("%d bytes after the producers", len(p))
	}
	return m, offset, nil
}

// Last returns the producer's latest remembered batch, false when it is
// unknown.
func (s *State) Last() (Batch, bool) {
	if s.n == 0 {
		return Batch{}, false
	}
	return s.batches[s.n-1], true
}
