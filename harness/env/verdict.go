package env

import (
	"fmt"
	"strings"

	"github.com/weir-broker/weir/harness/result"
)

// Latency bounds of Judge: a 7200 rpm disk's random 4 KiB read averages about 12 ms (seek plus half a turn), a
// 15k rpm one about 5.5 ms and never much below 2 ms; flash answers in 0.1 ms or less, a virtual disk on flash in
// well under 1 ms.
const (
	spinningUs = 2000
	flashUs    = 1000
)

// Judge records what the disk probe measured, the median latency of random 4 KiB O_DIRECT reads in µs, and what it
// makes the device: a run's environment stops taking the kernel's rotational flag at its word (a virtual disk on
// flash often claims to be rotational, and an emulated disk's flag is its host's). The verdict says when flag and
// measurement disagree, and names an emulated device as such.
func Judge(e *result.Env, random4KUs float64) {
	if random4KUs <= 0 {
		return
	}
	e.ProbeRandom4KUs = random4KUs
	ms := random4KUs / 1000
	var measured string
	spinning := false
	switch {
	case random4KUs >= spinningUs:
		measured, spinning = fmt.Sprintf("random 4 KiB reads take %.2g ms: a spinning disk's latency", ms), true
	case random4KUs < flashUs:
		measured = fmt.Sprintf("random 4 KiB reads take %.2g ms: flash latency (SSD, NVMe, or a virtual disk on one)", ms)
	default:
		e.DiskVerdict = fmt.Sprintf("random 4 KiB reads take %.2g ms: between flash and a spinning disk", ms)
		return
	}
	switch {
	case e.EmulatedDevice != "":
		name, _, _ := strings.Cut(e.EmulatedDevice, ":")
		e.DiskVerdict = measured + "; emulated (weir disk " + name + ")"
	case e.Rotational == nil:
		e.DiskVerdict = measured + "; the kernel does not say whether it rotates"
	case *e.Rotational == spinning:
		e.DiskVerdict = measured + "; the kernel's rotational flag agrees"
	case *e.Rotational:
		e.DiskVerdict = measured + "; the kernel calls it rotational, which the measurement contradicts"
	default:
		e.DiskVerdict = measured + "; the kernel calls it non-rotational, which the measurement contradicts"
	}
}
