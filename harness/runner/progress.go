package runner

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress reports a run's advance on stderr: on a terminal, a bar per
// point with its elapsed and remaining time; elsewhere (CI logs, pipes),
// one line per finished point. Either way each finished point prints a
// summary line with the run's elapsed time and an estimate of what is left,
// scaled by how the finished points compared with their estimates.
type progress struct {
	w        io.Writer
	term     bool
	start    time.Time
	total    int           // load points in the run
	done     int           // load points finished
	left     time.Duration // estimated load time of the points not started
	spent    time.Duration // actual time of the finished points
	expected time.Duration // their estimates
}

// isTerminal reports whether w is a terminal (bars redraw in place only
// there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newProgress(w io.Writer, terminal bool, points int, estimate time.Duration) *progress {
	if w == nil {
		w = io.Discard
	}
	return &progress{w: w, term: terminal, start: time.Now(), total: points, left: estimate}
}

// remaining estimates the time the run still needs after the current point,
// scaling the estimates by what the finished points took.
func (p *progress) remaining() time.Duration {
	scale := 1.0
	if p.expected > 0 {
		scale = float64(p.spent) / float64(p.expected)
	}
	return time.Duration(float64(p.left) * scale).Round(time.Second)
}

// pointProgress is the advance of one point.
type pointProgress struct {
	p        *progress
	label    string
	begin    time.Time
	expected time.Duration

	mu   sync.Mutex
	bar  *progressbar.ProgressBar
	stop chan struct{}
	wg   sync.WaitGroup
}

// point starts reporting a point expected to take about expected.
func (p *progress) point(label string, expected time.Duration) *pointProgress {
	p.left -= expected
	pp := &pointProgress{p: p, label: fmt.Sprintf("[%d/%d] %s", p.done+1, p.total, label), begin: time.Now(), expected: expected}
	if !p.term {
		return pp
	}
	pp.bar = progressbar.NewOptions64(max(expected.Milliseconds(), 1),
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(pp.label),
		progressbar.OptionSetWidth(24),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true),
	)
	pp.stop = make(chan struct{})
	pp.wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-pp.stop:
				return
			case <-tick.C:
				// The bar follows the clock, short of the end until the
				// point is really done.
				pp.mu.Lock()
				_ = pp.bar.Set64(min(time.Since(pp.begin).Milliseconds(), pp.bar.GetMax64()-1))
				pp.mu.Unlock()
			}
		}
	})
	return pp
}

// rep notes which repetition runs now.
func (pp *pointProgress) rep(i, n int) {
	if pp.bar == nil {
		return
	}
	pp.mu.Lock()
	pp.bar.Describe(fmt.Sprintf("%s rep %d/%d", pp.label, i+1, n))
	pp.mu.Unlock()
}

// note shows what the point is doing now (a fault lab's latest fault):
// in the bar's description on a terminal, nothing elsewhere.
func (pp *pointProgress) note(s string) {
	if pp.bar == nil {
		return
	}
	pp.mu.Lock()
	pp.bar.Describe(pp.label + ": " + s)
	pp.mu.Unlock()
}

// log reports what a long point is doing now: in the bar's description on
// a terminal, as a line of its own elsewhere (CI logs keep every step).
func (pp *pointProgress) log(s string) {
	if pp.bar != nil {
		pp.note(s)
		return
	}
	fmt.Fprintf(pp.p.w, "  %s: %s\n", pp.label, s)
}

// end finishes the point with a summary line.
func (pp *pointProgress) end(summary string) {
	p := pp.p
	if pp.bar != nil {
		close(pp.stop)
		pp.wg.Wait()
		_ = pp.bar.Finish()
	}
	took := time.Since(pp.begin)
	p.done++
	p.spent += took
	p.expected += pp.expected
	left := ""
	if p.done < p.total {
		left = fmt.Sprintf(", ~%v left", p.remaining())
	}
	fmt.Fprintf(p.w, "%s: %s in %v (run: %v elapsed%s)\n", pp.label, summary,
		took.Round(100*time.Millisecond), time.Since(p.start).Round(time.Second), left)
}

// probe returns a probe.Progress-shaped callback for a probe section: a bar
// over its repetitions on a terminal, nothing elsewhere; and the function
// that ends it with a summary line.
func (p *progress) probe(name string) (func(done, total int, label string), func(summary string)) {
	begin := time.Now()
	var bar *progressbar.ProgressBar
	update := func(done, total int, label string) {
		if !p.term || total <= 0 {
			return
		}
		if bar == nil {
			bar = progressbar.NewOptions(total,
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetWidth(24),
				progressbar.OptionSetElapsedTime(true),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionClearOnFinish(),
			)
		}
		bar.Describe("probe " + name + ": " + label)
		_ = bar.Set(done)
	}
	end := func(summary string) {
		if bar != nil {
			_ = bar.Finish()
		}
		fmt.Fprintf(p.w, "probe %s: %s in %v\n", name, summary, time.Since(begin).Round(100*time.Millisecond))
	}
	return update, end
}
