package main

// `weir produce`: records from lines (or whole files) to a topic, with any
// codec and partitioner spec. Input is read in batches of what is already
// available (up to produceBatchRecords records or --batch-max-bytes bytes),
// and each batch costs ONE partitioner call, so an external partitioner
// crosses its process boundary once per batch rather than once per record.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/kgoadapt"
	"github.com/weir-broker/weir/plugins/partitioner"
)

// produceBatchRecords bounds the records of one input batch (one
// partitioner call).
const produceBatchRecords = 10_000

// defaultBatchMaxBytes is Kafka's max.message.bytes default, franz-go's too.
const defaultBatchMaxBytes = 1_000_012

// minBatchMaxBytes is the smallest batch franz-go accepts.
const minBatchMaxBytes = 512

// produceFlags are the flags of `weir produce`, as given.
type produceFlags struct {
	client        clientFlags
	delim         string
	keyDelim      string
	filePerRecord bool
	headers       []string
	partition     int32
	partitioner   string
	codec         string
	acks          string
	linger        time.Duration
	batchMaxBytes int32
	createTopic   int32
	quiet         bool
}

// produceConfig is produceFlags checked and decoded.
type produceConfig struct {
	seeds    []string
	delim    []byte
	keyDelim []byte // nil: no keys
	headers  []kgo.RecordHeader
	acks     kgo.Acks
	files    []string
}

const produceLong = `Produce records to a topic, one per input line by default: from the FILEs
given, or from stdin when there are none. -D changes the delimiter (kcat's
escapes \n \r \t \0 \\ \xNN work), -K splits each line into key and value at
the first KEYDELIM (a line without it has a null key), and --file-per-record
sends each FILE whole as one record value.

Input is read in batches of what is available, up to 10000 records or
--batch-max-bytes, and the partitioner is called ONCE per batch, so an
external partitioner costs one process round trip per batch. -p sends every
record to one partition instead. The default partitioner, murmur2, is the
Java client's default: keys land where Kafka's own producers put them.

--codec and --partitioner take a spec, NAME or NAME:key=value,...: a
built-in (codecs none, gzip, snappy, lz4, zstd; partitioners murmur2, crc32,
fnv1a, round-robin, sticky, random: see weir plugins), else an external plugin: the executable
weir-codec-NAME or weir-partitioner-NAME in --plugin-dir, or a NAME holding
a '/', the plugin's path.

A summary (records, bytes, partitions, time) goes to stderr unless -q. Any
record that fails makes the command fail, naming the first error.`

const produceExample = `  printf 'k1\tv1\nk2\tv2\n' | weir produce -t events -K '\t'
  weir produce -b 127.0.0.1:9092 -t events --codec zstd:level=3 -H source=cli data.txt
  weir produce -t blobs --file-per-record --create-topic 3 a.bin b.bin
  WEIR_PLUGIN_DIR=bin/plugins weir produce -t events --codec s2 --partitioner 'keyrange:splits=g;n;t'`

func newProduceCmd() *cobra.Command {
	var f produceFlags
	cmd := &cobra.Command{
		Use:     "produce -t TOPIC [flags] [FILE...]",
		Short:   "Produce records from lines or files to a topic",
		Long:    produceLong,
		Example: produceExample,
		RunE: func(cmd *cobra.Command, files []string) error {
			cfg, err := f.check(cmd, files)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runProduce(ctx, f, cfg, cmd.InOrStdin(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	f.client.add(fs)
	f.delim = `\n`
	fs.VarP(escapedString{&f.delim}, "delimiter", "D", "record `delim`iter in the input")
	fs.StringVarP(&f.keyDelim, "key-delimiter", "K", "", "split each record into key and value at the first `keydelim` (default: no key)")
	fs.BoolVar(&f.filePerRecord, "file-per-record", false, "send each FILE (or all of stdin) as one record value")
	fs.StringArrayVarP(&f.headers, "header", "H", nil, "add header `key=value` to every record, repeatable")
	fs.Int32VarP(&f.partition, "partition", "p", -1, "send every record to this `partition`, overriding the partitioner; -1 uses the partitioner")
	fs.StringVar(&f.partitioner, "partitioner", "murmur2", "partitioner `spec`, built-in or plugin")
	fs.StringVar(&f.codec, "codec", "none", "compression codec `spec`, built-in or plugin")
	fs.StringVar(&f.acks, "acks", "all", "`acks` to wait for: 0 (none), 1 (the leader's) or all (every in-sync replica's)")
	fs.DurationVar(&f.linger, "linger", 10*time.Millisecond, "how long a partition's batch waits for more records before it is sent")
	fs.Int32Var(&f.batchMaxBytes, "batch-max-bytes", defaultBatchMaxBytes, "largest record batch, in `bytes` before compression; also bounds one record")
	fs.Int32Var(&f.createTopic, "create-topic", 0, "create the topic with this many `partitions` if it is missing (default 0: rely on the broker's auto-creation)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "print no summary")
	return cmd
}

// check validates everything that can be checked without a broker.
func (f *produceFlags) check(cmd *cobra.Command, files []string) (produceConfig, error) {
	var cfg produceConfig
	var err error
	if cfg.seeds, err = f.client.validate(); err != nil {
		return cfg, err
	}
	if cfg.delim, err = unescape("-D", f.delim); err != nil {
		return cfg, err
	}
	if len(cfg.delim) == 0 {
		return cfg, fmt.Errorf("%w -D: the delimiter cannot be empty", errBadFlag)
	}
	if f.keyDelim != "" {
		if cfg.keyDelim, err = unescape("-K", f.keyDelim); err != nil {
			return cfg, err
		}
	}
	if f.filePerRecord && (cmd.Flags().Changed("delimiter") || cmd.Flags().Changed("key-delimiter")) {
		return cfg, fmt.Errorf("%w --file-per-record: -D and -K split lines; a file is one record value", errBadFlag)
	}
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return cfg, fmt.Errorf("%w -H %q: want key=value", errBadFlag, h)
		}
		cfg.headers = append(cfg.headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	if f.partition < -1 {
		return cfg, fmt.Errorf("%w -p %d: want a partition number, or -1 for the partitioner", errBadFlag, f.partition)
	}
	switch f.acks {
	case "0":
		cfg.acks = kgo.NoAck()
	case "1":
		cfg.acks = kgo.LeaderAck()
	case "all", "-1":
		cfg.acks = kgo.AllISRAcks()
	default:
		return cfg, fmt.Errorf("%w --acks %q: want 0, 1 or all", errBadFlag, f.acks)
	}
	if f.linger < 0 {
		return cfg, fmt.Errorf("%w --linger %v: want zero or more", errBadFlag, f.linger)
	}
	if f.batchMaxBytes < minBatchMaxBytes {
		return cfg, fmt.Errorf("%w --batch-max-bytes %d: want at least %d (franz-go's minimum)", errBadFlag, f.batchMaxBytes, minBatchMaxBytes)
	}
	if f.createTopic < 0 {
		return cfg, fmt.Errorf("%w --create-topic %d: want a partition count", errBadFlag, f.createTopic)
	}
	for _, name := range files {
		st, err := os.Stat(name)
		if err != nil {
			return cfg, fmt.Errorf("%w: %w", errBadFlag, err)
		}
		if st.IsDir() {
			return cfg, fmt.Errorf("%w: %s is a directory", errBadFlag, name)
		}
	}
	cfg.files = files
	return cfg, nil
}

// produceStats counts what the broker acknowledged, from the produce
// callbacks (which run on franz-go's goroutines).
type produceStats struct {
	mu         sync.Mutex
	records    int64
	bytes      int64
	failed     int64
	firstErr   error
	partitions map[int32]int64
}

func (s *produceStats) done(r *kgo.Record, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed++
		if s.firstErr == nil {
			s.firstErr = fmt.Errorf("%s/%d: %w", r.Topic, r.Partition, err)
		}
		return
	}
	s.records++
	s.bytes += int64(len(r.Key) + len(r.Value))
	s.partitions[r.Partition]++
}

func (s *produceStats) summary(topic string, elapsed time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := make([]string, 0, len(s.partitions))
	for _, p := range slices.Sorted(maps.Keys(s.partitions)) {
		parts = append(parts, strconv.Itoa(int(p)))
	}
	used := "none"
	if len(parts) > 0 {
		used = strings.Join(parts, ",")
	}
	line := fmt.Sprintf("produced %d records (%d bytes of keys and values) to %s, partitions %s, in %v",
		s.records, s.bytes, topic, used, elapsed.Round(time.Millisecond))
	if s.failed > 0 {
		line += fmt.Sprintf("; %d records failed", s.failed)
	}
	return line
}

func runProduce(ctx context.Context, f produceFlags, cfg produceConfig, stdin io.Reader, stderr io.Writer) (err error) {
	start := time.Now()
	h := newPluginHost(f.client.pluginDir, stderr)
	defer func() { err = errors.Join(err, h.Close()) }()
	cd, err := h.Codec(f.codec)
	if err != nil {
		return fmt.Errorf("%w --codec %q: %w", errBadFlag, f.codec, err)
	}
	var part partitioner.Partitioner // unused with -p: no plugin started for nothing
	if f.partition < 0 {
		if part, err = h.Partitioner(f.partitioner); err != nil {
			return fmt.Errorf("%w --partitioner %q: %w", errBadFlag, f.partitioner, err)
		}
	}

	opts := []kgo.Opt{
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(cfg.acks),
		kgo.ProducerLinger(f.linger),
		kgo.ProducerBatchMaxBytes(f.batchMaxBytes),
		kgo.RecordDeliveryTimeout(f.client.timeout),
	}
	if cd.ID() == codec.None {
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	} else {
		opts = append(opts, kgo.WithCompressor(kgoadapt.Compressor(cd)))
	}
	if f.acks != "all" && f.acks != "-1" {
		opts = append(opts, kgo.DisableIdempotentWrite()) // idempotence needs acks=all
	}
	cl, err := newConn(cfg.seeds, f.client.timeout, append(opts, f.client.security.opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()

	topic := f.client.topic
	if f.createTopic > 0 {
		if _, err := cl.partitions(ctx, topic, false); errors.Is(err, errTopic) {
			if err := cl.createTopic(ctx, topic, f.createTopic); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
	}
	nparts, err := cl.partitions(ctx, topic, f.createTopic == 0)
	if err != nil {
		if errors.Is(err, errTopic) && f.createTopic == 0 {
			return fmt.Errorf("%w (the broker does not auto-create it; use --create-topic N)", err)
		}
		return err
	}
	if f.partition >= nparts {
		return fmt.Errorf("%w -p %d: topic %s has %d partitions", errBadFlag, f.partition, topic, nparts)
	}

	stats := &produceStats{partitions: make(map[int32]int64)}
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	recs := make(chan *kgo.Record, 4096)
	readErr := make(chan error, 1)
	go func() {
		defer close(recs)
		readErr <- readRecords(readCtx, f, cfg, stdin, recs)
	}()

	var prodErr error
	for prodErr == nil {
		batch, more := nextBatch(ctx, recs, produceBatchRecords, int(f.batchMaxBytes))
		if len(batch) > 0 {
			prodErr = produceBatch(ctx, cl.Client, part, topic, nparts, f.partition, batch, stats)
		}
		if !more {
			break
		}
	}
	// The reader has reported by now if it reached the end of the input (it
	// reports before closing recs). Otherwise production failed or was
	// interrupted, and the reader may be blocked reading a terminal: it is
	// told to stop, not waited for.
	stopReading()
	select {
	case rerr := <-readErr:
		if prodErr == nil && rerr != nil && !errors.Is(rerr, context.Canceled) {
			prodErr = rerr
		}
	default:
	}
	if ferr := cl.Flush(ctx); prodErr == nil && ferr != nil {
		prodErr = fmt.Errorf("%w: flush: %w", errProduce, ferr)
	}
	if prodErr == nil && ctx.Err() != nil {
		prodErr = fmt.Errorf("%w: interrupted: %w", errProduce, context.Cause(ctx))
	}
	if !f.quiet {
		fmt.Fprintln(stderr, stats.summary(topic, time.Since(start)))
	}
	if prodErr != nil {
		return prodErr
	}
	stats.mu.Lock()
	defer stats.mu.Unlock()
	if stats.failed > 0 {
		return fmt.Errorf("%w: %d of %d records failed, first: %w", errProduce, stats.failed, stats.failed+stats.records, stats.firstErr)
	}
	return nil
}

// nextBatch waits for one record, then takes what else is already read, up
// to maxRecords records or maxBytes bytes of keys and values. more is false
// once the input is exhausted (or ctx ended).
func nextBatch(ctx context.Context, recs <-chan *kgo.Record, maxRecords, maxBytes int) (batch []*kgo.Record, more bool) {
	select {
	case r, ok := <-recs:
		if !ok {
			return nil, false
		}
		batch = append(batch, r)
	case <-ctx.Done():
		return nil, false
	}
	size := len(batch[0].Key) + len(batch[0].Value)
	for len(batch) < maxRecords && size < maxBytes {
		select {
		case r, ok := <-recs:
			if !ok {
				return batch, false
			}
			batch = append(batch, r)
			size += len(r.Key) + len(r.Value)
		default:
			return batch, true
		}
	}
	return batch, true
}

// produceBatch assigns partitions to batch (one partitioner call, or the
// explicit partition) and hands the records to the client.
func produceBatch(ctx context.Context, cl *kgo.Client, p partitioner.Partitioner, topic string, nparts, explicit int32,
	batch []*kgo.Record, stats *produceStats) error {
	if explicit >= 0 {
		for _, r := range batch {
			r.Partition = explicit
		}
	} else if err := kgoadapt.Assign(ctx, p, topic, nparts, batch); err != nil {
		return fmt.Errorf("%w: partitioner: %w", errProduce, err)
	}
	for _, r := range batch {
		cl.Produce(ctx, r, stats.done)
	}
	return nil
}

// readRecords sends the input's records to out until it is exhausted, fails
// or ctx ends. Records carry the topic and headers; partitions come later.
func readRecords(ctx context.Context, f produceFlags, cfg produceConfig, stdin io.Reader, out chan<- *kgo.Record) error {
	send := func(key, value []byte) error {
		r := &kgo.Record{Topic: f.client.topic, Key: key, Value: value, Headers: cfg.headers}
		select {
		case out <- r:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.filePerRecord {
		if len(cfg.files) == 0 {
			value, err := io.ReadAll(io.LimitReader(stdin, int64(f.batchMaxBytes)+1))
			if err != nil {
				return fmt.Errorf("%w: stdin: %w", errProduce, err)
			}
			if len(value) > int(f.batchMaxBytes) {
				return fmt.Errorf("%w: stdin is over --batch-max-bytes (%d bytes)", errProduce, f.batchMaxBytes)
			}
			return send(nil, value)
		}
		for _, name := range cfg.files {
			value, err := os.ReadFile(name)
			if err != nil {
				return fmt.Errorf("%w: %w", errProduce, err)
			}
			if len(value) > int(f.batchMaxBytes) {
				return fmt.Errorf("%w: %s is %d bytes, over --batch-max-bytes %d", errProduce, name, len(value), f.batchMaxBytes)
			}
			if err := send(nil, value); err != nil {
				return err
			}
		}
		return nil
	}
	split := func(rec []byte) error {
		if cfg.keyDelim != nil {
			if k, v, ok := bytes.Cut(rec, cfg.keyDelim); ok {
				return send(k, v)
			}
		}
		return send(nil, rec)
	}
	if len(cfg.files) == 0 {
		return scanRecords(stdin, "stdin", cfg.delim, int(f.batchMaxBytes), split)
	}
	for _, name := range cfg.files {
		file, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("%w: %w", errProduce, err)
		}
		err = scanRecords(file, name, cfg.delim, int(f.batchMaxBytes), split)
		file.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// scanRecords calls fn with each delim-terminated record of r (a copy fn may
// keep); a last record without its delimiter counts, an empty one after the
// final delimiter does not. A record over maxSize bytes is an error.
func scanRecords(r io.Reader, name string, delim []byte, maxSize int, fn func([]byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(64<<10, maxSize+len(delim))), maxSize+len(delim))
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.Index(data, delim); i >= 0 {
			return i + len(delim), data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		if err := fn(bytes.Clone(sc.Bytes())); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%w: %s: a record is over --batch-max-bytes (%d bytes)", errProduce, name, maxSize)
		}
		return fmt.Errorf("%w: %s: %w", errProduce, name, err)
	}
	return nil
}
