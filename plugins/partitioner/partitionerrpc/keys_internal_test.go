package partitionerrpc

import (
	"bytes"
	"errors"
	"testing"
)

func TestJoinSplitKeys(t *testing.T) {
	keys := [][]byte{nil, {}, []byte("a"), nil, []byte("longer key"), {}}
	data, lengths := joinKeys(keys)
	if string(data) != "alonger key" {
		t.Fatalf("data %q", data)
	}
	got, err := splitKeys(data, lengths)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(keys) {
		t.Fatalf("%d keys back, want %d", len(got), len(keys))
	}
	for i := range keys {
		if (got[i] == nil) != (keys[i] == nil) || !bytes.Equal(got[i], keys[i]) {
			t.Errorf("key %d: got %q (nil %v), want %q (nil %v)", i, got[i], got[i] == nil, keys[i], keys[i] == nil)
		}
	}
	// A split key cannot grow into its neighbour.
	if cap(got[2]) != 1 {
		t.Errorf("key 2 has capacity %d, want 1", cap(got[2]))
	}
}

func TestSplitKeysRejectsMalformed(t *testing.T) {
	for _, tc := range []struct {
		data    string
		lengths []int32
	}{
		{"abc", []int32{2}},     // bytes left over
		{"abc", []int32{4}},     // past the end
		{"abc", []int32{-2, 3}}, // below -1
		{"", []int32{1}},
		{"ab", []int32{1, 1, 1}},
	} {
		if _, err := splitKeys([]byte(tc.data), tc.lengths); !errors.Is(err, errMalformed) {
			t.Errorf("splitKeys(%q, %v): %v, want errMalformed", tc.data, tc.lengths, err)
		}
	}
}

// FuzzSplitKeys feeds the plugin side's decoder arbitrary requests: it must
// reject or split, never panic, and what it splits must join back.
func FuzzSplitKeys(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add([]byte("abc"), []byte{1, 2})
	f.Add([]byte("abc"), []byte{0xff, 3})
	f.Add([]byte("abc"), []byte{0xfe, 0x7f})
	f.Fuzz(func(t *testing.T, data, rawLengths []byte) {
		lengths := make([]int32, len(rawLengths))
		for i, b := range rawLengths {
			lengths[i] = int32(int8(b))
		}
		keys, err := splitKeys(data, lengths)
		if err != nil {
			return
		}
		data2, lengths2 := joinKeys(keys)
		if !bytes.Equal(data, data2) || len(lengths) != len(lengths2) {
			t.Fatalf("join(split(%q, %v)) = %q, %v", data, lengths, data2, lengths2)
		}
		for i := range lengths {
			if lengths[i] != lengths2[i] {
				t.Fatalf("length %d: %d, then %d", i, lengths[i], lengths2[i])
			}
		}
	})
}
