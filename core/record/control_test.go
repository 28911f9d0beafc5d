package record

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestControlBatchRoundTrip(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := BuildControlBatch(ControlBatchOptions{ProducerID: 7, ProducerEpoch: 3, Commit: commit, CoordinatorEpoch: 11, Timestamp: 1234})
		h, n, err := Next(b, len(b))
		if err != nil || n != len(b) {
			t.Fatalf("Next: %d of %d bytes, %v", n, len(b), err)
		}
		if !h.Control() || !h.Transactional() || h.ProducerID != 7 || h.ProducerEpoch != 3 || h.BaseSequence != -1 || h.RecordCount != 1 {
			t.Fatalf("header %+v", h)
		}
		m, err := ParseControlBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		want := ControlAbort
		if commit {
			want = ControlCommit
		}
		if m.Type != want || m.CoordinatorEpoch != 11 {
			t.Fatalf("marker %+v, want type %s epoch 11", m, want)
		}
		// Kafka's own reading of the same bytes (kmsg's EndTxnMarker and
		// ControlRecordKey, as franz-go's consumer decodes them).
		recs, err := Records(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		var key kmsg.ControlRecordKey
		if err := key.ReadFrom(recs[0].Key); err != nil || key.Version != 0 || int16(key.Type) != int16(want) {
			t.Fatalf("kmsg key %+v, %v", key, err)
		}
		var val kmsg.EndTxnMarker
		if err := val.ReadFrom(recs[0].Value); err != nil || val.CoordinatorEpoch != 11 {
			t.Fatalf("kmsg value %+v, %v", val, err)
		}
	}
}

func TestParseControlBatchRefuses(t *testing.T) {
	plain, err := Build(DefaultBuildOptions(), []Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseControlBatch(plain); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("plain batch: %v, want ErrCorrupt", err)
	}
	opts := DefaultBuildOptions()
	opts.Control, opts.Transactional = true, true
	odd, err := Build(opts, []Record{{Key: []byte{0, 0, 0, 5}, Value: []byte{0, 0, 0, 0, 0, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseControlBatch(odd); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("control type 5: %v, want ErrCorrupt", err)
	}
	short, err := Build(opts, []Record{{Key: []byte{0, 0}, Value: nil}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseControlBatch(short); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short key: %v, want ErrCorrupt", err)
	}
}
