package brokertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The weir binary of this tree, built on first use by WeirBinary for tests
// that run real `weir broker` (or `weir mirror`) processes, so a test binary
// whose selected tests need none builds nothing.
var weirBin struct {
	once      sync.Once
	dir, path string
	err       error
}

// WeirBinary builds cmd/weir once per test binary and returns its path,
// failing t when the build fails (with the compiler's output). A TestMain
// calls RemoveWeirBinary after m.Run.
func WeirBinary(t testing.TB) string {
	t.Helper()
	weirBin.once.Do(func() {
		if weirBin.dir, weirBin.err = os.MkdirTemp("", "weir-test-bin-"); weirBin.err != nil {
			return
		}
		weirBin.path = filepath.Join(weirBin.dir, "weir")
		out, err := exec.Command("go", "build", "-o", weirBin.path, "github.com/weir-broker/weir/cmd/weir").CombinedOutput()
		if err != nil {
			weirBin.err = fmt.Errorf("go build cmd/weir: %w\n%s", err, out)
		}
	})
	if weirBin.err != nil {
		t.Fatal(weirBin.err)
	}
	return weirBin.path
}

// RemoveWeirBinary removes what WeirBinary built, if anything.
func RemoveWeirBinary() {
	if weirBin.dir != "" {
		os.RemoveAll(weirBin.dir)
	}
}
