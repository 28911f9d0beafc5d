// Package keyrange is the partitioner of the example plugin
// weir-partitioner-keyrange: records go to partitions by key range, so a
// consumer of one partition sees one contiguous slice of the key space (all
// customers from "g" to "m", say) in key-arrival order.
//
// Spec parameter (required):
//
//	splits=S1;S2;...;Sk   split points, strictly ascending (bytewise), non-empty
//
// The k split points cut the key space into k+1 ranges, numbered from 0:
// range 0 holds keys below S1, range i keys from S(i) up to but not including
// S(i+1), range k keys from Sk up. Comparison is bytewise (bytes.Compare), so
// "Z" < "a" and "10" < "9". Example: splits=g;n;t maps
//
//	"apple" -> 0   "grape" -> 1   "mango" -> 1   "nectarine" -> 2   "tomato" -> 3
//
// Range i goes to partition i. A topic with fewer partitions than ranges
// sends every range from its last partition up to that partition (the map is
// clamped, never an error); partitions beyond the last range get only keyless
// records.
//
// Keyless records (a null key) go round robin over all partitions of the
// topic, one counter per topic. An empty (non-null) key is a key like any
// other: the smallest, so range 0. Split points cannot contain ',' (the spec
// separator) or ';' (theirs).
package keyrange

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/plugins/spec"
)

// Partitioner maps keys to partitions by range. Like every partitioner it is
// called from one goroutine at a time.
type Partitioner struct {
	splits [][]byte
	next   map[string]uint32 // round-robin position per topic, for keyless records
}

// New builds a partitioner from spec parameters (see the package doc).
func New(params map[string]string) (partitioner.Partitioner, error) {
	if err := spec.OnlyParams(params, "splits"); err != nil {
		return nil, err
	}
	s, ok := params["splits"]
	if !ok {
		return nil, fmt.Errorf(`missing parameter splits (e.g. "splits=g;n;t")`)
	}
	parts := strings.Split(s, ";")
	p := &Partitioner{next: make(map[string]uint32)}
	for i, part := range parts {
		if part == "" {
			return nil, fmt.Errorf("splits=%q: split point %d is empty", s, i+1)
		}
		if i > 0 && parts[i-1] >= part {
			return nil, fmt.Errorf("splits=%q: split points must be strictly ascending, but %q follows %q", s, part, parts[i-1])
		}
		p.splits = append(p.splits, []byte(part))
	}
	return p, nil
}

// Range returns the key's range: how many split points are <= key.
func (p *Partitioner) Range(key []byte) int {
	return sort.Search(len(p.splits), func(i int) bool { return bytes.Compare(p.splits[i], key) > 0 })
}

// Partition assigns each record its key's range (clamped to the topic's
// partitions), and keyless records round robin.
func (p *Partitioner) Partition(ctx context.Context, req partitioner.Request) (partitioner.Response, error) {
	if err := ctx.Err(); err != nil {
		return partitioner.Response{}, fmt.Errorf("keyrange: %w", err)
	}
	if err := req.Validate(); err != nil {
		return partitioner.Response{}, err
	}
	out := make([]int32, len(req.Keys))
	rr := p.next[req.Topic]
	for i, k := range req.Keys {
		if k == nil {
			out[i] = int32(rr % uint32(req.Partitions))
			rr++
			continue
		}
		out[i] = int32(min(p.Range(k), int(req.Partitions)-1))
	}
	p.next[req.Topic] = rr
	return partitioner.Response{Partitions: out}, nil
}

// KeyConsistent: a key's partition depends only on the key and the
// partition count.
func (p *Partitioner) KeyConsistent() bool { return true }

// String returns the partitioner's parameters in spec form.
func (p *Partitioner) String() string {
	return "keyrange:splits=" + string(bytes.Join(p.splits, []byte(";")))
}
