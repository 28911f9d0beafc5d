// Command benchratio turns Go benchmark output into a table of medians and
// ratios against a baseline measured in the same run: for every benchmark
// that differs only in one config key, the median of one metric over all
// runs for the baseline value of that key and for each other value, and the
// ratio other/baseline, judged against a goal if one is given.
//
//	go test -run '^$' -bench '^BenchmarkProduce$' -count 5 ./transport/bench > produce.txt
//	go run ./scripts/benchratio -key impl -base kfake -metric MB/s -goal 1 -check produce.txt
//	go run ./scripts/benchratio -key impl -base kfake -metric p99-us -lower -goal 1 latency.txt
//
// Usage: benchratio -key K -base V [-metric MB/s] [-goal G [-lower]] [-match RE] [-check] [file ...]
//
// It reads the files named (standard input when there are none, or for "-")
// and takes the benchmark lines whose names carry K=<value> (in the
// benchstat form BenchmarkX/a=1/K=weir/b=2-GOMAXPROCS) and report the
// metric, ignoring every other line. A row is the name with K=<value> and the
// -GOMAXPROCS suffix removed, and the Benchmark prefix dropped; rows come in
// the order they first appear, and for each row one line per value of K
// other than V, in the order they first appear. The table is Markdown, with a
// column for K only when more than one value is compared to V.
//
// The ratio is median(value)/median(base). With -goal, each row says whether
// the ratio is at least G, or with -lower (for metrics where less is better,
// such as latency or CPU time) at most G. With -check it exits with status 1
// when a row misses the goal or lacks results for the base or the value.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "benchratio: %v\n", err)
		os.Exit(1)
	}
}

// options are the parsed flags.
type options struct {
	key, base, metric string
	goal              float64 // 0: none
	lower, check      bool
	match             *regexp.Regexp // nil: every row
}

// run parses args (without the program name), reads the benchmark output and
// writes the table to stdout; usage goes to stderr. It returns the error that
// should end the process with status 1, without printing it.
func run(args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("benchratio", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var o options
	fl.StringVar(&o.key, "key", "", "the config `key` whose values are compared, such as impl (required)")
	fl.StringVar(&o.base, "base", "", "the `value` of -key that is the baseline, such as kfake (required)")
	fl.StringVar(&o.metric, "metric", "MB/s", "the `unit` of the metric compared, as in the benchmark output: MB/s, ns/op, p99-us, ...")
	fl.Float64Var(&o.goal, "goal", 0, "the `ratio` each row must reach (default 0: no goal column)")
	fl.BoolVar(&o.lower, "lower", false, "less is better: the goal is a ratio of at most -goal")
	fl.BoolVar(&o.check, "check", false, "exit with status 1 if a row misses -goal or lacks results")
	match := fl.String("match", "", "only rows whose name matches this `regexp` (default: all)")
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: benchratio -key K -base V [-metric MB/s] [-goal G [-lower]] [-match RE] [-check] [file ...]\n\n"+
			"Reads `go test -bench` output (stdin without files) and prints, for each benchmark\n"+
			"whose name carries K=, the median metric of the base value and of every other\n"+
			"value, and their ratio, as a Markdown table.\n\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	switch {
	case o.key == "":
		return errors.New("-key is required")
	case o.base == "":
		return errors.New("-base is required")
	case o.metric == "":
		return errors.New("-metric is empty")
	case o.goal < 0:
		return fmt.Errorf("-goal %g is negative", o.goal)
	}
	if *match != "" {
		re, err := regexp.Compile(*match)
		if err != nil {
			return fmt.Errorf("-match: %w", err)
		}
		o.match = re
	}
	files := fl.Args()
	if len(files) == 0 {
		files = []string{"-"}
	}
	t := table{opts: o}
	for _, name := range files {
		if err := t.readFile(name); err != nil {
			return err
		}
	}
	if len(t.rows) == 0 {
		return fmt.Errorf("no benchmark results with %s= and %s found", o.key, o.metric)
	}
	failed, lines := t.write(stdout)
	if o.check && len(failed) > 0 {
		return fmt.Errorf("%d of %d rows fail: %s", len(failed), lines, strings.Join(failed, "; "))
	}
	return nil
}

// row is one benchmark without the key: the metric of every run, by value.
type row struct {
	name   string
	values map[string][]float64
}

type table struct {
	opts   options
	rows   []*row   // in order of first appearance
	others []string // values other than the base, in order of first appearance
}

func (t *table) readFile(name string) error {
	if name == "-" {
		return t.read(os.Stdin)
	}
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := t.read(f); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (t *table) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, v, ok := parseLine(sc.Text(), t.opts.key, t.opts.metric)
		if !ok || (t.opts.match != nil && !t.opts.match.MatchString(name)) {
			continue
		}
		t.add(name, value, v)
	}
	return sc.Err()
}

// parseLine parses a benchmark result line such as
//
//	BenchmarkProduce/size=100B/impl=weir-2  50  5377182 ns/op  194.99 MB/s  1949920 records/s
//
// into the row name without key=value (Produce/size=100B), the key's value
// (weir) and the metric's value, and reports false for any line that is not
// one with the key and the metric.
func parseLine(line, key, metric string) (name, value string, v float64, ok bool) {
	fields := strings.Fields(line)
	if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
		return "", "", 0, false
	}
	if _, err := strconv.ParseInt(fields[1], 10, 64); err != nil {
		return "", "", 0, false
	}
	found := false
	for i := 2; i+1 < len(fields); i += 2 {
		if fields[i+1] == metric {
			x, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return "", "", 0, false
			}
			v, found = x, true
		}
	}
	if !found {
		return "", "", 0, false
	}
	full := strings.TrimPrefix(fields[0], "Benchmark")
	// Drop the -GOMAXPROCS suffix the testing package appends.
	if i := strings.LastIndexByte(full, '-'); i >= 0 {
		if _, err := strconv.Atoi(full[i+1:]); err == nil {
			full = full[:i]
		}
	}
	parts := strings.Split(full, "/")
	kept := parts[:0]
	for _, part := range parts {
		if k, val, isKV := strings.Cut(part, "="); isKV && k == key {
			value = val
			continue
		}
		kept = append(kept, part)
	}
	if value == "" {
		return "", "", 0, false
	}
	return strings.Join(kept, "/"), value, v, true
}

func (t *table) add(name, value string, v float64) {
	var r *row
	for _, x := range t.rows {
		if x.name == name {
			r = x
			break
		}
	}
	if r == nil {
		r = &row{name: name, values: make(map[string][]float64)}
		t.rows = append(t.rows, r)
	}
	r.values[value] = append(r.values[value], v)
	if value != t.opts.base && !contains(t.others, value) {
		t.others = append(t.others, value)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// write prints the table and returns a description of every line that
// fails (misses the goal or lacks results) and how many lines it printed.
func (t *table) write(w io.Writer) (failed []string, lines int) {
	o := t.opts
	others := t.others
	if len(others) == 0 {
		others = []string{"?"} // only base results: every row lacks the other side
	}
	keyCol := len(others) > 1
	other := o.key // the header names the value only when there is one
	if !keyCol {
		other = others[0]
	}
	cmp, verdictOp := ">=", func(r float64) bool { return r >= o.goal }
	if o.lower {
		cmp, verdictOp = "<=", func(r float64) bool { return r <= o.goal }
	}

	header := "| benchmark |"
	rule := "|---|"
	if keyCol {
		header += " " + o.key + " |"
		rule += "---|"
	}
	header += fmt.Sprintf(" runs | %s %s (median) | %s %s (median) | %s/%s |", o.base, o.metric, other, o.metric, other, o.base)
	rule += "---:|---:|---:|---:|"
	if o.goal > 0 {
		header += fmt.Sprintf(" goal %s %g |", cmp, o.goal)
		rule += ":---:|"
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, rule)

	for _, r := range t.rows {
		base := r.values[o.base]
		for _, val := range others {
			xs := r.values[val]
			if len(xs) == 0 && keyCol {
				continue // this row was not measured with this value
			}
			lines++
			label := r.name
			if keyCol {
				label += " " + val
			}
			line := "| " + r.name + " |"
			if keyCol {
				line += " " + val + " |"
			}
			line += fmt.Sprintf(" %d/%d | %s | %s |", len(base), len(xs), cell(base), cell(xs))
			if len(base) == 0 || len(xs) == 0 {
				missing := o.base
				if len(base) > 0 {
					missing = val
				}
				line += " - |"
				if o.goal > 0 {
					line += " n/a |"
				}
				failed = append(failed, fmt.Sprintf("%s: no %s=%s results", label, o.key, missing))
				fmt.Fprintln(w, line)
				continue
			}
			ratio := median(xs) / median(base)
			line += fmt.Sprintf(" %.3f |", ratio)
			if o.goal > 0 {
				verdict := "yes"
				if !verdictOp(ratio) {
					verdict = "no"
					failed = append(failed, fmt.Sprintf("%s: %.3f", label, ratio))
				}
				line += " " + verdict + " |"
			}
			fmt.Fprintln(w, line)
		}
	}
	return failed, lines
}

// cell formats the median of runs: two decimals, none from 10,000 on
// (records/s, say), four significant digits below 1 (CPU seconds per GB).
func cell(runs []float64) string {
	if len(runs) == 0 {
		return "-"
	}
	m := median(runs)
	switch a := math.Abs(m); {
	case a >= 10000:
		return fmt.Sprintf("%.0f", m)
	case a < 1 && a != 0:
		return strconv.FormatFloat(m, 'g', 4, 64)
	}
	return fmt.Sprintf("%.2f", m)
}

// median of a non-empty sample; the mean of the two middle values for an even count.
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
