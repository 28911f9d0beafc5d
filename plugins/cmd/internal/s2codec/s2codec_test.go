package s2codec_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/weir-broker/weir/plugins/cmd/internal/s2codec"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codectest"
)

func TestConformance(t *testing.T) {
	for _, params := range []map[string]string{
		{},
		{"level": "best", "id": "7"},
	} {
		c, err := s2codec.New(params)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(c.(*s2codec.Codec).String(), func(t *testing.T) {
			codectest.Run(t, func(*testing.T) codec.Codec { return c })
		})
	}
}

func TestParams(t *testing.T) {
	c, err := s2codec.New(map[string]string{})
	if err != nil || c.ID() != s2codec.DefaultID {
		t.Fatalf("default: id %v, %v", c.ID(), err)
	}
	c, err = s2codec.New(map[string]string{"id": "7"})
	if err != nil || c.ID() != 7 {
		t.Fatalf("id=7: id %v, %v", c.ID(), err)
	}
	for _, bad := range []map[string]string{
		{"id": "4"}, {"id": "8"}, {"id": "x"}, {"level": "max"}, {"speed": "1"},
	} {
		if _, err := s2codec.New(bad); err == nil {
			t.Errorf("New(%v) accepted it", bad)
		}
	}
}

// TestOutputIsS2 checks the output is a plain S2 block, readable by any S2
// decoder (so a consumer can use klauspost/compress directly).
func TestOutputIsS2(t *testing.T) {
	c, _ := s2codec.New(map[string]string{"level": "better"})
	data := codectest.JSONLogPayload(1, 10000)
	resp, err := c.Compress(context.Background(), codec.CompressRequest{Records: data})
	if err != nil {
		t.Fatal(err)
	}
	back, err := s2.Decode(nil, resp.Compressed)
	if err != nil || string(back) != string(data) {
		t.Fatalf("s2.Decode of the output: %d bytes, %v", len(back), err)
	}
}

func TestDecompressChecksDeclaredSize(t *testing.T) {
	c, _ := s2codec.New(nil)
	block := s2.Encode(nil, make([]byte, 1<<20))
	_, err := c.Decompress(context.Background(), codec.DecompressRequest{Compressed: block, MaxSize: 1000})
	if !errors.Is(err, codec.ErrTooLarge) || !strings.Contains(err.Error(), "declares 1048576 bytes") {
		t.Fatalf("Decompress of a 1 MiB block with MaxSize 1000: %v", err)
	}
	// A header claiming 4 GiB, and no limit given: refused, not allocated.
	_, err = c.Decompress(context.Background(), codec.DecompressRequest{Compressed: []byte{0xff, 0xff, 0xff, 0xff, 0x0f}})
	if !errors.Is(err, codec.ErrTooLarge) {
		t.Fatalf("Decompress of a 4 GiB claim: %v, want ErrTooLarge", err)
	}
}
