package env

import (
	"strings"
	"testing"

	"github.com/weir-broker/weir/harness/result"
)

func TestJudge(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		rot      *bool
		emulated string
		us       float64
		want     string
	}{
		{&yes, "", 150, "the kernel calls it rotational, which the measurement contradicts"},
		{&yes, "", 12000, "the kernel's rotational flag agrees"},
		{&no, "", 12000, "the kernel calls it non-rotational, which the measurement contradicts"},
		{&no, "", 80, "flash latency"},
		{nil, "", 80, "the kernel does not say"},
		{&yes, "raid5-6xhdd-7200", 13000, "emulated (weir disk raid5-6xhdd-7200)"},
		{&yes, "", 1500, "between flash and a spinning disk"},
	} {
		e := result.Env{Rotational: tc.rot, EmulatedDevice: tc.emulated}
		Judge(&e, tc.us)
		if !strings.Contains(e.DiskVerdict, tc.want) || e.ProbeRandom4KUs != tc.us {
			t.Errorf("Judge(rotational %v, emulated %q, %g µs) = %q, want it to say %q", tc.rot, tc.emulated, tc.us, e.DiskVerdict, tc.want)
		}
	}
	e := result.Env{}
	if Judge(&e, 0); e.DiskVerdict != "" {
		t.Errorf("no measurement gave a verdict: %q", e.DiskVerdict)
	}
}
