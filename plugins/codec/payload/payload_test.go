package payload_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/payload"
)

// The generators feed benchmarks whose results are compared across runs and
// machines, so they must be deterministic and the size asked for.
func TestPayloadsAreDeterministic(t *testing.T) {
	for name, gen := range map[string]func(int64, int) []byte{
		"RandomPayload":  payload.RandomPayload,
		"JSONLogPayload": payload.JSONLogPayload,
	} {
		for _, n := range []int{0, 1, 7, 1000, 100 << 10} {
			a, b := gen(42, n), gen(42, n)
			if len(a) != n || !bytes.Equal(a, b) {
				t.Errorf("%s(42, %d): %d bytes, equal on a second call: %v", name, n, len(a), bytes.Equal(a, b))
			}
			if n >= 1000 && bytes.Equal(a, gen(43, n)) {
				t.Errorf("%s: seeds 42 and 43 give the same %d bytes", name, n)
			}
		}
	}
}

func TestJSONLogPayloadIsJSONLines(t *testing.T) {
	p := payload.JSONLogPayload(1, 64<<10)
	lines := bytes.Split(p, []byte("\n"))
	// The last line is cut at n bytes; every other one is a JSON object.
	for i, l := range lines[:len(lines)-1] {
		var v map[string]any
		if err := json.Unmarshal(l, &v); err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		if v["level"] == nil || v["msg"] == nil {
			t.Fatalf("line %d lacks level or msg: %s", i, l)
		}
	}
	if len(lines) < 100 {
		t.Errorf("%d lines in 64 KiB, want lines of a few hundred bytes", len(lines))
	}
	// Log lines compress, random bytes do not: the two payloads bracket
	// real data.
	c := codec.Standard(codec.Gzip)
	for name, tc := range map[string]struct {
		data     []byte
		min, max float64
	}{
		"json":   {p, 3, 20},
		"random": {payload.RandomPayload(1, 64<<10), 0.9, 1.01},
	} {
		resp, err := c.Compress(t.Context(), codec.CompressRequest{Records: tc.data})
		if err != nil {
			t.Fatal(err)
		}
		if r := float64(len(tc.data)) / float64(len(resp.Compressed)); r < tc.min || r > tc.max {
			t.Errorf("%s payload: gzip ratio %.2f, want %.1f..%.1f", name, r, tc.min, tc.max)
		}
	}
}

// TestRecordsSection: the section is a real one: under a batch header with
// its length and record count, record.Records decodes the log lines back.
func TestRecordsSection(t *testing.T) {
	const n = 30
	sec := payload.RecordsSection(5, n)
	lines := payload.JSONLogLines(5, n)
	// Borrow the header of a batch with as many records, and fix its
	// length (Records does not check the CRC).
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte("x")}
	}
	b, err := record.Build(record.DefaultBuildOptions(), recs)
	if err != nil {
		t.Fatal(err)
	}
	batch := append(bytes.Clone(b[:record.HeaderSize]), sec...)
	binary.BigEndian.PutUint32(batch[8:], uint32(len(batch)-12))
	got, err := record.Records(batch, nil)
	if err != nil {
		t.Fatalf("decoding the section: %v", err)
	}
	if len(got) != n {
		t.Fatalf("%d records, want %d", len(got), n)
	}
	for i, r := range got {
		if !bytes.Equal(r.Value, lines[i]) {
			t.Fatalf("record %d value %q, want %q", i, r.Value, lines[i])
		}
	}
}
