package transport

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestUnservedAPILogged: a request for an API weir does not serve
// (DescribeAcls), and one for a version of a served API below what it
// serves (Fetch v3), each close their connection with one INFO line naming
// the API, the version and the client id, so the operator can tell which
// client needs what.
func TestUnservedAPILogged(t *testing.T) {
	b := startBroker(t)
	for _, tc := range []struct {
		req      kmsg.Request
		clientID string
		want     []string
	}{
		{&kmsg.DescribeClientQuotasRequest{Version: 1}, "quota-tool",
			[]string{"INFO ", "api=DescribeClientQuotas", "key=48", "version=1", "client_id=quota-tool", "does not serve"}},
		{&kmsg.FetchRequest{Version: 3, ReplicaID: -1}, "old-consumer",
			[]string{"INFO ", "api=Fetch", "key=1", "version=3", "client_id=old-consumer", "serves v4-v"}},
	} {
		rc := b.dial(t)
		id := tc.clientID
		// Two requests in one write: should the server read the second
		// before closing, still one line.
		rc.write(append(frame(tc.req, 1, &id), frame(tc.req, 2, &id)...))
		rc.expectClosed()
		var lines []string
		pollUntil(t, "the unserved request logged", func() bool {
			lines = b.logs.find("client_id=" + tc.clientID)
			return len(lines) > 0
		})
		if len(lines) != 1 {
			t.Errorf("%s: %d log lines, want 1: %q", tc.clientID, len(lines), lines)
		}
		for _, w := range tc.want {
			if !strings.Contains(lines[0], w) {
				t.Errorf("log line %q lacks %q", lines[0], w)
			}
		}
	}
	b.checkAlive(t)
}
