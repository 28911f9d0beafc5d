package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Reheader is PutHeader for a batch whose CRC is valid (Next checked it):
// it writes the header fields from h as PutHeader does, and computes the
// new CRC from the old one and the header bytes that changed, without
// reading the records section. CRC-32C is affine in its input, so for two
// inputs of one length crc(m') = crc(m) xor raw(m xor m'), where raw is
// the CRC register with no pre- and post-inversion; m xor m' is the header
// difference followed by zeros, and running the register through n zero
// bytes is a linear map applied in O(log n) steps from precomputed powers.
// A forwarder that rewrites producer ids and sequences of batches it
// validated so reads each batch once, not twice. On a batch whose CRC is
// not valid the result is not valid either.
// It panics if len(b) < HeaderSize or len(b)-12 does not fit an int32.
func Reheader(b []byte, h Header) {
	if len(b) < HeaderSize || int64(len(b)) > lengthPrefix+math.MaxInt32 {
		panic(fmt.Sprintf("record: Reheader on %d bytes", len(b)))
	}
	var old [HeaderSize - offAttributes]byte
	copy(old[:], b[offAttributes:HeaderSize])
	sum := binary.BigEndian.Uint32(b[offCRC:])
	putFields(b, h)
	for i := range old {
		old[i] ^= b[offAttributes+i]
	}
	// raw(d) = ^Update(^0, d): Go's Update inverts before and after.
	delta := ^crc32.Update(^uint32(0), castagnoli, old[:])
	delta = crcZeros(delta, len(b)-HeaderSize)
	binary.BigEndian.PutUint32(b[offCRC:], sum^delta)
}

// crcZerosOps[i] runs the raw CRC-32C register through 2^i zero bytes: as
// a 32x32 matrix over GF(2), column j the image of bit j.
var crcZerosOps = func() (ops [32][32]uint32) {
	var bit [32]uint32 // one zero bit: shift right, xor the polynomial if bit 0 was set
	bit[0] = crc32.Castagnoli
	for j := 1; j < 32; j++ {
		bit[j] = 1 << (j - 1)
	}
	m := bit
	for range 3 { // 2, 4, 8 bits: one byte
		m = gf2Square(&m)
	}
	ops[0] = m
	for i := 1; i < 32; i++ {
		ops[i] = gf2Square(&ops[i-1])
	}
	return ops
}()

func gf2Times(m *[32]uint32, v uint32) uint32 {
	var s uint32
	for j := 0; v != 0; j, v = j+1, v>>1 {
		if v&1 != 0 {
			s ^= m[j]
		}
	}
	return s
}

func gf2Square(m *[32]uint32) (sq [32]uint32) {
	for j := range sq {
		sq[j] = gf2Times(m, m[j])
	}
	return sq
}

// crcZeros runs the raw register value v through n zero bytes.
func crcZeros(v uint32, n int) uint32 {
	for i := 0; n != 0; i, n = i+1, n>>1 {
		if n&1 != 0 {
			v = gf2Times(&crcZerosOps[i], v)
		}
	}
	return v
}

func updateCastagnoli(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }
