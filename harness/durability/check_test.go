package durability

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

func TestValueHeader(t *testing.T) {
	v := make([]byte, 64)
	copy(v[headerSize:], "payload")
	sum := seal(v, recordID(3, 12345), 42)
	id, got, err := open(v)
	if err != nil || got != sum || id != recordID(3, 12345) {
		t.Fatalf("open = %#x, %#x, %v; want %#x, %#x", id, got, err, recordID(3, 12345), sum)
	}
	if p, seq := splitID(id); p != 3 || seq != 12345 {
		t.Errorf("splitID = %d, %d", p, seq)
	}
	for _, i := range []int{0, 9, 17, headerSize, 63} { // id, time, checksum, payload
		bad := slices.Clone(v)
		bad[i] ^= 1
		if _, _, err := open(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("byte %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
	if _, _, err := open(v[:headerSize-1]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short value: %v, want ErrCorrupt", err)
	}
}

// realInput is the check input of one real power cut with durable acks:
// every acknowledged record served, offsets continuous. The tampering
// tests start from copies of it.
var realInput = sync.OnceValues(func() (*checkInput, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cfg := Config{Workload: smallLoad("every-batch", true, "all"), Fault: Power, Seed: 7, VerifyRecords: 3}
	cfg.Workload.Duration = 0
	cfg.Workload.Warmup = 40 * time.Millisecond
	_, in, err := run(ctx, cfg)
	return in, err
})

func cloneInput(t *testing.T) *checkInput {
	t.Helper()
	in, err := realInput()
	if err != nil {
		t.Fatal(err)
	}
	c := *in
	c.ledgers = nil
	for _, l := range in.ledgers {
		c.ledgers = append(c.ledgers, slices.Clone(l))
	}
	c.post = slices.Clone(in.post)
	c.recovered = maps.Clone(in.recovered)
	c.served = map[tp]*served{}
	for k, s := range in.served {
		cs := *s
		cs.records = slices.Clone(s.records)
		cs.badBatches = slices.Clone(s.badBatches)
		c.served[k] = &cs
	}
	return &c
}

// ackedServed returns the indexes, in partition (0, 0)'s served records,
// of the records acknowledged before the fault, in offset order.
func ackedServed(in *checkInput) []int {
	var out []int
	for i, r := range in.served[tp{0, 0}].records {
		p, seq := splitID(r.id)
		if p < len(in.ledgers) && in.ledgers[p][seq].state == acked {
			out = append(out, i)
		}
	}
	return out
}

// The check must see every kind of broken guarantee: each case tampers
// with what a real run served and expects Verify to name the guarantee.
func TestCheckDetects(t *testing.T) {
	base := cloneInput(t)
	if o := check(*base); o.Acked == 0 || o.PostRecovery == 0 || len(ackedServed(base)) < 4 {
		t.Fatalf("the real run acknowledged %d records (%d on 0/0), produced %d after recovery: too few to tamper with",
			o.Acked, len(ackedServed(base)), o.PostRecovery)
	} else if err := o.Verify(Nothing, 0); err != nil {
		t.Fatalf("the untouched run breaks a guarantee: %v", err)
	}
	tests := []struct {
		name   string
		tamper func(in *checkInput)
		want   error
		check  func(t *testing.T, o *Outcome)
	}{
		{"acknowledged record dropped", func(in *checkInput) {
			s := in.served[tp{0, 0}]
			i := ackedServed(in)[1]
			s.records = slices.Delete(s.records, i, i+1)
		}, ErrLoss, func(t *testing.T, o *Outcome) {
			if o.AckedLost != 1 || o.LostPerPartition[[2]int32{0, 0}] != 1 || o.OffsetGaps != 1 {
				t.Errorf("lost %d (%v), gaps %d; want 1 lost on 0/0 and the offset it leaves", o.AckedLost, o.LostPerPartition, o.OffsetGaps)
			}
		}},
		{"record served twice", func(in *checkInput) {
			s := in.served[tp{0, 0}]
			i := ackedServed(in)[0]
			s.records = slices.Insert(s.records, i+1, s.records[i])
		}, ErrDuplicate, func(t *testing.T, o *Outcome) {
			if o.Duplicates != 1 || o.OffsetReuse != 1 {
				t.Errorf("duplicates %d, reuse %d; want 1 and 1 (its offset served twice)", o.Duplicates, o.OffsetReuse)
			}
		}},
		{"record content changed", func(in *checkInput) {
			in.served[tp{0, 0}].records[ackedServed(in)[0]].sum ^= 1
		}, ErrCorrupt, nil},
		{"record failing its checksum", func(in *checkInput) {
			in.served[tp{0, 0}].records[0].bad = "value checksum mismatch"
		}, ErrCorrupt, nil},
		{"batch failing its CRC", func(in *checkInput) {
			s := in.served[tp{0, 1}]
			s.badBatches = append(s.badBatches, "batch at 0: bad CRC")
		}, ErrCorrupt, nil},
		{"record nobody produced", func(in *checkInput) {
			in.served[tp{0, 0}].records[0].id = recordID(9, 1)
		}, ErrCorrupt, nil},
		{"record served at another offset", func(in *checkInput) {
			s := in.served[tp{0, 0}]
			for i := ackedServed(in)[0]; i < len(s.records); i++ {
				s.records[i].offset++
			}
			s.end++
		}, ErrOffsets, func(t *testing.T, o *Outcome) {
			if o.OffsetGaps != 1 || o.OffsetReuse == 0 {
				t.Errorf("gaps %d, reuse %d; want the skipped offset and the moved records", o.OffsetGaps, o.OffsetReuse)
			}
		}},
		{"offsets below the high watermark missing", func(in *checkInput) {
			in.served[tp{0, 1}].end += 3
		}, ErrOffsets, nil},
		{"post-recovery record reusing an offset", func(in *checkInput) {
			in.recovered[tp{0, 0}]++
		}, ErrOffsets, nil},
		{"post-recovery record not served", func(in *checkInput) {
			s := in.served[tp{0, 1}]
			s.records = s.records[:len(s.records)-1]
		}, ErrLoss, func(t *testing.T, o *Outcome) {
			if o.PostLost != 1 || o.AckedLost != 0 {
				t.Errorf("post lost %d, acked lost %d; want 1 and 0", o.PostLost, o.AckedLost)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := cloneInput(t)
			tc.tamper(in)
			o := check(*in)
			err := o.Verify(Nothing, 0)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}

// A loss is judged against the policy's bound, per partition: exactly at
// the bound is a violation, one below is not.
func TestCheckBounds(t *testing.T) {
	in := cloneInput(t)
	s := in.served[tp{0, 0}]
	// The newest three acknowledged records of 0/0 in a row that were
	// acknowledged before the cut (an answer may arrive after it, for an
	// append written before it: its age would be 0, and the age bounds
	// below could not tell apart).
	before := func(i int) bool {
		p, seq := splitID(s.records[i].id)
		return in.ledgers[p][seq].ack < in.cut.UnixNano()
	}
	idx := ackedServed(in)
	var drop []int
	for k := len(idx) - 3; k >= 0 && drop == nil; k-- {
		if idx[k+2] == idx[k]+2 && before(idx[k]) && before(idx[k+1]) && before(idx[k+2]) {
			drop = idx[k : k+3]
		}
	}
	if drop == nil {
		t.Fatal("the real run has no three acknowledged records in a row before the cut on 0/0")
	}
	var bytes int64
	for _, i := range drop {
		bytes += int64(s.records[i].size)
	}
	s.records = slices.Delete(s.records, drop[0], drop[2]+1)
	// Records served after them (those produced after the recovery, when
	// they landed on this partition) take their offsets, as after a real
	// power cut: offsets stay continuous, only acknowledged records are gone.
	for i := drop[0]; i < len(s.records); i++ {
		s.records[i].offset -= int64(len(drop))
	}
	s.end -= int64(len(drop))
	o := check(*in)
	if o.AckedLost != 3 || o.LostBytesPerPartition[[2]int32{0, 0}] != bytes {
		t.Fatalf("lost %d records, %v bytes; want 3 and %d", o.AckedLost, o.LostBytesPerPartition, bytes)
	}
	age := o.OldestLostAge
	for _, tc := range []struct {
		b     flushpolicy.Bound
		slack time.Duration
		lost  bool
	}{
		{flushpolicy.Bound{Messages: 4}, 0, false},
		{flushpolicy.Bound{Messages: 3}, 0, true},
		{flushpolicy.Bound{Bytes: bytes + 1}, 0, false},
		{flushpolicy.Bound{Bytes: bytes}, 0, true},
		{flushpolicy.Bound{Age: age + time.Millisecond}, 0, false},
		{flushpolicy.Bound{Age: age / 2}, 0, true},
		{flushpolicy.Bound{Age: age / 2}, age, false}, // the slack forgives it
		{flushpolicy.Bound{}, 0, false},               // never: unbounded
		{Nothing, 0, true},
	} {
		err := o.Verify(tc.b, tc.slack)
		if got := errors.Is(err, ErrLoss); got != tc.lost {
			t.Errorf("bound %v, slack %v: loss reported %t, want %t (%v)", tc.b, tc.slack, got, tc.lost, err)
		}
	}
	// The lost records were acknowledged before the cut: a later cut ages them.
	in.cut = in.cut.Add(time.Second)
	if o := check(*in); o.OldestLostAge < time.Second {
		t.Errorf("oldest lost age %v after moving the cut a second later", o.OldestLostAge)
	}
}

func TestExpectedBound(t *testing.T) {
	for _, tc := range []struct {
		fault   Fault
		durable bool
		policy  string
		want    string
	}{
		{Kill, false, "never", "nothing"},
		{Power, true, "never", "nothing"},
		{Power, false, "every-batch", "nothing"},
		{Power, false, "messages:n=50", "< 50 messages"},
		{Power, false, "bytes:n=8192", "< 8192 bytes"},
		{Power, false, "interval:ms=20", "< 20ms old"},
		{Power, false, "adaptive", "< 50ms old"},
		{Power, false, "never", "unbounded"},
		{Power, false, "", "unbounded"},
		{Power, false, "./bin/plugins/weir-flushpolicy-ratelimit", "unbounded"},
	} {
		b, err := ExpectedBound(tc.fault, tc.durable, tc.policy)
		if err != nil || b.String() != tc.want {
			t.Errorf("ExpectedBound(%s, %t, %q) = %v, %v; want %s", tc.fault, tc.durable, tc.policy, b, err, tc.want)
		}
	}
	if _, err := ExpectedBound(Power, false, "sometimes"); !errors.Is(err, ErrConfig) {
		t.Errorf("unknown policy: %v, want ErrConfig", err)
	}
}

func TestConfigErrors(t *testing.T) {
	with := func(f func(w *spec.Workload)) spec.Workload {
		w := smallLoad("never", false, "1")
		f(&w)
		return w
	}
	ok := with(func(*spec.Workload) {})
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no fault", Config{Workload: ok}, `Fault ""`},
		{"kill without binary", Config{Workload: ok, Fault: Kill, DataDir: "/tmp/x"}, "Weir"},
		{"kill without dir", Config{Workload: ok, Fault: Kill, Weir: "weir"}, "DataDir"},
		{"acks 0", Config{Workload: with(func(w *spec.Workload) { w.Acks = "0" }), Fault: Power}, "acks 0"},
		{"small records", Config{Workload: with(func(w *spec.Workload) { w.MessageSize.Min = 8 }), Fault: Power}, "at least 20 bytes"},
		{"no moment", Config{Workload: with(func(w *spec.Workload) { w.Warmup, w.Duration = 0, 0 }), Fault: Power}, "no moment"},
	} {
		_, err := Run(context.Background(), tc.cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrConfig mentioning %q", tc.name, err, tc.want)
		}
	}
}

// The read-back checks every batch's CRC itself: damaged batches are
// counted and skipped, a batch cut short by the fetch size is asked for
// again, and offsets that jump are noted.
func TestDecodeDamage(t *testing.T) {
	batch := func(base int64, ids ...uint64) []byte {
		var recs []record.Record
		for _, id := range ids {
			v := make([]byte, 40)
			seal(v, id, 1)
			recs = append(recs, record.Record{Value: v, Timestamp: 1})
		}
		b, err := record.Build(record.BuildOptions{BaseOffset: base}, recs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b1, b2, b3 := batch(0, 1, 2), batch(2, 3, 4), batch(4, 5)
	all := slices.Concat(b1, b2, b3)
	f := &fetcher{}

	s := &served{end: 5}
	if next := f.decode(s, 0, all); next != 5 || len(s.records) != 5 || len(s.badBatches) != 0 || len(s.offsetProblems) != 0 {
		t.Fatalf("intact: next %d, %d records, bad %v, offsets %v", next, len(s.records), s.badBatches, s.offsetProblems)
	}
	if s.records[3].offset != 3 || s.records[3].id != 4 || s.records[3].bad != "" {
		t.Errorf("record 3 = %+v", s.records[3])
	}

	damaged := slices.Clone(all)
	damaged[len(b1)+record.HeaderSize+3] ^= 0xff // inside b2's records: its CRC fails
	s = &served{end: 5}
	if next := f.decode(s, 0, damaged); next != 5 || len(s.records) != 3 || len(s.badBatches) != 1 {
		t.Errorf("damaged: next %d, %d records, bad %v; want 5, 3 and one bad batch", next, len(s.records), s.badBatches)
	}

	s = &served{end: 5}
	if next := f.decode(s, 0, all[:len(all)-5]); next != 4 || len(s.records) != 4 || len(s.badBatches) != 0 {
		t.Errorf("cut short: next %d, %d records, bad %v; want 4 (fetch b3 again), 4, none", next, len(s.records), s.badBatches)
	}

	s = &served{end: 6}
	if f.decode(s, 0, slices.Concat(b1, batch(3, 3, 4))); len(s.offsetProblems) != 1 {
		t.Errorf("gap: offset problems %v, want one", s.offsetProblems)
	}
	if o := check(checkInput{served: map[tp]*served{{0, 0}: s}}); o.OffsetGaps != 2 {
		t.Errorf("gap: %d offsets missing, want 2 (offset 2 and the end)", o.OffsetGaps)
	}
}
