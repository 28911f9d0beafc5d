package e2e_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReadmeVersions keeps the README's table of protocol versions true: it
// must list exactly what a running broker answers to ApiVersions.
func TestReadmeVersions(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "\n## The broker\n"
	start := strings.Index(string(readme), heading)
	if start < 0 {
		t.Fatal(`README.md has no "## The broker" section`)
	}
	section := string(readme[start+len(heading):])
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	row := regexp.MustCompile(`(?m)^\| (\w+) \| (\d+) \| (\d+)-(\d+) \|$`)
	type served struct {
		Name          string
		Key, Min, Max int16
	}
	atoi := func(s string) int16 { n, _ := strconv.Atoi(s); return int16(n) }
	var documented []served
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		documented = append(documented, served{m[1], atoi(m[2]), atoi(m[3]), atoi(m[4])})
	}

	b := startBroker(t, t.TempDir())
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(testContext(t), newClient(t, b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatal(err)
	}
	var live []served
	for _, k := range resp.ApiKeys {
		live = append(live, served{kmsg.NameForKey(k.ApiKey), k.ApiKey, k.MinVersion, k.MaxVersion})
	}
	slices.SortFunc(live, func(a, b served) int { return int(a.Key) - int(b.Key) })
	equal := slices.EqualFunc(documented, live, func(d, l served) bool {
		return strings.EqualFold(d.Name, l.Name) && d.Key == l.Key && d.Min == l.Min && d.Max == l.Max
	})
	if !equal {
		var want strings.Builder
		for _, l := range live {
			want.WriteString("| " + l.Name + " | " + strconv.Itoa(int(l.Key)) + " | " +
				strconv.Itoa(int(l.Min)) + "-" + strconv.Itoa(int(l.Max)) + " |\n")
		}
		t.Errorf("README.md's protocol versions table differs from what the broker serves; it should read:\n%s", want.String())
	}
}
