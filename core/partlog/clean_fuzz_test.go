package partlog

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// FuzzClean drives a log with fuzzed appends of keys and tombstones (plain,
// zstd and idempotent batches), rolls, clock moves and clean passes (with
// and without tombstone retention), and after every pass, and after a
// reopen, compares it with a model map: every key reads back as its latest
// record says (a deleted key: nothing or its tombstone), no other key
// appears, every record served is the one appended at its offset, and the
// offsets continue (readView). Run it with
//
//	go test -run '^$' -fuzz '^FuzzClean$' -fuzztime 1m ./core/partlog/
func FuzzClean(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 0, 9, 17, 4, 6, 7, 6})
	f.Add([]byte{8, 0x81, 16, 0x82, 24, 3, 4, 3, 0x80, 4, 5, 7, 0x41, 4, 6, 4, 6})
	f.Add([]byte{1, 1, 1, 4, 1, 0x81, 4, 5, 7, 7, 5, 3, 0xc2, 4, 6})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 300 {
			ops = ops[:300]
		}
		clk := newClock()
		mem := memFS(t)
		cfg := cleanConfig(clk)
		cfg.SegmentBytes = 1024
		l, _ := mustOpen(t, mem, cfg)
		defer func() { _ = l.Close() }()
		m := keyModel{}
		byOff := &offsetModel{recs: map[int64]kv{}}
		seq := int32(0)
		check := func(when string) {
			t.Helper()
			v := readView(t, l)
			m.check(t, v)
			for _, r := range v.records {
				want, ok := byOff.recs[r.off]
				if !ok || !bytes.Equal(want.key, r.key) || !bytes.Equal(want.value, r.value) || (want.value == nil) != (r.value == nil) {
					t.Fatalf("%s: offset %d holds %q=%q, %q=%q was appended there (%v)", when, r.off, r.key, r.value, want.key, want.value, ok)
				}
			}
		}
		appendRecs := func(o func() (string, []kv)) {
			kind, recs := o()
			opts := plain()
			switch kind {
			case "zstd":
				opts = zstdOpts(opts)
			case "idempotent":
				opts, seq = idempotent(7, seq), seq+int32(len(recs))
			}
			res, err := l.Append(ctx, keyed(t, opts, clk.Now().UnixMilli(), recs...), 1)
			if err != nil {
				t.Fatalf("append: %v", err)
			}
			byOff.add(res.BaseOffset, recs)
			m.apply(recs...)
		}
		clean := func(retention time.Duration) {
			if _, err := l.Clean(ctx, withCodecs(CleanOptions{UpTo: NoLimit, DeleteRetention: retention})); err != nil {
				t.Fatalf("clean: %v (segments %s)", err, segNames(l))
			}
			check("after a pass")
		}
		for i := 0; i < len(ops); i++ {
			b := ops[i]
			switch b % 8 {
			case 0, 1, 2, 3:
				n := int(b>>3)%3 + 1
				appendRecs(func() (string, []kv) {
					var recs []kv
					for j := 0; j < n; j++ {
						k := b
						if i+1 < len(ops) {
							i++
							k = ops[i]
						}
						switch {
						case k&0x80 != 0:
							recs = append(recs, del(keyName(int(k%8))))
						case k&0x70 == 0x70:
							recs = append(recs, unkeyed(fmt.Sprint("u", i)))
						default:
							recs = append(recs, put(keyName(int(k%8)), fmt.Sprint("v", i, ".", j)))
						}
					}
					switch (b >> 5) % 4 {
					case 1:
						return "zstd", recs
					case 2:
						return "idempotent", recs
					}
					return "plain", recs
				})
			case 4: // roll: the next append after SegmentAge opens a segment
				clk.Advance(cfg.SegmentAge)
				appendRecs(func() (string, []kv) { return "plain", []kv{unkeyed("roll")} })
			case 5:
				clean(time.Hour)
			case 6:
				clean(-1)
			case 7:
				clk.Advance(time.Duration(b>>3) * 10 * time.Minute)
			}
		}
		clk.Advance(cfg.SegmentAge)
		appendRecs(func() (string, []kv) { return "plain", []kv{unkeyed("last")} })
		clean(-1)
		clean(-1)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, _ = mustOpen(t, mem, cfg)
		check("after a reopen")
	})
}
