package mirror_test

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/mirror"
)

// TestMirrorForwardsTransactions: a source partition holding committed
// and aborted transactions between plain records is forwarded; the target
// holds the plain and committed records in source order, none of the
// aborted ones, and the mirror's position reaches the source end (past the
// transaction markers, which are not copied).
func TestMirrorForwardsTransactions(t *testing.T) {
	src := brokertest.Start(t, "").Addr()
	dst := brokertest.Start(t, "").Addr()
	brokertest.CreateTopic(t, src, "tx", 1, nil)
	plain := brokertest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn := brokertest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("fwd-test"))
	ctx := brokertest.Context(t)
	var want []string
	for round := range 6 {
		v := fmt.Sprintf("plain %d", round)
		if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		commit := round%2 == 0
		for i := range 3 {
			v := fmt.Sprintf("txn %d/%d commit=%v", round, i, commit)
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if commit {
				want = append(want, v)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig(t, src, dst, "tx")
	cfg.Forward = true
	_, stop := runMirror(t, cfg)
	end := brokertest.ListOffsets(t, src, "tx", 1, -1)
	waitFor(t, "the position at the source end", func() bool {
		return fmt.Sprint(brokertest.CommittedOffsets(t, dst, mirror.DefaultName, "tx", 1)) == fmt.Sprint(end)
	})
	stop()
	got := readAll(t, dst, "tx", 1)[0]
	if len(got) != len(want) {
		t.Fatalf("target holds %d records, want %d (source end %v)", len(got), len(want), end)
	}
	for i, r := range got {
		if string(r.Value) != want[i] {
			t.Fatalf("target record %d is %q, want %q", i, r.Value, want[i])
		}
	}
}

// TestMirrorForwardCorruptBatch: a source batch whose bytes were damaged on
// the source's disk (its CRC no longer matches) is not copied when
// forwarding, though the forwarder does not read the records: the target
// refuses the batch (its new CRC is derived from the bad one), the mirror
// reports it as the source's, with the partition and offset, and the
// position stays before it, while the batch before it is copied.
func TestMirrorForwardCorruptBatch(t *testing.T) {
	srcDir := t.TempDir()
	src := brokertest.Start(t, srcDir).Addr()
	dst := brokertest.Start(t, "").Addr()
	brokertest.CreateTopic(t, src, "bad", 1, nil)
	cl := brokertest.Client(t, src)
	ctx := brokertest.Context(t)
	for _, v := range []string{"good one", "to be damaged", "after it"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "bad", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	damageFile(t, srcDir, []byte("to be damaged"))

	cfg := testConfig(t, src, dst, "bad")
	cfg.Forward = true
	m, stop := runMirror(t, cfg)
	defer stop()
	var st mirror.PartitionStatus
	waitFor(t, "the damaged batch refused", func() bool {
		s := m.Status()
		if len(s) == 1 {
			st = s[0]
		}
		return strings.Contains(st.LastError, "source batch at offset 1") && st.Records == 1
	})
	if !strings.Contains(st.LastError, "CORRUPT_MESSAGE") || !strings.Contains(st.LastError, "bad CRC") {
		t.Errorf("last error %q: want the target's CORRUPT_MESSAGE and the bad CRC", st.LastError)
	}
	if st.Next != 1 {
		t.Errorf("position %d, want 1 (before the damaged batch)", st.Next)
	}
	stop()
	got := readAll(t, dst, "bad", 1)[0]
	if len(got) != 1 || string(got[0].Value) != "good one" {
		t.Fatalf("target holds %d records (%v), want the first only", len(got), got)
	}
}

// damageFile flips a bit of the first occurrence of what in the files
// under dir (a record value in a segment), so that its batch's CRC no
// longer matches.
func damageFile(t *testing.T, dir string, what []byte) {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		i := bytes.Index(data, what)
		if i < 0 {
			return nil
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		found = true
		_, err = f.WriteAt([]byte{data[i] ^ 0x20}, int64(i))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("%q not found under %s", what, dir)
	}
}

// TestMirrorForwardCorruptSkippedBatch: a batch the forwarder would skip
// by its header (an aborted transaction's) is CRC-checked first, since a
// damaged header could make a data batch look skippable: damaged on the
// source's disk, it stops the partition there (a fetch error naming it),
// and nothing after it is copied.
func TestMirrorForwardCorruptSkippedBatch(t *testing.T) {
	srcDir := t.TempDir()
	src := brokertest.Start(t, srcDir).Addr()
	dst := brokertest.Start(t, "").Addr()
	brokertest.CreateTopic(t, src, "badtx", 1, nil)
	plain := brokertest.Client(t, src)
	txn := brokertest.Client(t, src, kgo.TransactionalID("fwd-corrupt"))
	ctx := brokertest.Context(t)
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "badtx", Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "badtx", Value: []byte("aborted, to be damaged")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "badtx", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	damageFile(t, srcDir, []byte("aborted, to be damaged"))

	cfg := testConfig(t, src, dst, "badtx")
	cfg.Forward = true
	m, stop := runMirror(t, cfg)
	defer stop()
	var st mirror.PartitionStatus
	waitFor(t, "the damaged batch reported", func() bool {
		s := m.Status()
		if len(s) == 1 {
			st = s[0]
		}
		return st.FetchErrors > 0 && strings.Contains(st.LastError, "bad CRC") && st.Records == 1
	})
	if st.Next != 1 {
		t.Errorf("position %d, want 1 (at the damaged batch)", st.Next)
	}
	stop()
	got := readAll(t, dst, "badtx", 1)[0]
	if len(got) != 1 || string(got[0].Value) != "before" {
		t.Fatalf("target holds %d records (%v), want the first only", len(got), got)
	}
}

// TestMirrorForwardCompactedSource: a compacted source partition whose
// first batches kept all their records (A: offsets 0-1, B: 2-3) and whose
// third (G: 4-6) lost its middle record to the cleaner, so has a gap. The
// forwarder copies A and B, then the partition fails at G with an error
// saying why, and keeps failing there on each retry: A and B are in the
// target once, however many retries (they were written again on every
// retry when the partition failed before they were acknowledged).
func TestMirrorForwardCompactedSource(t *testing.T) {
	srcB := brokertest.Start(t, "", func(c *broker.Config) { c.CleanerBackoff = 50 * time.Millisecond })
	src := srcB.Addr()
	dst := brokertest.Start(t, "").Addr()
	brokertest.CreateTopic(t, src, "cmp", 1, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"})
	cl := brokertest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := brokertest.Context(t)
	batch := func(keys ...string) { // one batch
		var recs []*kgo.Record
		for _, k := range keys {
			recs = append(recs, &kgo.Record{Topic: "cmp", Key: []byte(k), Value: []byte("value of " + k)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	batch("a1", "a2")
	batch("b1", "b2")
	batch("g1", "dup", "g2")
	for range 40 { // "dup" again: rolls segments, so the cleaner drops offset 5
		batch("dup")
	}
	waitFor(t, "the cleaner to drop offset 5", func() bool {
		got := readAll(t, src, "cmp", 1)[0]
		return len(got) > 5 && got[4].Offset == 4 && got[5].Offset == 6
	})

	cfg := testConfig(t, src, dst, "cmp")
	cfg.Forward = true
	var logs brokertest.LogBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}), nil))
	m, stop := runMirror(t, cfg)
	defer stop()
	waitFor(t, "the partition failing, retried twice", func() bool {
		return logs.Count("mirror: retrying partition") >= 2 && logs.Count("mirror: cannot forward") >= 3
	})
	var st mirror.PartitionStatus
	if s := m.Status(); len(s) == 1 {
		st = s[0]
	}
	if !strings.Contains(st.LastError, "gaps") {
		t.Errorf("last error %q, want the gap's", st.LastError)
	}
	if st.Next != 4 {
		t.Errorf("position %d, want 4 (at G)", st.Next)
	}
	stop()
	got := readAll(t, dst, "cmp", 1)[0]
	var vals []string
	for _, r := range got {
		vals = append(vals, string(r.Key))
	}
	if fmt.Sprint(vals) != "[a1 a2 b1 b2]" {
		t.Fatalf("target holds keys %v, want A's and B's once: [a1 a2 b1 b2]", vals)
	}
}
