package durability

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/segment"
)

// batchDigest is one batch of a replica's log: its offsets and a digest
// of its bytes.
type batchDigest struct {
	base, last int64
	sum        [32]byte
}

// readReplica lists the batches of one replica's log from its segment
// files (nothing writing them), in offset order. A torn tail (a batch cut
// short) ends its segment's part of the list, as recovery would cut it.
func readReplica(dir string) ([]batchDigest, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, e := range entries {
		if base, suffix, ok := segment.ParseName(e.Name()); ok && suffix == ".log" {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	var out []batchDigest
	for _, base := range bases {
		b, err := os.ReadFile(segment.Name(dir, base, ".log"))
		if err != nil {
			return nil, err
		}
		for len(b) > 0 {
			h, n, err := record.Next(b, 0)
			if err != nil {
				break
			}
			out = append(out, batchDigest{base: h.BaseOffset, last: h.LastOffset(), sum: sha256.Sum256(b[:n])})
			b = b[n:]
		}
	}
	return out, nil
}

// compareReplicas compares every partition's replicas, read from the
// brokers' data directories (dirs by broker id) once nothing is written:
// from the partition's log start as its leader served it (starts), every
// replica must hold the same batches, byte for byte, to the same end,
// and none may start later. It returns one line per partition whose
// replicas differ (or could not be read). Each partition's first replica
// (its leader: see observer.assignment) is the one the others are compared
// with.
func compareReplicas(dirs map[int32]string, topics []string, assignment map[tp][]int32, starts map[tp]int64) []string {
	var out []string
	for _, k := range slices.SortedFunc(maps.Keys(assignment), func(a, b tp) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	}) {
		replicas := assignment[k]
		if len(replicas) < 2 || int(k.topic) >= len(topics) {
			continue
		}
		logsOf := map[int32][]batchDigest{}
		from := starts[k]
		bad := false
		for _, id := range replicas {
			d, err := readReplica(filepath.Join(dirs[id], logs.DirName(topics[k.topic], k.partition)))
			if err != nil {
				out = append(out, fmt.Sprintf("%d/%d: replica on broker %d: %v", k.topic, k.partition, id, err))
				bad = true
				break
			}
			if len(d) > 0 && d[0].base > from {
				out = append(out, fmt.Sprintf("%d/%d: broker %d's replica starts at %d, the log at %d", k.topic, k.partition, id, d[0].base, from))
				bad = true
				break
			}
			logsOf[id] = d
		}
		if bad {
			continue
		}
		first := replicas[0]
		want := trimFrom(logsOf[first], from)
		for _, id := range replicas[1:] {
			got := trimFrom(logsOf[id], from)
			if diff := diffLogs(want, got); diff != "" {
				out = append(out, fmt.Sprintf("%d/%d: broker %d's replica differs from broker %d's: %s", k.topic, k.partition, id, first, diff))
			}
		}
	}
	return out
}

func trimFrom(d []batchDigest, from int64) []batchDigest {
	i, _ := slices.BinarySearchFunc(d, from, func(b batchDigest, o int64) int { return cmp.Compare(b.last, o) })
	return d[i:]
}

// diffLogs describes the first difference of two replicas' batches, or
// returns "".
func diffLogs(a, b []batchDigest) string {
	for i := range min(len(a), len(b)) {
		x, y := a[i], b[i]
		if x.base != y.base || x.last != y.last || !bytes.Equal(x.sum[:], y.sum[:]) {
			return fmt.Sprintf("batch %d: offsets %d..%d vs %d..%d%s", i, x.base, x.last, y.base, y.last,
				map[bool]string{true: ", bytes differ", false: ""}[x.base == y.base && x.last == y.last])
		}
	}
	end := func(d []batchDigest) string {
		if len(d) == 0 {
			return "empty"
		}
		return fmt.Sprintf("ends at %d", d[len(d)-1].last+1)
	}
	if len(a) != len(b) {
		return strings.Join([]string{end(a), end(b)}, " vs ")
	}
	return ""
}
