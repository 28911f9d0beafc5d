// Package testbatch builds Kafka v2 record batches with known contents for the
// storage engine's tests and benchmarks, and checks batches read back.
package testbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/weir-broker/weir/core/record"
)

// Make returns one uncompressed batch of n records whose values are size bytes
// each, stamped with id (so a batch can be recognised after a crash), with
// record timestamps ts, ts+1, ... It panics on a build error (a test bug).
func Make(id uint64, n, size int, ts int64) []byte {
	if size < 8 {
		size = 8
	}
	recs := make([]record.Record, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte('a' + (id+uint64(i))%26)}, size)
		binary.BigEndian.PutUint64(v, id)
		recs[i] = record.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: v, Timestamp: ts + int64(i)}
	}
	b, err := record.Build(record.DefaultBuildOptions(), recs)
	if err != nil {
		panic(err)
	}
	return b
}

// OfSize returns one batch of about total bytes (one record), stamped with id.
func OfSize(id uint64, total int, ts int64) []byte {
	return Make(id, 1, max(8, total-record.HeaderSize-20), ts)
}

// ID returns the id Make stamped into a batch's first record.
func ID(batch []byte) (uint64, error) {
	recs, err := record.Records(batch, nil)
	if err != nil {
		return 0, err
	}
	if len(recs) == 0 || len(recs[0].Value) < 8 {
		return 0, fmt.Errorf("testbatch: no id in batch")
	}
	return binary.BigEndian.Uint64(recs[0].Value), nil
}

// Split walks b, a buffer of concatenated batches, checking each completely
// (record.Next), and returns the batches. Any error means b holds something
// other than whole valid batches.
func Split(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		_, n, err := record.Next(b, 0)
		if err != nil {
			return out, fmt.Errorf("batch %d: %w", len(out), err)
		}
		out = append(out, b[:n:n])
		b = b[n:]
	}
	return out, nil
}

// Tagged returns one uncompressed, non-idempotent batch of n records with
// values "<tag>-<i>" and timestamps from 1_700_000_000_000 on. It panics on a
// build error (a test bug).
func Tagged(tag string, n int) []byte {
	return Build(record.DefaultBuildOptions(), tag, n)
}

// Idempotent returns a batch of n records from producer pid at epoch,
// starting at sequence seq, with values "p<pid>-e<epoch>-s<seq>-<i>".
func Idempotent(pid int64, epoch int16, seq int32, n int) []byte {
	o := record.DefaultBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence = pid, epoch, seq
	return Build(o, fmt.Sprintf("p%d-e%d-s%d", pid, epoch, seq), n)
}

// Build returns a batch built with o of n records with values "<tag>-<i>".
func Build(o record.BuildOptions, tag string, n int) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte(fmt.Sprintf("%s-%d", tag, i)), Timestamp: 1_700_000_000_000 + int64(i)}
	}
	b, err := record.Build(o, recs)
	if err != nil {
		panic(fmt.Sprintf("testbatch: %v", err))
	}
	return b
}
