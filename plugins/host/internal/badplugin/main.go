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
//	             "garbage" answers MaxSize+1 bytes, of "huge" 64 MiB whatever
//	             MaxSize; Compress of "instances" answers how many instances
//	             of all kinds are open, of "opens" how many Opens built one,
//	             of "hostpid" the plugin's
//	             WEIR_PLUGIN_HOST_PID; anything else is echoed. Codec id 6, or
//	             the number in the file the parameter idfile names, read at
//	             each Open. The parameter reject=1 makes Open fail.
//	partitioner  topic "crash", "hang", "error" as above; "garbage" answers
//	             partition n (out of range), "short" one partition too few;
//	             any other topic gets partition 0 for every record.
//	flushpolicy  AppendInfo.Messages 1001 crashes, 1002 hangs, 1003 errs;
//	             otherwise the answer is Flush. The parameter boundfile names
//	             a file holding the loss bound's Messages, read at each Open.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

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
			c := badCodec{id: 6}
			if file := params["idfile"]; file != "" {
				n, err := readNumber(file)
				if err != nil {
					return nil, err
				}
				c.id = codec.ID(n)
			}
			opened()
			return c, nil
		}),
		pluginrpc.KindPartitioner: partitionerrpc.Plugin(func(map[string]string) (partitioner.Partitioner, error) {
			opened()
			return badPartitioner{}, nil
		}),
		pluginrpc.KindFlushPolicy: flushpolicyrpc.Plugin(func(params map[string]string) (flushpolicy.Policy, error) {
			var p badPolicy
			if file := params["boundfile"]; file != "" {
				n, err := readNumber(file)
				if err != nil {
					return nil, err
				}
				p.bound.Messages = n
			}
			opened()
			return p, nil
		}),
	})
}

// open counts the instances of every kind that Open built and Close has not
// closed yet; opens counts every Open that built one.
var open, opens atomic.Int64

// opened counts a new instance.
func opened() {
	open.Add(1)
	opens.Add(1)
}

func readNumber(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
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

type badCodec struct{ id codec.ID }

func (c badCodec) ID() codec.ID { return c.id }

func (badCodec) Close() error {
	open.Add(-1)
	return nil
}

func (badCodec) Compress(_ context.Context, req codec.CompressRequest) (codec.CompressResponse, error) {
	switch string(req.Records) {
	case "instances":
		return codec.CompressResponse{Compressed: strconv.AppendInt(nil, open.Load(), 10)}, nil
	case "opens":
		return codec.CompressResponse{Compressed: strconv.AppendInt(nil, opens.Load(), 10)}, nil
	case "hostpid":
		return codec.CompressResponse{Compressed: []byte(os.Getenv(pluginrpc.HostPidEnv))}, nil
	}
	if err := misbehave(string(req.Records)); err != nil {
		return codec.CompressResponse{}, err
	}
	return codec.CompressResponse{Compressed: bytes.Clone(req.Records)}, nil
}

func (badCodec) Decompress(_ context.Context, req codec.DecompressRequest) (codec.DecompressResponse, error) {
	switch string(req.Compressed) {
	case "garbage":
		return codec.DecompressResponse{Records: make([]byte, req.MaxSize+1)}, nil
	case "huge":
		return codec.DecompressResponse{Records: make([]byte, 64<<20)}, nil
	}
	if err := misbehave(string(req.Compressed)); err != nil {
		return codec.DecompressResponse{}, err
	}
	return codec.DecompressResponse{Records: bytes.Clone(req.Compressed)}, nil
}

type badPartitioner struct{}

func (badPartitioner) Close() error {
	open.Add(-1)
	return nil
}

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

type badPolicy struct{ bound flushpolicy.Bound }

func (p badPolicy) LossBound() flushpolicy.Bound { return p.bound }

func (badPolicy) Close() error {
	open.Add(-1)
	return nil
}

func (badPolicy) Appended(_ context.Context, a flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	cmd := map[int64]string{1001: "crash", 1002: "hang", 1003: "error"}[a.Messages]
	if err := misbehave(cmd); err != nil {
		return flushpolicy.Decision{}, err
	}
	return flushpolicy.Decision{Flush: true}, nil
}

func (badPolicy) Flushed(context.Context, flushpolicy.FlushInfo) error { return nil }
