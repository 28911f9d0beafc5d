package transport

import (
	"encoding/binary"
	"io"
	"syscall"
	"testing"
	"time"
)

// BenchmarkFetchPath fetches 8 MiB per request over loopback from a partition
// on the OS file system, through the whole server, with sendfile and with the
// copy path. Besides throughput it reports the process's CPU time per GB
// served (user+system, from getrusage; the in-process client's reading is
// the same in both, so the difference is the server's):
//
//	go test -run '^$' -bench FetchPath -benchtime 200x ./transport
func BenchmarkFetchPath(b *testing.B) {
	for _, path := range []struct {
		name     string
		copyPath bool
	}{{"sendfile", false}, {"copy", true}} {
		b.Run(path.name, func(b *testing.B) {
			opts := []brokerOpt{}
			if path.copyPath {
				opts = append(opts, withCopyPath)
			}
			br := startBroker(b, opts...)
			br.createTopic(b, "bench", 1, nil)
			p, err := br.node.Partition("bench", 0)
			if err != nil {
				b.Fatal(err)
			}
			one := batchOf(b, 100, 1000, 0) // ~100 KB batches
			for p.Stats().Size < 64<<20 {
				br.produce(b, "bench", 0, append([]byte(nil), one...))
			}
			rc := br.dial(b)
			req := fetchReq(11, 0, 1, 8<<20, "bench", map[int32]int64{0: 0})
			req.Topics[0].Partitions[0].PartitionMaxBytes = 8 << 20
			end := p.Stats().LogEndOffset

			var size [4]byte
			var served int64
			before := cpuTime()
			b.ResetTimer()
			for i := range b.N {
				req.Topics[0].Partitions[0].FetchOffset = int64(i*80) % (end - 100)
				rc.send(req)
				if _, err := io.ReadFull(rc.r, size[:]); err != nil {
					b.Fatal(err)
				}
				n := int64(binary.BigEndian.Uint32(size[:]))
				if _, err := io.CopyN(io.Discard, rc.r, n); err != nil {
					b.Fatal(err)
				}
				served += n
			}
			b.StopTimer()
			cpu := cpuTime() - before
			b.SetBytes(served / int64(b.N))
			b.ReportMetric(cpu.Seconds()/(float64(served)/1e9), "cpu-s/GB")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
