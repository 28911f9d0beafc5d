package filestore

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/weir-broker/weir/core/coord/internal/tree"
	"github.com/weir-broker/weir/core/vfs"
)

// BenchmarkWriteWithManyNodes sets one node of a tree of n nodes (a
// partition's state among n partitions): the cost of a write must not grow
// with the tree. The tree is written as a snapshot file and opened, so the
// setup does not depend on how fast writes are. fs=mem measures the CPU a
// write costs; fs=os adds the fsyncs of a real disk.
func BenchmarkWriteWithManyNodes(b *testing.B) {
	for _, fsName := range []string{"mem", "os"} {
		for _, n := range []int{1_000, 10_000, 100_000} {
			b.Run(fmt.Sprintf("fs=%s/nodes=%d", fsName, n), func(b *testing.B) {
				fsys, d := vfs.FS(vfs.NewMem()), "/d"
				if fsName == "os" {
					fsys, d = vfs.Default, b.TempDir()
				}
				nodes := []tree.Persisted{{Path: "/", Cversion: 1}, {Path: "/p", Czxid: 1, Mzxid: 1, Cversion: int32(n - 2)}}
				data := []byte(`{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}`)
				for i := range n - 2 {
					nodes = append(nodes, tree.Persisted{Path: fmt.Sprintf("/p/%07d", i), Data: data, Czxid: 2, Mzxid: 2})
				}
				must(b, fsys.MkdirAll(d, 0o755))
				must(b, vfs.WriteFileSynced(fsys, filepath.Join(d, FileName), encode(2, nodes)))
				s, err := Open(Options{FS: fsys, Dir: d})
				must(b, err)
				defer s.Close()
				ctx := b.Context()
				path := fmt.Sprintf("/p/%07d", n/2)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := s.Set(ctx, path, data, -1); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
