package layout

import (
	"strings"
	"testing"
)

// A resignation's node name is read from the store, so from anyone: it
// never panics, and what parses is exactly the name ResignationPath gives.
func FuzzParseResignation(f *testing.F) {
	for _, s := range []string{"", ":", ":::", "1:t:0:0", "3:a.b-c_d:12:7", "1:a:b:2:3", "1::0:0", "01:t:0:0",
		"1:t:0:2147483648", "-1:t:0:0", "1:t:0:0:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		r, ok := parseResignation(name)
		if !ok {
			return
		}
		if got := strings.TrimPrefix(ResignationPath(r), ResignedPath+"/"); got != name {
			t.Fatalf("%q parses to %+v, which names %q", name, r, got)
		}
		if r.Broker < 0 || r.Partition < 0 || r.LeaderEpoch < 0 || r.Topic == "" {
			t.Fatalf("%q parses to %+v", name, r)
		}
	})
}
