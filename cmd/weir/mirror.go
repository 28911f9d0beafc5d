package main

// `weir mirror`: copy topics from one Kafka-protocol cluster to another
// (package transport/mirror), and `weir mirror status` / `weir mirror
// translate` to look at a mirror from the two clusters.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/term"
	"gopkg.in/yaml.v3"

	"github.com/weir-broker/weir/transport/mirror"
)

// mirrorFlags are the flags `weir mirror` and its subcommands share.
type mirrorFlags struct {
	config      string
	source      string
	target      string
	topics      string
	exclude     string
	sourceAlias string
	targetAlias string
	name        string
	// TLS and SASL of each cluster: --source-security-protocol, ...,
	// --target-security-protocol, ... (client_security.go).
	sourceSec, targetSec clientSecurity
}

func (f *mirrorFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "YAML `file` whose keys are flag names (source, target, topics, commit-interval, ...); flags given win")
	fs.StringVar(&f.source, "source", "", "source cluster bootstrap `addresses` (host:port, comma-separated)")
	fs.StringVar(&f.target, "target", "", "target cluster bootstrap `addresses` (host:port, comma-separated)")
	fs.StringVar(&f.topics, "topics", "", "regular `expression` of source topics to mirror, matched against whole names")
	fs.StringVar(&f.exclude, "exclude", mirror.DefaultExclude, "regular `expression` of source topics never mirrored")
	fs.StringVar(&f.sourceAlias, "source-alias", "", "prefix target topic names with `alias`. (default: same names)")
	fs.StringVar(&f.targetAlias, "target-alias", "", "skip source topics named `alias`.* (they came from the target), so two-way mirroring cannot loop")
	fs.StringVar(&f.name, "name", mirror.DefaultName, "the mirror's `name`: its group on the target holds its positions, <name>.offset-syncs its offset syncs")
	f.sourceSec.prefix, f.targetSec.prefix = "source-", "target-"
	f.sourceSec.add(fs)
	f.targetSec.add(fs)
}

// mirrorConfig returns the library config of f (after the config file
// merged in), with the client options of --source-security-protocol, ...;
// its errors wrap errBadFlag.
func (f *mirrorFlags) mirrorConfig() (mirror.Config, error) {
	for _, sec := range []*clientSecurity{&f.sourceSec, &f.targetSec} {
		if err := sec.build(); err != nil {
			return mirror.Config{}, err
		}
	}
	return mirror.Config{Source: splitList(f.source), Target: splitList(f.target), Topics: f.topics,
		Exclude: f.exclude, SourceAlias: f.sourceAlias, TargetAlias: f.targetAlias, Name: f.name,
		SourceOpts: f.sourceSec.opts, TargetOpts: f.targetSec.opts}, nil
}

func splitList(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// applyConfigFile sets every flag the YAML file names and the command line
// did not. Keys that are flags of `weir mirror` only (parent, for the
// subcommands, which share its file) are skipped.
func applyConfigFile(fs *pflag.FlagSet, path string, parent *pflag.FlagSet) error {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w --config: %w", errBadFlag, err)
	}
	var kv map[string]any
	if err := yaml.Unmarshal(data, &kv); err != nil {
		return fmt.Errorf("%w --config %s: %w", errBadFlag, path, err)
	}
	for k, v := range kv {
		fl := fs.Lookup(k)
		if fl == nil && parent != nil && parent.Lookup(k) != nil {
			continue
		}
		if fl == nil || k == "config" {
			return fmt.Errorf("%w --config %s: unknown key %q (keys are flag names)", errBadFlag, path, k)
		}
		if fl.Changed {
			continue
		}
		s := fmt.Sprint(v)
		if list, ok := v.([]any); ok {
			parts := make([]string, len(list))
			for i, x := range list {
				parts[i] = fmt.Sprint(x)
			}
			s = strings.Join(parts, ",")
		}
		if err := fs.Set(k, s); err != nil {
			return fmt.Errorf("%w --config %s: %s: %w", errBadFlag, path, k, err)
		}
	}
	return nil
}

const mirrorLong = `Copy topics from a source cluster to a target cluster, both speaking the
Kafka protocol (weir or Kafka), until interrupted: partition p to partition
p, with keys, headers and timestamps; target topics are created with the
source's partition count and topic configs, and new source topics and
partitions are picked up every --refresh-interval.

Delivery is at least once: the mirror's position in each source partition
is committed (to the group --name on the target) only after the target
acknowledged every record before it (acks=all, idempotent producer), so a
killed mirror restarts without losing a record. With --exactly-once, each
--commit-interval is one transaction on the target holding the records and
the positions: read_committed consumers of the target see every record
exactly once. A partition whose records
the target refuses is reported with its topic and partition and retried
with backoff, while the others go on.

The mirror also writes offset syncs to <name>.offset-syncs on the target,
one every --offset-sync-interval records, with which consumer groups are
translated to the target ('weir mirror translate', or --sync-groups to do
it continuously): a group moved to the target may re-read fewer than
--offset-sync-interval records per partition and skips none.

In a terminal a progress line shows throughput and lag; --metrics-listen
serves them, per partition, as Prometheus metrics.

Each cluster is reached over TLS and SASL with the security flags of weir
produce and consume, prefixed by source- or target-
(--source-security-protocol SASL_SSL, --target-ssl-ca-file, ...). Keep
passwords in the --config file (source-sasl-password: ...), out of sight of
ps.`

const mirrorExample = `  weir mirror --source 10.0.0.1:9092 --target 10.0.1.1:9092 --topics 'events|orders'
  weir mirror --source a:9092 --target b:9092 --topics '.*' --source-alias dc1 --metrics-listen :9100
  weir mirror --config dr.yaml --source a:9093 --target b:9093 --source-security-protocol SASL_SSL \
    --source-sasl-user mirror --target-security-protocol SSL --target-ssl-ca-file ca.pem
  weir mirror status --source a:9092 --target b:9092 --topics '.*'
  weir mirror translate --source a:9092 --target b:9092 --topics '.*' --group billing --commit`

func newMirrorCmd() *cobra.Command {
	var f mirrorFlags
	var (
		fromLatest       bool
		syncInterval     int64
		commitInterval   time.Duration
		refreshInterval  time.Duration
		syncGroups       string
		groupsInterval   time.Duration
		compression      string
		replication      int16
		metricsListen    string
		progress         string
		logLevel         string
		backoffMin, bMax time.Duration
		exactlyOnce      bool
		forward          bool
	)
	cmd := &cobra.Command{
		Use:     "mirror --source ADDRS --target ADDRS --topics REGEX [flags]",
		Short:   "Copy topics from one cluster to another, at least or exactly once",
		Long:    mirrorLong,
		Example: mirrorExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyConfigFile(cmd.Flags(), f.config, nil); err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			logger, err := newLogger(stderr, logLevel, "text")
			if err != nil {
				return fmt.Errorf("%w %w", errBadFlag, err)
			}
			showProgress, err := progressWanted(progress, stderr)
			if err != nil {
				return err
			}
			cfg, err := f.mirrorConfig()
			if err != nil {
				return err
			}
			cfg.StartAtLatest = fromLatest
			cfg.OffsetSyncInterval = syncInterval
			cfg.CommitInterval = commitInterval
			cfg.RefreshInterval = refreshInterval
			cfg.SyncGroups = syncGroups
			cfg.SyncGroupsInterval = groupsInterval
			cfg.Compression = compression
			cfg.ReplicationFactor = replication
			cfg.BackoffMin, cfg.BackoffMax = backoffMin, bMax
			cfg.ExactlyOnce = exactlyOnce
			cfg.Forward = forward
			cfg.Logger = logger
			reg := prometheus.NewRegistry()
			cfg.Registerer = reg
			m, err := mirror.New(cfg)
			if err != nil {
				return fmt.Errorf("%w %w", errBadFlag, err)
			}
			defer m.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if metricsListen != "" {
				addr, stopMetrics, err := serveMetrics(metricsListen, reg, logger)
				if err != nil {
					return err
				}
				defer stopMetrics()
				logger.Info("mirror: metrics endpoint", "metrics", addr)
			}
			logger.Info("mirror: started", "source", cfg.Source, "target", cfg.Target, "topics", cfg.Topics, "name", cfg.Name)
			if showProgress {
				done, finished := make(chan struct{}), make(chan struct{})
				defer func() {
					close(done)
					<-finished
				}()
				go func() {
					defer close(finished)
					progressLoop(m, stderr, done)
				}()
			}
			return m.Run(ctx)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	f.add(fs)
	fs.BoolVar(&fromLatest, "from-latest", false, "start partitions the mirror never committed at the source's end (default: its beginning)")
	fs.Int64Var(&syncInterval, "offset-sync-interval", mirror.DefaultOffsetSyncInterval, "source `records` between two offset syncs of a partition: the most a translated group re-reads")
	fs.DurationVar(&commitInterval, "commit-interval", mirror.DefaultCommitInterval, "how often acknowledged positions are committed: at most this much is copied again after a crash")
	fs.DurationVar(&refreshInterval, "refresh-interval", mirror.DefaultRefreshInterval, "how often source topics are listed for new topics and partitions")
	fs.StringVar(&syncGroups, "sync-groups", "", "regular `expression` of source groups whose translated offsets are committed to the same groups on the target (when empty there)")
	fs.DurationVar(&groupsInterval, "sync-groups-interval", mirror.DefaultSyncGroupsInterval, "how often --sync-groups translates")
	fs.BoolVar(&exactlyOnce, "exactly-once", false, "one target transaction per --commit-interval holding the records and the positions: none lost, none duplicated for read_committed readers (the target must serve transactions)")
	fs.BoolVar(&forward, "forward", false, "send source batches byte for byte, compression kept (faster; not with --exactly-once, not for compacted topics; --compression unused)")
	fs.StringVar(&compression, "compression", mirror.DefaultCompression, "producer `codec`: none, gzip, snappy, lz4 or zstd")
	fs.Int16Var(&replication, "replication-factor", -1, "replication `factor` of created target topics; -1: the target's default")
	fs.DurationVar(&backoffMin, "backoff-min", mirror.DefaultBackoffMin, "first wait before a failed partition is retried; doubles per failure")
	fs.DurationVar(&bMax, "backoff-max", mirror.DefaultBackoffMax, "longest wait before a failed partition is retried")
	fs.StringVar(&metricsListen, "metrics-listen", "", "`host:port` serving Prometheus metrics at /metrics (default: off)")
	fs.StringVar(&progress, "progress", "auto", "progress line on stderr: auto (in a terminal), always or never")
	fs.StringVar(&logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	cmd.AddCommand(newMirrorStatusCmd(), newMirrorTranslateCmd())
	return cmd
}

func progressWanted(mode string, w io.Writer) (bool, error) {
	switch mode {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto":
		fl, ok := w.(*os.File)
		return ok && term.IsTerminal(int(fl.Fd())), nil
	}
	return false, fmt.Errorf("%w --progress %q: want auto, always or never", errBadFlag, mode)
}

// progressLoop redraws one line every second until done, and once more
// then (rates over the whole run), ending it with a newline.
func progressLoop(m *mirror.Mirror, w io.Writer, done <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last mirrorTotals
	start := time.Now()
	lastAt := start
	for {
		select {
		case <-done:
			fmt.Fprintf(w, "\r\033[K%s\n", progressLine(totals(m.Status()), mirrorTotals{}, time.Since(start)))
			return
		case now := <-tick.C:
			cur := totals(m.Status())
			fmt.Fprintf(w, "\r\033[K%s", progressLine(cur, last, now.Sub(lastAt)))
			last, lastAt = cur, now
		}
	}
}

// mirrorTotals sums a Status.
type mirrorTotals struct {
	partitions, failing int
	records, bytes, lag int64
	lagSeconds          float64
	errors, fetchErrors int64
}

func totals(st []mirror.PartitionStatus) mirrorTotals {
	var t mirrorTotals
	for _, s := range st {
		t.partitions++
		t.records += s.Records
		t.bytes += s.Bytes
		t.lag += s.LagRecords
		t.lagSeconds = max(t.lagSeconds, s.LagSeconds)
		t.errors += s.Errors
		t.fetchErrors += s.FetchErrors
		if s.Retrying {
			t.failing++
		}
	}
	return t
}

// progressLine is the terminal progress line: totals, the rates since the
// previous line, the lag, and the partitions retrying after errors.
func progressLine(cur, prev mirrorTotals, elapsed time.Duration) string {
	secs := max(elapsed.Seconds(), 1e-3)
	line := fmt.Sprintf("mirrored %d records (%.1f MB) in %d partitions, %.0f rec/s %.1f MB/s, lag %d records %.1fs",
		cur.records, float64(cur.bytes)/1e6, cur.partitions,
		float64(cur.records-prev.records)/secs, float64(cur.bytes-prev.bytes)/1e6/secs, cur.lag, cur.lagSeconds)
	if cur.failing > 0 || cur.errors > 0 {
		line += fmt.Sprintf(", %d partitions retrying (%d records refused)", cur.failing, cur.errors)
	}
	return line
}

// serveMetrics serves reg at /metrics on addr until stop.
func serveMetrics(addr string, reg *prometheus.Registry, logger *slog.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics endpoint stopped", "err", err)
		}
	}()
	return ln.Addr().String(), func() { srv.Close() }, nil
}

func newMirrorStatusCmd() *cobra.Command {
	var f mirrorFlags
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status --source ADDRS --target ADDRS --topics REGEX [flags]",
		Short: "Show a mirror's position and lag per partition, read from the two clusters",
		Long: `Show, for each partition of the source topics a mirror copies, the position
the mirror committed on the target (group --name), the source's end, and the
lag in records and in seconds (the age of the first source record not yet
mirrored). It needs no running mirror; a running one's throughput and errors
are in its progress line and metrics.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyConfigFile(cmd.Flags(), f.config, cmd.Parent().Flags()); err != nil {
				return err
			}
			cfg, err := f.mirrorConfig()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			st, err := mirror.ReadStatus(ctx, cfg)
			if err != nil {
				return err
			}
			return writeMirrorStatus(cmd.OutOrStdout(), st)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	f.add(fs)
	fs.DurationVar(&timeout, "timeout", 30*time.Second, "give up after this `duration`")
	return cmd
}

func writeMirrorStatus(w io.Writer, st []mirror.PartitionStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tTARGET TOPIC\tPOSITION\tEND\tLAG\tLAG SECONDS\t")
	var lag int64
	for _, s := range st {
		pos, secs := "-", "-"
		if s.Committed >= 0 {
			pos = strconv.FormatInt(s.Committed, 10)
		}
		if s.LagSeconds >= 0 {
			secs = strconv.FormatFloat(s.LagSeconds, 'f', 1, 64)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%s\t\n", s.Topic, s.Partition, s.TargetTopic, pos, s.End, s.LagRecords, secs)
		lag += s.LagRecords
	}
	fmt.Fprintf(tw, "total\t%d\t\t\t\t%d\t\t\n", len(st), lag)
	return tw.Flush()
}

func newMirrorTranslateCmd() *cobra.Command {
	var f mirrorFlags
	var group string
	var commit bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "translate --source ADDRS --target ADDRS --topics REGEX --group GROUP [--commit]",
		Short: "Translate a source consumer group's offsets to the target",
		Long: `Translate the committed offsets of consumer group --group on the source to
target offsets with the mirror's offset syncs, conservatively: a consumer
starting there may re-read fewer than the mirror's --offset-sync-interval
records per partition, and skips none. With --commit the offsets are
committed to the same group on the target, unless it has members there
or is already further on; its consumers can then fail over to the target.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyConfigFile(cmd.Flags(), f.config, cmd.Parent().Flags()); err != nil {
				return err
			}
			if group == "" {
				return fmt.Errorf("%w --group: required", errBadFlag)
			}
			cfg, err := f.mirrorConfig()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			src, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Source...)}, cfg.SourceOpts...)...)
			if err != nil {
				return err
			}
			defer src.Close()
			tgt, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Target...)}, cfg.TargetOpts...)...)
			if err != nil {
				return err
			}
			defer tgt.Close()
			syncs, err := mirror.ReadSyncs(ctx, tgt, cfg.SyncTopic())
			if err != nil {
				return err
			}
			tr, err := mirror.TranslateGroup(ctx, cfg, src, syncs, group)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tTARGET TOPIC\tSOURCE OFFSET\tTARGET OFFSET\t")
			for _, o := range tr.Offsets {
				t := "-"
				if o.OK {
					t = strconv.FormatInt(o.Target, 10)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t\n", o.Topic, o.Partition, o.TargetTopic, o.Source, t)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if commit {
				n, err := mirror.CommitTranslation(ctx, tgt, tr)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "committed %d partitions of group %s on the target\n", n, group)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	f.add(fs)
	fs.StringVar(&group, "group", "", "source consumer `group` to translate")
	fs.BoolVar(&commit, "commit", false, "commit the translated offsets to the same group on the target")
	fs.DurationVar(&timeout, "timeout", 30*time.Second, "give up after this `duration`")
	return cmd
}
