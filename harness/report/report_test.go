package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/perf/benchfmt"

	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/stats"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// testRun is testdata/run.json: four sections (a disk probe, a memory probe
// with a partial matrix, a load matrix with a failed rep, a metric missing
// from one rep and the last point missing, and a section with no points),
// published references including one for a section the run lacks, and the
// interrupted flag.
func testRun(t testing.TB) *result.Run {
	t.Helper()
	run, err := result.Read(filepath.Join("testdata", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// pinPlatform makes bench.txt independent of the machine running the test.
func pinPlatform(t *testing.T) {
	goos, goarch := benchGOOS, benchGOARCH
	benchGOOS, benchGOARCH = "linux", "amd64"
	t.Cleanup(func() { benchGOOS, benchGOARCH = goos, goarch })
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run `go test ./harness/report -update` to accept)\n--- got ---\n%s--- want ---\n%s", path, got, want)
	}
}

// TestGolden compares report.md, bench.txt and the terminal tables of the
// synthetic run with golden files.
func TestGolden(t *testing.T) {
	pinPlatform(t)
	run := testRun(t)
	for _, tc := range []struct {
		file  string
		write func(io.Writer, *result.Run) error
	}{
		{"report.md.golden", WriteMarkdown},
		{"bench.txt.golden", WriteBench},
		{"print.golden", Print},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tc.write(&buf, run); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.file, buf.Bytes())
		})
	}
}

// TestWrite writes a results directory and checks every file in it.
func TestWrite(t *testing.T) {
	pinPlatform(t)
	run := testRun(t)
	dir := filepath.Join(t.TempDir(), "results", "smoke")
	// A plot left by an earlier run goes; a file of the user's stays.
	if err := os.MkdirAll(filepath.Join(dir, PlotsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, PlotsDir, "load-old-metric-by-codec.svg")
	notes := filepath.Join(dir, "notes.txt")
	for _, f := range []string{stale, notes} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := Write(dir, run); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale plot %s: err = %v, want it removed", stale, err)
	}
	if _, err := os.Stat(notes); err != nil {
		t.Errorf("unrelated file %s: %v, want it kept", notes, err)
	}

	back, err := result.Read(filepath.Join(dir, RunFile))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, run) {
		t.Errorf("run.json does not read back as the run written")
	}
	for file, write := range map[string]func(io.Writer, *result.Run) error{MarkdownFile: WriteMarkdown, BenchFile: WriteBench} {
		var want bytes.Buffer
		if err := write(&want, run); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s differs from what %T writes", file, write)
		}
	}

	plan := PlanPlots(run)
	if len(plan) == 0 || len(plan) > MaxPlots {
		t.Fatalf("planned %d plots, want 1..%d", len(plan), MaxPlots)
	}
	entries, err := os.ReadDir(filepath.Join(dir, PlotsDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(plan) {
		t.Errorf("plots/ holds %d files, plan has %d", len(entries), len(plan))
	}
	for _, spec := range plan {
		b, err := os.ReadFile(filepath.Join(dir, PlotsDir, spec.File))
		if err != nil {
			t.Error(err)
			continue
		}
		checkSVG(t, spec, b)
	}

	// Every plot report.md links exists.
	md, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`\]\((plots/[^)]+)\)`).FindAllStringSubmatch(string(md), -1)
	if len(links) != len(plan) {
		t.Errorf("report.md links %d plots, want %d", len(links), len(plan))
	}
	for _, l := range links {
		if _, err := os.Stat(filepath.Join(dir, l[1])); err != nil {
			t.Errorf("report.md links %s: %v", l[1], err)
		}
	}
}

// checkSVG parses an SVG file as XML and looks for its title, its axis
// label and one tick label per level of the factor.
func checkSVG(t *testing.T, spec PlotSpec, b []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var texts []string
	root := ""
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Errorf("%s is not valid XML: %v", spec.File, err)
			return
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			inText = tok.Name.Local == "text"
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		}
	}
	if root != "svg" {
		t.Errorf("%s: root element %q, want svg", spec.File, root)
	}
	for _, want := range []string{spec.Title, MetricLabel(spec.Metric), spec.Factor} {
		if !slices.Contains(texts, want) {
			t.Errorf("%s: no text %q among %q", spec.File, want, texts)
		}
	}
	if !bytes.Contains(b, []byte(html.EscapeString(spec.Title))) {
		t.Errorf("%s does not contain its title %q", spec.File, spec.Title)
	}
}

// TestDeterministic writes the same run twice: every file is identical.
func TestDeterministic(t *testing.T) {
	run := testRun(t)
	a, b := t.TempDir(), t.TempDir()
	if err := Write(a, run); err != nil {
		t.Fatal(err)
	}
	if err := Write(b, run); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := filepath.WalkDir(a, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(a, path)
		x, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil {
			return err
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two writes of the same run", rel)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 4 {
		t.Errorf("compared %d files, want run.json, report.md, bench.txt and plots", n)
	}
}

// TestBenchReadsWithBenchfmt parses bench.txt with the reader benchstat
// uses: one result per successful rep, named after section and point, each
// metric a value with its name as unit, and the configuration lines.
func TestBenchReadsWithBenchfmt(t *testing.T) {
	run := testRun(t)
	var buf bytes.Buffer
	if err := WriteBench(&buf, run); err != nil {
		t.Fatal(err)
	}
	type rep struct {
		name    string
		metrics map[string]float64
	}
	var want []rep
	for _, s := range run.Sections {
		for _, p := range s.Points {
			for _, r := range p.Reps {
				if r.Error == "" {
					want = append(want, rep{benchName(s.Name, p.ID), r.Metrics})
				}
			}
		}
	}
	rd := benchfmt.NewReader(&buf, "bench.txt")
	var got []rep
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Errorf("benchfmt: %v", rec)
		case *benchfmt.Result:
			if rec.Iters != 1 {
				t.Errorf("%s: iterations %d, want 1", rec.Name.Full(), rec.Iters)
			}
			for key, v := range map[string]string{"weir-commit": "5d46309", "file-system": "ext4", "seed": "42",
				"pkg": BenchPkg, "cpu": "AMD EPYC 7B13", "interrupted": "true", "rotational": "false"} {
				if g := rec.GetConfig(key); g != v {
					t.Errorf("config %s = %q, want %q", key, g, v)
				}
			}
			r := rep{name: "Benchmark" + string(rec.Name.Full()), metrics: map[string]float64{}}
			for _, v := range rec.Values {
				if v.OrigUnit != "" { // benchfmt tidied the unit ("MB/s" -> "B/s")
					v.Value, v.Unit = v.OrigValue, v.OrigUnit
				}
				r.metrics[v.Unit] = v.Value
			}
			got = append(got, r)
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("benchfmt read %d results, want %d; first got %+v, want %+v", len(got), len(want), got[0], want[0])
	}
	if name, want := got[len(got)-1].name, "BenchmarkLoad/codec=lz4/flush=never"; name != want {
		t.Errorf("last result %q, want %q", name, want)
	}
}

func TestBenchName(t *testing.T) {
	tests := []struct{ section, id, want string }{
		{"load", "codec=zstd/flush=never", "BenchmarkLoad/codec=zstd/flush=never"},
		{"disk-seq", "", "BenchmarkDiskSeq"},
		{"memory probe", "access=random", "BenchmarkMemoryProbe/access=random"},
		{"load", "key space=a b", "BenchmarkLoad/key_space=a_b"},
		{"load", "batch=16-32", "BenchmarkLoad/batch=16-32-1"}, // else benchstat reads GOMAXPROCS 32
		{"load", "codec=lz4-fast", "BenchmarkLoad/codec=lz4-fast"},
	}
	for _, tc := range tests {
		if got := benchName(tc.section, tc.id); got != tc.want {
			t.Errorf("benchName(%q, %q) = %q, want %q", tc.section, tc.id, got, tc.want)
		}
	}
}

func TestFormatValue(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{1, "1.000"},
		{0.012345, "0.01235"},
		{0.5, "0.5000"},
		{12.345, "12.35"},
		{812.34, "812.3"},
		{8123.4, "8123"},
		{9999.4, "9999"},
		{12345, "12.35k"},
		{1234567, "1.235M"},
		{9999600, "10.00M"}, // rounding carries into a new digit
		{999.96, "1000"},
		{2.5e9, "2.500G"},
		{7.1e12, "7.100T"},
		{3e16, "30000T"},
		{-12345, "-12.35k"},
		{math.Inf(1), "+Inf"},
		{math.NaN(), "NaN"},
	}
	for _, tc := range tests {
		if got := FormatValue(tc.v); got != tc.want {
			t.Errorf("FormatValue(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestFormatSummary(t *testing.T) {
	tests := []struct {
		s    stats.Summary
		want string
	}{
		{stats.Summary{N: 1, Median: 412.5}, "412.5"},
		{stats.Summary{N: 5, Median: 400, MAD: 6}, "400.0 ± 1.5%"},
		{stats.Summary{N: 5, Median: 400, MAD: 60}, "400.0 ± 15%"},
		{stats.Summary{N: 5, Median: 400}, "400.0 ± 0.0%"},
		{stats.Summary{N: 5, Median: 0, MAD: 1}, "0 ± ∞%"},
	}
	for _, tc := range tests {
		if got := FormatSummary(tc.s); got != tc.want {
			t.Errorf("FormatSummary(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestSortMetrics(t *testing.T) {
	got := []string{"zz-custom", result.PartitionSkew, result.MsgsProduced, result.E2EP99, result.AckMax,
		result.BrokerCPUSeconds, "fetch-us", result.AckP50, "custom-ops/s", result.ProduceMBPerSec, result.CompressionRatio,
		result.ProduceMsgsPerSec, "aa-custom", result.DiskWriteBytes}
	SortMetrics(got)
	want := []string{result.ProduceMsgsPerSec, result.ProduceMBPerSec, "custom-ops/s", result.AckP50, result.AckMax,
		result.E2EP99, "fetch-us", result.BrokerCPUSeconds, result.DiskWriteBytes, result.CompressionRatio,
		result.PartitionSkew, result.MsgsProduced, "aa-custom", "zz-custom"}
	if !slices.Equal(got, want) {
		t.Errorf("SortMetrics:\n got %q\nwant %q", got, want)
	}
}

func TestEscapeMarkdown(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"a|b", `a\|b`},
		{"NOT_ENOUGH_REPLICAS", `NOT\_ENOUGH\_REPLICAS`},
		{"line\nbreak\t tab", "line break tab"},
		{"*x* `y` [z](w) <b> #1", "\\*x\\* \\`y\\` \\[z\\](w) \\<b> \\#1"},
	}
	for _, tc := range tests {
		if got := EscapeMarkdown(tc.in); got != tc.want {
			t.Errorf("EscapeMarkdown(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ in, want string }{
		{"produce-MB/s", "produce-MB-per-s"},
		{"ack-p99.9-us", "ack-p99.9-us"},
		{"memory probe", "memory-probe"},
		{"../etc", "per-etc"}, // no path separator survives
	}
	for _, tc := range tests {
		if got := slug(tc.in); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// matrixRun builds a section with factors a (levels a0..an-1) and b (b0..bm-1),
// one point per cell, reps whose metric is 100*(i+1) + j + rep offset.
func matrixRun(na, nb int) *result.Run {
	sec := result.Section{Name: "grid", Factors: []string{"a", "b"}}
	for i := range na {
		for j := range nb {
			a, b := "a"+string(rune('0'+i)), "b"+string(rune('0'+j))
			p := result.Point{ID: "a=" + a + "/b=" + b, Factors: []result.FactorValue{{Name: "a", Value: a}, {Name: "b", Value: b}}}
			for r := range 3 {
				p.Reps = append(p.Reps, result.Rep{Metrics: map[string]float64{
					result.ProduceMBPerSec:  float64(100*(i+1) + j + r),
					result.CompressionRatio: 2, // flat: never worth a plot
				}})
			}
			sec.Points = append(sec.Points, p)
		}
	}
	return &result.Run{Version: result.SchemaVersion, Name: "grid", Sections: []result.Section{sec}}
}

func TestPlanPlots(t *testing.T) {
	run := testRun(t)
	plan := PlanPlots(run)
	files := map[string]bool{}
	for _, p := range plan {
		if files[p.File] {
			t.Errorf("file %s planned twice", p.File)
		}
		files[p.File] = true
		if p.Metric == result.CompressionRatio && p.Factor == "flush" {
			t.Errorf("planned %s by flush, which does not change with it", p.Metric)
		}
	}
	for _, want := range []string{"disk-MB-per-s-by-pattern.svg", "memory-values-per-s-by-access.svg",
		"load-produce-MB-per-s-by-codec.svg", "load-ack-p99-us-by-flush.svg", "load-compression-ratio-by-codec.svg"} {
		if !files[want] {
			t.Errorf("plan lacks %s; has %v", want, plan)
		}
	}

	grid := PlanPlots(matrixRun(3, 2))
	if len(grid) != 2 {
		t.Errorf("grid: %d plots, want throughput by a and by b (the flat ratio skipped): %+v", len(grid), grid)
	}
	single := matrixRun(1, 1)
	if p := PlanPlots(single); len(p) != 0 {
		t.Errorf("one point: planned %v, want nothing", p)
	}
	// Many sections share the budget.
	many := &result.Run{Version: result.SchemaVersion}
	for i := range 8 {
		sec := matrixRun(3, 3).Sections[0]
		sec.Name = "grid" + string(rune('a'+i))
		many.Sections = append(many.Sections, sec)
	}
	if p := PlanPlots(many); len(p) != MaxPlots {
		t.Errorf("8 sections: %d plots, want the budget %d", len(p), MaxPlots)
	}
}

// TestSeriesPooled: with more combinations of the other factors than
// maxSeries, one series pools them: the median of the point medians, bars
// from the lowest to the highest rep.
func TestSeriesPooled(t *testing.T) {
	run := matrixRun(2, maxSeries+1)
	v := newView(&run.Sections[0])
	ss := v.series(result.ProduceMBPerSec, "a")
	if len(ss) != 1 {
		t.Fatalf("%d series, want 1 pooled", len(ss))
	}
	// At a0 the point medians are 101+j for j in 0..6 -> median 104;
	// reps span 100 (j=0, r=0) to 108 (j=6, r=2).
	p := ss[0].points[0]
	if p.median != 104 || p.lo != 100 || p.hi != 108 {
		t.Errorf("pooled a0 = median %v [%v, %v], want 104 [100, 108]", p.median, p.lo, p.hi)
	}
	split := v.series(result.ProduceMBPerSec, "b")
	if len(split) != 2 || split[0].label != "a=a0" || len(split[0].points) != maxSeries+1 {
		t.Errorf("by b: %d series (first %q), want 2 labelled by a", len(split), split[0].label)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestErrors(t *testing.T) {
	writers := map[string]func(io.Writer, *result.Run) error{"WriteMarkdown": WriteMarkdown, "WriteBench": WriteBench, "Print": Print}
	unnamed := &result.Run{Version: result.SchemaVersion, Sections: []result.Section{{Name: " "}}}
	for name, write := range writers {
		if err := write(io.Discard, nil); !errors.Is(err, ErrRun) {
			t.Errorf("%s(nil) = %v, want ErrRun", name, err)
		}
		if err := write(io.Discard, unnamed); !errors.Is(err, ErrRun) {
			t.Errorf("%s(unnamed section) = %v, want ErrRun", name, err)
		}
		if err := write(failWriter{}, testRun(t)); !errors.Is(err, ErrWrite) {
			t.Errorf("%s(failing writer) = %v, want ErrWrite", name, err)
		}
	}
	if err := Write(t.TempDir(), nil); !errors.Is(err, ErrRun) {
		t.Errorf("Write(nil) = %v, want ErrRun", err)
	}
	if _, err := WritePlots(t.TempDir(), nil); !errors.Is(err, ErrRun) {
		t.Errorf("WritePlots(nil) = %v, want ErrRun", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(file, "results"), testRun(t)); !errors.Is(err, ErrWrite) {
		t.Errorf("Write under a file = %v, want ErrWrite", err)
	}
}

// TestSparseRuns reports runs with nothing in them without failing.
func TestSparseRuns(t *testing.T) {
	allFailed := &result.Run{Version: result.SchemaVersion, Name: "failed", Started: time.Unix(0, 0),
		Sections: []result.Section{{Name: "load", Factors: []string{"codec"}, Points: []result.Point{
			{ID: "codec=none", Factors: []result.FactorValue{{Name: "codec", Value: "none"}},
				Reps: []result.Rep{{Error: "broker did not start"}, {Error: "broker did not start"}}},
		}}}}
	for name, run := range map[string]*result.Run{
		"empty":      {Version: result.SchemaVersion},
		"all failed": allFailed,
		"no factors": {Version: result.SchemaVersion, Sections: []result.Section{{Name: "probe", Points: []result.Point{
			{Reps: []result.Rep{{Metrics: map[string]float64{result.MBPerSec: 1}}}}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := Write(t.TempDir(), run); err != nil {
				t.Fatal(err)
			}
			var md, out bytes.Buffer
			if err := WriteMarkdown(&md, run); err != nil {
				t.Fatal(err)
			}
			if err := Print(&out, run); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(md.String(), "# weir run: ") || !strings.HasPrefix(out.String(), "weir run: ") {
				t.Errorf("no title:\n%s\n%s", md.String(), out.String())
			}
		})
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, allFailed); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| codec=none | 0 of 2 |", "broker did not start"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("all-failed report lacks %q:\n%s", want, md.String())
		}
	}
}

// A cluster run names its brokers, ZooKeeper and networking, and a
// section with a baseline sets each point's medians against it; the
// per-broker figures stay in run.json.
func TestBaselineAndClusterEnv(t *testing.T) {
	rep := func(mbps, p99 float64) result.Rep {
		return result.Rep{Metrics: map[string]float64{result.ProduceMBPerSec: mbps, result.AckP99: p99},
			Brokers: map[string]map[string]float64{"1": {result.BrokerCPUSeconds: 0.5}, "2": {result.BrokerCPUSeconds: 0.25}}}
	}
	point := func(rf, acks string, reps ...result.Rep) result.Point {
		return result.Point{ID: "replication_factor=" + rf + "/acks=" + acks,
			Factors: []result.FactorValue{{Name: "replication_factor", Value: rf}, {Name: "acks", Value: acks}}, Reps: reps}
	}
	run := &result.Run{Version: result.SchemaVersion, Name: "repl",
		Env: result.Env{Target: "cluster", Brokers: 3, ZooKeeper: "embedded", Networking: "loopback"},
		Sections: []result.Section{{Name: "load", Factors: []string{"replication_factor", "acks"}, Baseline: "replication_factor=1/acks=1",
			Points: []result.Point{
				point("1", "1", rep(100, 2000), rep(110, 2200), rep(90, 1800)),
				point("3", "all", rep(50, 8000), rep(55, 9000), rep(45, 7000)),
			}}}}
	var md, txt bytes.Buffer
	if err := WriteMarkdown(&md, run); err != nil {
		t.Fatal(err)
	}
	if err := Print(&txt, run); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Against the baseline", "baseline's (replication\\_factor=1/acks=1)", " 0.5000× |", " 4.000× |", " 1.000× |",
		"| brokers ", "| 3 ", "| ZooKeeper ", "| embedded ", "| networking ", "| loopback "} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md.String())
		}
	}
	if !strings.Contains(txt.String(), "Against the baseline") || !strings.Contains(txt.String(), "4.000×") {
		t.Errorf("printed report lacks the baseline table:\n%s", txt.String())
	}
	dir := t.TempDir()
	if err := Write(dir, run); err != nil {
		t.Fatal(err)
	}
	back, err := result.Read(filepath.Join(dir, RunFile))
	if err != nil {
		t.Fatal(err)
	}
	if b := back.Sections[0].Points[1].Reps[0].Brokers; b["2"][result.BrokerCPUSeconds] != 0.25 || back.Sections[0].Baseline != run.Sections[0].Baseline ||
		back.Env.Networking != "loopback" {
		t.Errorf("run.json read back: brokers %v, baseline %q, networking %q", b, back.Sections[0].Baseline, back.Env.Networking)
	}
	// Without a baseline (every run written before them) there is no such table.
	run.Sections[0].Baseline = ""
	md.Reset()
	if err := WriteMarkdown(&md, run); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(md.String(), "Against the baseline") {
		t.Error("a baseline table without a baseline")
	}
}

// A section that reports itself (OwnReport) gets no generic tables or
// plots, only the note and its failed repetitions; the environment names
// the broker's open-file limit when the run recorded it.
func TestOwnReportSection(t *testing.T) {
	run := &result.Run{Version: result.SchemaVersion, Name: "own", Env: result.Env{BrokerOpenFiles: "soft 20000, hard 20000"},
		Sections: []result.Section{{Name: "scale", Factors: []string{"total_partitions"}, OwnReport: true, Points: []result.Point{
			{ID: "total_partitions=10", Factors: []result.FactorValue{{Name: "total_partitions", Value: "10"}},
				Reps: []result.Rep{{Metrics: map[string]float64{"create-s": 1.5}}}},
			{ID: "total_partitions=100", Factors: []result.FactorValue{{Name: "total_partitions", Value: "100"}},
				Reps: []result.Rep{{Metrics: map[string]float64{"create-s": 2.5}, Error: "step 3 (x): broken"}}},
		}}}}
	for _, markdown := range []bool{true, false} {
		var b bytes.Buffer
		var err error
		if markdown {
			err = WriteMarkdown(&b, run)
		} else {
			err = Print(&b, run)
		}
		if err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, want := range []string{ownReportNote, "step 3 (x): broken", "soft 20000, hard 20000"} {
			if !strings.Contains(out, want) {
				t.Errorf("markdown %t: lacks %q:\n%s", markdown, want, out)
			}
		}
		if strings.Contains(out, "create-s") {
			t.Errorf("markdown %t: a generic table of an own-report section:\n%s", markdown, out)
		}
	}
	if plots := PlanPlots(run); len(plots) != 0 {
		t.Errorf("PlanPlots = %v, want none for an own-report section", plots)
	}
}
