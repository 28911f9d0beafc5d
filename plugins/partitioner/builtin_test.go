package partitioner

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMurmur2KafkaVectors: the test vectors of Kafka's own UtilsTest.testMurmur2
// (the Java client's hash, as a signed int).
func TestMurmur2KafkaVectors(t *testing.T) {
	for key, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		if got := int32(Murmur2([]byte(key))); got != want {
			t.Errorf("Murmur2(%q) = %d, want %d (Kafka's UtilsTest)", key, got, want)
		}
	}
}

func TestFNV1aMatchesHashFNV(t *testing.T) {
	for _, k := range testKeys(500) {
		h := fnv.New32a()
		h.Write(k)
		if got, want := FNV1a(k), h.Sum32(); got != want {
			t.Fatalf("FNV1a(%q) = %#x, hash/fnv says %#x", k, got, want)
		}
	}
}

// testKeys returns n distinct keys of lengths 0..63 (every murmur2 tail
// length), bytes of every value, deterministic.
func testKeys(n int) [][]byte {
	rng := rand.New(rand.NewPCG(7, 7))
	keys := make([][]byte, 0, n)
	seen := map[string]bool{}
	for i := 0; len(keys) < n; i++ {
		k := make([]byte, i%64)
		for i := range k {
			k[i] = byte(rng.Uint32())
		}
		if !seen[string(k)] {
			seen[string(k)] = true
			keys = append(keys, k)
		}
	}
	return keys
}

var partitionCounts = []int32{1, 2, 3, 7, 12, 1000, math.MaxInt32}

// partitionOne asks p for one key's partition.
func partitionOne(t *testing.T, p Partitioner, key []byte, n int32) int32 {
	t.Helper()
	resp, err := p.Partition(context.Background(), Request{Topic: "t", Partitions: n, Keys: [][]byte{key}})
	if err != nil {
		t.Fatalf("%v.Partition: %v", p, err)
	}
	return resp.Partitions[0]
}

// TestHashesMatchClientCode: each hashing built-in agrees with the client
// library it copies, run in process, for keys of every tail length and
// partition counts up to MaxInt32 (where the sign handling matters).
func TestHashesMatchClientCode(t *testing.T) {
	keys := testKeys(1000)
	t.Run("murmur2=franz-go StickyKeyPartitioner(nil)", func(t *testing.T) {
		p := NewMurmur2(1)
		for _, n := range partitionCounts {
			ref := kgo.StickyKeyPartitioner(nil).ForTopic("t")
			for _, k := range keys {
				if k == nil {
					continue
				}
				want := int32(ref.Partition(&kgo.Record{Key: k}, int(n)))
				if got := partitionOne(t, p, k, n); got != want {
					t.Fatalf("murmur2 key %q, %d partitions: %d, franz-go says %d", k, n, got, want)
				}
			}
		}
	})
	t.Run("crc32=franz-go SaramaHasher(crc32.ChecksumIEEE)", func(t *testing.T) {
		// franz-go documents this hasher as librdkafka's consistent
		// partitioner on 64-bit platforms (unsigned modulo).
		p := NewCRC32(1)
		hasher := kgo.SaramaHasher(crc32.ChecksumIEEE)
		for _, n := range partitionCounts {
			for _, k := range keys {
				if len(k) == 0 {
					continue // keyless: random
				}
				if got, want := partitionOne(t, p, k, n), int32(hasher(k, int(n))); got != want {
					t.Fatalf("crc32 key %q, %d partitions: %d, want %d", k, n, got, want)
				}
			}
		}
	})
	t.Run("fnv1a=sarama NewHashPartitioner", func(t *testing.T) {
		p := NewFNV1a(1)
		for _, n := range partitionCounts {
			ref := sarama.NewHashPartitioner("t")
			for _, k := range keys {
				// An empty key is hashed by both (sarama's ByteEncoder of
				// an empty non-nil slice is a key).
				want, err := ref.Partition(&sarama.ProducerMessage{Key: sarama.ByteEncoder(k)}, n)
				if err != nil {
					t.Fatal(err)
				}
				if got := partitionOne(t, p, k, n); got != want {
					t.Fatalf("fnv1a key %q, %d partitions: %d, sarama says %d", k, n, got, want)
				}
			}
		}
	})
}

// call runs one Partition call that must succeed.
func call(t *testing.T, p Partitioner, topic string, n int32, keys ...[]byte) []int32 {
	t.Helper()
	req := Request{Topic: topic, Partitions: n, Keys: keys}
	resp, err := p.Partition(context.Background(), req)
	if err != nil {
		t.Fatalf("%v.Partition(%d keys, %d partitions): %v", p, len(keys), n, err)
	}
	if err := Check(req, resp); err != nil {
		t.Fatal(err)
	}
	return resp.Partitions
}

func nilKeys(n int) [][]byte { return make([][]byte, n) }

func emptyKeys(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte{}
	}
	return out
}

func allSame(ps []int32) bool {
	return len(ps) == 0 || slices.Equal(ps, slices.Repeat(ps[:1], len(ps)))
}

// TestKeylessRecords: what each built-in does with nil and empty keys.
func TestKeylessRecords(t *testing.T) {
	const n = 7
	t.Run("murmur2/null-keys-sticky-per-call", func(t *testing.T) {
		p := NewMurmur2(3)
		prev := int32(-1)
		used := map[int32]bool{}
		for i := range 200 {
			keys := append(nilKeys(20), []byte("k1"), nil, []byte("k2"))
			got := call(t, p, "t", n, keys...)
			sticky := got[0]
			for j, k := range keys {
				want := sticky
				if k != nil {
					want = murmur2Partition(k, n)
				}
				if got[j] != want {
					t.Fatalf("call %d record %d (key %q): partition %d, want %d", i, j, k, got[j], want)
				}
			}
			if sticky == prev {
				t.Fatalf("call %d chose partition %d again", i, sticky)
			}
			prev = sticky
			used[sticky] = true
		}
		if len(used) != n {
			t.Errorf("200 calls stuck to %d of %d partitions", len(used), n)
		}
	})
	t.Run("murmur2/empty-key-is-hashed", func(t *testing.T) {
		got := call(t, NewMurmur2(3), "t", 1000, emptyKeys(50)...)
		if want := murmur2Partition(nil, 1000); !allSame(got) || got[0] != want {
			t.Errorf("empty keys went to %v, want all on %d (murmur2 of no bytes)", got[:5], want)
		}
	})
	for _, tc := range []struct {
		name string
		p    Partitioner
		keys [][]byte
	}{
		{"crc32/null-keys-random", NewCRC32(3), nilKeys(7000)},
		{"crc32/empty-keys-random", NewCRC32(3), emptyKeys(7000)},
		{"fnv1a/null-keys-random", NewFNV1a(3), nilKeys(7000)},
		{"random/keys-ignored", NewRandom(3), testKeys(7000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counts := make([]int, n)
			for _, p := range call(t, tc.p, "t", n, tc.keys...) {
				counts[p]++
			}
			// 1000 expected per partition, sd ~29: a loose band.
			for part, c := range counts {
				if c < 800 || c > 1200 {
					t.Errorf("partition %d got %d of 7000 records, want about 1000 (counts %v)", part, c, counts)
				}
			}
		})
	}
	t.Run("fnv1a/empty-key-is-hashed", func(t *testing.T) {
		got := call(t, NewFNV1a(3), "t", 1000, emptyKeys(50)...)
		if want := fnv1aPartition(nil, 1000); !allSame(got) || got[0] != want {
			t.Errorf("empty keys went to %v, want all on %d", got[:5], want)
		}
	})
}

func TestRoundRobin(t *testing.T) {
	p := NewRoundRobin()
	var got []int32
	for _, size := range []int{0, 1, 5, 0, 9, 13} {
		got = append(got, call(t, p, "a", 4, testKeys(size)...)...)
	}
	for i, part := range got {
		if part != int32(i%4) {
			t.Fatalf("record %d of topic a on partition %d, want %d (all: %v)", i, part, i%4, got)
		}
	}
	// Topics keep separate positions.
	if b := call(t, p, "b", 4, nil, nil); !slices.Equal(b, []int32{0, 1}) {
		t.Errorf("topic b starts at %v, want [0 1]", b)
	}
	if a := call(t, p, "a", 4, nil); a[0] != int32(len(got)%4) {
		t.Errorf("topic a continues at %d, want %d", a[0], len(got)%4)
	}
	// Fewer partitions later: still in range, still cycling.
	if c := call(t, p, "a", 3, nilKeys(6)...); !slices.Equal(c[:3], c[3:]) || allSame(c) {
		t.Errorf("after shrinking to 3 partitions: %v, want a cycle of 3", c)
	}
}

func TestSticky(t *testing.T) {
	p := NewSticky(5)
	prev := int32(-1)
	used := map[int32]int{}
	for i := range 300 {
		got := call(t, p, "t", 7, testKeys(1+i%50)...)
		if !allSame(got) {
			t.Fatalf("call %d spread over %v, want one partition", i, got)
		}
		if got[0] == prev {
			t.Fatalf("call %d repeated partition %d", i, prev)
		}
		prev = got[0]
		used[prev]++
		if len(call(t, p, "t", 7)) != 0 { // an empty call chooses nothing
			t.Fatal("empty call returned partitions")
		}
	}
	if len(used) != 7 {
		t.Errorf("300 calls used partitions %v, want all 7", used)
	}
	if got := call(t, p, "t", 1, nilKeys(3)...); !slices.Equal(got, []int32{0, 0, 0}) {
		t.Errorf("one partition: %v", got)
	}
	if got := call(t, p, "t", 1, nilKeys(3)...); !slices.Equal(got, []int32{0, 0, 0}) {
		t.Errorf("one partition, again: %v (sticky must not insist on changing)", got)
	}
}

// stateful returns fresh seeded instances of every built-in that draws.
func stateful(seed uint64) []Partitioner {
	return []Partitioner{NewMurmur2(seed), NewCRC32(seed), NewFNV1a(seed), NewSticky(seed), NewRandom(seed)}
}

// mixedKeys: nil, empty and non-empty keys.
func mixedKeys(n int) [][]byte {
	keys := testKeys(n)
	for i := range keys {
		switch i % 3 {
		case 0:
			keys[i] = nil
		case 1:
			keys[i] = []byte{}
		}
	}
	return keys
}

// run feeds p a fixed sequence of calls over two topics and returns every
// answer.
func run(t *testing.T, p Partitioner) []int32 {
	var out []int32
	for i := range 40 {
		out = append(out, call(t, p, []string{"x", "y"}[i%2], int32(1+i%9), mixedKeys(i*3)...)...)
	}
	return out
}

func TestSeedsReproduce(t *testing.T) {
	a, b, c := stateful(11), stateful(11), stateful(12)
	for i := range a {
		t.Run(fmt.Sprint(a[i]), func(t *testing.T) {
			ra, rb, rc := run(t, a[i]), run(t, b[i]), run(t, c[i])
			if !slices.Equal(ra, rb) {
				t.Errorf("two instances with seed 11 disagree")
			}
			if slices.Equal(ra, rc) {
				t.Errorf("seeds 11 and 12 made the same %d choices", len(ra))
			}
		})
	}
}

// TestStringRoundTrips: String is a spec that New turns into an equal,
// fresh partitioner, seeded or not.
func TestStringRoundTrips(t *testing.T) {
	ps := append(stateful(0), NewRoundRobin(), NewMurmur2(math.MaxUint64))
	for _, name := range Names() {
		p, err := New(name) // a drawn seed
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		s := fmt.Sprint(p)
		t.Run(s, func(t *testing.T) {
			q, err := New(s)
			if err != nil {
				t.Fatalf("New(%q): %v", s, err)
			}
			if !reflect.DeepEqual(p, q) {
				t.Errorf("New(%q) = %#v, want %#v", s, q, p)
			}
			if got := fmt.Sprint(q); got != s {
				t.Errorf("New(%q).String() = %q", s, got)
			}
			if !slices.Equal(run(t, p), run(t, q)) {
				t.Errorf("%q and its rebuilt twin chose differently", s)
			}
		})
	}
	a, _ := New("murmur2")
	b, _ := New("murmur2")
	if fmt.Sprint(a) == fmt.Sprint(b) {
		t.Errorf("two unseeded murmur2 drew the same seed: %v", a)
	}
}

func TestContextDoneFailsWithoutTouchingState(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ps, twins := append(stateful(4), NewRoundRobin()), append(stateful(4), NewRoundRobin())
	for i, p := range ps {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			resp, err := p.Partition(ctx, Request{Topic: "x", Partitions: 3, Keys: mixedKeys(10)})
			if !errors.Is(err, context.Canceled) || resp.Partitions != nil {
				t.Fatalf("cancelled call = %v, %v; want an error wrapping context.Canceled", resp, err)
			}
			if !slices.Equal(run(t, p), run(t, twins[i])) {
				t.Errorf("a cancelled call changed the partitioner's later choices")
			}
		})
	}
}

func TestBadRequests(t *testing.T) {
	for _, name := range Names() {
		p, err := New(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int32{0, -1, math.MinInt32} {
			resp, err := p.Partition(context.Background(), Request{Topic: "t", Partitions: n, Keys: mixedKeys(5)})
			if !errors.Is(err, ErrBadRequest) || resp.Partitions != nil {
				t.Errorf("%s with %d partitions = %v, %v; want ErrBadRequest", name, n, resp, err)
			}
		}
	}
	err := Request{Topic: "t", Partitions: 0}.Validate()
	if want := `partitioner: bad request: topic "t" has 0 partitions, want at least 1`; err == nil || err.Error() != want {
		t.Errorf("Validate: %v, want %s", err, want)
	}
}

func TestCheck(t *testing.T) {
	keys3 := [][]byte{nil, {}, []byte("k")}
	tests := []struct {
		name   string
		req    Request
		parts  []int32
		target error
		msg    string
	}{
		{"ok", Request{Topic: "t", Partitions: 3, Keys: keys3}, []int32{0, 2, 1}, nil, ""},
		{"ok-empty", Request{Topic: "t", Partitions: 1}, nil, nil, ""},
		{"ok-empty-non-nil", Request{Topic: "t", Partitions: 1, Keys: [][]byte{}}, []int32{}, nil, ""},
		{"short", Request{Topic: "t", Partitions: 3, Keys: keys3}, []int32{0, 1}, ErrBadResponse,
			`partitioner: bad response: 2 partitions for 3 records of topic "t"`},
		{"long", Request{Topic: "t", Partitions: 3}, []int32{0}, ErrBadResponse,
			`partitioner: bad response: 1 partitions for 0 records of topic "t"`},
		{"too-big", Request{Topic: "t", Partitions: 3, Keys: keys3}, []int32{0, 3, 1}, ErrBadResponse,
			`partitioner: bad response: record 1 of topic "t": partition 3 out of range [0, 3)`},
		{"negative", Request{Topic: "t", Partitions: 3, Keys: keys3}, []int32{0, 1, -1}, ErrBadResponse,
			`partitioner: bad response: record 2 of topic "t": partition -1 out of range [0, 3)`},
		{"no-partitions", Request{Topic: "t", Partitions: 0, Keys: keys3}, []int32{0, 0, 0}, ErrBadRequest,
			`partitioner: bad request: topic "t" has 0 partitions, want at least 1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.req, Response{Partitions: tc.parts})
			if tc.target == nil {
				if err != nil {
					t.Fatalf("Check: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.target) || err.Error() != tc.msg {
				t.Errorf("Check: %v\nwant %s (wrapping %v)", err, tc.msg, tc.target)
			}
		})
	}
}

// BenchmarkPartition: cost per record of each built-in, for batches of 1,
// 100 and 10000 records with 16-byte keys (every tenth one null).
func BenchmarkPartition(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	keys := make([][]byte, 10000)
	for i := range keys {
		if i%10 == 9 {
			continue
		}
		keys[i] = fmt.Appendf(nil, "user-%011d", rng.Int64N(1e11))
	}
	for _, name := range Names() {
		for _, batch := range []int{1, 100, 10000} {
			b.Run(fmt.Sprintf("name=%s/batch=%d", name, batch), func(b *testing.B) {
				p, err := New(name)
				if err != nil {
					b.Fatal(err)
				}
				req := Request{Topic: "bench", Partitions: 12, Keys: keys[:batch]}
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Partition(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
			})
		}
	}
}
