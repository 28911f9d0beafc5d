package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/harness/load"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// broker is a `weir broker` subprocess serving one matrix point, with its
// /metrics endpoint for Sample.
type broker struct{ *brokerproc.Process }

// startBroker starts `weir broker` with its data in dataDir (see package
// brokerproc), with env added to its environment and, when openFiles > 0,
// that open-file limit; errors wrap ErrBroker.
func startBroker(ctx context.Context, weir, dataDir string, flags, env []string, openFiles int) (*broker, error) {
	return startBrokerOpts(ctx, brokerproc.Options{Weir: weir, DataDir: dataDir, Flags: flags, Env: env, OpenFilesLimit: openFiles})
}

// startBrokerOpts starts `weir broker` with o and its /metrics endpoint;
// errors wrap ErrBroker.
func startBrokerOpts(ctx context.Context, o brokerproc.Options) (*broker, error) {
	o.Metrics = true
	p, err := brokerproc.Start(ctx, o)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrBroker, err)
	}
	return &broker{p}, nil
}

// stop stops the broker gracefully; an unclean exit is an error wrapping
// ErrBroker.
func (b *broker) stop() error {
	if err := b.Stop(); err != nil {
		return fmt.Errorf("%w: %w", ErrBroker, err)
	}
	return nil
}

// Sample implements load.BrokerStats: CPU time and bytes written from
// /proc/<pid>, fsyncs and stored bytes of the topics from /metrics.
func (b *broker) Sample(ctx context.Context, topics []string) (load.BrokerSample, error) {
	s, _, err := sampleProcess(ctx, b.Process, topics)
	return s, err
}

// sampleProcess reads one broker process's counters (see Sample), and the
// stored bytes of each of the topics' partitions it holds, by
// "topic/partition".
func sampleProcess(ctx context.Context, p *brokerproc.Process, topics []string) (load.BrokerSample, map[string]int64, error) {
	pid := p.Pid()
	var s load.BrokerSample
	var err error
	if s.CPUSeconds, err = procCPUSeconds(pid); err != nil {
		return s, nil, err
	}
	s.WriteBytes = procWriteBytes(pid)
	ms, err := scrape(ctx, p.MetricsAddr)
	if err != nil {
		return s, nil, err
	}
	sizes := map[string]int64{}
	for _, m := range ms {
		if !slices.Contains(topics, m.labels["topic"]) {
			continue
		}
		switch m.name {
		case "weir_partition_fsyncs_total":
			s.Fsyncs += int64(m.value)
		case "weir_partition_size_bytes":
			s.StoredBytes += int64(m.value)
			sizes[m.labels["topic"]+"/"+m.labels["partition"]] = int64(m.value)
		}
	}
	return s, sizes, nil
}

// procCPUSeconds reads utime+stime (fields 14 and 15) of /proc/<pid>/stat.
func procCPUSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBroker, err)
	}
	return parseStatCPU(string(data))
}

func parseStatCPU(stat string) (float64, error) {
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after the last ')'.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: /proc stat without a command name", ErrBroker)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: /proc stat has %d fields", ErrBroker, len(f)+2)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("%w: /proc stat: %w", ErrBroker, err)
	}
	return float64(utime+stime) / clockTicks, nil
}

// procWriteBytes reads write_bytes of /proc/<pid>/io: bytes the process
// caused to be sent to the storage layer. -1 when the kernel does not
// account I/O or does not let this process read it.
func procWriteBytes(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return -1
	}
	return parseIOWriteBytes(string(data))
}

func parseIOWriteBytes(io string) int64 {
	for line := range strings.SplitSeq(io, "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// metric is one sample of the Prometheus text format.
type metric struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads the weir_partition_ samples of the /metrics endpoint at
// addr.
func scrape(ctx context.Context, addr string) ([]metric, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBroker, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: metrics: %w", ErrBroker, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: metrics: %s", ErrBroker, resp.Status)
	}
	return parseMetrics(resp.Body, "weir_partition_")
}

// parseMetrics reads the samples of the Prometheus text format whose names
// start with prefix. Comments and other samples are skipped.
func parseMetrics(r io.Reader, prefix string) ([]metric, error) {
	var out []metric
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		m := metric{labels: map[string]string{}}
		rest := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			m.name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				return nil, fmt.Errorf("%w: metrics: unterminated labels: %q", ErrBroker, line)
			}
			if err := parseLabels(rest[1:end], m.labels); err != nil {
				return nil, fmt.Errorf("%w: metrics: %q: %w", ErrBroker, line, err)
			}
			rest = rest[end+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("%w: metrics: no value: %q", ErrBroker, line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%w: metrics: %q: %w", ErrBroker, line, err)
		}
		m.value = v
		out = append(out, m)
	}
	return out, sc.Err()
}

// parseLabels reads name="value",... with Prometheus' escapes.
func parseLabels(s string, into map[string]string) error {
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimLeft(strings.TrimSpace(s), ",") {
		name, rest, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(rest, `"`) {
			return fmt.Errorf("bad label %q", s)
		}
		var v strings.Builder
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(rest[i])
				}
				continue
			}
			v.WriteByte(rest[i])
		}
		if i >= len(rest) {
			return fmt.Errorf("unterminated label value in %q", s)
		}
		into[strings.TrimSpace(name)] = v.String()
		s = rest[i+1:]
	}
	return nil
}
