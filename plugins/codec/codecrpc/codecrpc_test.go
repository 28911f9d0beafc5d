package codecrpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codecrpc"
	"github.com/weir-broker/weir/plugins/codec/codectest"
	"github.com/weir-broker/weir/plugins/pluginrpc"
	"github.com/weir-broker/weir/plugins/pluginrpc/pluginrpctest"
	"github.com/weir-broker/weir/plugins/spec"
)

// open serves f in process through the shim and opens one codec with params.
func open(t *testing.T, f codecrpc.Factory, params map[string]string, cfg pluginrpc.Config) (*codecrpc.Client, error) {
	t.Helper()
	sup := pluginrpctest.Connect(t, pluginrpc.KindCodec, "inproc-codec", codecrpc.Plugin(f), cfg)
	return codecrpc.Open(context.Background(), sup, params)
}

// builtin serves the registered built-ins by name, as weir-builtins does.
func builtin(name string) codecrpc.Factory {
	return func(params map[string]string) (codec.Codec, error) {
		return codec.New(spec.Spec{Name: name, Params: params}.String())
	}
}

// TestBuiltinsThroughShim runs the conformance suite against every built-in
// codec served over go-plugin's gRPC in process.
func TestBuiltinsThroughShim(t *testing.T) {
	names := codec.Names()
	if len(names) == 0 {
		t.Fatal("no built-in codecs registered")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			codectest.Run(t, func(t *testing.T) codec.Codec {
				c, err := open(t, builtin(name), nil, pluginrpc.Config{})
				if err != nil {
					t.Fatalf("Open %s: %v", name, err)
				}
				t.Cleanup(func() { _ = c.Close() })
				return c
			})
		})
	}
}

func TestOpenPassesParamsAndID(t *testing.T) {
	c, err := open(t, builtin("zstd"), map[string]string{"level": "3"}, pluginrpc.Config{})
	if err != nil {
		t.Fatalf("Open zstd:level=3: %v", err)
	}
	if c.ID() != codec.Zstd {
		t.Errorf("ID() = %v, want zstd", c.ID())
	}
	if got := c.String(); got != "inproc-codec:level=3" {
		t.Errorf("String() = %q, want the plugin name and parameters", got)
	}
}

func TestOpenRejectedParams(t *testing.T) {
	_, err := open(t, builtin("zstd"), map[string]string{"nope": "1"}, pluginrpc.Config{})
	if !errors.Is(err, codec.ErrInvalidSpec) {
		t.Fatalf("Open with an unknown parameter: %v, want codec.ErrInvalidSpec", err)
	}
	for _, want := range []string{"inproc-codec", "nope"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Count(err.Error(), codec.ErrInvalidSpec.Error()) != 1 {
		t.Errorf("error %q repeats the sentinel's text", err)
	}
}

// fake is a codec whose answers a test chooses.
type fake struct {
	id         codec.ID
	compress   func(ctx context.Context, in []byte) ([]byte, error)
	decompress func(ctx context.Context, in []byte, maxSize int) ([]byte, error)
}

func (f *fake) ID() codec.ID { return f.id }
func (f *fake) Compress(ctx context.Context, req codec.CompressRequest) (codec.CompressResponse, error) {
	out, err := f.compress(ctx, req.Records)
	return codec.CompressResponse{Compressed: out}, err
}
func (f *fake) Decompress(ctx context.Context, req codec.DecompressRequest) (codec.DecompressResponse, error) {
	out, err := f.decompress(ctx, req.Compressed, req.MaxSize)
	return codec.DecompressResponse{Records: out}, err
}

func serveFake(f *fake) codecrpc.Factory {
	return func(map[string]string) (codec.Codec, error) { return f, nil }
}

func TestOpenRejectsBadID(t *testing.T) {
	_, err := open(t, serveFake(&fake{id: 9}), nil, pluginrpc.Config{})
	if !errors.Is(err, codec.ErrInvalidSpec) || !strings.Contains(err.Error(), "id 9") {
		t.Fatalf("Open of a codec with id 9: %v, want codec.ErrInvalidSpec naming the id", err)
	}
}

// TestErrorsCrossTheBoundary checks each kind of failure maps to its
// sentinel and names the plugin and the call.
func TestErrorsCrossTheBoundary(t *testing.T) {
	f := &fake{
		id: 6,
		compress: func(_ context.Context, in []byte) ([]byte, error) {
			if string(in) == "fail" {
				return nil, errors.New("the disk is made of cheese")
			}
			return bytes.Clone(in), nil
		},
		decompress: func(_ context.Context, in []byte, maxSize int) ([]byte, error) {
			switch string(in) {
			case "corrupt":
				return nil, fmt.Errorf("%w: bad block", codec.ErrCorrupt)
			case "big":
				return nil, fmt.Errorf("%w: too much", codec.ErrTooLarge)
			case "ignore-limit":
				return make([]byte, maxSize+1), nil
			}
			return bytes.Clone(in), nil
		},
	}
	c, err := open(t, serveFake(f), nil, pluginrpc.Config{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx := context.Background()
	tests := []struct {
		name     string
		call     func() error
		want     []error
		notWant  []error
		contains string
	}{
		{"error answer", func() error {
			_, err := c.Compress(ctx, codec.CompressRequest{Records: []byte("fail")})
			return err
		}, []error{codec.ErrPluginFailed}, nil, "the disk is made of cheese"},
		{"corrupt", func() error {
			_, err := c.Decompress(ctx, codec.DecompressRequest{Compressed: []byte("corrupt")})
			return err
		}, []error{codec.ErrCorrupt}, []error{codec.ErrPluginFailed}, "bad block"},
		{"too large", func() error {
			_, err := c.Decompress(ctx, codec.DecompressRequest{Compressed: []byte("big"), MaxSize: 10})
			return err
		}, []error{codec.ErrTooLarge}, []error{codec.ErrPluginFailed}, "too much"},
		{"output over MaxSize", func() error {
			_, err := c.Decompress(ctx, codec.DecompressRequest{Compressed: []byte("ignore-limit"), MaxSize: 100})
			return err
		}, []error{codec.ErrTooLarge, codec.ErrPluginFailed}, nil, "101 bytes, over MaxSize 100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("error %v does not wrap %v", err, w)
				}
			}
			for _, nw := range tc.notWant {
				if errors.Is(err, nw) {
					t.Errorf("error %v wraps %v", err, nw)
				}
			}
			if err != nil && (!strings.Contains(err.Error(), tc.contains) || !strings.Contains(err.Error(), "inproc-codec")) {
				t.Errorf("error %q does not name the plugin and say %q", err, tc.contains)
			}
		})
	}
	// The plugin survives error answers.
	resp, err := c.Compress(ctx, codec.CompressRequest{Records: []byte("fine")})
	if err != nil || string(resp.Compressed) != "fine" {
		t.Fatalf("Compress after error answers: %q, %v", resp.Compressed, err)
	}
}

func TestCancelledContextIsTheCallers(t *testing.T) {
	started := make(chan struct{}, 1)
	f := &fake{id: 5, compress: func(ctx context.Context, in []byte) ([]byte, error) {
		if string(in) == "wait" {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return bytes.Clone(in), nil
	}}
	c, err := open(t, serveFake(f), nil, pluginrpc.Config{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Compress(ctx, codec.CompressRequest{Records: []byte("wait")})
		errc <- err
	}()
	<-started
	cancel()
	err = <-errc
	if !errors.Is(err, context.Canceled) || errors.Is(err, codec.ErrPluginFailed) {
		t.Fatalf("Compress cancelled by the caller: %v, want context.Canceled and no plugin failure", err)
	}
	// A caller's cancellation does not take the plugin down.
	resp, err := c.Compress(context.Background(), codec.CompressRequest{Records: []byte("after")})
	if err != nil || string(resp.Compressed) != "after" {
		t.Fatalf("Compress after a cancelled call: %q, %v", resp.Compressed, err)
	}
}

// TestHungCallInProcess: a call past CallTimeout is reported as a hung
// plugin; a connection (unlike a process) cannot be restarted, so the next
// call fails fast with a clear error.
func TestHungCallInProcess(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	f := &fake{id: 5, compress: func(_ context.Context, in []byte) ([]byte, error) {
		if string(in) == "hang" {
			<-block
		}
		return bytes.Clone(in), nil
	}}
	c, err := open(t, serveFake(f), nil, pluginrpc.Config{CallTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	_, err = c.Compress(context.Background(), codec.CompressRequest{Records: []byte("hang")})
	if !errors.Is(err, codec.ErrPluginFailed) || !errors.Is(err, pluginrpc.ErrHung) {
		t.Fatalf("hung Compress: %v, want codec.ErrPluginFailed and pluginrpc.ErrHung", err)
	}
	if !strings.Contains(err.Error(), "inproc-codec") || !strings.Contains(err.Error(), "Compress did not answer within 200ms") {
		t.Errorf("error %q does not name the plugin, the call and the deadline", err)
	}
	_, err = c.Compress(context.Background(), codec.CompressRequest{Records: []byte("ok")})
	if !errors.Is(err, codec.ErrPluginFailed) || !errors.Is(err, pluginrpc.ErrExited) {
		t.Fatalf("Compress after the kill: %v, want codec.ErrPluginFailed and pluginrpc.ErrExited", err)
	}
}

func TestClosedClient(t *testing.T) {
	c, err := open(t, builtin("gzip"), nil, pluginrpc.Config{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = c.Compress(context.Background(), codec.CompressRequest{Records: []byte("x")})
	if !errors.Is(err, codec.ErrPluginFailed) || !errors.Is(err, pluginrpc.ErrClosed) {
		t.Fatalf("Compress after Close: %v, want codec.ErrPluginFailed and pluginrpc.ErrClosed", err)
	}
}

// TestLargeBatch sends a batch over gRPC's default 4 MiB message limit.
func TestLargeBatch(t *testing.T) {
	c, err := open(t, builtin("none"), nil, pluginrpc.Config{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	data := codectest.RandomPayload(1, 3<<20)
	resp, err := c.Compress(context.Background(), codec.CompressRequest{Records: data})
	if err != nil || !bytes.Equal(resp.Compressed, data) {
		t.Fatalf("Compress of 3 MiB: %d bytes, %v", len(resp.Compressed), err)
	}
}
