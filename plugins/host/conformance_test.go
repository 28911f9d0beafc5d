package host

import (
	"io"
	"testing"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codectest"
	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/flushpolicy/flushpolicytest"
	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/plugins/partitioner/partitionertest"
)

// The example plugins as real subprocesses, through the host, held to the
// same conformance suites as the built-ins. One host (so one process per
// plugin) serves every instance a suite asks for.

func closeWith(t *testing.T, v any) {
	if c, ok := v.(io.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
}

func TestExampleCodecConformance(t *testing.T) {
	h := newHost(t, Config{})
	for _, s := range []string{"s2", "s2:level=better,id=6"} {
		t.Run(s, func(t *testing.T) {
			codectest.Run(t, func(t *testing.T) codec.Codec {
				c, err := h.Codec(s)
				if err != nil {
					t.Fatalf("Codec(%s): %v", s, err)
				}
				closeWith(t, c)
				return c
			})
		})
	}
	if n := len(h.Processes()); n != 1 {
		t.Errorf("%d processes, want one weir-codec-s2 for every instance", n)
	}
}

func TestExamplePartitionerConformance(t *testing.T) {
	h := newHost(t, Config{})
	partitionertest.Run(t, func(t *testing.T) partitioner.Partitioner {
		p, err := h.Partitioner("keyrange:splits=g;n;t")
		if err != nil {
			t.Fatalf("Partitioner: %v", err)
		}
		closeWith(t, p)
		return p
	})
}

// TestExampleFlushPolicyConformance runs the flush policy suite against
// weir-flushpolicy-ratelimit as a subprocess. The suite makes ~40,000 calls,
// 5 s here but 25 s or more under the race detector, so -race skips it:
// package ratelimit runs the suite in process, package flushpolicyrpc through
// the shim, and TestFailures drives flush policy subprocesses.
func TestExampleFlushPolicyConformance(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped under -race (~40,000 plugin calls); run go test without -race for it")
	}
	h := newHost(t, Config{})
	flushpolicytest.Run(t, func(t *testing.T) flushpolicy.Policy {
		f, err := h.FlushPolicy("ratelimit:hz=100")
		if err != nil {
			t.Fatalf("FlushPolicy: %v", err)
		}
		closeWith(t, f)
		return f
	})
}
