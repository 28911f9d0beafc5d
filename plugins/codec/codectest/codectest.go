// Package codectest is the conformance suite every codec.Codec must pass:
// the built-ins, codecs running over the go-plugin gRPC shim, and codecs
// running as subprocesses. One body of checks runs against every
// implementation, so a codec that passes here can be swapped for any other
// with the same id. It also exports deterministic payload generators for
// benchmarks and other suites.
//
// Call Run from a test:
//
//	func TestMyCodec(t *testing.T) {
//		codectest.Run(t, func(t *testing.T) codec.Codec { return mycodec.New() })
//	}
//
// Run calls newCodec once per subtest, so a factory may start a plugin
// process and stop it with t.Cleanup.
//
// # What a codec must do
//
//   - ID is valid (0-7) and never changes.
//   - Decompress(Compress(x)) == x for empty, 1-byte, small, 1 MiB random,
//     1 MiB repetitive, 1 MiB of JSON log lines and a real records section.
//   - Outputs are the caller's: never the input slice, nor a buffer the
//     codec reuses later.
//   - MaxSize: exactly MaxSize bytes of output is fine; one more is an error
//     wrapping codec.ErrTooLarge, also for a bomb (8 MiB of zeros, a limit
//     of 1 MiB).
//   - Input that does not decode (random bytes, a truncated output) is an
//     error, never a panic: truncated output wraps codec.ErrCorrupt; random
//     bytes wrap codec.ErrCorrupt or, if they happen to declare a size over
//     the limit, codec.ErrTooLarge. The "none" codec (ID 0) accepts any
//     bytes, so it skips this check.
//   - Safe for concurrent use by several goroutines.
//
// # The context rule
//
// Given a context that has already ended, Compress and Decompress either
// return an error wrapping the context's error (context.Canceled here) or
// succeed with a correct result; they never return another error or a
// wrong result. Built-ins check ctx on entry and so always return the
// error; external codecs must honour ctx throughout a call (a plugin call
// can block on a dead process), which the suite cannot observe with an
// already-cancelled context, so it accepts either outcome.
package codectest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/weir-broker/weir/plugins/codec"
)

// payload is one named round-trip input.
type payload struct {
	name string
	data []byte
}

// payloads are the round-trip inputs, built once: the 1 MiB ones take a
// moment to generate.
var payloads = sync.OnceValue(func() []payload {
	return []payload{
		{"empty", []byte{}},
		{"one-byte", []byte{'w'}},
		{"small", []byte(`{"ts":"2025-03-01T12:00:00Z","level":"info","msg":"small record"}`)},
		{"random-1MiB", RandomPayload(1, 1<<20)},
		{"repetitive-1MiB", bytes.Repeat([]byte("weir keeps every byte. "), (1<<20)/23+1)[:1<<20]},
		{"json-1MiB", JSONLogPayload(2, 1<<20)},
		{"records-section", RecordsSection(3, 500)},
	}
})

// Run runs the conformance suite against the codecs newCodec returns, as
// subtests of t. newCodec is called once per subtest.
func Run(t *testing.T, newCodec func(t *testing.T) codec.Codec) {
	t.Helper()
	t.Run("ID", func(t *testing.T) { testID(t, newCodec(t)) })
	t.Run("RoundTrip", func(t *testing.T) {
		c := newCodec(t)
		for _, p := range payloads() {
			t.Run(p.name, func(t *testing.T) { testRoundTrip(t, c, p.data) })
		}
	})
	t.Run("NoAliasing", func(t *testing.T) { testNoAliasing(t, newCodec(t)) })
	t.Run("MaxSize", func(t *testing.T) { testMaxSize(t, newCodec(t)) })
	t.Run("Garbage", func(t *testing.T) { testGarbage(t, newCodec(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newCodec(t)) })
	t.Run("CancelledContext", func(t *testing.T) { testCancelled(t, newCodec(t)) })
}

// Compress and Decompress call c with a background context and fail the
// test on error.
func compress(t testing.TB, c codec.Codec, data []byte) []byte {
	t.Helper()
	resp, err := c.Compress(context.Background(), codec.CompressRequest{Records: data})
	if err != nil {
		t.Fatalf("%s: Compress(%d bytes): %v", c.ID(), len(data), err)
	}
	return resp.Compressed
}

func decompress(t testing.TB, c codec.Codec, data []byte, maxSize int) []byte {
	t.Helper()
	resp, err := c.Decompress(context.Background(), codec.DecompressRequest{Compressed: data, MaxSize: maxSize})
	if err != nil {
		t.Fatalf("%s: Decompress(%d bytes, MaxSize %d): %v", c.ID(), len(data), maxSize, err)
	}
	return resp.Records
}

// same reports where got and want first differ, or "" when equal.
func same(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	i := 0
	for i < min(len(got), len(want)) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("got %d bytes, want %d; first difference at byte %d", len(got), len(want), i)
}

func testID(t *testing.T, c codec.Codec) {
	id := c.ID()
	if !id.Valid() {
		t.Fatalf("ID() = %d, outside 0..%d", id, codec.MaxID)
	}
	compress(t, c, []byte("use the codec once"))
	for range 3 {
		if again := c.ID(); again != id {
			t.Fatalf("ID() changed from %d to %d", id, again)
		}
	}
}

func testRoundTrip(t *testing.T, c codec.Codec, data []byte) {
	comp := compress(t, c, data)
	if d := same(decompress(t, c, comp, 0), data); d != "" {
		t.Fatalf("round trip without a limit: %s", d)
	}
	// Exactly at the limit is fine (MaxSize 0 means none, so an empty
	// payload has no "exact" limit to try).
	if len(data) > 0 {
		if d := same(decompress(t, c, comp, len(data)), data); d != "" {
			t.Fatalf("round trip with MaxSize = %d (exactly the size): %s", len(data), d)
		}
	}
}

// testNoAliasing checks that outputs belong to the caller: scribbling over
// the input after a call, or calling again, leaves an earlier output alone.
func testNoAliasing(t *testing.T, c codec.Codec) {
	want := JSONLogPayload(4, 64<<10)
	in := bytes.Clone(want)
	comp := compress(t, c, in)
	compSaved := bytes.Clone(comp)
	fill(in, 0xAA)
	if !bytes.Equal(comp, compSaved) {
		t.Fatal("Compress output changed when the caller overwrote its input: it aliases the input")
	}
	// A second Compress must not reuse the first output's memory.
	compress(t, c, JSONLogPayload(5, 64<<10))
	if !bytes.Equal(comp, compSaved) {
		t.Fatal("Compress output changed on the next Compress: the codec reuses its output buffer")
	}

	out := decompress(t, c, comp, 0)
	fill(comp, 0x55)
	if d := same(out, want); d != "" {
		t.Fatalf("Decompress output changed when the caller overwrote its input (it aliases the input): %s", d)
	}
	decompress(t, c, compress(t, c, JSONLogPayload(6, 64<<10)), 0)
	if d := same(out, want); d != "" {
		t.Fatalf("Decompress output changed on the next Decompress (the codec reuses its output buffer): %s", d)
	}
}

func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

func testMaxSize(t *testing.T, c codec.Codec) {
	data := JSONLogPayload(7, 64<<10)
	comp := compress(t, c, data)
	if d := same(decompress(t, c, comp, len(data)), data); d != "" {
		t.Fatalf("MaxSize = size: %s", d)
	}
	for _, limit := range []int{len(data) - 1, len(data) / 2, 1} {
		wantTooLarge(t, c, comp, limit, len(data))
	}
	// A bomb: 8 MiB of zeros compresses to a few KiB (except with none).
	bomb := compress(t, c, make([]byte, 8<<20))
	wantTooLarge(t, c, bomb, 1<<20, 8<<20)
}

func wantTooLarge(t *testing.T, c codec.Codec, comp []byte, limit, size int) {
	t.Helper()
	resp, err := c.Decompress(context.Background(), codec.DecompressRequest{Compressed: comp, MaxSize: limit})
	if !errors.Is(err, codec.ErrTooLarge) {
		t.Errorf("Decompress of %d bytes with MaxSize %d: error %v (output %d bytes), want one wrapping codec.ErrTooLarge",
			size, limit, err, len(resp.Records))
	}
}

func testGarbage(t *testing.T, c codec.Codec) {
	if c.ID() == codec.None {
		t.Skip("the none codec (ID 0) takes any bytes as its output")
	}
	const limit = 16 << 20
	for seed := range int64(4) {
		junk := RandomPayload(100+seed, 1<<10+int(seed)*300)
		resp, err := c.Decompress(context.Background(), codec.DecompressRequest{Compressed: junk, MaxSize: limit})
		if !errors.Is(err, codec.ErrCorrupt) && !errors.Is(err, codec.ErrTooLarge) {
			t.Errorf("Decompress of %d random bytes: error %v (output %d bytes), want one wrapping codec.ErrCorrupt",
				len(junk), err, len(resp.Records))
		}
	}
	for _, p := range []payload{{"json", JSONLogPayload(8, 64<<10)}, {"small", []byte("a short records section")}} {
		comp := compress(t, c, p.data)
		for _, cut := range []int{len(comp) / 2, len(comp) - 1} {
			if cut <= 0 {
				continue
			}
			resp, err := c.Decompress(context.Background(), codec.DecompressRequest{Compressed: comp[:cut], MaxSize: limit})
			if !errors.Is(err, codec.ErrCorrupt) {
				t.Errorf("Decompress of %s output truncated to %d of %d bytes: error %v (output %d bytes), want one wrapping codec.ErrCorrupt",
					p.name, cut, len(comp), err, len(resp.Records))
			}
		}
	}
}

func testConcurrent(t *testing.T, c codec.Codec) {
	const goroutines, rounds = 4, 6
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				seed := int64(1000 + g*rounds + i)
				var data []byte
				if i%2 == 0 {
					data = JSONLogPayload(seed, 32<<10+i*1000)
				} else {
					data = RandomPayload(seed, 16<<10+g*100)
				}
				resp, err := c.Compress(context.Background(), codec.CompressRequest{Records: data})
				if err != nil {
					t.Errorf("goroutine %d round %d: Compress: %v", g, i, err)
					return
				}
				out, err := c.Decompress(context.Background(), codec.DecompressRequest{Compressed: resp.Compressed, MaxSize: len(data)})
				if err != nil {
					t.Errorf("goroutine %d round %d: Decompress: %v", g, i, err)
					return
				}
				if d := same(out.Records, data); d != "" {
					t.Errorf("goroutine %d round %d: round trip: %s", g, i, d)
					return
				}
			}
		})
	}
	wg.Wait()
}

func testCancelled(t *testing.T, c codec.Codec) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	data := JSONLogPayload(9, 16<<10)
	resp, err := c.Compress(ctx, codec.CompressRequest{Records: data})
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		t.Errorf("Compress with a cancelled context: %v, want success or an error wrapping context.Canceled", err)
	case err == nil:
		if d := same(decompress(t, c, resp.Compressed, 0), data); d != "" {
			t.Errorf("Compress with a cancelled context succeeded with a wrong output: %s", d)
		}
	}
	comp := compress(t, c, data)
	out, err := c.Decompress(ctx, codec.DecompressRequest{Compressed: comp})
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		t.Errorf("Decompress with a cancelled context: %v, want success or an error wrapping context.Canceled", err)
	case err == nil:
		if d := same(out.Records, data); d != "" {
			t.Errorf("Decompress with a cancelled context succeeded with a wrong output: %s", d)
		}
	}
}
