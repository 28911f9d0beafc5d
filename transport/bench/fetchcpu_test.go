package bench_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchBytes is how much one Fetch of BenchmarkFetchCPU asks for.
const fetchBytes = 8 << 20

// fetchFill is how much BenchmarkFetchCPU writes to the partition before
// fetching it over and over (it stays in the page cache).
const fetchFill = 128 << 20

// BenchmarkFetchCPU: the broker process's CPU time per GB of Fetch
// responses, with sendfile and with the copy path. One op is one Fetch of
// up to 8 MiB. See the package doc.
func BenchmarkFetchCPU(b *testing.B) {
	for _, path := range ordered([]string{"sendfile", "copy"}) {
		b.Run("path="+path, func(b *testing.B) {
			b.StopTimer()
			r := fetchCPU(b, b, path == "copy", fetchFill, fetchBytes, b.N)
			b.SetBytes(r.served / int64(b.N))
			b.ReportMetric(r.cpu.Seconds()/(float64(r.served)/1e9), "cpu-s/GB")
			b.ReportMetric(r.statCPU.Seconds()/(float64(r.served)/1e9), "stat-cpu-s/GB")
			b.ReportMetric(float64(r.mallocs)/float64(b.N), "broker-allocs/op")
		})
	}
}

type fetchResult struct {
	served  int64         // response bytes, size prefixes included
	cpu     time.Duration // the broker process's CPU time while fetching (getrusage)
	statCPU time.Duration // the same from /proc/<pid>/stat, 10 ms resolution
	mallocs uint64        // the broker process's heap allocations meanwhile
}

// fetchCPU starts a broker process, fills one partition with fill bytes of
// 1 KiB records, then sends n Fetch requests (v11, one partition, maxBytes
// each) over one connection, each from an offset further on (wrapping), and
// reads every response to the end.
func fetchCPU(tb testing.TB, tm timer, copyPath bool, fill, maxBytes, n int) fetchResult {
	tb.Helper()
	p := startBrokerProcess(tb, "weir", copyPath)
	createTopic(tb, p.addr, 1, nil)
	c := produceConfig{size: 1024, partitions: 1, acks: "1"}
	records := fill / c.size
	produce(tb, noTimer{}, p.addr, c, records)
	step := int64(maxBytes / c.size) // about one response's worth of records
	span := max(int64(records)-step, 1)

	nc, err := net.Dial("tcp", p.addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReaderSize(nc, 1<<20)
	buf := make([]byte, 1<<20)

	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = int32(maxBytes)
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = int32(maxBytes)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var frame []byte

	var res fetchResult
	before := p.stats(tb)
	statBefore := p.statCPU(tb)
	tm.StartTimer()
	for i := range n {
		req.Topics[0].Partitions[0].FetchOffset = int64(i) * step % span
		frame = appendRequest(frame[:0], req, int32(i))
		if _, err := nc.Write(frame); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf[:8]); err != nil {
			tb.Fatal(err)
		}
		size := int64(binary.BigEndian.Uint32(buf[:4]))
		if corr := int32(binary.BigEndian.Uint32(buf[4:8])); corr != int32(i) {
			tb.Fatalf("response correlation ID %d, want %d", corr, i)
		}
		if size < int64(maxBytes/2) {
			tb.Fatalf("fetch %d from offset %d: response of %d bytes, want about %d", i, req.Topics[0].Partitions[0].FetchOffset, size, maxBytes)
		}
		for left := size - 4; left > 0; {
			m, err := r.Read(buf[:min(left, int64(len(buf)))])
			if err != nil {
				tb.Fatal(err)
			}
			left -= int64(m)
		}
		res.served += 4 + size
	}
	tm.StopTimer()
	after := p.stats(tb)
	res.statCPU = p.statCPU(tb) - statBefore
	res.cpu = after.cpu - before.cpu
	res.mallocs = after.mallocs - before.mallocs
	return res
}

// appendRequest appends req as a frame: size, request header v1 (key,
// version, correlation ID, client ID), body. Fetch v11 is not flexible, so
// the header has no tagged fields.
func appendRequest(dst []byte, req kmsg.Request, corr int32) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len("bench")))
	dst = append(dst, "bench"...)
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
