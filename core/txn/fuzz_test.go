package txn

import (
	"maps"
	"testing"
	"time"
)

// FuzzDecodeValue: no input makes the record decoders panic, and a value
// that decodes encodes back (as version 0) to one that decodes the same.
func FuzzDecodeValue(f *testing.F) {
	full := meta{ProducerID: 7, Epoch: 2, Timeout: time.Minute, State: Ongoing, Start: t0, Updated: t0,
		Partitions: map[TopicPartition]struct{}{{"a", 0}: {}, {"b", 3}: {}}}
	valid := encodeValue(&full)
	empty := encodeValue(&meta{ProducerID: 1, State: Empty, Updated: t0})
	for _, seed := range [][]byte{nil, {}, {0, 0}, {0, 1}, valid, empty, append(valid, 0xff), valid[:len(valid)/2],
		encodeKey("id"), {0x7f, 0xff, 0xff, 0xff}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeKey(b)
		m, err := decodeValue(b)
		if err != nil {
			return
		}
		again, err := decodeValue(encodeValue(&m))
		if err != nil {
			t.Fatalf("re-encoded value does not decode: %v", err)
		}
		if again.ProducerID != m.ProducerID || again.Epoch != m.Epoch || again.State != m.State ||
			again.Timeout.Milliseconds() != m.Timeout.Milliseconds() || !maps.Equal(again.Partitions, m.Partitions) ||
			!again.Updated.Equal(m.Updated) || !again.Start.Equal(m.Start) {
			t.Fatalf("round trip: %+v became %+v", m, again)
		}
	})
}
