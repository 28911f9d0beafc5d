// Command badplugin is a test-only plugin that misbehaves on request, so the
// host's tests can drive every failure through a real process.
//
// Its name picks how it starts: a name containing "nohandshake" exits with
// status 2 before go-plugin's handshake; "stdoutnoise" prints a line to
// stdout first, which breaks the handshake (stdout must carry only that).
// Otherwise it serves all three kinds, and each call obeys its input:
//
//	codec        Compress or Decompress input "crash" exits with status 3,
//	             "hang" blocks forever, "error" returns an error; Decompress of
//	             "garbage" answers MaxSize+1 bytes; anything else is echoed.
//	             Codec id 6. The parameter reject=1 makes Open fail.
//	partitioner  topic "crash", "hang", "error" as above; "garbage" answers
//	             partition n (out of range), "short" one partition too few;
//	             any other topic gets partition 0 for every record.
//	flushpolicy  AppendInfo.Messages 1001 crashes, 1002 hangs, 1003 errs;
//	             otherwise the answer is Flush.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-plugin"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codecrpc"
	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/flushpolicy/flushpolicyrpc"
	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/plugins/partitioner/partitionerrpc"
	"github.com/weir-broker/weir/plugins/pluginrpc"
)

func main() {
	name := filepath.Base(os.Args[0])
	switch {
	case strings.Contains(name, "nohandshake"):
		fmt.Fprintln(os.Stderr, "badplugin: refusing to start")
		os.Exit(2)
	case strings.Contains(name, "stdoutnoise"):
		fmt.Println("badplugin: hello on stdout")
	}
	pluginrpc.Serve(plugin.PluginSet{
		pluginrpc.KindCodec: codecrpc.Plugin(func(params map[string]string) (codec.Codec, error) {
			if params["reject"] == "1" {
				return nil, errors.New("reject=1: rejected as asked")
			}
			return badCodec{}, nil
		}),
		pluginrpc.KindPartitioner: partitionerrpc.Plugin(func(map[string]string) (partitioner.Partitioner, error) {
			return badPartitioner{}, nil
		}),
		pluginrpc.KindFlushPolicy: flushpolicyrpc.Plugin(func(map[string]string) (flushpolicy.Policy, error) {
			return badPolicy{}, nil
		}),
	})
}

var errAsked = errors.New("badplugin: failing as asked")

// misbehave acts on a command; it returns only for "error" (an error) and
// anything it does not know (nil).
func misbehave(cmd string) error {
	switch cmd {
	case "crash":
		os.Exit(3)
	case "hang":
		select {}
	case "error":
		return errAsked
	}
	return nil
}

type badCodec struct{}

func (badCodec) ID() codec.ID { return 6 }

func (badCodec) Compress(_ context.Context, req codec.CompressRequest) (codec.CompressResponse, error) {
	if err := misbehave(string(req.Records)); err != nil {
		return codec.CompressResponse{}, err
	}
	return codec.CompressResponse{Compressed: bytes.Clone(req.Records)}, nil
}

func (badCodec) Decompress(_ context.Context, req codec.DecompressRequest) (codec.DecompressResponse, error) {
	if string(req.Compressed) == "garbage" {
		return codec.DecompressResponse{Records: make([]byte, req.MaxSize+1)}, nil
	}
	if err := misbehave(string(req.Compressed)); err != nil {
		return codec.DecompressResponse{}, err
	}
	return codec.DecompressResponse{Records: bytes.Clone(req.Compressed)}, nil
}

type badPartitioner struct{}

func (badPartitioner) Partition(_ context.Context, req partitioner.Request) (partitioner.Response, error) {
	out := make([]int32, len(req.Keys))
	switch req.Topic {
	case "garbage":
		for i := range out {
			out[i] = req.Partitions
		}
	case "short":
		out = out[:max(len(out)-1, 0)]
	default:
		if err := misbehave(req.Topic); err != nil {
			return partitioner.Response{}, err
		}
	}
	return partitioner.Response{Partitions: out}, nil
}

type badPolicy struct{}

func (badPolicy) Appended(_ context.Context, a flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	cmd := map[int64]string{1001: "crash", 1002: "hang", 1003: "error"}[a.Messages]
	if err := misbehave(cmd); err != nil {
		return flushpolicy.Decision{}, err
	}
	return flushpolicy.Decision{Flush: true}, nil
}

func (badPolicy) Flushed(context.Context, flushpolicy.FlushInfo) error { return nil }
