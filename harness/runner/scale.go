package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/scale"
	"github.com/weir-broker/weir/harness/spec"
)

// scale runs a scale section's points (see spec.Scale): each repetition
// one scale.Run against a fresh broker. A repetition that fails at a step
// keeps the figures before it, its error naming the step, and the run goes
// on to the next partition count: a broker that cannot hold 10,000
// partitions says where 100,000 fail too.
func (r *runner) scale(ctx context.Context, run *result.Run, sections []spec.Section) error {
	for _, sec := range sections {
		rs := result.Section{Name: sec.Name, Factors: slices.Clone(sec.Factors), OwnReport: true}
		var err error
		for _, p := range sec.Points {
			var pt result.Point
			pt, err = r.scalePoint(ctx, run, sec.Name, p)
			if len(pt.Reps) > 0 {
				rs.Points = append(rs.Points, pt)
			}
			if err != nil {
				break
			}
		}
		run.Sections = append(run.Sections, rs)
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) scalePoint(ctx context.Context, run *result.Run, section string, p spec.Point) (pt result.Point, err error) {
	index := r.point
	r.point++
	pt = result.Point{ID: p.ID, Factors: slices.Clone(p.Factors)}
	w := p.Workload
	pp := r.progress.point(section+" "+p.ID, r.pointEstimate(w))
	summary := "not run"
	defer func() { pp.end(summary) }()

	c, err := r.host.Codec(w.Codec)
	if err != nil {
		return pt, err
	}
	if cl, ok := c.(io.Closer); ok {
		defer cl.Close()
	}
	var flags, env []string
	limit := 0
	if r.opts.PluginDir != "" {
		flags = append(flags, "--plugin-dir", r.opts.PluginDir)
	}
	if e := r.spec.Target.Embedded; e != nil {
		flags = append(flags, e.BrokerFlags...)
		env, limit = e.BrokerEnv, e.OpenFilesLimit
	}
	var mu sync.Mutex // Progress is called from the run's goroutines
	for rep := range r.spec.Repetitions {
		pp.rep(rep, r.spec.Repetitions)
		dir := filepath.Join(r.workDir, fmt.Sprintf("point-%03d-rep-%03d", index, rep))
		cfg := scale.Config{
			Scale:          *r.spec.Scale,
			Partitions:     p.TotalPartitions,
			Workload:       w,
			Codec:          c,
			Weir:           r.weir,
			DataDir:        dir,
			BrokerFlags:    flags,
			BrokerEnv:      env,
			OpenFilesLimit: limit,
			Seed:           r.spec.Seed + 1000*int64(index) + int64(rep),
			TopicPrefix:    fmt.Sprintf("weir-scale-%s-p%d-r%d", r.runID, index, rep),
			Progress: func(s string) {
				mu.Lock()
				defer mu.Unlock()
				pp.log(s)
			},
		}
		begin := time.Now()
		o, err := scale.Run(ctx, cfg)
		os.RemoveAll(dir)
		if ctx.Err() != nil {
			summary = fmt.Sprintf("interrupted after %d of %d reps", len(pt.Reps), r.spec.Repetitions)
			return pt, ctx.Err()
		}
		rp := result.Rep{Started: begin.UTC(), Duration: time.Since(begin), Metrics: map[string]float64{}}
		if o != nil {
			rp.Metrics = o.Metrics
			if run.Env.BrokerOpenFiles == "" && o.Limit.Soft != 0 {
				run.Env.BrokerOpenFiles = o.Limit.String()
			}
		}
		if err != nil {
			rp.Error = err.Error()
		}
		pt.Reps = append(pt.Reps, rp)
	}
	summary = scaleSummary(&pt)
	return pt, nil
}

// scaleSummary is a finished scale point's line: its headline figures,
// or where it failed.
func scaleSummary(pt *result.Point) string {
	var parts []string
	failed := 0
	for _, rp := range pt.Reps {
		if rp.Error != "" {
			failed++
			if failed == 1 {
				msg := rp.Error
				if len(msg) > 300 {
					msg = msg[:300] + "…"
				}
				parts = append(parts, "FAILED "+msg)
			}
		}
	}
	add := func(metric, format string) {
		var vs []float64
		for _, rp := range pt.Reps {
			if v, ok := rp.Metrics[metric]; ok {
				vs = append(vs, v)
			}
		}
		if len(vs) > 0 {
			parts = append(parts, fmt.Sprintf(format, report.FormatValue(median(vs))))
		}
	}
	add("create-s", "created in %s s")
	add(scale.MetricFDsMax, "at most %s fds")
	add(scale.MetricHWMMax, "peak RSS %s MiB")
	add("metadata-p99-ms", "Metadata p99 %s ms")
	add("clean-restart-fetch-s", "clean restart serving %s s")
	add("hot-ratio", "hot beside idle %s×")
	return fmt.Sprintf("%d reps (%d failed): %s", len(pt.Reps), failed, strings.Join(parts, ", "))
}
