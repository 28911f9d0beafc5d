package record

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestReheaderMatchesPutHeader: on valid batches of many sizes, Reheader
// with new header fields (producer id, epoch, sequence, attributes, base
// offset, leader epoch, timestamps) writes exactly what PutHeader writes,
// and Next accepts the result.
func TestReheaderMatchesPutHeader(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 7, 50, 300, 2000} {
		orig, err := Build(DefaultBuildOptions(), testRecords(n))
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			h, err := ParseHeader(orig)
			if err != nil {
				t.Fatal(err)
			}
			h.BaseOffset = rng.Int64()
			h.PartitionLeaderEpoch = rng.Int32()
			h.ProducerID, h.ProducerEpoch, h.BaseSequence = rng.Int64(), int16(rng.Uint32()), rng.Int32()
			h.Attributes ^= int16(rng.IntN(2)) << 4
			h.MaxTimestamp += rng.Int64N(1000)
			want, got := bytes.Clone(orig), bytes.Clone(orig)
			PutHeader(want, h)
			Reheader(got, h)
			if !bytes.Equal(got, want) {
				t.Fatalf("%d records: Reheader wrote % x, PutHeader % x", n, got[:HeaderSize], want[:HeaderSize])
			}
			if _, _, err := Next(got, 0); err != nil {
				t.Fatalf("%d records: Next after Reheader: %v", n, err)
			}
		}
	}
}

// TestCRCZeros: running the register through n zero bytes with the
// precomputed powers equals feeding it n zero bytes.
func TestCRCZeros(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 8, 255, 256, 1000, 65537} {
		for _, v := range []uint32{1, 0x80000000, 0xdeadbeef} {
			zeros := make([]byte, n)
			// raw(v, zeros) = ^Update(^v, zeros)
			if got, want := crcZeros(v, n), ^updateCastagnoli(^v, zeros); got != want {
				t.Errorf("crcZeros(%#x, %d) = %#x, want %#x", v, n, got, want)
			}
		}
	}
}

func BenchmarkReheader(b *testing.B) {
	orig, err := Build(DefaultBuildOptions(), testRecords(2000))
	if err != nil {
		b.Fatal(err)
	}
	h, _ := ParseHeader(orig)
	b.SetBytes(int64(len(orig)))
	for i := range b.N {
		h.BaseSequence = int32(i)
		Reheader(orig, h)
	}
}

func BenchmarkPutHeader(b *testing.B) {
	orig, err := Build(DefaultBuildOptions(), testRecords(2000))
	if err != nil {
		b.Fatal(err)
	}
	h, _ := ParseHeader(orig)
	b.SetBytes(int64(len(orig)))
	for i := range b.N {
		h.BaseSequence = int32(i)
		PutHeader(orig, h)
	}
}
