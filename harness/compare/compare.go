// Package compare sets two runs side by side, benchstat style: for every
// point both ran, each metric's medians, the change from A to B and whether
// that change is significant.
//
// Significance is the two-sided Mann-Whitney U test at alpha = 0.05 over the
// repetitions (package stats, which uses benchstat's own implementation), so
// a delta is printed only when the two sets of repetitions are unlikely to
// come from one distribution; otherwise the delta reads "~". The test makes
// no assumption about the distribution, which suits benchmark figures
// (skewed, with outliers), but it needs repetitions: with fewer than four a
// side no difference can reach p <= 0.05, and the row says so instead of
// pretending the runs are equal.
//
// Points are matched by section name and point ID; points, sections and
// metrics only one run has are listed, not compared. Differences between the
// two environments (commit, kernel, file system, device...) are listed
// first, because a significant delta between two machines says nothing
// about a code change.
package compare

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/stats"
)

// Errors returned by this package.
var (
	// ErrInput: a run to compare could not be found or read.
	ErrInput = errors.New("compare: cannot read run")
	// ErrFormat: an output format other than text or md was asked for.
	ErrFormat = errors.New("compare: unknown format")
)

// Load reads the run at path: a results directory (its run.json, as
// report.Write lays it out) or a run file itself.
func Load(path string) (*result.Run, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if fi.IsDir() {
		path = filepath.Join(path, report.RunFile)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s is not a results directory: no %s in it", ErrInput, filepath.Dir(path), report.RunFile)
		}
	}
	run, err := result.Read(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	return run, nil
}

// Side is one of the two runs compared, with the label output names it by
// (typically the path it was loaded from).
type Side struct {
	Label string
	Run   *result.Run
}

// Row compares one metric at one point.
type Row struct {
	Section, Point, Metric string
	// A and B summarise the metric's successful reps; N is 0 on a side
	// that lacks the metric, and then Cmp is zero and Only names the
	// side that has it.
	A, B stats.Summary
	Only string // "A" or "B" when one side lacks the metric
	// Delta is the change of the median from A to B, in percent of A's
	// (±Inf when A's median is 0 and B's is not; 0 when both are 0).
	Delta float64
	Cmp   stats.Comparison
}

// Compared reports whether the row holds a test result.
func (r Row) Compared() bool { return r.Only == "" }

// Missing names a section, or a point of a section, only one run has.
type Missing struct {
	Section string
	Point   string
	Whole   bool // the whole section is missing (Point is "")
}

// EnvDiff is an environment property that differs between the runs.
type EnvDiff struct {
	Property string
	A, B     string
}

// Result is a comparison of two runs.
type Result struct {
	A, B         Side
	EnvDiffs     []EnvDiff
	Rows         []Row // sections in A's order, points in A's order, metrics in report order
	OnlyA, OnlyB []Missing
}

// Compare matches the points of a and b and compares every metric either
// side recorded at each point both have. It fails with ErrInput when a run
// is missing.
func Compare(a, b Side) (*Result, error) {
	if a.Run == nil || b.Run == nil {
		return nil, fmt.Errorf("%w: nil run", ErrInput)
	}
	res := &Result{A: a, B: b, EnvDiffs: envDiffs(a.Run, b.Run)}
	for _, sa := range a.Run.Sections {
		sb := findSection(b.Run, sa.Name)
		if sb == nil {
			res.OnlyA = append(res.OnlyA, Missing{Section: sa.Name, Whole: true})
			continue
		}
		for _, pa := range sa.Points {
			pb := findPoint(sb, pa.ID)
			if pb == nil {
				res.OnlyA = append(res.OnlyA, Missing{Section: sa.Name, Point: pa.ID})
				continue
			}
			res.Rows = append(res.Rows, comparePoint(sa.Name, &pa, pb)...)
		}
		for _, pb := range sb.Points {
			if findPoint(&sa, pb.ID) == nil {
				res.OnlyB = append(res.OnlyB, Missing{Section: sa.Name, Point: pb.ID})
			}
		}
	}
	for _, sb := range b.Run.Sections {
		if findSection(a.Run, sb.Name) == nil {
			res.OnlyB = append(res.OnlyB, Missing{Section: sb.Name, Whole: true})
		}
	}
	return res, nil
}

func comparePoint(section string, pa, pb *result.Point) []Row {
	metrics := report.Metrics([]result.Point{*pa, *pb})
	var rows []Row
	for _, m := range metrics {
		row := Row{Section: section, Point: pa.ID, Metric: m}
		va, vb := pa.Values(m), pb.Values(m)
		// Values holds no NaN (JSON cannot), so Summarize fails only on
		// an empty sample, which leaves the zero Summary.
		row.A, _ = stats.Summarize(va)
		row.B, _ = stats.Summarize(vb)
		switch {
		case len(va) == 0:
			row.Only = "B"
		case len(vb) == 0:
			row.Only = "A"
		default:
			row.Cmp, _ = stats.Compare(va, vb)
			row.Delta = delta(row.A.Median, row.B.Median)
		}
		rows = append(rows, row)
	}
	return rows
}

func delta(a, b float64) float64 {
	switch {
	case a == b:
		return 0
	case a == 0:
		return math.Copysign(math.Inf(1), b)
	}
	return (b - a) / math.Abs(a) * 100
}

func findSection(run *result.Run, name string) *result.Section {
	for i := range run.Sections {
		if run.Sections[i].Name == name {
			return &run.Sections[i]
		}
	}
	return nil
}

func findPoint(s *result.Section, id string) *result.Point {
	for i := range s.Points {
		if s.Points[i].ID == id {
			return &s.Points[i]
		}
	}
	return nil
}

// envDiffs lists the environment properties (and seed and spec) that
// differ; the hostname is left out, as runs on one machine may differ in it.
func envDiffs(a, b *result.Run) []EnvDiff {
	rot := func(r *bool) string {
		if r == nil {
			return "unknown"
		}
		return strconv.FormatBool(*r)
	}
	ea, eb := a.Env, b.Env
	props := []EnvDiff{
		{"weir commit", ea.WeirCommit, eb.WeirCommit},
		{"CPU", ea.CPUModel, eb.CPUModel},
		{"CPUs", strconv.Itoa(ea.CPUs), strconv.Itoa(eb.CPUs)},
		{"memory MiB", strconv.FormatInt(ea.MemoryMiB, 10), strconv.FormatInt(eb.MemoryMiB, 10)},
		{"kernel", ea.Kernel, eb.Kernel},
		{"Go", ea.GoVersion, eb.GoVersion},
		{"target", ea.Target, eb.Target},
		{"file system", ea.FileSystem, eb.FileSystem},
		{"mount options", ea.MountOptions, eb.MountOptions},
		{"device", ea.Device, eb.Device},
		{"device model", ea.DeviceModel, eb.DeviceModel},
		{"rotational", rot(ea.Rotational), rot(eb.Rotational)},
		{"I/O scheduler", ea.Scheduler, eb.Scheduler},
		{"RAID", ea.RAID, eb.RAID},
		{"seed", strconv.FormatInt(a.Seed, 10), strconv.FormatInt(b.Seed, 10)},
	}
	out := slices.DeleteFunc(props, func(d EnvDiff) bool { return d.A == d.B })
	if a.Spec != b.Spec {
		out = append(out, EnvDiff{"spec", "(see run.json)", "differs"})
	}
	return out
}
