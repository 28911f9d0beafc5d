package scale

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/harness/procstat"
	"github.com/weir-broker/weir/harness/stats"
)

// Outcome is what a run measured, up to the step that failed.
type Outcome struct {
	// Metrics are the figures, by the names the package doc lists.
	Metrics map[string]float64
	// Limit is the broker's open-file limit, read from its /proc.
	Limit procstat.Limit
	// Budget is the broker's descriptor budget, its --max-open-files flag
	// (also the fd-budget metric); 0 when the flags give none, and the
	// open-file limit is then the only bound.
	Budget int
}

// sampleEvery is how often the broker's descriptors and peak memory are
// sampled over the whole run (fds-max, hwm-max-MiB).
const sampleEvery = 250 * time.Millisecond

// pollEvery paces the polls of a restarting broker.
const pollEvery = 10 * time.Millisecond

// Run runs the steps against a fresh broker. The Outcome holds the
// figures of every step that ran, also when one failed: the error is then
// a *StepError (errors.Is ErrStep). ctx ends the run at once.
func Run(ctx context.Context, cfg Config) (*Outcome, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, out: &Outcome{Metrics: map[string]float64{}}, progress: cfg.Progress}
	if r.progress == nil {
		r.progress = func(string) {}
	}
	r.m = r.out.Metrics
	r.layout()
	err := r.steps(ctx)
	if r.sampler != nil {
		r.sampler()
	}
	if r.broker != nil {
		stopErr := r.broker.Stop()
		if err == nil && stopErr != nil {
			err = fmt.Errorf("%w: the broker did not stop cleanly after the last step: %w", ErrStep, stopErr)
		}
	}
	if ctx.Err() != nil {
		return r.out, context.Cause(ctx)
	}
	return r.out, err
}

// run is the state of one Run.
type run struct {
	cfg      Config
	out      *Outcome
	m        map[string]float64
	progress func(string)

	topics []string // names, in creation order
	sizes  []int32  // partitions of each

	advanced atomic.Int64 // when advance last passed a message on, Unix nanoseconds

	broker  *brokerproc.Process // the broker holding the N partitions
	pid     atomic.Int64        // its pid, for the sampler
	sampler func()              // stops the sampler
	fdsMax  atomic.Int64
	hwmMax  atomic.Int64
}

// advanceEvery spaces the messages of a long step's advance.
const advanceEvery = 5 * time.Second

// advance passes on a message of a long step's advance, at most one per
// advanceEvery.
func (r *run) advance(msg string) {
	now := time.Now().UnixNano()
	if last := r.advanced.Load(); now-last >= int64(advanceEvery) && r.advanced.CompareAndSwap(last, now) {
		r.progress(msg)
	}
}

// layout names the topics: N partitions in topics of PartitionsPerTopic,
// the last one smaller when N is not a multiple.
func (r *run) layout() {
	ppt := r.cfg.Scale.PartitionsPerTopic
	for left, i := r.cfg.Partitions, 0; left > 0; i++ {
		n := min(left, ppt)
		r.topics = append(r.topics, fmt.Sprintf("%s-%06d", r.cfg.TopicPrefix, i))
		r.sizes = append(r.sizes, int32(n))
		left -= n
	}
}

// index is the global index of a partition (topic order, then partition),
// or -1 for a topic not of this run.
func (r *run) index(topic string, partition int32) int {
	suffix, ok := strings.CutPrefix(topic, r.cfg.TopicPrefix+"-")
	if !ok {
		return -1
	}
	t, err := strconv.Atoi(suffix)
	if err != nil || t < 0 || t >= len(r.topics) || partition < 0 || partition >= r.sizes[t] {
		return -1
	}
	return t*r.cfg.Scale.PartitionsPerTopic + int(partition)
}

// at returns the topic and partition of global index i.
func (r *run) at(i int) (string, int32) {
	ppt := r.cfg.Scale.PartitionsPerTopic
	return r.topics[i/ppt], int32(i % ppt)
}

func (r *run) steps(ctx context.Context) error {
	sc := r.cfg.Scale
	type step struct {
		n  int
		on bool
		fn func(context.Context) error
	}
	for _, s := range []step{
		{StepCreate, true, r.create},
		{StepMetadata, true, r.metadata},
		{StepRecords, true, r.records},
		{StepCleanRestart, sc.Restarts > 0, func(ctx context.Context) error { return r.restarts(ctx, true) }},
		{StepUncleanRestart, sc.Restarts > 0, func(ctx context.Context) error { return r.restarts(ctx, false) }},
		{StepSessions, sc.SessionPartitions > 0, r.sessions},
		{StepHot, sc.HotRounds > 0, r.hot},
	} {
		if !s.on {
			continue
		}
		begin := time.Now()
		r.progress(fmt.Sprintf("step %d: %s", s.n, StepNames[s.n]))
		err := s.fn(ctx)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err != nil {
			return &StepError{Step: s.n, Err: fmt.Errorf("%w%s", err, r.brokerNote())}
		}
		r.progress(fmt.Sprintf("step %d done in %v", s.n, time.Since(begin).Round(10*time.Millisecond)))
	}
	return nil
}

// brokerNote says how the broker ended when it is no longer running, or
// else how many descriptors it holds, and what its log (warnings and
// errors) ends with, for a step's error.
func (r *run) brokerNote() string {
	if r.broker == nil {
		return ""
	}
	out := r.broker.Output()
	var logged string
	if n := strings.Count(out, "too many open files"); n > 0 {
		logged = fmt.Sprintf("; its log's last 16 KiB report \"too many open files\" %d times", n)
	}
	lines := strings.Split(out, "\n")
	if len(lines) > 2 {
		lines = lines[len(lines)-2:]
	}
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400] + "…"
		}
	}
	tail := strings.Join(lines, "\n")
	select {
	case <-r.broker.Exited():
		return fmt.Sprintf(" (the broker exited: %v%s; %s)", r.broker.ExitErr(), logged, tail)
	default:
		held := ""
		if n, err := procstat.OpenFDs(r.broker.Pid()); err == nil {
			held = fmt.Sprintf(", holding %d open descriptors (limit: %s)", n, r.out.Limit)
		}
		return fmt.Sprintf(" (the broker is running%s%s; its log ends: %s)", held, logged, tail)
	}
}

// startBroker starts a broker on dir; listen "" picks a free port.
func (r *run) startBroker(ctx context.Context, dir, listen string, timeout time.Duration) (*brokerproc.Process, error) {
	return brokerproc.Start(ctx, brokerproc.Options{
		Weir: r.cfg.Weir, DataDir: dir, Flags: r.cfg.BrokerFlags, Env: r.cfg.BrokerEnv, OpenFilesLimit: r.cfg.OpenFilesLimit,
		Listen: listen, Pprof: true, StartTimeout: timeout, StopTimeout: r.cfg.Scale.RestartTimeout,
	})
}

// use makes p the broker measured: the sampler follows it.
func (r *run) use(p *brokerproc.Process) {
	r.broker = p
	r.pid.Store(int64(p.Pid()))
	if r.sampler != nil {
		return
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			pid := int(r.pid.Load())
			if n, err := procstat.OpenFDs(pid); err == nil {
				for old := r.fdsMax.Load(); int64(n) > old && !r.fdsMax.CompareAndSwap(old, int64(n)); old = r.fdsMax.Load() {
				}
			}
			if m, err := procstat.ReadMemory(pid); err == nil && m.HWM > r.hwmMax.Load() {
				r.hwmMax.Store(m.HWM)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	r.sampler = func() {
		close(stop)
		wg.Wait()
		if n := r.fdsMax.Load(); n > 0 {
			r.m[MetricFDsMax] = float64(n)
		}
		if h := r.hwmMax.Load(); h > 0 {
			r.m[MetricHWMMax] = toMiB(h)
		}
	}
}

// Metrics of the whole run.
const (
	MetricFDsMax         = "fds-max"
	MetricHWMMax         = "hwm-max-MiB"
	MetricOpenFilesLimit = "open-files-limit"
	MetricFDBudget       = "fd-budget"
)

func toMiB(b int64) float64 { return float64(b) / (1 << 20) }

// client is a kgo client of the measured broker; opts add to the seed.
func (r *run) client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(r.broker.Addr),
		// Raw Fetch requests name topics (up to v12), not topic ids.
		kgo.MaxVersions(fetchByName()),
		kgo.RequestTimeoutOverhead(30 * time.Second),
	}, opts...)...)
}

func fetchByName() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(1, 12)
	return v
}

// measure reads the broker's descriptors, memory, threads and goroutines
// into metrics suffixed with at ("created", "clean-restart"). A figure
// that cannot be read is left out, never guessed.
func (r *run) measure(ctx context.Context, at string) string {
	pid := r.broker.Pid()
	var parts []string
	if n, err := procstat.OpenFDs(pid); err == nil {
		r.m["fds-"+at] = float64(n)
		parts = append(parts, fmt.Sprintf("%d fds", n))
		// The sampler looks every sampleEvery; a count read here is
		// held too, whether or not a sample caught it.
		for old := r.fdsMax.Load(); int64(n) > old && !r.fdsMax.CompareAndSwap(old, int64(n)); old = r.fdsMax.Load() {
		}
	}
	if m, err := procstat.ReadMemory(pid); err == nil {
		r.m["rss-"+at+"-MiB"] = toMiB(m.RSS)
		r.m["hwm-"+at+"-MiB"] = toMiB(m.HWM)
		r.m["threads-"+at] = float64(m.Threads)
		parts = append(parts, fmt.Sprintf("RSS %.0f MiB (peak %.0f)", toMiB(m.RSS), toMiB(m.HWM)))
	}
	if g, err := goroutines(ctx, r.broker.PprofAddr); err == nil {
		r.m["goroutines-"+at] = float64(g)
		parts = append(parts, fmt.Sprintf("%d goroutines", g))
	} else {
		parts = append(parts, fmt.Sprintf("goroutines unknown (%v)", err))
	}
	return strings.Join(parts, ", ")
}

// goroutines reads the goroutine count from the first line of the pprof
// goroutine profile ("goroutine profile: total N").
func goroutines(ctx context.Context, addr string) (int, error) {
	if addr == "" {
		return 0, errors.New("no pprof endpoint")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("pprof: %s", resp.Status)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("pprof: %w", err)
	}
	return parseGoroutines(line)
}

func parseGoroutines(line string) (int, error) {
	v, ok := strings.CutPrefix(strings.TrimSpace(line), "goroutine profile: total ")
	n, err := strconv.Atoi(v)
	if !ok || err != nil {
		return 0, fmt.Errorf("pprof: unexpected first line %q", line)
	}
	return n, nil
}

// Step 1.
func (r *run) create(ctx context.Context) error {
	sc := r.cfg.Scale
	ctx, cancel := context.WithTimeout(ctx, sc.StepTimeout)
	defer cancel()
	p, err := r.startBroker(ctx, filepath.Join(r.cfg.DataDir, "main"), "", brokerproc.DefaultStartTimeout)
	if err != nil {
		return fmt.Errorf("the broker did not start: %w", err)
	}
	r.use(p)
	if l, err := procstat.OpenFilesLimit(p.Pid()); err == nil {
		r.out.Limit = l
		r.m[MetricOpenFilesLimit] = float64(l.Soft)
	}
	if b := flagBudget(r.cfg.BrokerFlags); b > 0 {
		r.out.Budget = b
		r.m[MetricFDBudget] = float64(b)
	}
	r.progress(fmt.Sprintf("step 1: broker up (open-file limit %s); %s", r.out.Limit, r.measure(ctx, "empty")))
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	timeout := int32(min(sc.RequestTimeout.Milliseconds(), math.MaxInt32))
	created := 0
	begin := time.Now()
	for b := 0; b < len(r.topics); b += sc.CreateBatch {
		end := min(b+sc.CreateBatch, len(r.topics))
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = timeout
		want := 0
		for i := b; i < end; i++ {
			t := kmsg.NewCreateTopicsRequestTopic()
			t.Topic, t.NumPartitions, t.ReplicationFactor = r.topics[i], r.sizes[i], 1
			req.Topics = append(req.Topics, t)
			want += int(r.sizes[i])
		}
		rctx, rcancel := context.WithTimeout(ctx, sc.RequestTimeout)
		resp, err := req.RequestWith(rctx, cl)
		rcancel()
		if err != nil {
			return fmt.Errorf("CreateTopics for topics %d..%d after %d of %d partitions were created (%v): %w",
				b, end-1, created, r.cfg.Partitions, time.Since(begin).Round(time.Millisecond), err)
		}
		failed, first := 0, ""
		for _, t := range resp.Topics {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				if failed == 0 {
					first = fmt.Sprintf("%s: %v", t.Topic, err)
					if t.ErrorMessage != nil && *t.ErrorMessage != "" {
						first += ": " + *t.ErrorMessage
					}
				}
				failed++
			}
		}
		if failed > 0 || len(resp.Topics) != end-b {
			return fmt.Errorf("CreateTopics for topics %d..%d: %d of %d topics failed (answered %d), the first %s; %d of %d partitions were created before this request",
				b, end-1, failed, end-b, len(resp.Topics), first, created, r.cfg.Partitions)
		}
		created += want
		r.advance(fmt.Sprintf("step 1: created %d of %d partitions (%v)", created, r.cfg.Partitions, time.Since(begin).Round(time.Millisecond)))
	}
	took := time.Since(begin)
	r.m["create-s"] = took.Seconds()
	r.progress(fmt.Sprintf("step 1: %d partitions in %d topics created in %v; %s", created, len(r.topics),
		took.Round(time.Millisecond), r.measure(ctx, "created")))
	return nil
}

// metadataAll sends one Metadata request for every topic and reports how
// many of this run's partitions it lists with a leader and no error.
func (r *run) metadataAll(ctx context.Context, cl *kgo.Client) (led int, resp *kmsg.MetadataResponse, err error) {
	req := kmsg.NewPtrMetadataRequest() // Topics nil: every topic
	resp, err = req.RequestWith(ctx, cl)
	if err != nil {
		return 0, nil, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || kerr.ErrorForCode(t.ErrorCode) != nil {
			continue
		}
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Leader >= 0 && r.index(*t.Topic, p.Partition) >= 0 {
				led++
			}
		}
	}
	return led, resp, nil
}

// Step 2.
func (r *run) metadata(ctx context.Context) error {
	sc := r.cfg.Scale
	ctx, cancel := context.WithTimeout(ctx, sc.StepTimeout)
	defer cancel()
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	var lat []float64
	size := 0
	for i := range sc.MetadataRequests {
		begin := time.Now()
		rctx, rcancel := context.WithTimeout(ctx, sc.RequestTimeout)
		led, resp, err := r.metadataAll(rctx, cl)
		rcancel()
		took := time.Since(begin)
		if err != nil {
			return fmt.Errorf("Metadata request %d of %d: %w", i+1, sc.MetadataRequests, err)
		}
		if led != r.cfg.Partitions {
			return fmt.Errorf("Metadata request %d of %d lists %d of the %d partitions with a leader", i+1, sc.MetadataRequests, led, r.cfg.Partitions)
		}
		lat = append(lat, float64(took.Microseconds())/1000)
		size = len(resp.AppendTo(nil))
	}
	ps, _ := stats.Percentiles(lat, 50, 99)
	r.m["metadata-p50-ms"], r.m["metadata-p99-ms"] = ps[0], ps[1]
	r.m["metadata-response-KiB"] = float64(size) / 1024
	r.progress(fmt.Sprintf("step 2: Metadata for %d partitions: p50 %.1f ms, p99 %.1f ms over %d requests, %d KiB each",
		r.cfg.Partitions, ps[0], ps[1], len(lat), size>>10))
	return nil
}

// Step 3.
func (r *run) records(ctx context.Context) error {
	sc := r.cfg.Scale
	ctx, cancel := context.WithTimeout(ctx, sc.StepTimeout)
	defer cancel()
	n := r.cfg.Partitions
	prod, err := r.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordDeliveryTimeout(sc.StepTimeout))
	if err != nil {
		return err
	}
	defer prod.Close()
	var (
		wg            sync.WaitGroup
		failed, acked atomic.Int64
		firstMu       sync.Mutex
		firstErr      error
		every         = int64(max(n/10, 1))
	)
	begin := time.Now()
	for i := range n {
		topic, part := r.at(i)
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: part, Value: []byte("scale-" + strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				if failed.Add(1) == 1 {
					firstMu.Lock()
					firstErr = err
					firstMu.Unlock()
				}
				return
			}
			if a := acked.Add(1); a%every == 0 {
				r.advance(fmt.Sprintf("step 3: %d of %d records acknowledged", a, n))
			}
		})
	}
	wg.Wait()
	took := time.Since(begin)
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d records were not acknowledged, the first: %w", f, n, firstErr)
	}
	r.m["produce-all-s"] = took.Seconds()
	r.progress(fmt.Sprintf("step 3: one record produced to each of %d partitions in %v", n, took.Round(time.Millisecond)))

	begin = time.Now()
	cons, err := r.client(kgo.ConsumeTopics(r.topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return err
	}
	defer cons.Close()
	seen := make([]bool, n)
	count, extra := 0, 0
	var lastErr error
	for count < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			r.m["records-consumed"] = float64(count)
			msg := fmt.Sprintf("the consumer saw %d of %d partitions' records within %v", count, n, sc.StepTimeout)
			if lastErr != nil {
				msg += fmt.Sprintf("; the last fetch error: %v", lastErr)
			}
			return errors.New(msg)
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				lastErr = err
			}
		})
		before := count
		fs.EachRecord(func(rec *kgo.Record) {
			i := r.index(rec.Topic, rec.Partition)
			switch {
			case i < 0 || seen[i]:
				extra++
			default:
				seen[i] = true
				count++
			}
		})
		if count/int(every) != before/int(every) {
			r.advance(fmt.Sprintf("step 3: the consumer has seen %d of %d", count, n))
		}
	}
	took = time.Since(begin)
	r.m["consume-all-s"] = took.Seconds()
	r.m["records-consumed"] = float64(count)
	if extra > 0 {
		return fmt.Errorf("the consumer saw %d records besides one per partition", extra)
	}
	r.progress(fmt.Sprintf("step 3: one consumer saw all %d records in %v", count, took.Round(time.Millisecond)))
	return nil
}
