package main

// `weir consume`: print a topic's records, kcat style. Without -G it reads
// partitions directly from offsets it resolves itself (so -o and -e are
// exact); with -G it is a group member that commits what it printed.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/kgoadapt"
)

// consumeFlags are the flags of `weir consume`, as given.
type consumeFlags struct {
	client    clientFlags
	partition int32
	offset    string
	count     int64
	exitAtEnd bool
	group     string
	codec     string
	format    string
}

const consumeLong = `Print the records of a topic: each record's value and a newline by default,
or what -f FORMAT says, with kcat's directives: %t topic, %p partition,
%o offset, %k key, %K key size, %s value, %S value size, %T timestamp (ms
since the epoch), %h headers (k=v,k=v), %% a percent sign, and the escapes
\n \r \t \0 \\ \xNN. A null key or value prints as nothing, its size as -1.

-o says where each partition starts: beginning (the default), end, an
absolute offset (one past the end starts at the end), or -N for the last N
records. -e exits once every assigned partition is consumed up to the high
watermark it had when consuming started; -c exits after COUNT records.

With -G the command joins consumer group GROUP, which assigns the partitions
(so -p does not apply) and starts each where the group committed, -o
applying only to partitions without a commit. It commits what it printed
after every batch, so a second run with the same group prints only newer
records.

Batches compressed with a standard codec (gzip, snappy, lz4, zstd) always
decode; --codec names a codec (a built-in, a weir-codec-NAME plugin in
--plugin-dir, or a plugin's path) for batches whose codec id is a custom one
(5-7) or that replaces a standard one.`

const consumeExample = `  weir consume -t events -e
  weir consume -b 127.0.0.1:9092 -t events -o -10 -f '%p/%o %k=%s %h\n'
  weir consume -t events -G audit -e
  WEIR_PLUGIN_DIR=bin/plugins weir consume -t events --codec s2 -c 100`

func newConsumeCmd() *cobra.Command {
	var f consumeFlags
	cmd := &cobra.Command{
		Use:     "consume -t TOPIC [flags]",
		Short:   "Print the records of a topic",
		Long:    consumeLong,
		Example: consumeExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.check(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runConsume(ctx, f, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	f.client.add(fs)
	fs.Int32VarP(&f.partition, "partition", "p", -1, "consume only this `partition`; -1 consumes all")
	fs.StringVarP(&f.offset, "offset", "o", "beginning", "where to start: beginning, end, an `offset`, or -N for the last N records")
	fs.Int64VarP(&f.count, "count", "c", 0, "exit after `count` records (default 0: no limit)")
	fs.BoolVarP(&f.exitAtEnd, "exit", "e", false, "exit at the end: once every assigned partition reached its high watermark at the start")
	fs.StringVarP(&f.group, "group", "G", "", "join consumer `group` and commit what is printed (default: no group)")
	fs.StringVar(&f.codec, "codec", "", "codec `spec` for batches with a custom codec id (default: standard codecs only)")
	f.format = `%s\n`
	fs.VarP(escapedString{&f.format}, "format", "f", "output `format`, see above")
	return cmd
}

// consumeConfig is consumeFlags checked and decoded.
type consumeConfig struct {
	seeds  []string
	start  startAt
	format []formatOp
}

func (f *consumeFlags) check(cmd *cobra.Command) (consumeConfig, error) {
	var cfg consumeConfig
	var err error
	if cfg.seeds, err = f.client.validate(); err != nil {
		return cfg, err
	}
	if cfg.start, err = parseOffset(f.offset); err != nil {
		return cfg, err
	}
	if cfg.format, err = parseFormat(f.format); err != nil {
		return cfg, err
	}
	if f.partition < -1 {
		return cfg, fmt.Errorf("%w -p %d: want a partition number, or -1 for all", errBadFlag, f.partition)
	}
	if f.count < 0 {
		return cfg, fmt.Errorf("%w -c %d: want zero (no limit) or more", errBadFlag, f.count)
	}
	if f.group != "" && cmd.Flags().Changed("partition") {
		return cfg, fmt.Errorf("%w -p with -G: the group assigns the partitions", errBadFlag)
	}
	return cfg, nil
}

// startAt is a parsed -o.
type startAt struct {
	kind startKind
	n    int64 // the offset (startExact) or record count (startLast)
}

type startKind int

const (
	startBeginning startKind = iota
	startEnd
	startExact
	startLast
)

func parseOffset(s string) (startAt, error) {
	switch s {
	case "beginning":
		return startAt{kind: startBeginning}, nil
	case "end":
		return startAt{kind: startEnd}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return startAt{}, fmt.Errorf("%w -o %q: want beginning, end, an offset, or -N for the last N records", errBadFlag, s)
	}
	if strings.HasPrefix(s, "-") {
		return startAt{kind: startLast, n: -n}, nil
	}
	return startAt{kind: startExact, n: n}, nil
}

// resolve returns the offset to start at in a partition holding
// [earliest, latest).
func (s startAt) resolve(earliest, latest int64) int64 {
	switch s.kind {
	case startEnd:
		return latest
	case startExact:
		return min(max(s.n, earliest), latest)
	case startLast:
		return max(latest-s.n, earliest)
	}
	return earliest
}

// resetOffset is s as franz-go's reset offset, for group partitions without
// a commit.
func (s startAt) resetOffset() kgo.Offset {
	switch s.kind {
	case startEnd:
		return kgo.NewOffset().AtEnd()
	case startExact:
		return kgo.NewOffset().At(s.n)
	case startLast:
		return kgo.NewOffset().AtEnd().Relative(-s.n)
	}
	return kgo.NewOffset().AtStart()
}

// starts resolves where each partition of parts starts and returns it with
// each partition's high watermark. A committed offset (groups) wins over s.
func (c *conn) starts(ctx context.Context, topic string, parts []int32, s startAt, committed map[int32]int64) (starts, ends map[int32]int64, err error) {
	earliest, err := c.listOffsets(ctx, topic, parts, offsetsEarliest)
	if err != nil {
		return nil, nil, err
	}
	ends, err = c.listOffsets(ctx, topic, parts, offsetsLatest)
	if err != nil {
		return nil, nil, err
	}
	starts = make(map[int32]int64, len(parts))
	for _, p := range parts {
		if off, ok := committed[p]; ok {
			starts[p] = min(max(off, earliest[p]), ends[p])
		} else {
			starts[p] = s.resolve(earliest[p], ends[p])
		}
	}
	return starts, ends, nil
}

// endTracker knows, for -e, which assigned partitions are still short of
// the high watermark they had when they were assigned, and calls finish
// once none is (after at least one assignment).
type endTracker struct {
	mu       sync.Mutex
	ready    bool
	limit    map[int32]int64
	pending  map[int32]bool
	err      error
	finish   func()
	finished bool
}

func newEndTracker(finish func()) *endTracker {
	return &endTracker{limit: make(map[int32]int64), pending: make(map[int32]bool), finish: finish}
}

func (t *endTracker) assign(starts, ends map[int32]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, end := range ends {
		t.limit[p] = end
		if starts[p] < end {
			t.pending[p] = true
		} else {
			delete(t.pending, p)
		}
	}
	t.ready = true
	t.check()
}

// revoke forgets partitions. It does not finish: an eager rebalance
// revokes everything before assigning again.
func (t *endTracker) revoke(parts []int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range parts {
		delete(t.limit, p)
		delete(t.pending, p)
	}
}

func (t *endTracker) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
	t.ready = true
	t.finishOnce()
}

// beyond reports whether offset is at or past partition p's limit, so the
// record was written after consuming started and -e does not print it.
func (t *endTracker) beyond(p int32, offset int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	limit, ok := t.limit[p]
	return ok && offset >= limit
}

func (t *endTracker) consumed(p int32, offset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if limit, ok := t.limit[p]; ok && offset+1 >= limit {
		delete(t.pending, p)
		t.check()
	}
}

func (t *endTracker) done() (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.finished, t.err
}

func (t *endTracker) check() {
	if t.ready && len(t.pending) == 0 {
		t.finishOnce()
	}
}

func (t *endTracker) finishOnce() {
	if !t.finished {
		t.finished = true
		t.finish()
	}
}

func runConsume(ctx context.Context, f consumeFlags, cfg consumeConfig, stdout, stderr io.Writer) (err error) {
	var codecs []codec.Codec // beside the standard ones, which always decode
	if f.codec != "" {
		h := newPluginHost(f.client.pluginDir, stderr)
		defer func() { err = errors.Join(err, h.Close()) }()
		cd, err := h.Codec(f.codec)
		if err != nil {
			return fmt.Errorf("%w --codec %q: %w", errBadFlag, f.codec, err)
		}
		codecs = append(codecs, cd)
	}
	opts := []kgo.Opt{kgo.WithDecompressor(kgoadapt.Decompressor(codecs...))}
	topic := f.client.topic
	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	var ends *endTracker
	if f.exitAtEnd {
		ends = newEndTracker(stopPolling)
	}
	var c *conn // set before the group callbacks can run: they need a topic to consume
	if f.group != "" {
		opts = append(opts,
			kgo.ConsumerGroup(f.group),
			kgo.ConsumeResetOffset(cfg.start.resetOffset()),
			kgo.DisableAutoCommit(),
		)
		if ends != nil {
			opts = append(opts,
				kgo.OnPartitionsAssigned(func(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
					parts := assigned[topic]
					committed, err := c.committed(ctx, f.group, topic, parts)
					if err != nil {
						ends.fail(err)
						return
					}
					starts, hw, err := c.starts(ctx, topic, parts, cfg.start, committed)
					if err != nil {
						ends.fail(err)
						return
					}
					ends.assign(starts, hw)
				}),
				kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
					ends.revoke(revoked[topic])
				}),
				kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
					ends.revoke(lost[topic])
				}),
			)
		}
	}
	c, err = newConn(cfg.seeds, f.client.timeout, append(opts, f.client.security.opts...)...)
	if err != nil {
		return err
	}
	defer c.Close()

	nparts, err := c.partitions(ctx, topic, false)
	if err != nil {
		return err
	}
	if f.group != "" {
		c.AddConsumeTopics(topic)
	} else {
		parts := make([]int32, 0, nparts)
		if f.partition >= 0 {
			if f.partition >= nparts {
				return fmt.Errorf("%w -p %d: topic %s has %d partitions", errBadFlag, f.partition, topic, nparts)
			}
			parts = append(parts, f.partition)
		} else {
			for p := range nparts {
				parts = append(parts, p)
			}
		}
		starts, hw, err := c.starts(ctx, topic, parts, cfg.start, nil)
		if err != nil {
			return err
		}
		if ends != nil {
			ends.assign(starts, hw)
			if done, _ := ends.done(); done {
				return nil
			}
		}
		at := make(map[int32]kgo.Offset, len(parts))
		for _, p := range parts {
			at[p] = kgo.NewOffset().At(starts[p])
		}
		c.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: at})
	}
	return consumeLoop(ctx, pollCtx, c.Client, f, cfg, ends, stdout)
}

// consumeLoop polls, prints and (in a group) commits until -c or -e is
// satisfied, or ctx ends (an interrupt, which is not an error).
func consumeLoop(ctx, pollCtx context.Context, cl *kgo.Client, f consumeFlags, cfg consumeConfig, ends *endTracker, stdout io.Writer) error {
	w := bufio.NewWriterSize(stdout, 64<<10)
	var printed int64
	var fetchErr error
	for {
		fs := cl.PollFetches(pollCtx)
		var batch []*kgo.Record
		fs.EachError(func(t string, p int32, err error) {
			if fetchErr == nil && pollCtx.Err() == nil {
				fetchErr = fmt.Errorf("%w: %s/%d: %w", errConsume, t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if f.count > 0 && printed >= f.count {
				return
			}
			if ends != nil {
				if ends.beyond(r.Partition, r.Offset) {
					return
				}
			}
			writeRecord(w, cfg.format, r)
			printed++
			batch = append(batch, r)
			if ends != nil {
				ends.consumed(r.Partition, r.Offset)
			}
		})
		if err := w.Flush(); err != nil {
			return fmt.Errorf("%w: write: %w", errConsume, err)
		}
		if f.group != "" && len(batch) > 0 {
			commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.client.timeout)
			err := cl.CommitRecords(commitCtx, batch...)
			cancel()
			if err != nil {
				return fmt.Errorf("%w: commit for group %q: %w", errConsume, f.group, err)
			}
		}
		if fetchErr != nil {
			if f.codec == "" && errors.Is(fetchErr, kgoadapt.ErrNoCodec) {
				return fmt.Errorf("%w (a custom codec id needs --codec)", fetchErr)
			}
			return fetchErr
		}
		if f.count > 0 && printed >= f.count {
			return nil
		}
		if ends != nil {
			if done, err := ends.done(); done {
				return err
			}
		}
		if ctx.Err() != nil {
			return nil // interrupted
		}
	}
}

// formatOp is one piece of a -f format: a literal, or a directive.
type formatOp struct {
	verb byte // 0 for a literal
	lit  []byte
}

const formatVerbs = "tpokKsSTh"

// parseFormat splits a -f format into literals and directives.
func parseFormat(s string) ([]formatOp, error) {
	b, err := unescape("-f", s)
	if err != nil {
		return nil, err
	}
	var ops []formatOp
	var lit []byte
	for i := 0; i < len(b); i++ {
		if b[i] != '%' {
			lit = append(lit, b[i])
			continue
		}
		if i+1 >= len(b) {
			return nil, fmt.Errorf("%w -f %q: a lone %% at the end (%%%% prints one)", errBadFlag, s)
		}
		i++
		if b[i] == '%' {
			lit = append(lit, '%')
			continue
		}
		if !strings.ContainsRune(formatVerbs, rune(b[i])) {
			return nil, fmt.Errorf("%w -f %q: unknown directive %%%c (known: %%t %%p %%o %%k %%K %%s %%S %%T %%h %%%%)", errBadFlag, s, b[i])
		}
		if len(lit) > 0 {
			ops = append(ops, formatOp{lit: lit})
			lit = nil
		}
		ops = append(ops, formatOp{verb: b[i]})
	}
	if len(lit) > 0 {
		ops = append(ops, formatOp{lit: lit})
	}
	return ops, nil
}

// writeRecord prints r as ops say. Errors surface at the writer's Flush.
func writeRecord(w *bufio.Writer, ops []formatOp, r *kgo.Record) {
	for _, op := range ops {
		switch op.verb {
		case 0:
			w.Write(op.lit)
		case 't':
			w.WriteString(r.Topic)
		case 'p':
			w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(r.Partition), 10))
		case 'o':
			w.Write(strconv.AppendInt(w.AvailableBuffer(), r.Offset, 10))
		case 'k':
			w.Write(r.Key)
		case 'K':
			w.Write(appendSize(w.AvailableBuffer(), r.Key))
		case 's':
			w.Write(r.Value)
		case 'S':
			w.Write(appendSize(w.AvailableBuffer(), r.Value))
		case 'T':
			ts := int64(-1)
			if !r.Timestamp.IsZero() {
				ts = r.Timestamp.UnixMilli()
			}
			w.Write(strconv.AppendInt(w.AvailableBuffer(), ts, 10))
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					w.WriteByte(',')
				}
				w.WriteString(h.Key)
				w.WriteByte('=')
				w.Write(h.Value)
			}
		}
	}
}

// appendSize appends b's length, or -1 for a null b.
func appendSize(dst, b []byte) []byte {
	if b == nil {
		return append(dst, "-1"...)
	}
	return strconv.AppendInt(dst, int64(len(b)), 10)
}
