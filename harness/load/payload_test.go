package load

import (
	"bytes"
	"math"
	"slices"
	"testing"

	"github.com/weir-broker/weir/harness/spec"
)

func TestGenSizes(t *testing.T) {
	w := spec.Defaults().Workload
	corpus := bytes.Repeat([]byte("x"), 1<<20)
	for _, m := range []spec.MessageSize{
		{Distribution: spec.Fixed, Size: 100},
		{Distribution: spec.Uniform, Min: 10, Max: 20},
		{Distribution: spec.Normal, Mean: 1000, Stddev: 100, Min: 500, Max: 1500},
		{Distribution: spec.Exponential, Mean: 1000, Min: 8, Max: 100000},
	} {
		w.MessageSize = m
		g := newGen(w, corpus, 7, 0)
		lo, hi := m.Bounds()
		var sum float64
		const n = 20_000
		for range n {
			s := g.size()
			if int64(s) < lo || int64(s) > hi {
				t.Fatalf("%v: size %d outside [%d, %d]", m, s, lo, hi)
			}
			sum += float64(s)
		}
		want := float64(m.Mean)
		switch m.Distribution {
		case spec.Fixed:
			want = float64(m.Size)
		case spec.Uniform:
			want = float64(m.Min+m.Max) / 2
		}
		if mean := sum / n; math.Abs(mean-want) > 0.03*want {
			t.Errorf("%v: mean size %.1f, want about %.0f", m, mean, want)
		}
	}
}

func TestGenDeterministic(t *testing.T) {
	w := spec.Defaults().Workload
	w.Keys = spec.Keys{Kind: "zipf", Count: 50, ZipfS: 1.5}
	w.MessageSize = spec.MessageSize{Distribution: spec.Uniform, Min: 8, Max: 300}
	corpus, err := makeCorpus(w, nil, 9)
	if err != nil {
		t.Fatal(err)
	}
	a, b := newGen(w, corpus, 9, 1), newGen(w, corpus, 9, 1)
	other := newGen(w, corpus, 9, 2)
	differs := false
	for range 1000 {
		ka, kb, ko := a.key(), b.key(), other.key()
		va, vb := a.value(a.size()), b.value(b.size())
		if !bytes.Equal(ka, kb) || !bytes.Equal(va, vb) {
			t.Fatal("two generators with one seed differ")
		}
		if !bytes.Equal(ka, ko) {
			differs = true
		}
		other.value(other.size())
	}
	if !differs {
		t.Error("producers 1 and 2 draw the same keys")
	}
}

func TestGenKeys(t *testing.T) {
	w := spec.Defaults().Workload
	g := newGen(w, []byte("corpus"), 1, 0)
	if k := g.key(); k != nil {
		t.Errorf("keys none gave %q", k)
	}
	w.Keys = spec.Keys{Kind: "sequential", Count: 3}
	g = newGen(w, []byte("corpus"), 1, 1)
	var got []string
	for range 4 {
		got = append(got, string(g.key()))
	}
	if want := []string{"key-1", "key-2", "key-0", "key-1"}; !slices.Equal(got, want) {
		t.Errorf("sequential keys of producer 1: %q, want %q", got, want)
	}
}

func TestTimestamp(t *testing.T) {
	v := make([]byte, 20)
	putTimestamp(v, 1234567890123)
	if ts, ok := timestamp(v); !ok || ts != 1234567890123 {
		t.Errorf("timestamp = %d, %v", ts, ok)
	}
	if _, ok := timestamp(v[:7]); ok {
		t.Error("a 7-byte value carries a timestamp")
	}
}

func TestPayloads(t *testing.T) {
	w := spec.Defaults().Workload
	for _, kind := range []string{"random", "json", "text"} {
		w.Payload = kind
		c, err := makeCorpus(w, nil, 1)
		if err != nil || len(c) != corpusMin {
			t.Errorf("%s corpus: %d bytes, %v", kind, len(c), err)
		}
	}
	c, err := makeCorpus(w, []byte("abc"), 1)
	if err != nil || len(c) != corpusMin || string(c[:7]) != "abcabca" {
		t.Errorf("file corpus: %q..., %v", c[:7], err)
	}
	w.Payload = "xml"
	if _, err := makeCorpus(w, nil, 1); err == nil {
		t.Error("unknown payload accepted")
	}
}

// BenchmarkGenRecord is what a producer spends per record before the
// client sees it: a key, a size, a value cut from the corpus.
func BenchmarkGenRecord(b *testing.B) {
	w := spec.Defaults().Workload
	w.Keys = spec.Keys{Kind: "zipf", Count: 1000, ZipfS: 1.2}
	corpus, err := makeCorpus(w, nil, 1)
	if err != nil {
		b.Fatal(err)
	}
	g := newGen(w, corpus, 1, 0)
	b.SetBytes(int64(w.MessageSize.Size))
	for b.Loop() {
		g.key()
		putTimestamp(g.value(g.size()), 1)
	}
}
