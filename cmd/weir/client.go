package main

// What `weir produce` and `weir consume` share: the connection flags, the
// first round trip to the broker (which is where an unreachable broker or a
// missing topic shows up, with a bounded wait), topic creation and offset
// lookups, and the escape syntax of delimiters and formats.
//
// Both commands are thin franz-go clients. Codecs and partitioners are
// resolved by plugins/host, so a spec names a built-in or an external
// `weir-<kind>-<name>` plugin alike, and plugins/kgoadapt turns them into
// what franz-go takes, crossing a plugin's process boundary once per batch.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/plugins/host"
	"github.com/weir-broker/weir/transport/broker"
)

// Errors of the client commands. main prefixes them with "weir: ".
var (
	// errBadFlag: a flag's value is malformed or out of range; reported
	// before anything connects.
	errBadFlag = errors.New("bad flag")
	// errUnreachable: no broker answered within --timeout.
	errUnreachable = errors.New("broker unreachable")
	// errTopic: the topic does not exist (and was not created) or the
	// broker refused to describe or create it.
	errTopic = errors.New("topic")
	// errProduce: a record could not be produced.
	errProduce = errors.New("produce failed")
	// errConsume: fetching, decoding or committing failed.
	errConsume = errors.New("consume failed")
)

// pluginDirEnv names the environment variable --plugin-dir defaults to.
const pluginDirEnv = "WEIR_PLUGIN_DIR"

// defaultClientTimeout bounds the wait for a broker that does not answer.
const defaultClientTimeout = 30 * time.Second

// clientFlags are the connection flags of produce and consume.
type clientFlags struct {
	brokers   string
	topic     string
	pluginDir string
	timeout   time.Duration
	security  clientSecurity // client_security.go
}

func (c *clientFlags) add(f *pflag.FlagSet) {
	f.StringVarP(&c.brokers, "brokers", "b", broker.DefaultListen, "comma-separated `host:port` list of brokers to bootstrap from")
	f.StringVarP(&c.topic, "topic", "t", "", "`topic` name (required)")
	f.StringVar(&c.pluginDir, "plugin-dir", "", "`dir`ectory holding weir-<kind>-<name> plugin executables (default: $"+pluginDirEnv+")")
	f.DurationVar(&c.timeout, "timeout", defaultClientTimeout, "give up when the broker does not answer, or a record is not delivered, within this long")
	c.security.add(f)
}

// validate checks the flags without connecting and returns the broker list.
func (c *clientFlags) validate() ([]string, error) {
	if c.topic == "" {
		return nil, fmt.Errorf("%w -t: a topic is required", errBadFlag)
	}
	if err := checkTopicName(c.topic); err != nil {
		return nil, err
	}
	if c.timeout <= 0 {
		return nil, fmt.Errorf("%w --timeout %v: want a positive duration", errBadFlag, c.timeout)
	}
	var seeds []string
	for _, b := range strings.Split(c.brokers, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return nil, fmt.Errorf("%w -b %q: want host:port[,host:port...]", errBadFlag, c.brokers)
		}
		seeds = append(seeds, b)
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("%w -b: no broker given", errBadFlag)
	}
	if c.pluginDir == "" {
		c.pluginDir = os.Getenv(pluginDirEnv)
	}
	if err := c.security.build(); err != nil {
		return nil, err
	}
	return seeds, nil
}

// checkTopicName applies Kafka's rule: 1 to 249 of [a-zA-Z0-9._-], not "."
// or "..".
func checkTopicName(name string) error {
	if len(name) > 249 || name == "." || name == ".." {
		return fmt.Errorf("%w -t %q: not a valid Kafka topic name", errBadFlag, name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%w -t %q: topic names hold only letters, digits, '.', '_' and '-'", errBadFlag, name)
		}
	}
	return nil
}

// newPluginHost opens the plugin host for dir, logging plugin trouble
// (warnings and errors, not lifecycle chatter) to stderr. The caller closes
// it, which stops any plugin process it started.
func newPluginHost(dir string, stderr io.Writer) *host.Host {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return host.New(host.Config{Dir: dir, Logger: logger})
}

// conn is a franz-go client that remembers the last failed dial, so that an
// unreachable broker is reported with the reason rather than as a bare
// deadline.
type conn struct {
	*kgo.Client
	seeds   []string
	timeout time.Duration
	dials   *dialHook
}

// dialHook records the most recent connection failure.
type dialHook struct {
	mu   sync.Mutex
	last error
}

func (h *dialHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = err // a success clears an older failure
}

func (h *dialHook) lastErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func newConn(seeds []string, timeout time.Duration, opts ...kgo.Opt) (*conn, error) {
	dials := new(dialHook)
	base := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("weir-cli"),
		kgo.DialTimeout(min(timeout, 10*time.Second)),
		kgo.WithHooks(dials),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadFlag, err)
	}
	return &conn{Client: cl, seeds: seeds, timeout: timeout, dials: dials}, nil
}

// unreachable explains why a first request failed: the last dial error if
// there was one.
func (c *conn) unreachable(err error) error {
	if dial := c.dials.lastErr(); dial != nil {
		err = dial
	}
	return fmt.Errorf("%w: %s (waited up to %v): %w", errUnreachable, strings.Join(c.seeds, ","), c.timeout, err)
}

// partitions returns the partition count of topic, asking the broker to
// auto-create it when autoCreate is set (Kafka's auto.create.topics.enable
// decides). It retries retriable errors (a topic just created may not have
// leaders yet) until c.timeout.
func (c *conn) partitions(ctx context.Context, topic string, autoCreate bool) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	for {
		n, err := c.describe(ctx, topic, autoCreate)
		if err == nil || errors.Is(err, errTopic) || errors.Is(err, errUnreachable) || !kerr.IsRetriable(err) {
			return n, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w %q: %w", errTopic, topic, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *conn) describe(ctx context.Context, topic string, autoCreate bool) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = autoCreate
	resp, err := req.RequestWith(ctx, c.Client)
	if err != nil {
		return 0, c.unreachable(err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return 0, fmt.Errorf("%w %q does not exist: %w", errTopic, topic, err)
			}
			return 0, err // retriable ones are retried by partitions
		}
		if len(t.Partitions) == 0 {
			return 0, kerr.LeaderNotAvailable
		}
		return int32(len(t.Partitions)), nil
	}
	return 0, fmt.Errorf("%w %q: not in the broker's metadata response", errTopic, topic)
}

// createTopic creates topic with n partitions; an existing topic is fine.
func (c *conn) createTopic(ctx context.Context, topic string, n int32) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(c.timeout.Milliseconds())
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = n
	rt.ReplicationFactor = -1 // the broker's default
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.Client)
	if err != nil {
		return c.unreachable(err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("%w %q: create: %d topics in the response", errTopic, topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		msg := ""
		if m := resp.Topics[0].ErrorMessage; m != nil {
			msg = " (" + *m + ")"
		}
		return fmt.Errorf("%w %q: create with %d partitions: %w%s", errTopic, topic, n, err, msg)
	}
	return nil
}

// ListOffsets timestamps.
const (
	offsetsEarliest = -2
	offsetsLatest   = -1
)

// listOffsets returns the earliest (at = offsetsEarliest) or latest (the
// high watermark) offset of each partition of parts.
func (c *conn) listOffsets(ctx context.Context, topic string, parts []int32, at int64) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range parts {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = at
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.Client)
	if err != nil {
		return nil, c.unreachable(err)
	}
	out := make(map[int32]int64, len(parts))
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("%w: list offsets of %s/%d: %w", errConsume, topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	for _, p := range parts {
		if _, ok := out[p]; !ok {
			return nil, fmt.Errorf("%w: list offsets: no answer for %s/%d", errConsume, topic, p)
		}
	}
	return out, nil
}

// committed returns the group's committed offsets for parts of topic; a
// partition without a commit is missing from the map.
func (c *conn) committed(ctx context.Context, group, topic string, parts []int32) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = parts
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.Client)
	if err != nil {
		return nil, c.unreachable(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("%w: committed offsets of group %q: %w", errConsume, group, err)
	}
	out := make(map[int32]int64)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("%w: committed offset of group %q on %s/%d: %w", errConsume, group, topic, p.Partition, err)
			}
			if p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}

// escapedString is a string flag holding kcat escapes (see unescape); its
// default shows in --help as written (\n), not Go-quoted ("\\n").
type escapedString struct{ p *string }

func (e escapedString) String() string {
	if e.p == nil {
		return ""
	}
	return *e.p
}
func (e escapedString) Set(v string) error { *e.p = v; return nil }
func (e escapedString) Type() string       { return "escaped" }

// unescape decodes the escapes kcat accepts in delimiters and formats: \n,
// \r, \t, \0, \\ and \xNN. Any other backslash sequence is an error, so a
// typo cannot silently become a literal.
func unescape(flag, s string) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			out = append(out, s[i])
			continue
		}
		if i+1 >= len(s) {
			return nil, fmt.Errorf("%w %s %q: trailing backslash", errBadFlag, flag, s)
		}
		i++
		switch s[i] {
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case '0':
			out = append(out, 0)
		case '\\':
			out = append(out, '\\')
		case 'x':
			if i+2 >= len(s) {
				return nil, fmt.Errorf("%w %s %q: \\x needs two hex digits", errBadFlag, flag, s)
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return nil, fmt.Errorf("%w %s %q: \\x needs two hex digits", errBadFlag, flag, s)
			}
			out = append(out, byte(v))
			i += 2
		default:
			return nil, fmt.Errorf("%w %s %q: unknown escape \\%c (known: \\n \\r \\t \\0 \\\\ \\xNN)", errBadFlag, flag, s, s[i])
		}
	}
	return out, nil
}
