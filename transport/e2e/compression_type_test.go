package e2e_test

import (
	"testing"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/plugins/codec"
)

// TestCompressionTypeRecompresses: a topic's compression.type makes the broker
// recompress what real clients send, and every client reads the result. Each
// producer uses a codec other than the topic's; the stored batches (fetched
// raw) carry the topic's codec, and franz-go, sarama and kcat consume the
// records intact.
func TestCompressionTypeRecompresses(t *testing.T) {
	b := startBroker(t, t.TempDir())
	addr := b.Addr()
	cases := []struct {
		topicType string
		want      codec.ID
		producer  string // client codec
		produce   func(t testing.TB, addr, topic, codec string, msgs []msg)
	}{
		{"zstd", codec.Zstd, "snappy", produceFranz},
		{"gzip:level=9", codec.Gzip, "lz4", produceSarama},
		{"uncompressed", codec.None, "zstd", produceKcat},
		{"lz4", codec.LZ4, "gzip", produceKcat},
	}
	for _, tc := range cases {
		t.Run(tc.topicType, func(t *testing.T) {
			topic := "ctype-" + tc.want.String()
			createTopic(t, addr, topic, 1, map[string]string{"compression.type": tc.topicType})
			msgs := textMessages(topic, 20)
			tc.produce(t, addr, topic, tc.producer, msgs)

			cl := newClient(t, addr)
			for i, batch := range fetchBatches(t, cl, topic, len(msgs)) {
				h, err := record.ParseHeader(batch)
				if err != nil {
					t.Fatal(err)
				}
				if got := codec.ID(h.Codec()); got != tc.want {
					t.Errorf("stored batch %d under %s, want %s (producer sent %s)", i, got, tc.want, tc.producer)
				}
			}
			sameMessages(t, "franz-go", franzMessages(consumeFranz(t, addr, topic, len(msgs))), msgs)
			sameMessages(t, "sarama", consumeSarama(t, addr, topic, len(msgs)), msgs)
			if _, ok := findKcat(t); ok {
				sameMessages(t, "kcat", consumeKcat(t, addr, topic, len(msgs)), msgs)
			}
		})
	}
}
