package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/node"
)

// openLog opens a partition log and appends batches of n records of size
// bytes until it holds at least total bytes.
func openLog(t testing.TB, fsys vfs.FS, dir string, total, n, size int) *partlog.Log {
	t.Helper()
	l, _, err := partlog.Open(fsys, dir, partlog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for l.Size() < int64(total) {
		if _, err := l.Append(context.Background(), batchOf(t, n, size, l.EndOffset()), 0); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// batchOf builds a batch whose contents depend on seed, so that two logs
// given the same calls hold the same bytes.
func batchOf(t testing.TB, n, size int, seed int64) []byte {
	t.Helper()
	b := batch(t, string(bytes.Repeat([]byte{byte('a' + seed%26)}, size)), n)
	return b
}

// testConnPair returns the server side of a loopback TCP connection wrapped
// as a conn (sendfile on unless copyPath) and the client side.
func testConnPair(t testing.TB, copyPath bool) (*conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	cfg := Config{DisableSendfile: copyPath}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: cfg, log: slog.New(slog.DiscardHandler), ctx: context.Background()}
	c := newConn(s, server)
	if copyPath != (c.raw == nil) {
		t.Fatalf("copyPath %v but raw conn %v", copyPath, c.raw)
	}
	return c, client
}

// writeAndRead writes r on c while reading the whole frame from client.
func writeAndRead(t testing.TB, c *conn, client net.Conn, r *fetchResponse, corr int32) []byte {
	t.Helper()
	got := make(chan []byte, 1)
	go func() {
		var size [4]byte
		if _, err := io.ReadFull(client, size[:]); err != nil {
			got <- nil
			return
		}
		b := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
		copy(b, size[:])
		if _, err := io.ReadFull(client, b[4:]); err != nil {
			got <- nil
			return
		}
		got <- b
	}()
	if err := r.writeTo(c, corr); err != nil {
		t.Fatal(err)
	}
	b := <-got
	if b == nil {
		t.Fatal("client could not read the response")
	}
	return b
}

// fetchFrom builds the response the handler would: two topics, one with a
// partition holding data, an empty one (read at the log end) and one failed.
func fetchFrom(t testing.TB, version int16, l *partlog.Log, maxBytes int64) *fetchResponse {
	t.Helper()
	sl, err := l.Read(0, maxBytes, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	empty, err := l.Read(l.EndOffset(), maxBytes, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	return &fetchResponse{
		version: version,
		topics: []fetchTopic{
			{name: "topic-a", parts: []fetchPart{
				{index: 0, hw: l.EndOffset(), lso: l.EndOffset(), logStart: l.StartOffset(), records: node.NewRecords(sl)},
				{index: 3, hw: l.EndOffset(), lso: l.EndOffset(), logStart: l.StartOffset(), records: node.NewRecords(empty)},
			}},
			{name: "b", parts: []fetchPart{
				{index: 1, errCode: kerr.UnknownTopicOrPartition.Code, hw: -1, lso: -1, logStart: -1},
			}},
		},
	}
}

// kmsgEquivalent is the same response built as a kmsg message.
func kmsgEquivalent(t testing.TB, r *fetchResponse) *kmsg.FetchResponse {
	t.Helper()
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = r.version
	resp.ErrorCode, resp.SessionID = r.errCode, r.sessionID
	for _, ft := range r.topics {
		kt := kmsg.NewFetchResponseTopic()
		kt.Topic = ft.name
		for _, fp := range ft.parts {
			kp := kmsg.NewFetchResponseTopicPartition()
			kp.Partition, kp.ErrorCode = fp.index, fp.errCode
			kp.HighWatermark, kp.LastStableOffset, kp.LogStartOffset = fp.hw, fp.lso, fp.logStart
			kp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			kp.PreferredReadReplica = -1
			kp.RecordBatches = []byte{}
			if fp.records.Len() > 0 {
				b := make([]byte, fp.records.Len())
				if _, err := fp.records.ReadAt(b, 0); err != nil {
					t.Fatal(err)
				}
				kp.RecordBatches = b
			}
			kt.Partitions = append(kt.Partitions, kp)
		}
		resp.Topics = append(resp.Topics, kt)
	}
	return resp
}

// For every served Fetch version, the sendfile path, the copy path from the
// same OS file, and the copy path from an in-memory file write exactly the
// bytes kmsg encodes for the same response, and kmsg decodes them back.
func TestFetchWriterPathsMatchKmsg(t *testing.T) {
	const total = 700 << 10 // several buffers' worth
	osLog := openLog(t, vfs.Default, t.TempDir(), total, 20, 100)
	memLog := openLog(t, vfs.NewMem(), "mem", total, 20, 100)
	for v := apiByKey[1].min; v <= apiByKey[1].max; v++ {
		var frames [][]byte
		for _, path := range []struct {
			name     string
			log      *partlog.Log
			copyPath bool
		}{{"sendfile", osLog, false}, {"copy", osLog, true}, {"memfs", memLog, false}} {
			c, client := testConnPair(t, path.copyPath)
			r := fetchFrom(t, v, path.log, 1<<30)
			if path.name == "sendfile" && !r.hasOSFile() {
				t.Fatal("the OS log's Slice is not an OSFiler")
			}
			var before int64
			if path.name == "sendfile" {
				before = fileOffset(t, r)
			}
			frame := writeAndRead(t, c, client, r, 42+int32(v))
			if path.name == "sendfile" {
				if after := fileOffset(t, r); after != before {
					t.Fatalf("sendfile moved the file offset from %d to %d", before, after)
				}
			}
			want := kmsgEquivalent(t, r)
			r.release()

			if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
				t.Fatalf("v%d %s: size prefix %d, frame %d", v, path.name, binary.BigEndian.Uint32(frame), len(frame)-4)
			}
			if corr := int32(binary.BigEndian.Uint32(frame[4:])); corr != 42+int32(v) {
				t.Fatalf("v%d %s: correlation %d", v, path.name, corr)
			}
			if enc := want.AppendTo(nil); !bytes.Equal(frame[8:], enc) {
				t.Fatalf("v%d %s: body differs from kmsg's encoding (%d vs %d bytes)", v, path.name, len(frame)-8, len(enc))
			}
			got := kmsg.NewPtrFetchResponse()
			got.Version = v
			if err := got.ReadFrom(frame[8:]); err != nil {
				t.Fatalf("v%d %s: kmsg cannot decode: %v", v, path.name, err)
			}
			p := got.Topics[0].Partitions[0]
			if p.HighWatermark != osLog.EndOffset() || len(p.RecordBatches) < total {
				t.Fatalf("v%d %s: hw %d, %d record bytes", v, path.name, p.HighWatermark, len(p.RecordBatches))
			}
			frames = append(frames, frame)
		}
		for i := 1; i < len(frames); i++ {
			if !bytes.Equal(frames[0], frames[i]) {
				t.Fatalf("v%d: path %d wrote different bytes", v, i)
			}
		}
	}
}

func fileOffset(t testing.TB, r *fetchResponse) int64 {
	t.Helper()
	f, _, ok := r.topics[0].parts[0].records.OSFile()
	if !ok {
		t.Fatal("records not on an OS file")
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// The fetch path allocates per request and per partition, never per byte:
// writing 8 times more bytes costs no more allocations.
func TestFetchWriterAllocsIndependentOfSize(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	l := openLog(t, vfs.Default, t.TempDir(), 8<<20, 100, 1000)
	for _, copyPath := range []bool{false, true} {
		c, client := testConnPair(t, copyPath)
		go io.Copy(io.Discard, client)
		allocs := func(n int64) float64 {
			return testing.AllocsPerRun(5, func() {
				sl, err := l.Read(0, n, partlog.NoLimit)
				if err != nil {
					t.Fatal(err)
				}
				r := &fetchResponse{version: 11, topics: []fetchTopic{{name: "t", parts: []fetchPart{{records: node.NewRecords(sl)}}}}}
				if err := r.writeTo(c, 1); err != nil {
					t.Fatal(err)
				}
				r.release()
			})
		}
		small, large := allocs(1<<20), allocs(8<<20)
		t.Logf("copyPath=%v: %.0f allocs for 1 MiB, %.0f for 8 MiB", copyPath, small, large)
		if large > small+1 {
			t.Errorf("copyPath=%v: %.0f allocs for 8 MiB vs %.0f for 1 MiB", copyPath, large, small)
		}
	}
}

// A response whose fields alone overflow the buffer (thousands of
// partitions) is flushed in pieces and still matches kmsg's encoding.
func TestFetchWriterManyPartitions(t *testing.T) {
	l := openLog(t, vfs.Default, t.TempDir(), 10<<10, 5, 100)
	for _, copyPath := range []bool{false, true} {
		c, client := testConnPair(t, copyPath)
		r := &fetchResponse{version: 11}
		for ti := range 3 {
			ft := fetchTopic{name: fmt.Sprintf("topic-%d", ti)}
			for p := range 3000 {
				fp := fetchPart{index: int32(p), hw: 5, lso: 5, logStart: 0}
				if p%1000 == 7 {
					sl, err := l.Read(0, 1<<20, partlog.NoLimit)
					if err != nil {
						t.Fatal(err)
					}
					fp.records = node.NewRecords(sl)
				}
				ft.parts = append(ft.parts, fp)
			}
			r.topics = append(r.topics, ft)
		}
		frame := writeAndRead(t, c, client, r, 9)
		want := kmsgEquivalent(t, r).AppendTo(nil)
		r.release()
		if !bytes.Equal(frame[8:], want) {
			t.Fatalf("copyPath=%v: %d bytes differ from kmsg's %d", copyPath, len(frame)-8, len(want))
		}
	}
}
