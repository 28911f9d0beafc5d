package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-broker/weir/harness/result"
)

// Errors returned by the probes.
var (
	// ErrInvalidOptions: an options field is out of range; the message names
	// the field.
	ErrInvalidOptions = errors.New("probe: invalid options")
	// ErrMismatch: a probe read back values other than those it wrote.
	ErrMismatch = errors.New("probe: read back wrong data")
)

// Section names.
const (
	SectionDisk   = "disk"
	SectionMemory = "memory"
)

// Progress is told, before each point repetition starts, how many have
// finished of how many, and what the next one measures (Describe's words);
// after the last it is called once more with done == total and label "".
// It runs on the probe's goroutine, so it must return quickly.
type Progress func(done, total int, label string)

// skippedPrefix starts the Error of a Rep that was not measured because the
// point does not apply here (O_DIRECT on tmpfs), as opposed to one that
// failed.
const skippedPrefix = "skipped: "

// Skipped reports whether r was skipped rather than measured, and why.
// Statistics skip such reps like failed ones; reports should print the
// reason instead of an error.
func Skipped(r result.Rep) (reason string, ok bool) {
	return strings.CutPrefix(r.Error, skippedPrefix)
}

func skippedRep(reason string) result.Rep {
	return result.Rep{Started: time.Now(), Error: skippedPrefix + reason}
}

// canceled wraps ctx's error the way every probe returns it.
func canceled(ctx context.Context) error {
	return fmt.Errorf("probe: interrupted: %w", ctx.Err())
}

// latencies collects per-operation durations and turns them into the
// percentile metrics.
type latencies []time.Duration

// add puts the p50/p99/p99.9/max latency metrics, in microseconds, into m.
// Percentiles are nearest-rank: the smallest sample with at least q of the
// samples at or below it, so each is a latency that was observed.
func (l latencies) add(m map[string]float64) {
	if len(l) == 0 {
		return
	}
	s := slices.Clone(l)
	slices.Sort(s)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	rank := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	m[result.LatP50] = us(rank(0.50))
	m[result.LatP99] = us(rank(0.99))
	m[result.LatP999] = us(rank(0.999))
	m[result.LatMax] = us(s[len(s)-1])
}

// alignedBuffer returns size bytes of page-aligned anonymous memory, as
// O_DIRECT requires, and the function that releases it.
func alignedBuffer(size int) ([]byte, func(), error) {
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("probe: allocate %d-byte aligned buffer: %w", size, err)
	}
	return b, func() { _ = unix.Munmap(b) }, nil
}

// dropCache makes the file's data durable and then asks the kernel to evict
// it from the page cache, so the next reads come from the device. Eviction
// is advice: the kernel keeps pages it cannot drop (tmpfs, pages mapped
// elsewhere), and a file system without fadvise support is measured as it
// is, so only the fdatasync can fail.
func dropCache(f *os.File) error {
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("probe: fdatasync %s: %w", f.Name(), err)
	}
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	return nil
}

// openDirect opens path for O_DIRECT I/O. reason is non-empty when direct
// I/O does not apply to this file system (the points are then skipped): it
// refuses O_DIRECT, or it is memory with no device under it. err is any
// other failure.
func openDirect(path string) (f *os.File, reason string, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err == nil {
		switch uint32(st.Type) {
		case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
			return nil, "the file system is memory (tmpfs/ramfs): there is no device for O_DIRECT to reach, " +
				"so direct points would measure memory", nil
		}
	}
	f, err = os.OpenFile(path, os.O_RDWR|syscall.O_DIRECT, 0)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		return nil, fmt.Sprintf("the file system refused O_DIRECT (%v)", err), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("probe: open O_DIRECT: %w", err)
	}
	return f, "", nil
}

// fillPattern fills b with incompressible bytes from the generator x
// (xorshift64*), so compressing or deduplicating storage cannot shortcut
// the writes, and returns the generator's next state.
func fillPattern(b []byte, x uint64) uint64 {
	x |= 1
	for i := 0; i+8 <= len(b); i += 8 {
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		v := x * 2685821657736338717
		b[i], b[i+1], b[i+2], b[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		b[i+4], b[i+5], b[i+6], b[i+7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
	}
	return x
}

// sizeLabel writes a byte count the way point IDs do: 4K, 64K, 1M, 1536.
func sizeLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

// sizeWords writes a byte count for people: 4 KiB, 1 MiB.
func sizeWords(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// point builds a result.Point from factor name/value pairs in matrix order.
func point(kv ...string) result.Point {
	var p result.Point
	var id []string
	for i := 0; i+1 < len(kv); i += 2 {
		p.Factors = append(p.Factors, result.FactorValue{Name: kv[i], Value: kv[i+1]})
		id = append(id, kv[i]+"="+kv[i+1])
	}
	p.ID = strings.Join(id, "/")
	return p
}
