// Command appendratio turns the output of core/partlog's BenchmarkAppend into
// the table the storage engine's throughput goal is judged by: for every batch
// size and flush policy, the median MB/s of the raw os.File.Write loop and of
// Log.Append over all runs, and their ratio against the goal (weir at least 0.8
// of raw).
//
//	go test -run '^$' -bench '^BenchmarkAppend$' -count 5 ./core/partlog/ > append.txt
//	go run ./scripts/appendratio -check append.txt
//
// Usage: appendratio [-check] [-goal 0.8] [file ...]
//
// It reads the files named (standard input when there are none, or for "-"),
// takes the benchmark lines whose names carry size=, flush= and impl=raw or
// impl=weir keys and an MB/s value, and ignores every other line. The table is
// Markdown, one row per size and flush in the order they first appear. With
// -check it exits with status 1 when a ratio is below the goal or a row lacks
// raw or weir results.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "appendratio: %v\n", err)
		os.Exit(1)
	}
}

// run parses args (without the program name), reads the benchmark output and
// writes the table to stdout; usage goes to stderr. It returns the error that
// should end the process with status 1, without printing it.
func run(args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("appendratio", flag.ContinueOnError)
	fl.SetOutput(stderr)
	check := fl.Bool("check", false, "exit with status 1 if a weir/raw ratio is below -goal or a row lacks raw or weir results")
	goal := fl.Float64("goal", 0.8, "the weir/raw MB/s ratio each row must reach")
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: appendratio [-check] [-goal 0.8] [file ...]\n\n"+
			"Reads `go test -bench BenchmarkAppend` output (stdin without files) and prints\n"+
			"the median raw and weir MB/s per size and flush policy as a Markdown table.\n\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *goal <= 0 {
		return fmt.Errorf("-goal %g is not positive", *goal)
	}
	files := fl.Args()
	if len(files) == 0 {
		files = []string{"-"}
	}
	var t table
	for _, name := range files {
		if err := t.readFile(name); err != nil {
			return err
		}
	}
	if len(t.groups) == 0 {
		return errors.New("no benchmark results with size=, flush=, impl=raw|weir and MB/s found")
	}
	failed := t.write(stdout, *goal)
	if *check && len(failed) > 0 {
		return fmt.Errorf("%d of %d rows miss the goal weir/raw >= %g: %s", len(failed), len(t.groups), *goal, strings.Join(failed, "; "))
	}
	return nil
}

// group is one row: the MB/s of every run of each implementation.
type group struct {
	size, flush string
	raw, weir   []float64
}

type table struct {
	groups []*group // in order of first appearance
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
	for sc.Scan() {
		if res, ok := parseLine(sc.Text()); ok {
			t.add(res)
		}
	}
	return sc.Err()
}

type result struct {
	size, flush, impl string
	mbps              float64
}

// parseLine parses a benchmark result line such as
//
//	BenchmarkAppend/size=1KiB/flush=never/impl=raw-2  366690  1867 ns/op  543.66 MB/s  0 B/op
//
// and reports false for any line that is not one with the keys and MB/s needed.
func parseLine(line string) (result, bool) {
	fields := strings.Fields(line)
	if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
		return result{}, false
	}
	if _, err := strconv.ParseInt(fields[1], 10, 64); err != nil {
		return result{}, false
	}
	var res result
	found := false
	for i := 2; i+1 < len(fields); i += 2 {
		if fields[i+1] == "MB/s" {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return result{}, false
			}
			res.mbps, found = v, true
		}
	}
	if !found {
		return result{}, false
	}
	name := fields[0]
	// Drop the -GOMAXPROCS suffix the testing package appends.
	if i := strings.LastIndexByte(name, '-'); i >= 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i]
		}
	}
	for _, part := range strings.Split(name, "/")[1:] {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		switch k {
		case "size":
			res.size = v
		case "flush":
			res.flush = v
		case "impl":
			res.impl = v
		}
	}
	if res.size == "" || res.flush == "" || (res.impl != "raw" && res.impl != "weir") {
		return result{}, false
	}
	return res, true
}

func (t *table) add(res result) {
	var g *group
	for _, x := range t.groups {
		if x.size == res.size && x.flush == res.flush {
			g = x
			break
		}
	}
	if g == nil {
		g = &group{size: res.size, flush: res.flush}
		t.groups = append(t.groups, g)
	}
	if res.impl == "raw" {
		g.raw = append(g.raw, res.mbps)
	} else {
		g.weir = append(g.weir, res.mbps)
	}
}

// write prints the table and returns a description of every row that misses
// the goal.
func (t *table) write(w io.Writer, goal float64) []string {
	fmt.Fprintf(w, "| size | flush | raw MB/s (median) | weir MB/s (median) | weir/raw | goal >= %g |\n", goal)
	fmt.Fprintf(w, "|------|-------|------------------:|-------------------:|---------:|:---:|\n")
	var failed []string
	for _, g := range t.groups {
		row := g.size + " " + g.flush
		if len(g.raw) == 0 || len(g.weir) == 0 {
			fmt.Fprintf(w, "| %s | %s | %s | %s | - | n/a |\n", g.size, g.flush, cell(g.raw), cell(g.weir))
			missing := "weir"
			if len(g.raw) == 0 {
				missing = "raw"
			}
			failed = append(failed, row+": no "+missing+" results")
			continue
		}
		ratio := median(g.weir) / median(g.raw)
		verdict := "yes"
		if ratio < goal {
			verdict = "no"
			failed = append(failed, fmt.Sprintf("%s: %.3f", row, ratio))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.3f | %s |\n", g.size, g.flush, cell(g.raw), cell(g.weir), ratio, verdict)
	}
	return failed
}

func cell(runs []float64) string {
	if len(runs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", median(runs))
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
