package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// kcat is librdkafka (Debian 12: kcat 1.7.1, librdkafka 2.0.2), the client
// with the strictest expectations of the broker's API versions.

// TestKcatMetadata: kcat -L lists the broker at its advertised address and
// every topic with its partitions, each led by the one broker.
func TestKcatMetadata(t *testing.T) {
	kcatPath(t)
	b := startBroker(t, t.TempDir())
	createTopic(t, b.Addr(), "kcat-meta-a", 1, nil)
	createTopic(t, b.Addr(), "kcat-meta-b", 3, nil)

	var md struct {
		Brokers []struct {
			ID   int32  `json:"id"`
			Name string `json:"name"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string `json:"topic"`
			Error      string `json:"error"`
			Partitions []struct {
				Partition int32 `json:"partition"`
				Leader    int32 `json:"leader"`
				Error     string
			} `json:"partitions"`
		} `json:"topics"`
	}
	out := runKcat(t, nil, "-b", b.Addr(), "-L", "-J")
	if err := json.Unmarshal(out, &md); err != nil {
		t.Fatalf("kcat -L -J: %v\n%s", err, out)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != 0 || md.Brokers[0].Name != b.Addr() {
		t.Errorf("brokers %+v, want one, id 0, at %s", md.Brokers, b.Addr())
	}
	partitions := map[string][]int32{}
	for _, tp := range md.Topics {
		if tp.Error != "" {
			t.Errorf("topic %s: error %s", tp.Topic, tp.Error)
		}
		for _, p := range tp.Partitions {
			if p.Leader != 0 || p.Error != "" {
				t.Errorf("%s/%d: leader %d, error %q", tp.Topic, p.Partition, p.Leader, p.Error)
			}
			partitions[tp.Topic] = append(partitions[tp.Topic], p.Partition)
		}
	}
	for topic, want := range map[string][]int32{"kcat-meta-a": {0}, "kcat-meta-b": {0, 1, 2}} {
		got := partitions[topic]
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("topic %s: partitions %v, want %v", topic, got, want)
		}
	}

	// -t asks for one topic; an unknown one is auto-created, like Kafka.
	out = runKcat(t, nil, "-b", b.Addr(), "-L", "-J", "-t", "kcat-meta-auto")
	if err := json.Unmarshal(out, &md); err != nil {
		t.Fatalf("kcat -L -J -t: %v\n%s", err, out)
	}
	if len(md.Topics) != 1 || md.Topics[0].Topic != "kcat-meta-auto" || len(md.Topics[0].Partitions) != 1 {
		t.Errorf("kcat -L -t kcat-meta-auto: %s", out)
	}
}

// linesFile returns a file of text lines as a user would pipe into kcat:
// varied lengths (one of 200 KiB), UTF-8, tabs, spaces at the ends, no empty
// lines (kcat skips those).
func linesFile(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		b.WriteString(textLine(i))
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "the last line, %s\n", strings.Repeat("long ", 200<<10/5))
	return b.Bytes()
}

// textLine is line i of linesFile, without its newline.
func textLine(i int) string {
	switch i % 5 {
	case 0:
		return fmt.Sprintf("line %d", i)
	case 1:
		return fmt.Sprintf("  línea %d — ünïcödé ✓ 日本語 \t tab", i)
	case 2:
		return fmt.Sprintf("%d %s", i, strings.Repeat("abc ", i%97))
	case 3:
		return fmt.Sprintf(`{"n":%d,"json":"with \"quotes\" and \\ backslashes"}`, i)
	default:
		return fmt.Sprintf("%d\x01\x7f binary-ish bytes %%s %%d", i)
	}
}

// TestKcatFileRoundTrip: for every codec, kcat -P sends a file of lines and
// kcat -C prints them back byte for byte; franz-go confirms the batches are
// stored with that codec.
func TestKcatFileRoundTrip(t *testing.T) {
	kcatPath(t)
	b := startBroker(t, t.TempDir())
	data := linesFile(2000)
	lines := bytes.Count(data, []byte("\n"))
	file := writeFile(t, "lines.txt", data)
	for _, codec := range codecs {
		t.Run(codec.Name, func(t *testing.T) {
			topic := "kcat-file-" + codec.Name
			createTopic(t, b.Addr(), topic, 1, nil)
			runKcat(t, nil, "-b", b.Addr(), "-P", "-t", topic, "-z", codec.Name, "-l", file)
			out := runKcat(t, nil, "-b", b.Addr(), "-C", "-t", topic, "-o", "beginning", "-e", "-q")
			if !bytes.Equal(out, data) {
				t.Fatalf("kcat read back %d bytes in %d lines, want the file's %d bytes in %d lines",
					len(out), bytes.Count(out, []byte("\n")), len(data), lines)
			}
			seen := map[uint8]int{}
			for _, r := range consumeFranz(t, b.Addr(), topic, lines) {
				seen[r.Attrs.CompressionType()]++
			}
			// librdkafka sends a batch uncompressed when compressing does
			// not shrink it: these lines compress, except in a batch of a
			// few of them (a linger cut short on a busy machine: a run
			// stored 2 of 2001 uncompressed under zstd, whose frame
			// outweighs two lines). The rest carry the codec.
			const fewLines = 10
			plain := seen[0]
			if codec.ID == 0 {
				plain = 0
			}
			if seen[codec.ID]+plain != lines || plain > fewLines {
				t.Errorf("records by stored codec %v, want all %d with codec %d (%s), at most %d of them uncompressed",
					seen, lines, codec.ID, codec.Name, fewLines)
			}
		})
	}
}

// TestKcatConsumerGroup: kcat -G consumes as a member of a group (join, sync,
// heartbeat, offset commit); a second run of the same group then reads only
// what was produced after the first, so librdkafka found its committed
// offsets.
func TestKcatConsumerGroup(t *testing.T) {
	kcatPath(t)
	b := startBroker(t, t.TempDir())
	const topic, group, partitions = "kcat-group", "kcat-group-g", 4
	createTopic(t, b.Addr(), topic, partitions, nil)
	producer := newClient(t, b.Addr())

	consume := func(n int) []string {
		t.Helper()
		out := runKcat(t, nil, "-b", b.Addr(), "-G", group, "-c", fmt.Sprint(n), "-q", "-f", "%s\n",
			"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=200",
			topic)
		got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		slices.Sort(got)
		return got
	}

	first := batchValues("kcat-first", 200)
	produceValues(t, producer, topic, first)
	if got := consume(len(first)); !slices.Equal(got, first) {
		t.Fatalf("first run of kcat -G read %d values (%.3q...), want the %d produced", len(got), got[:min(3, len(got))], len(first))
	}
	ends := endOffsets(t, b.Addr(), topic, partitions)
	if committed := committedOffsets(t, b.Addr(), group, topic, partitions); !slices.Equal(committed, ends) {
		t.Errorf("after kcat -G closed: committed %v, want the end offsets %v", committed, ends)
	}

	second := batchValues("kcat-second", 100)
	produceValues(t, producer, topic, second)
	if got := consume(len(second)); !slices.Equal(got, second) {
		t.Fatalf("second run of kcat -G read %d values (%.3q...), want only the %d produced since", len(got), got[:min(3, len(got))], len(second))
	}
}

// TestKcatBesideFetchSessions: kcat (librdkafka 2.0.2, which sends
// sessionless fetches) reads every record of a 40-partition topic on a
// broker that serves franz-go the same topic through an incremental fetch
// session, and both see all of it.
func TestKcatBesideFetchSessions(t *testing.T) {
	kcatPath(t)
	b := startBroker(t, t.TempDir())
	const topic = "kcat-sessions"
	createTopic(t, b.Addr(), topic, 40, nil)
	values := batchValues("kcat-sessions", 400)
	produceValues(t, newClient(t, b.Addr()), topic, values)

	var viaFranz []string
	for _, r := range consumeFranz(t, b.Addr(), topic, len(values)) {
		viaFranz = append(viaFranz, string(r.Value))
	}
	slices.Sort(viaFranz)
	out := runKcat(t, nil, "-b", b.Addr(), "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")
	viaKcat := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	slices.Sort(viaKcat)
	if !slices.Equal(viaFranz, values) || !slices.Equal(viaKcat, values) {
		t.Fatalf("franz-go read %d values, kcat %d; want the %d produced", len(viaFranz), len(viaKcat), len(values))
	}
	kinds := map[string]float64{}
	mfs, err := b.Node().Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "weir_fetch_requests_total" {
			for _, m := range mf.Metric {
				kinds[m.Label[0].GetValue()] = m.Counter.GetValue()
			}
		}
	}
	t.Logf("fetch requests by session kind: %v", kinds)
	if kinds["full"] == 0 || kinds["sessionless"] == 0 {
		t.Fatalf("fetch requests by session kind %v: want franz-go's session and kcat's sessionless fetches", kinds)
	}
}
