package codectest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codectest"
)

// A suite that cannot fail proves nothing. Each broken codec below breaks
// one rule; TestSuiteCatchesBrokenCodecs runs the suite against it in a
// child process (the failures must not fail this test) and checks that the
// suite fails, in the subtest for that rule.

var inner = codec.Standard(codec.Snappy)

// broken wraps snappy and breaks the rule named by how.
type broken struct {
	how   string
	calls atomic.Int64
}

func (b *broken) ID() codec.ID {
	if b.how == "unstable-id" && b.calls.Add(1) > 1 {
		return codec.Gzip
	}
	return codec.Snappy
}

func (b *broken) Compress(ctx context.Context, req codec.CompressRequest) (codec.CompressResponse, error) {
	if b.how == "wrong-ctx-error" && ctx.Err() != nil {
		return codec.CompressResponse{}, errors.New("something else went wrong")
	}
	if b.how == "aliases-output" {
		return codec.CompressResponse{Compressed: req.Records}, nil // and "decompresses" by copying
	}
	return inner.Compress(context.Background(), req)
}

func (b *broken) Decompress(ctx context.Context, req codec.DecompressRequest) (codec.DecompressResponse, error) {
	switch b.how {
	case "aliases-output":
		if req.MaxSize > 0 && len(req.Compressed) > req.MaxSize {
			return codec.DecompressResponse{}, codec.ErrTooLarge
		}
		return codec.DecompressResponse{Records: req.Compressed}, nil
	case "ignores-maxsize":
		req.MaxSize = 0
	case "truncates-large":
		resp, err := inner.Decompress(ctx, req)
		if len(resp.Records) > 512<<10 {
			resp.Records = resp.Records[:512<<10]
		}
		return resp, err
	case "accepts-garbage":
		resp, err := inner.Decompress(ctx, req)
		if errors.Is(err, codec.ErrCorrupt) {
			return codec.DecompressResponse{Records: []byte{}}, nil
		}
		return resp, err
	}
	return inner.Decompress(ctx, req)
}

// TestBrokenCodec runs the suite against the broken codec named by
// $CODECTEST_BROKEN; it only runs as TestSuiteCatchesBrokenCodecs's child.
func TestBrokenCodec(t *testing.T) {
	how := os.Getenv("CODECTEST_BROKEN")
	if how == "" {
		t.Skip("runs only as a child of TestSuiteCatchesBrokenCodecs")
	}
	codectest.Run(t, func(*testing.T) codec.Codec { return &broken{how: how} })
}

func TestSuiteCatchesBrokenCodecs(t *testing.T) {
	if os.Getenv("CODECTEST_BROKEN") != "" {
		t.Skip("this is the child")
	}
	cases := map[string]string{ // broken codec: the subtest that must fail
		"unstable-id":     "TestBrokenCodec/ID",
		"aliases-output":  "TestBrokenCodec/NoAliasing",
		"truncates-large": "TestBrokenCodec/RoundTrip/random-1MiB",
		"ignores-maxsize": "TestBrokenCodec/MaxSize",
		"accepts-garbage": "TestBrokenCodec/Garbage",
		"wrong-ctx-error": "TestBrokenCodec/CancelledContext",
	}
	// The genuine snappy passes, so the failures come from the breakage.
	codectest.Run(t, func(*testing.T) codec.Codec { return &broken{how: "none"} })
	for how, subtest := range cases {
		t.Run(how, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenCodec$", "-test.v")
			cmd.Env = append(os.Environ(), "CODECTEST_BROKEN="+how)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed (or did not run: %v) against a codec that breaks %q:\n%s", err, how, out)
			}
			if !strings.Contains(string(out), "--- FAIL: "+subtest+" ") {
				t.Errorf("the suite failed, but not in %s:\n%s", subtest, out)
			}
		})
	}
}
