package errorfs_test

import (
	"errors"
	"fmt"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// appendSynced is a tiny "log": it appends each record and fsyncs it, and reports how many records it acked.
func appendSynced(fs vfs.FS, records []string) (acked int, err error) {
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		return 0, err
	}
	f, err := fs.Create("/d/log")
	if err != nil {
		return 0, err
	}
	defer func() { // a failed Close must be reported too: the example below catches it otherwise
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if err := fs.SyncDir("/d"); err != nil {
		return 0, err
	}
	for _, r := range records {
		if _, err := f.Write([]byte(r)); err != nil {
			return acked, err
		}
		if err := f.Sync(); err != nil {
			return acked, err
		}
		acked++
	}
	return acked, nil
}

// Fail each operation in turn and check the error is reported.
func Example_failEachOperation() {
	records := []string{"a", "b", "c"}
	probe := &errorfs.FailAt{K: -1}
	appendSynced(errorfs.Wrap(vfs.NewMem(), probe), records)
	for k := range probe.Count() {
		_, err := appendSynced(errorfs.Wrap(vfs.NewMem(), &errorfs.FailAt{K: k}), records)
		if !errors.Is(err, errorfs.ErrInjected) {
			fmt.Println("swallowed failure", k)
		}
	}
	fmt.Println("operations:", probe.Count())
	// Output: operations: 10
}

// Cut the power just before write k and check every acknowledged record survived.
func Example_crashBeforeWrite() {
	records := []string{"a", "b", "c"}
	for k := range len(records) {
		mem := vfs.NewMem()
		var crashed *vfs.MemFS
		writes := 0
		inj := errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
			if op == errorfs.OpWrite {
				if writes == k {
					crashed = mem.CrashClone()
				}
				writes++
			}
			return nil
		})
		appendSynced(errorfs.Wrap(mem, inj), records)
		got, err := vfs.ReadFile(crashed, "/d/log")
		fmt.Printf("crash before write %d: %q %v\n", k, got, err)
	}
	// Output:
	// crash before write 0: "" <nil>
	// crash before write 1: "a" <nil>
	// crash before write 2: "ab" <nil>
}
