package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceNumbered puts n records "p<P>-<i>" on each of partitions 0..parts-1
// of a new topic, with weir produce -p.
func produceNumbered(t *testing.T, addr, topic string, parts int32, n int) {
	t.Helper()
	createTestTopic(t, addr, topic, parts, nil)
	for p := range parts {
		var in strings.Builder
		for i := range n {
			fmt.Fprintf(&in, "p%d-%d\n", p, i)
		}
		mustCLI(t, in.String(), "produce", "-b", addr, "-t", topic, "-p", fmt.Sprint(p), "-q")
	}
}

func TestConsumeOffsets(t *testing.T) {
	addr := startTestBroker(t)
	produceNumbered(t, addr, "offsets", 2, 10)
	base := []string{"consume", "-b", addr, "-t", "offsets", "-f", `%p:%o:%s\n`}
	both := func(offsets ...int) []string {
		var out []string
		for p := range 2 {
			for _, o := range offsets {
				out = append(out, fmt.Sprintf("%d:%d:p%d-%d", p, o, p, o))
			}
		}
		return out
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"last 3", []string{"-o", "-3", "-e"}, both(7, 8, 9)},
		{"last 30 of 10", []string{"-o", "-30", "-e"}, both(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)},
		{"exact", []string{"-o", "8", "-e"}, both(8, 9)},
		{"past the end", []string{"-o", "100", "-e"}, nil},
		{"end", []string{"-o", "end", "-e"}, nil},
		{"beginning of one partition", []string{"-p", "1", "-o", "beginning", "-e"}, both(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)[10:]},
		{"count without -e", []string{"-p", "0", "-c", "4"}, both(0, 1, 2, 3)[:4]},
		{"count with -o", []string{"-p", "1", "-o", "5", "-c", "2"}, both(5, 6)[2:]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr := mustCLI(t, "", append(base, tc.args...)...)
			got := lines(stdout)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("printed %q, want %q", got, tc.want)
			}
			if stderr != "" {
				t.Errorf("stderr %q", stderr)
			}
		})
	}
}

func TestConsumeErrors(t *testing.T) {
	addr := startTestBroker(t)
	produceNumbered(t, addr, "two", 2, 1)
	_, _, err := cli(t, "", "consume", "-b", addr, "-t", "missing", "-e")
	if !errors.Is(err, errTopic) || !strings.Contains(err.Error(), `"missing" does not exist`) {
		t.Errorf("missing topic: %v, want errTopic saying it does not exist", err)
	}
	_, _, err = cli(t, "", "consume", "-b", addr, "-t", "two", "-p", "2", "-e")
	if !errors.Is(err, errBadFlag) || !strings.Contains(err.Error(), "has 2 partitions") {
		t.Errorf("-p 2 of 2: %v, want errBadFlag naming the partition count", err)
	}
	// consume never auto-creates.
	if _, _, err := cli(t, "", "consume", "-b", addr, "-t", "missing", "-e"); !errors.Is(err, errTopic) {
		t.Errorf("second consume of a missing topic: %v, want errTopic", err)
	}
}

// TestConsumeExitAtEnd: -e stops at the high watermark of the
// start, even when records arrive meanwhile; an empty topic exits at once.
func TestConsumeExitAtEnd(t *testing.T) {
	addr := startTestBroker(t)
	createTestTopic(t, addr, "empty", 3, nil)
	if stdout, _ := mustCLI(t, "", "consume", "-b", addr, "-t", "empty", "-e"); stdout != "" {
		t.Errorf("empty topic printed %q", stdout)
	}
	produceNumbered(t, addr, "growing", 1, 3)
	// A writer that produces more records when the first line is printed,
	// before weir consume can reach the old end.
	w := &produceOnWrite{t: t, addr: addr, topic: "growing"}
	root := newRootCmd()
	root.SetArgs([]string{"consume", "-b", addr, "-t", "growing", "-e"})
	root.SetOut(w)
	root.SetErr(io.Discard)
	if err := root.ExecuteContext(waitContext(t)); err != nil {
		t.Fatal(err)
	}
	if got := w.out.String(); got != "p0-0\np0-1\np0-2\n" {
		t.Errorf("printed %q, want the 3 records of the start", got)
	}
	if !w.produced {
		t.Error("nothing was produced during the consume")
	}
}

type produceOnWrite struct {
	t        *testing.T
	addr     string
	topic    string
	produced bool
	out      strings.Builder
}

func (w *produceOnWrite) Write(p []byte) (int, error) {
	if !w.produced {
		w.produced = true
		cl := newTestClient(w.t, w.addr, kgo.DefaultProduceTopic(w.topic))
		if err := cl.ProduceSync(waitContext(w.t), &kgo.Record{Value: []byte("later")}).FirstErr(); err != nil {
			w.t.Errorf("produce during consume: %v", err)
		}
	}
	return w.out.Write(p)
}

// TestConsumeGroupCommits: a group member commits what it printed, so the
// next run of the same group prints only newer records.
func TestConsumeGroupCommits(t *testing.T) {
	addr := startTestBroker(t)
	produceNumbered(t, addr, "grouped", 2, 5)
	group := []string{"consume", "-b", addr, "-t", "grouped", "-G", "g1", "-e", "-f", `%s\n`}

	stdout, _ := mustCLI(t, "", group...)
	if got := lines(stdout); len(got) != 10 {
		t.Fatalf("first run printed %q, want the 10 records", got)
	}
	if got := committed(t, addr, "g1", "grouped", 2); !slices.Equal(got, []int64{5, 5}) {
		t.Errorf("committed offsets %v, want [5 5]", got)
	}
	if stdout, _ := mustCLI(t, "", group...); stdout != "" {
		t.Errorf("second run printed %q, want nothing new", stdout)
	}
	mustCLI(t, "new-1\nnew-2\n", "produce", "-b", addr, "-t", "grouped", "-p", "1", "-q")
	stdout, _ = mustCLI(t, "", group...)
	if got := lines(stdout); !slices.Equal(got, []string{"new-1", "new-2"}) {
		t.Errorf("third run printed %q, want the 2 new records", got)
	}
	// -c commits only what it printed.
	stdout, _ = mustCLI(t, "", "consume", "-b", addr, "-t", "grouped", "-G", "g2", "-c", "3", "-o", "beginning")
	if n := len(lines(stdout)); n != 3 {
		t.Errorf("-c 3 printed %d records", n)
	}
	got := committed(t, addr, "g2", "grouped", 2)
	if sum := max(got[0], 0) + max(got[1], 0); sum != 3 {
		t.Errorf("group g2 committed %v after printing 3 records", got)
	}
	// An -o for a group applies where nothing is committed.
	stdout, _ = mustCLI(t, "", "consume", "-b", addr, "-t", "grouped", "-G", "g3", "-o", "-1", "-e")
	if got := lines(stdout); !slices.Equal(sorted(got), []string{"new-2", "p0-4"}) {
		t.Errorf("new group with -o -1 printed %q, want the last record of each partition", got)
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }

// committed returns the group's committed offset per partition, -1 where
// there is none.
func committed(t *testing.T, addr, group, topic string, parts int32) []int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range parts {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(waitContext(t), newTestClient(t, addr))
	if err != nil {
		t.Fatalf("OffsetFetch: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("OffsetFetch: %v", err)
	}
	out := make([]int64, parts)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[rp.Partition] = rp.Offset
		}
	}
	return out
}

func TestParseOffset(t *testing.T) {
	tests := []struct {
		in       string
		want     startAt
		earliest int64
		latest   int64
		start    int64
	}{
		{"beginning", startAt{kind: startBeginning}, 3, 10, 3},
		{"end", startAt{kind: startEnd}, 3, 10, 10},
		{"0", startAt{kind: startExact, n: 0}, 3, 10, 3},
		{"5", startAt{kind: startExact, n: 5}, 3, 10, 5},
		{"11", startAt{kind: startExact, n: 11}, 3, 10, 10},
		{"-2", startAt{kind: startLast, n: 2}, 3, 10, 8},
		{"-9", startAt{kind: startLast, n: 9}, 3, 10, 3},
		{"-0", startAt{kind: startLast, n: 0}, 3, 10, 10},
	}
	for _, tc := range tests {
		got, err := parseOffset(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseOffset(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if s := got.resolve(tc.earliest, tc.latest); s != tc.start {
			t.Errorf("-o %s in [%d,%d) starts at %d, want %d", tc.in, tc.earliest, tc.latest, s, tc.start)
		}
	}
	for _, bad := range []string{"", "start", "1e3", "0x10", "--1", "99999999999999999999"} {
		if _, err := parseOffset(bad); !errors.Is(err, errBadFlag) {
			t.Errorf("parseOffset(%q) = %v, want errBadFlag", bad, err)
		}
	}
}

func TestFormat(t *testing.T) {
	r := &kgo.Record{
		Topic: "tp", Partition: 2, Offset: 41, Key: nil, Value: []byte("v a l"),
		Timestamp: time.UnixMilli(1700000000123),
		Headers:   []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}},
	}
	empty := &kgo.Record{Topic: "tp", Key: []byte{}, Value: nil}
	tests := []struct {
		format string
		rec    *kgo.Record
		want   string
	}{
		{`%s\n`, r, "v a l\n"},
		{`%t/%p/%o`, r, "tp/2/41"},
		{`[%k](%K) [%s](%S)`, r, "[](-1) [v a l](5)"},
		{`[%k](%K) [%s](%S)`, empty, "[](0) [](-1)"},
		{`%T`, r, "1700000000123"},
		{`%T`, empty, "-1"},
		{`%h`, r, "a=1,b="},
		{`%h|`, empty, "|"},
		{`100%% %s\t\x41\r\n`, r, "100% v a l\tA\r\n"},
		{`no directives`, r, "no directives"},
		{``, r, ""},
	}
	for _, tc := range tests {
		ops, err := parseFormat(tc.format)
		if err != nil {
			t.Errorf("parseFormat(%q): %v", tc.format, err)
			continue
		}
		var b strings.Builder
		w := bufio.NewWriter(&b)
		writeRecord(w, ops, tc.rec)
		w.Flush()
		if b.String() != tc.want {
			t.Errorf("format %q printed %q, want %q", tc.format, b.String(), tc.want)
		}
	}
}

func TestEndTracker(t *testing.T) {
	finished := 0
	tr := newEndTracker(func() { finished++ })
	if done, _ := tr.done(); done {
		t.Fatal("done before any assignment")
	}
	tr.assign(map[int32]int64{0: 0, 1: 5}, map[int32]int64{0: 3, 1: 5})
	if done, _ := tr.done(); done || finished != 0 {
		t.Fatal("done with partition 0 short of its end")
	}
	if !tr.beyond(1, 5) || tr.beyond(0, 2) || tr.beyond(7, 100) {
		t.Error("beyond: want true at the limit, false below it and for unknown partitions")
	}
	tr.consumed(0, 1)
	if done, _ := tr.done(); done {
		t.Fatal("done at offset 1 of [0,3)")
	}
	tr.revoke([]int32{0, 1}) // an eager rebalance
	if done, _ := tr.done(); done {
		t.Fatal("a revocation finished the consumer")
	}
	tr.assign(map[int32]int64{0: 2}, map[int32]int64{0: 3})
	tr.consumed(0, 2)
	if done, err := tr.done(); !done || err != nil || finished != 1 {
		t.Fatalf("after the last record: done %v, err %v, finish called %d times; want done once", done, err, finished)
	}
	tr.consumed(0, 3)
	if finished != 1 {
		t.Errorf("finish called %d times, want once", finished)
	}

	failing := newEndTracker(func() {})
	failing.fail(errConsume)
	if done, err := failing.done(); !done || !errors.Is(err, errConsume) {
		t.Errorf("after fail: done %v, err %v", done, err)
	}
}

func BenchmarkWriteRecord(b *testing.B) {
	ops, err := parseFormat(`%t %p %o %k=%s %h %T\n`)
	if err != nil {
		b.Fatal(err)
	}
	r := &kgo.Record{Topic: "events", Partition: 3, Offset: 123456, Key: []byte("key-0001"),
		Value: []byte(strings.Repeat("v", 100)), Timestamp: time.UnixMilli(1700000000000),
		Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("cli")}}}
	w := bufio.NewWriter(io.Discard)
	b.ReportAllocs()
	for b.Loop() {
		writeRecord(w, ops, r)
	}
	w.Flush()
}

// kcatPath returns kcat, skipping the test when it is missing, except under
// CI=true, where a missing kcat fails it (as in transport/e2e).
func kcatPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kcat not found (%v), and CI=true: .ci/run must install the Debian package kcat", err)
		}
		t.Skip("kcat not found: install the Debian package kcat (make deps) to run the kcat comparison")
	}
	return path
}

func runKcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcatPath(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// TestKcatAgrees: weir consume -f prints what kcat -f prints for the same
// records and format, and each reads what the other produced with -K.
func TestKcatAgrees(t *testing.T) {
	kcatPath(t)
	addr := startTestBroker(t)
	input, n := roundTripInput()
	mustCLI(t, input, "produce", "-b", addr, "-t", "by-weir", "-K", `\t`, "-H", "src=cli", "--create-topic", "3", "-q")
	const format = `%t %p %o [%k](%K) [%s](%S) %T %h\n`
	kcat := lines(runKcat(t, "", "-C", "-b", addr, "-t", "by-weir", "-e", "-q", "-f", format))
	stdout, _ := mustCLI(t, "", "consume", "-b", addr, "-t", "by-weir", "-e", "-f", format)
	weir := lines(stdout)
	if len(weir) != n || !slices.Equal(sorted(weir), sorted(kcat)) {
		t.Errorf("weir consume printed\n%s\nkcat printed\n%s", strings.Join(weir, "\n"), strings.Join(kcat, "\n"))
	}

	runKcat(t, input, "-P", "-b", addr, "-t", "by-kcat", "-K", "\t")
	stdout, _ = mustCLI(t, "", "consume", "-b", addr, "-t", "by-kcat", "-e", "-f", `%k\t%s\n`)
	var want []string
	for _, l := range lines(input) {
		if !strings.Contains(l, "\t") {
			l = "\t" + l // kcat sends it with a null key, printed as nothing
		}
		want = append(want, l)
	}
	if got := lines(stdout); !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("weir consume of kcat's records printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
