package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The codecs every client is tested with, by the name kcat's -z takes, with
// the codec number a batch's attributes carry.
var codecs = []struct {
	Name string
	ID   uint8
}{
	{"none", 0}, {"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4},
}

func franzCodec(t testing.TB, name string) kgo.CompressionCodec {
	switch name {
	case "none":
		return kgo.NoCompression()
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	t.Fatalf("unknown codec %q", name)
	return kgo.NoCompression()
}

func saramaCodec(t testing.TB, name string) sarama.CompressionCodec {
	switch name {
	case "none":
		return sarama.CompressionNone
	case "gzip":
		return sarama.CompressionGZIP
	case "snappy":
		return sarama.CompressionSnappy
	case "lz4":
		return sarama.CompressionLZ4
	case "zstd":
		return sarama.CompressionZSTD
	}
	t.Fatalf("unknown codec %q", name)
	return sarama.CompressionNone
}

// A client as the cross-client matrix uses it: produce messages with a codec,
// consume n messages from the start of every partition.
type client struct {
	Name    string
	Produce func(t testing.TB, addr, topic, codec string, msgs []msg)
	Consume func(t testing.TB, addr, topic string, n int) []msg
}

var clients = []client{
	{"franz-go", produceFranz, func(t testing.TB, addr, topic string, n int) []msg {
		return franzMessages(consumeFranz(t, addr, topic, n))
	}},
	{"sarama", produceSarama, consumeSarama},
	{"kcat", produceKcat, consumeKcat},
}

// produceFranz produces msgs with franz-go (idempotent, acks=all: its
// defaults) and fails the test unless every record is acknowledged.
func produceFranz(t testing.TB, addr, topic, codec string, msgs []msg) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(franzCodec(t, codec)))
	defer cl.Close()
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = &kgo.Record{Key: []byte(m.Key), Value: []byte(m.Value), Headers: m.Headers}
	}
	if err := cl.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatalf("franz-go produce to %s (%s): %v", topic, codec, err)
	}
}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "weir-e2e"
	cfg.Net.DialTimeout = 10 * time.Second
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	return cfg
}

// produceSarama produces msgs with a sarama SyncProducer (acks=all).
func produceSarama(t testing.TB, addr, topic, codec string, msgs []msg) {
	t.Helper()
	cfg := saramaConfig()
	cfg.Producer.Compression = saramaCodec(t, codec)
	p, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	defer p.Close()
	pms := make([]*sarama.ProducerMessage, len(msgs))
	for i, m := range msgs {
		pm := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(m.Key), Value: sarama.StringEncoder(m.Value)}
		for _, h := range m.Headers {
			pm.Headers = append(pm.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		pms[i] = pm
	}
	if err := p.SendMessages(pms); err != nil {
		t.Fatalf("sarama produce to %s (%s): %v", topic, codec, err)
	}
}

// consumeSarama reads n messages of topic from the oldest offset of every
// partition with sarama's partition consumers, in partition then offset
// order.
func consumeSarama(t testing.TB, addr, topic string, n int) []msg {
	t.Helper()
	c, err := sarama.NewConsumer([]string{addr}, saramaConfig())
	if err != nil {
		t.Fatalf("sarama.NewConsumer: %v", err)
	}
	defer c.Close()
	parts, err := c.Partitions(topic)
	if err != nil {
		t.Fatalf("sarama partitions of %s: %v", topic, err)
	}
	out := make(chan msg)
	errs := make(chan error, len(parts))
	done := make(chan struct{})
	defer close(done)
	for _, p := range parts {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("sarama consume %s/%d: %v", topic, p, err)
		}
		defer pc.Close()
		go func() {
			for {
				select {
				case m, ok := <-pc.Messages():
					if !ok {
						return
					}
					got := msg{Key: string(m.Key), Value: string(m.Value), Partition: m.Partition, Offset: m.Offset}
					for _, h := range m.Headers {
						got.Headers = append(got.Headers, kgo.RecordHeader{Key: string(h.Key), Value: h.Value})
					}
					select {
					case out <- got:
					case <-done:
						return
					}
				case err, ok := <-pc.Errors():
					if ok {
						errs <- err
					}
					return
				case <-done:
					return
				}
			}
		}()
	}
	deadline := time.After(waitTimeout)
	var got []msg
	for len(got) < n {
		select {
		case m := <-out:
			got = append(got, m)
		case err := <-errs:
			t.Fatalf("sarama consume %s: %v", topic, err)
		case <-deadline:
			t.Fatalf("sarama consumer: %d of %d messages of %s before the deadline", len(got), n, topic)
		}
	}
	sort.SliceStable(got, func(i, j int) bool {
		if got[i].Partition != got[j].Partition {
			return got[i].Partition < got[j].Partition
		}
		return got[i].Offset < got[j].Offset
	})
	return got
}

// produceKcat produces msgs with kcat -P, one "key<TAB>value" line each.
// Headers are not sent: kcat can only give every message the same ones.
func produceKcat(t testing.TB, addr, topic, codec string, msgs []msg) {
	t.Helper()
	var in bytes.Buffer
	for _, m := range msgs {
		if strings.ContainsAny(m.Key+m.Value, "\t\n") {
			t.Fatalf("kcat cannot produce %v: it has a tab or newline", m)
		}
		fmt.Fprintf(&in, "%s\t%s\n", m.Key, m.Value)
	}
	runKcat(t, in.Bytes(), "-b", addr, "-P", "-t", topic, "-K", `\t`, "-z", codec, "-X", "acks=all")
}

// kcatMessage is one line of kcat -J output.
type kcatMessage struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Payload   *string `json:"payload"`
}

// consumeKcat reads topic from the beginning of every partition with kcat -C
// -e (exit at the end) and -J (one JSON object a message), and checks it
// read n messages (n < 0: any number).
func consumeKcat(t testing.TB, addr, topic string, n int) []msg {
	t.Helper()
	out := runKcat(t, nil, "-b", addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-J")
	got := parseKcatJSON(t, out)
	if n >= 0 && len(got) != n { // n < 0: whatever there is
		t.Fatalf("kcat consumed %d messages of %s, want %d", len(got), topic, n)
	}
	sort.SliceStable(got, func(i, j int) bool {
		if got[i].Partition != got[j].Partition {
			return got[i].Partition < got[j].Partition
		}
		return got[i].Offset < got[j].Offset
	})
	return got
}

func parseKcatJSON(t testing.TB, out []byte) []msg {
	t.Helper()
	var got []msg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var km kcatMessage
		if err := json.Unmarshal(sc.Bytes(), &km); err != nil {
			t.Fatalf("kcat -J line %q: %v", sc.Text(), err)
		}
		m := msg{Partition: km.Partition, Offset: km.Offset}
		if km.Key != nil {
			m.Key = *km.Key
		}
		if km.Payload != nil {
			m.Value = *km.Payload
		}
		got = append(got, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
