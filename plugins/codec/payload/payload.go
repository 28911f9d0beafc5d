// Package payload generates deterministic test and benchmark payloads: random
// bytes (a codec's worst case) and realistic JSON log lines (what logs and
// events look like), shared by the codec conformance suite, the benchmarks
// and the harness's workloads. It does not import testing, so binaries can
// use it.
package payload

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/weir-broker/weir/core/record"
)

// RandomPayload returns n bytes from a generator seeded with seed: the same
// arguments give the same bytes. Random bytes do not compress, so they show
// a codec's worst case (speed on data it cannot shrink, and its overhead).
func RandomPayload(seed int64, n int) []byte {
	r := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := i; j < min(i+8, n); j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
	return b
}

// logLine is one structured log line, the kind of value most Kafka topics
// carry: repeated keys, a few enumerations, timestamps, ids, free text.
type logLine struct {
	Time     string  `json:"ts"`
	Level    string  `json:"level"`
	Service  string  `json:"service"`
	Host     string  `json:"host"`
	TraceID  string  `json:"trace_id"`
	Method   string  `json:"method"`
	Path     string  `json:"path"`
	Status   int     `json:"status"`
	Duration float64 `json:"duration_ms"`
	Bytes    int     `json:"bytes"`
	User     string  `json:"user,omitempty"`
	Message  string  `json:"msg"`
}

var (
	levels   = []string{"debug", "info", "info", "info", "info", "warn", "error"}
	services = []string{"checkout", "search", "auth", "inventory", "payments", "gateway"}
	methods  = []string{"GET", "GET", "GET", "POST", "PUT", "DELETE"}
	paths    = []string{"/api/v1/orders", "/api/v1/items", "/api/v1/users/me", "/healthz", "/api/v2/search", "/api/v1/cart"}
	statuses = []int{200, 200, 200, 200, 201, 204, 304, 400, 404, 500, 503}
	words    = []string{"request", "completed", "cache", "miss", "hit", "upstream", "timeout", "retrying", "user",
		"order", "created", "updated", "not", "found", "slow", "query", "connection", "reset", "by", "peer",
		"accepted", "rejected", "payment", "authorized", "token", "expired", "rate", "limited"}
)

// JSONLogLines returns count JSON log lines generated from seed (the same
// arguments give the same lines), each without its trailing newline: values
// for building realistic record batches.
func JSONLogLines(seed int64, count int) [][]byte {
	r := rand.New(rand.NewPCG(uint64(seed), 0x2545f4914f6cdd1d))
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	lines := make([][]byte, count)
	for i := range lines {
		l := logLine{
			Time:     t0.Add(time.Duration(i)*time.Millisecond + time.Duration(r.IntN(1000))*time.Microsecond).Format(time.RFC3339Nano),
			Level:    levels[r.IntN(len(levels))],
			Service:  services[r.IntN(len(services))],
			Host:     fmt.Sprintf("ip-10-0-%d-%d", r.IntN(4), r.IntN(256)),
			TraceID:  fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64()),
			Method:   methods[r.IntN(len(methods))],
			Path:     paths[r.IntN(len(paths))],
			Status:   statuses[r.IntN(len(statuses))],
			Duration: float64(r.IntN(250_000)) / 1000,
			Bytes:    r.IntN(64 << 10),
		}
		if r.IntN(3) > 0 {
			l.User = fmt.Sprintf("user-%d", r.IntN(5000))
		}
		n := 3 + r.IntN(10)
		msg := make([]byte, 0, 8*n)
		for w := range n {
			if w > 0 {
				msg = append(msg, ' ')
			}
			msg = append(msg, words[r.IntN(len(words))]...)
		}
		l.Message = string(msg)
		b, err := json.Marshal(l)
		if err != nil {
			panic(err) // a struct of strings and numbers always marshals
		}
		lines[i] = b
	}
	return lines
}

// JSONLogPayload returns exactly n bytes of newline-separated JSON log lines
// generated from seed (the last line cut short); the same arguments give the
// same bytes. Each line carries a random trace id, so the text compresses
// about 3-5x (gzip, zstd), like real log topics rather than like repeated
// text.
func JSONLogPayload(seed int64, n int) []byte {
	out := make([]byte, 0, n+512)
	for chunk := int64(0); len(out) < n; chunk++ {
		for _, l := range JSONLogLines(seed*1_000_003+chunk, 256) {
			out = append(append(out, l...), '\n')
			if len(out) >= n {
				break
			}
		}
	}
	return out[:n]
}

// RecordsSection returns the records section (the bytes after the 61-byte
// header) of an uncompressed RecordBatch v2 holding count JSON log lines as
// values, with keys and a header on some records: exactly what a producer
// hands a codec. count must be at least 1.
func RecordsSection(seed int64, count int) []byte {
	lines := JSONLogLines(seed, count)
	recs := make([]record.Record, count)
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	for i, l := range lines {
		recs[i] = record.Record{Value: l, Timestamp: base + int64(i)}
		if i%2 == 0 {
			recs[i].Key = fmt.Appendf(nil, "key-%d", i%97)
		}
		if i%5 == 0 {
			recs[i].Headers = []record.RecordHeader{{Key: "content-type", Value: []byte("application/json")}}
		}
	}
	b, err := record.Build(record.DefaultBuildOptions(), recs)
	if err != nil {
		panic(fmt.Sprintf("codectest: RecordsSection(%d, %d): %v", seed, count, err))
	}
	return b[record.HeaderSize:]
}
