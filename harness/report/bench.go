package report

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/weir-broker/weir/harness/result"
)

// benchGOOS and benchGOARCH fill the goos and goarch lines of bench.txt.
// The run does not record them, so they are this process's (the runner
// writes the report on the machine it measured). Tests pin them.
var benchGOOS, benchGOARCH = runtime.GOOS, runtime.GOARCH

// BenchPkg is the pkg line of bench.txt: benchstat groups results by it.
const BenchPkg = "github.com/weir-broker/weir/harness"

// WriteBench writes run in the Go benchmark format, which benchstat and the
// other golang.org/x/perf tools read: the header lines `go test -bench`
// prints (goos, goarch, pkg, cpu), configuration lines describing the run
// and its environment ("weir-commit: abc", "file-system: ext4"), then one
// line per successful rep:
//
//	BenchmarkLoad/codec=zstd/flush=never 1 412.5 produce-MB/s 812 ack-p99-us ...
//
// The name is "Benchmark", the section name in CamelCase, then the point ID
// (its factors as sub-benchmark keys); the iteration count is 1 (a rep is
// one measurement); the metrics follow in report order with their names as
// units. Failed reps are left out, as statistics leave them out. Spaces in
// IDs, which would split the line, become underscores, and an ID ending in
// "-<digits>" gets "-1" appended, or benchstat would read those digits as
// GOMAXPROCS.
func WriteBench(w io.Writer, run *result.Run) error {
	if err := check(run); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	e := run.Env
	config := [][2]string{
		{"goos", benchGOOS},
		{"goarch", benchGOARCH},
		{"pkg", BenchPkg},
		{"cpu", e.CPUModel},
		{"run", run.Name},
		{"seed", strconv.FormatInt(run.Seed, 10)},
		{"weir-commit", e.WeirCommit},
		{"go-version", e.GoVersion},
		{"kernel", e.Kernel},
		{"cpus", positive(int64(e.CPUs))},
		{"memory-mib", positive(e.MemoryMiB)},
		{"target", e.Target},
		{"file-system", e.FileSystem},
		{"mount-options", e.MountOptions},
		{"device", e.Device},
		{"device-model", e.DeviceModel},
		{"scheduler", e.Scheduler},
		{"raid", e.RAID},
	}
	if e.Rotational != nil {
		config = append(config, [2]string{"rotational", strconv.FormatBool(*e.Rotational)})
	}
	if !run.Started.IsZero() {
		config = append(config, [2]string{"started", run.Started.UTC().Format(time.RFC3339)})
	}
	if run.Interrupted {
		config = append(config, [2]string{"interrupted", "true"})
	}
	for _, kv := range config {
		if v := oneLine(kv[1]); v != "" {
			fmt.Fprintf(bw, "%s: %s\n", kv[0], v)
		}
	}
	for _, sec := range run.Sections {
		metrics := Metrics(sec.Points)
		for _, p := range sec.Points {
			name := benchName(sec.Name, p.ID)
			for _, r := range p.Reps {
				if r.Error != "" {
					continue
				}
				var b strings.Builder
				b.WriteString(name + " 1")
				n := 0
				for _, m := range metrics {
					v, ok := r.Metrics[m]
					if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
						continue
					}
					b.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64) + " " + noSpace(m))
					n++
				}
				if n > 0 { // a result line needs at least one value
					fmt.Fprintln(bw, b.String())
				}
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	return nil
}

// benchName is "Benchmark" + the section in CamelCase ("disk-seq" ->
// "DiskSeq") + "/" + the point ID.
func benchName(section, id string) string {
	var b strings.Builder
	b.WriteString("Benchmark")
	upper := true
	for _, r := range section {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	if id = noSpace(id); id != "" {
		b.WriteString("/" + id)
	}
	// benchstat reads a trailing "-N" as GOMAXPROCS (BenchmarkX-8); a
	// point ID ending in digits after a dash gets an explicit "-1" so that
	// only that is stripped.
	name := b.String()
	if i := strings.LastIndexAny(name, "-/"); i >= 0 && name[i] == '-' && i+1 < len(name) &&
		strings.Trim(name[i+1:], "0123456789") == "" {
		name += "-1"
	}
	return name
}

func noSpace(s string) string {
	return strings.Join(strings.Fields(s), "_")
}

func positive(n int64) string {
	if n <= 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}
