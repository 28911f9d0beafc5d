// Package weirbin builds cmd/weir for the harness's tests: the runner, the
// durability lab and clusterproc run real `weir broker` processes, from a
// binary of this tree, as `weir run` runs itself.
package weirbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Main is a TestMain's body: it builds cmd/weir into a temporary
// directory, sets *path to the binary, runs the tests, removes the
// directory and returns the exit code for os.Exit. A failed build fails
// the package with the compiler's output.
func Main(m *testing.M, path *string) int {
	dir, err := os.MkdirTemp("", "weir-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*path = filepath.Join(dir, "weir")
	build := exec.Command("go", "build", "-o", *path, "github.com/weir-broker/weir/cmd/weir")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build cmd/weir: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
