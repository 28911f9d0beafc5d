package keyrange_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/weir-broker/weir/plugins/cmd/internal/keyrange"
	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/plugins/partitioner/partitionertest"
)

func newKeyrange(t *testing.T, splits string) partitioner.Partitioner {
	t.Helper()
	p, err := keyrange.New(map[string]string{"splits": splits})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	partitionertest.Run(t, func(t *testing.T) partitioner.Partitioner { return newKeyrange(t, "g;n;t") })
}

// TestDocExample checks the package doc's example and its rules.
func TestDocExample(t *testing.T) {
	p := newKeyrange(t, "g;n;t")
	keys := [][]byte{
		[]byte("apple"), []byte("grape"), []byte("mango"), []byte("nectarine"), []byte("tomato"),
		[]byte("g"), []byte("Zebra"), {}, nil, nil, nil, nil, nil,
	}
	resp, err := p.Partition(context.Background(), partitioner.Request{Topic: "fruit", Partitions: 4, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	// Splits are inclusive lower bounds; "Z" < "a" bytewise; the empty key
	// is range 0; null keys go round robin from 0.
	if got, want := fmt.Sprint(resp.Partitions), "[0 1 1 2 3 1 0 0 0 1 2 3 0]"; got != want {
		t.Errorf("partitions %s, want %s", got, want)
	}
	// Fewer partitions than ranges: ranges from the last partition up share it.
	resp, err = p.Partition(context.Background(), partitioner.Request{Topic: "fruit", Partitions: 2, Keys: keys[:5]})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(resp.Partitions), "[0 1 1 1 1]"; got != want {
		t.Errorf("with 2 partitions: %s, want %s", got, want)
	}
}

func TestRoundRobinPerTopic(t *testing.T) {
	p := newKeyrange(t, "m")
	call := func(topic string) string {
		resp, err := p.Partition(context.Background(), partitioner.Request{Topic: topic, Partitions: 3, Keys: [][]byte{nil, nil}})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(resp.Partitions)
	}
	for _, tc := range []struct{ topic, want string }{{"a", "[0 1]"}, {"a", "[2 0]"}, {"b", "[0 1]"}, {"a", "[1 2]"}} {
		if got := call(tc.topic); got != tc.want {
			t.Errorf("topic %s: %s, want %s", tc.topic, got, tc.want)
		}
	}
}

func TestParams(t *testing.T) {
	for _, bad := range []map[string]string{
		{}, {"splits": ""}, {"splits": "a;;b"}, {"splits": "b;a"}, {"splits": "a;a"}, {"splits": "a", "x": "1"},
	} {
		if _, err := keyrange.New(bad); err == nil {
			t.Errorf("New(%v) accepted it", bad)
		}
	}
	p := newKeyrange(t, "g;n;t")
	if s := p.(fmt.Stringer).String(); s != "keyrange:splits=g;n;t" {
		t.Errorf("String() = %q", s)
	}
}
