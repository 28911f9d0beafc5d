package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/transport/broker"
)

// roundTripInput is kcat-style input for -K '\t': keyed lines, an empty
// key, an empty value, a line without the delimiter (null key), a value
// holding the delimiter again, and UTF-8.
func roundTripInput() (input string, n int) {
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "key-%02d\tvalue %02d\n", i, i)
	}
	b.WriteString("\tempty key\n")
	b.WriteString("empty-value\t\n")
	b.WriteString("no key on this line\n")
	b.WriteString("k\twith\ttabs\n")
	b.WriteString("clé\tvaleur ünïcode\n")
	return b.String(), 45
}

// recordLine prints a record the way the round trip's -f format does.
func recordLine(r *kgo.Record) string {
	size := func(b []byte) int {
		if b == nil {
			return -1
		}
		return len(b)
	}
	var hs []string
	for _, h := range r.Headers {
		hs = append(hs, h.Key+"="+string(h.Value))
	}
	return fmt.Sprintf("%d|%d|%d|%s|%d|%s|%s", r.Partition, r.Offset, size(r.Key), r.Key, size(r.Value), r.Value, strings.Join(hs, ","))
}

// TestProduceConsumeRoundTrip produces keyed lines with headers to three
// partitions, checks every record with franz-go (key, null key, value,
// headers, and the partition franz-go's own murmur2 partitioner picks), and
// checks that weir consume prints them all back exactly.
func TestProduceConsumeRoundTrip(t *testing.T) {
	addr := startTestBroker(t)
	input, n := roundTripInput()
	_, stderr := mustCLI(t, input, "produce", "-b", addr, "-t", "rt", "-K", `\t`, "-H", "src=cli", "-H", "n=1", "--create-topic", "3")
	if want := fmt.Sprintf("produced %d records", n); !strings.Contains(stderr, want) || !strings.Contains(stderr, "partitions 0,1,2") {
		t.Errorf("summary %q, want %q and partitions 0,1,2", stderr, want)
	}

	recs := readAll(t, addr, "rt", n)
	want := make(map[string][]byte) // value -> key (values are unique)
	for _, line := range lines(input) {
		k, v, ok := strings.Cut(line, "\t")
		if !ok {
			want[line] = nil
			continue
		}
		want[v] = []byte(k)
	}
	javaDefault := kgo.StickyKeyPartitioner(nil).ForTopic("rt")
	for _, r := range recs {
		key, ok := want[string(r.Value)]
		if !ok {
			t.Errorf("unexpected record %s", recordLine(r))
			continue
		}
		delete(want, string(r.Value))
		if (key == nil) != (r.Key == nil) || !bytes.Equal(key, r.Key) {
			t.Errorf("record %q: key %q (nil %v), want %q (nil %v)", r.Value, r.Key, r.Key == nil, key, key == nil)
		}
		if r.Value == nil {
			t.Errorf("record with key %q: null value, want an empty one", r.Key)
		}
		if len(r.Headers) != 2 || r.Headers[0].Key != "src" || string(r.Headers[0].Value) != "cli" ||
			r.Headers[1].Key != "n" || string(r.Headers[1].Value) != "1" {
			t.Errorf("record %q: headers %v, want src=cli, n=1", r.Value, r.Headers)
		}
		if r.Key != nil {
			if p := javaDefault.Partition(r, 3); p != int(r.Partition) {
				t.Errorf("record with key %q on partition %d; franz-go's StickyKeyPartitioner (murmur2) says %d", r.Key, r.Partition, p)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("records never consumed: %q", slices.Collect(maps.Keys(want)))
	}

	stdout, _ := mustCLI(t, "", "consume", "-b", addr, "-t", "rt", "-e", "-f", `%p|%o|%K|%k|%S|%s|%h\n`)
	got := lines(stdout)
	var wantLines []string
	for _, r := range recs {
		wantLines = append(wantLines, recordLine(r))
	}
	slices.Sort(got)
	slices.Sort(wantLines)
	if !slices.Equal(got, wantLines) {
		t.Errorf("weir consume printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantLines, "\n"))
	}
}

// batchCodecs fetches partition 0 of topic raw and returns the codec id
// (attributes bits 0-2) of each batch, as stored.
func batchCodecs(t testing.TB, addr, topic string) []int8 {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 16 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 16 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(waitContext(t), newTestClient(t, addr))
	if err != nil {
		t.Fatalf("fetch %s: %v", topic, err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("fetch %s: %v", topic, err)
	}
	var ids []int8
	for b := p.RecordBatches; len(b) >= 61; {
		size := 12 + int(binary.BigEndian.Uint32(b[8:12]))
		if size > len(b) {
			break // a partial batch at the end of the response
		}
		ids = append(ids, int8(binary.BigEndian.Uint16(b[21:23])&7))
		b = b[size:]
	}
	if len(ids) == 0 {
		t.Fatalf("fetch %s: no record batch", topic)
	}
	return ids
}

// compressibleLines is input every codec shrinks.
func compressibleLines(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "line %04d: %s\n", i, strings.Repeat("weir keeps every byte ", 6))
	}
	return b.String()
}

// TestProduceCodecs produces with each standard codec and checks that the
// stored batches carry its id, that franz-go reads them, and that weir
// consume prints the input back byte for byte; then the same with the
// external s2 codec plugin (a custom id) when it has been written.
func TestProduceCodecs(t *testing.T) {
	addr := startTestBroker(t)
	input := compressibleLines(300)
	for _, c := range []struct {
		spec string
		id   int8
	}{{"none", 0}, {"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}, {"zstd:level=4", 4}} {
		t.Run(c.spec, func(t *testing.T) {
			topic := "codec-" + strings.NewReplacer(":", "-", "=", "-").Replace(c.spec)
			_, stderr := mustCLI(t, input, "produce", "-b", addr, "-t", topic, "--codec", c.spec, "-q")
			if stderr != "" {
				t.Errorf("-q printed %q", stderr)
			}
			for i, id := range batchCodecs(t, addr, topic) {
				if id != c.id {
					t.Errorf("batch %d has codec id %d, want %d", i, id, c.id)
				}
			}
			recs := readAll(t, addr, topic, 300)
			if got := string(recs[299].Value) + "\n"; !strings.HasSuffix(input, got) {
				t.Errorf("franz-go read last value %q", got)
			}
			stdout, _ := mustCLI(t, "", "consume", "-b", addr, "-t", topic, "-e")
			if stdout != input {
				t.Errorf("weir consume printed %d bytes, want the %d bytes produced", len(stdout), len(input))
			}
		})
	}
	t.Run("s2-plugin", func(t *testing.T) {
		dir := buildPlugin(t, "codec-s2")
		_, stderr := mustCLI(t, input, "produce", "-b", addr, "-t", "codec-s2", "--codec", "s2", "--plugin-dir", dir)
		if !strings.Contains(stderr, "produced 300 records") {
			t.Errorf("summary %q", stderr)
		}
		ids := batchCodecs(t, addr, "codec-s2")
		if ids[0] < 5 {
			t.Errorf("the s2 plugin's batches carry codec id %d, want a custom one (5-7)", ids[0])
		}
		_, _, err := cli(t, "", "consume", "-b", addr, "-t", "codec-s2", "-e")
		if !errors.Is(err, errConsume) || !strings.Contains(err.Error(), "--codec") {
			t.Errorf("consume without --codec: %v, want errConsume suggesting --codec", err)
		}
		t.Setenv(pluginDirEnv, dir) // --plugin-dir defaults to $WEIR_PLUGIN_DIR
		stdout, _ := mustCLI(t, "", "consume", "-b", addr, "-t", "codec-s2", "-e", "--codec", "s2")
		if stdout != input {
			t.Errorf("weir consume --codec s2 printed %d bytes, want the %d bytes produced", len(stdout), len(input))
		}
	})
}

// buildPlugin builds plugins/cmd/weir-KIND-NAME into a temporary directory
// and returns the directory. Without its source the test skips, except
// under CI=true, where it fails.
func buildPlugin(t *testing.T, kindName string) string {
	t.Helper()
	src := filepath.Join("..", "..", "plugins", "cmd", "weir-"+kindName)
	if _, err := os.Stat(src); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("plugin source %s is missing (%v), and CI=true", src, err)
		}
		t.Skipf("plugin source %s is missing: this external plugin test needs it", src)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*cliWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "weir-"+kindName), "./"+filepath.ToSlash(src))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", src, err, out)
	}
	return dir
}

func TestProduceExplicitPartition(t *testing.T) {
	addr := startTestBroker(t)
	createTestTopic(t, addr, "explicit", 3, nil)
	input, n := roundTripInput()
	_, stderr := mustCLI(t, input, "produce", "-b", addr, "-t", "explicit", "-K", `\t`, "-p", "2")
	if !strings.Contains(stderr, "partitions 2,") {
		t.Errorf("summary %q, want partitions 2 only", stderr)
	}
	stdout, _ := mustCLI(t, "", "consume", "-b", addr, "-t", "explicit", "-p", "2", "-e", "-f", `%p\n`)
	if want := strings.Repeat("2\n", n); stdout != want {
		t.Errorf("partition 2 holds %d records, want %d", strings.Count(stdout, "\n"), n)
	}
	for _, p := range []string{"0", "1"} {
		if stdout, _ := mustCLI(t, "", "consume", "-b", addr, "-t", "explicit", "-p", p, "-e"); stdout != "" {
			t.Errorf("partition %s holds %q, want nothing", p, stdout)
		}
	}
	_, _, err := cli(t, "x\n", "produce", "-b", addr, "-t", "explicit", "-p", "3")
	if !errors.Is(err, errBadFlag) || !strings.Contains(err.Error(), "has 3 partitions") {
		t.Errorf("-p 3 of 3: %v, want errBadFlag naming the partition count", err)
	}
}

// TestProducePartitioner checks --partitioner takes another spec: round-robin
// spreads 30 keyless records evenly over 3 partitions.
func TestProducePartitioner(t *testing.T) {
	addr := startTestBroker(t)
	createTestTopic(t, addr, "rr", 3, nil)
	mustCLI(t, strings.Repeat("same\n", 30), "produce", "-b", addr, "-t", "rr", "--partitioner", "round-robin", "-q")
	count := make(map[int32]int)
	for _, r := range readAll(t, addr, "rr", 30) {
		count[r.Partition]++
	}
	if count[0] != 10 || count[1] != 10 || count[2] != 10 {
		t.Errorf("round-robin put %v records per partition, want 10 each", count)
	}
}

// TestProducePartitionerPlugin uses the example external partitioner,
// found in --plugin-dir by name and by path.
func TestProducePartitionerPlugin(t *testing.T) {
	addr := startTestBroker(t)
	dir := buildPlugin(t, "partitioner-keyrange")
	createTestTopic(t, addr, "ranges", 4, nil)
	input := "apple\t1\ngrape\t2\nmango\t3\nnectarine\t4\ntomato\t5\n"
	want := map[string]int32{"apple": 0, "grape": 1, "mango": 1, "nectarine": 2, "tomato": 3}
	for _, spec := range []string{"keyrange:splits=g;n;t", filepath.Join(dir, "weir-partitioner-keyrange") + ":splits=g;n;t"} {
		mustCLI(t, input, "produce", "-b", addr, "-t", "ranges", "-K", `\t`, "--partitioner", spec, "--plugin-dir", dir, "-q")
	}
	for _, r := range readAll(t, addr, "ranges", 10) {
		if r.Partition != want[string(r.Key)] {
			t.Errorf("key %q on partition %d, want %d", r.Key, r.Partition, want[string(r.Key)])
		}
	}
	_, _, err := cli(t, "", "produce", "-b", closedAddr(t), "-t", "ranges", "--partitioner", "keyrange", "--plugin-dir", dir)
	if !errors.Is(err, errBadFlag) || !errors.Is(err, partitioner.ErrInvalidSpec) || !strings.Contains(err.Error(), "splits") {
		t.Errorf("keyrange without splits: %v, want errBadFlag wrapping ErrInvalidSpec about splits", err)
	}
}

func TestProduceDelimitersAndFiles(t *testing.T) {
	addr := startTestBroker(t)
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a := write("a.bin", "first\nfile\x00with\nnewlines\n")
	b := write("b.bin", "")
	c := write("c.txt", "x;;y;;z")

	tests := []struct {
		name  string
		stdin string
		args  []string
		want  []string // values, in order
	}{
		{"multi-byte delimiter", "a;;b;;;;c;;", []string{"-D", ";;"}, []string{"a", "b", "", "c"}},
		{"last record without delimiter", "a\nb", nil, []string{"a", "b"}},
		{"escaped delimiter", "a\x00b\x00", []string{"-D", `\0`}, []string{"a", "b"}},
		{"files in order", "ignored", []string{"-D", ";;", c, c}, []string{"x", "y", "z", "x", "y", "z"}},
		{"file per record", "ignored", []string{"--file-per-record", a, b}, []string{"first\nfile\x00with\nnewlines\n", ""}},
		{"stdin as one record", "all\nof\nit", []string{"--file-per-record"}, []string{"all\nof\nit"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			topic := fmt.Sprintf("delim-%d", i)
			mustCLI(t, tc.stdin, append([]string{"produce", "-b", addr, "-t", topic, "-q"}, tc.args...)...)
			recs := readAll(t, addr, topic, len(tc.want))
			for j, r := range recs {
				if string(r.Value) != tc.want[j] || r.Key != nil {
					t.Errorf("record %d = key %q value %q, want null key and value %q", j, r.Key, r.Value, tc.want[j])
				}
			}
		})
	}
}

// TestProduceFailedRecord: a record over the topic's max.message.bytes is
// refused by the broker; the command reports it and fails.
func TestProduceFailedRecord(t *testing.T) {
	addr := startTestBroker(t)
	createTestTopic(t, addr, "small", 1, map[string]string{"max.message.bytes": "200"})
	_, stderr, err := cli(t, strings.Repeat("x", 1000)+"\n", "produce", "-b", addr, "-t", "small")
	if !errors.Is(err, errProduce) || !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("err = %v, want errProduce wrapping MESSAGE_TOO_LARGE", err)
	}
	if !strings.Contains(err.Error(), "1 of 1 records failed") {
		t.Errorf("err = %v, want the failed count", err)
	}
	if !strings.Contains(stderr, "produced 0 records") || !strings.Contains(stderr, "1 records failed") {
		t.Errorf("summary %q, want 0 produced and 1 failed", stderr)
	}
}

func TestProduceAcks(t *testing.T) {
	addr := startTestBroker(t)
	for _, acks := range []string{"0", "1", "all"} {
		t.Run(acks, func(t *testing.T) {
			topic := "acks-" + acks
			mustCLI(t, "a\nb\nc\n", "produce", "-b", addr, "-t", topic, "--acks", acks, "-q", "--linger", "0s")
			if got := readAll(t, addr, topic, 3); string(got[2].Value) != "c" {
				t.Errorf("last record %q, want c", got[2].Value)
			}
		})
	}
}

// TestProduceTopicCreation: with auto-creation off, a missing topic is an
// error suggesting --create-topic, which then creates it.
func TestProduceTopicCreation(t *testing.T) {
	addr := startTestBroker(t, func(c *broker.Config) { c.AutoCreateTopics = false })
	_, _, err := cli(t, "a\n", "produce", "-b", addr, "-t", "fresh")
	if !errors.Is(err, errTopic) || !strings.Contains(err.Error(), "--create-topic") {
		t.Fatalf("err = %v, want errTopic suggesting --create-topic", err)
	}
	input := strings.Repeat("k1\tv\nk2\tv\nk3\tv\nk4\tv\n", 5)
	_, stderr := mustCLI(t, input, "produce", "-b", addr, "-t", "fresh", "-K", `\t`, "--create-topic", "4")
	if !strings.Contains(stderr, "produced 20 records") {
		t.Errorf("summary %q", stderr)
	}
	var parts []int32
	for _, r := range readAll(t, addr, "fresh", 20) {
		parts = append(parts, r.Partition)
	}
	if slices.Max(parts) > 3 {
		t.Errorf("partitions %v, want them in 0..3", parts)
	}
	// The topic exists now: --create-topic is a no-op.
	mustCLI(t, "b\n", "produce", "-b", addr, "-t", "fresh", "--create-topic", "4", "-q")
}

func TestScanRecords(t *testing.T) {
	tests := []struct {
		in, delim string
		max       int
		want      []string
		err       string
	}{
		{"", "\n", 10, nil, ""},
		{"\n", "\n", 10, []string{""}, ""},
		{"a\n\nb", "\n", 10, []string{"a", "", "b"}, ""},
		{"a|-b|-", "|-", 10, []string{"a", "b"}, ""},
		{"a||b", "|-", 10, []string{"a||b"}, ""},
		{"0123456789\n", "\n", 10, []string{"0123456789"}, ""},
		{"0123456789A\n", "\n", 10, nil, "over --batch-max-bytes"},
	}
	for _, tc := range tests {
		var got []string
		err := scanRecords(strings.NewReader(tc.in), "in", []byte(tc.delim), tc.max, func(b []byte) error {
			got = append(got, string(b))
			return nil
		})
		if tc.err != "" {
			if !errors.Is(err, errProduce) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("scan %q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("scan %q by %q = %q, %v; want %q", tc.in, tc.delim, got, err, tc.want)
		}
	}
}

func TestNextBatch(t *testing.T) {
	ctx := context.Background()
	recs := make(chan *kgo.Record, 10)
	for range 5 {
		recs <- &kgo.Record{Value: []byte("0123456789")}
	}
	if b, more := nextBatch(ctx, recs, 2, 1000); len(b) != 2 || !more {
		t.Errorf("by records: %d records, more %v; want 2, true", len(b), more)
	}
	if b, more := nextBatch(ctx, recs, 100, 15); len(b) != 2 || !more {
		t.Errorf("by bytes: %d records, more %v; want 2 (20 bytes >= 15), true", len(b), more)
	}
	if b, more := nextBatch(ctx, recs, 100, 1000); len(b) != 1 || !more {
		t.Errorf("what is there: %d records, more %v; want 1, true", len(b), more)
	}
	recs <- &kgo.Record{}
	close(recs)
	if b, more := nextBatch(ctx, recs, 100, 1000); len(b) != 1 || more {
		t.Errorf("at the end: %d records, more %v; want 1, false", len(b), more)
	}
	if b, more := nextBatch(ctx, recs, 100, 1000); len(b) != 0 || more {
		t.Errorf("after the end: %d records, more %v; want 0, false", len(b), more)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if b, more := nextBatch(cancelled, make(chan *kgo.Record), 100, 1000); len(b) != 0 || more {
		t.Errorf("cancelled: %d records, more %v; want 0, false", len(b), more)
	}
}

func BenchmarkScanRecords(b *testing.B) {
	input := []byte(compressibleLines(1000))
	b.SetBytes(int64(len(input)))
	for b.Loop() {
		err := scanRecords(bytes.NewReader(input), "in", []byte("\n"), defaultBatchMaxBytes, func([]byte) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
}

// TestProduceRecordTooLong: an input record over --batch-max-bytes stops
// the command with a clear error, after producing the records before it.
func TestProduceRecordTooLong(t *testing.T) {
	addr := startTestBroker(t)
	_, stderr, err := cli(t, "short\n"+strings.Repeat("x", 1000)+"\nnever\n", "produce", "-b", addr, "-t", "long", "--batch-max-bytes", "512")
	if !errors.Is(err, errProduce) || !strings.Contains(err.Error(), "stdin: a record is over --batch-max-bytes (512 bytes)") {
		t.Fatalf("err = %v, want errProduce naming --batch-max-bytes", err)
	}
	if !strings.Contains(stderr, "produced 1 records") {
		t.Errorf("summary %q, want the record before the long one produced", stderr)
	}
	if recs := readAll(t, addr, "long", 1); string(recs[0].Value) != "short" {
		t.Errorf("record %q, want short", recs[0].Value)
	}
}
