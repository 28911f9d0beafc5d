package plan

import (
	"fmt"

	"github.com/weir-broker/weir/harness/result"
)

// MergeRuns pools several runs of one spec into one, so that profiles
// and predictions rest on the medians over every run's repetitions: on a
// machine shared with other work, runs taken in turn (profile, cluster,
// profile, cluster...) see the same mix of quiet and busy minutes. The
// first run's spec and environment are kept; each point's repetitions
// are the runs' concatenated, in order. The runs are not modified.
func MergeRuns(runs ...*result.Run) (*result.Run, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("%w: no runs to merge", ErrInput)
	}
	out := *runs[0]
	out.Sections = nil
	index := map[[2]string]*result.Point{}
	for i, r := range runs {
		if r.Name != runs[0].Name || r.Env.Brokers != runs[0].Env.Brokers {
			return nil, fmt.Errorf("%w: run %d is %q on %d brokers, run 1 %q on %d: merge runs of one spec", ErrInput, i+1, r.Name, r.Env.Brokers, runs[0].Name, runs[0].Env.Brokers)
		}
		for _, s := range r.Sections {
			si := -1
			for j := range out.Sections {
				if out.Sections[j].Name == s.Name {
					si = j
				}
			}
			if si < 0 {
				out.Sections = append(out.Sections, result.Section{Name: s.Name, Factors: s.Factors, Baseline: s.Baseline, OwnReport: s.OwnReport})
				si = len(out.Sections) - 1
			}
			for _, p := range s.Points {
				key := [2]string{s.Name, p.ID}
				if q, ok := index[key]; ok {
					q.Reps = append(q.Reps, p.Reps...)
					continue
				}
				sec := &out.Sections[si]
				sec.Points = append(sec.Points, result.Point{ID: p.ID, Factors: p.Factors, Reps: append([]result.Rep(nil), p.Reps...)})
				// Pointers into sec.Points move when it grows: re-index.
				for k := range sec.Points {
					index[[2]string{s.Name, sec.Points[k].ID}] = &sec.Points[k]
				}
			}
		}
	}
	return &out, nil
}
