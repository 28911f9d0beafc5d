package transport

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/node"
)

// metricValue is the value of a counter or gauge in reg (0 when absent),
// matching labels.
func metricValue(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.Metric {
			for _, lp := range m.Label {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metrics
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	return 0
}

// sessionFetch is a v11 Fetch in session id at epoch (MaxWait 0, MinBytes
// 1) naming parts (topic -> partition -> fetch offset) and forgetting
// forgotten (topic -> partitions).
func sessionFetch(id, epoch int32, parts map[string]map[int32]int64, forgotten map[string][]int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MinBytes, req.MaxBytes = 11, -1, 1, 1<<20
	req.SessionID, req.SessionEpoch = id, epoch
	for _, topic := range sortedKeys(parts) {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for _, p := range sortedKeys(parts[topic]) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, parts[topic][p], 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	for _, topic := range sortedKeys(forgotten) {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = topic, forgotten[topic]
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

func sortedKeys[K string | int32, V any](m map[K]V) []K {
	var ks []K
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// answered lists a response's partitions as "topic/partition" (with
// ":records" when it carries any, ":code" when it has an error).
func answered(resp *kmsg.FetchResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			s := fmt.Sprintf("%s/%d", t.Topic, p.Partition)
			if len(p.RecordBatches) > 0 {
				s += ":records"
			}
			if p.ErrorCode != 0 {
				s += fmt.Sprintf(":%d", p.ErrorCode)
			}
			out = append(out, s)
		}
	}
	return out
}

func expectAnswered(t *testing.T, what string, resp *kmsg.FetchResponse, want ...string) {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("%s: error %d", what, resp.ErrorCode)
	}
	if got := answered(resp); !slices.Equal(got, want) {
		t.Fatalf("%s: answered %q, want %q", what, got, want)
	}
}

// The session protocol end to end, at the protocol level: create, idle,
// changes, updates, wrong epoch, unknown ID, forgotten partitions, errors,
// close, and the request counts by kind.
func TestFetchSessions(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 3, nil)
	rc := b.dial(t)
	b.produce(t, "t", 0, batch(t, "a", 3))
	all := map[string]map[int32]int64{"t": {0: 0, 1: 0, 2: 0}}

	// Sessionless (epoch -1): session ID 0, every partition.
	resp := rc.do(sessionFetch(0, -1, all, nil)).(*kmsg.FetchResponse)
	if resp.SessionID != 0 {
		t.Fatalf("sessionless fetch got session %d", resp.SessionID)
	}
	expectAnswered(t, "sessionless", resp, "t/0:records", "t/1", "t/2")

	// Epoch 0: a new session, every partition answered.
	resp = rc.do(sessionFetch(0, 0, all, nil)).(*kmsg.FetchResponse)
	id := resp.SessionID
	if id == 0 {
		t.Fatal("no session created")
	}
	expectAnswered(t, "full", resp, "t/0:records", "t/1", "t/2")

	// Incremental, the consumer moved on to offset 3 of t/0: nothing new.
	resp = rc.do(sessionFetch(id, 1, map[string]map[int32]int64{"t": {0: 3}}, nil)).(*kmsg.FetchResponse)
	if resp.SessionID != id {
		t.Fatalf("incremental answered with session %d, want %d", resp.SessionID, id)
	}
	expectAnswered(t, "idle", resp)

	// Records for t/1: only t/1 is answered.
	b.produce(t, "t", 1, batch(t, "b", 2))
	resp = rc.do(sessionFetch(id, 2, nil, nil)).(*kmsg.FetchResponse)
	expectAnswered(t, "t/1 grew", resp, "t/1:records")
	if p := resp.Topics[0].Partitions[0]; p.HighWatermark != 2 || len(recordsIn(t, p)) != 2 {
		t.Fatalf("t/1: %+v", p)
	}

	// A replayed epoch: INVALID_FETCH_SESSION_EPOCH, no partitions, and the
	// session is unharmed.
	resp = rc.do(sessionFetch(id, 2, nil, nil)).(*kmsg.FetchResponse)
	if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(resp.Topics) != 0 || resp.SessionID != 0 {
		t.Fatalf("replayed epoch: error %d, %d topics, session %d", resp.ErrorCode, len(resp.Topics), resp.SessionID)
	}
	resp = rc.do(sessionFetch(id, 3, map[string]map[int32]int64{"t": {1: 2}}, nil)).(*kmsg.FetchResponse)
	expectAnswered(t, "after the replay", resp)

	// An unknown ID, and ID 0 with an epoch: FETCH_SESSION_ID_NOT_FOUND.
	for _, bad := range [][2]int32{{id + 1, 1}, {0, 4}} {
		resp = rc.do(sessionFetch(bad[0], bad[1], all, nil)).(*kmsg.FetchResponse)
		if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || len(resp.Topics) != 0 {
			t.Fatalf("session %d epoch %d: error %d, %d topics", bad[0], bad[1], resp.ErrorCode, len(resp.Topics))
		}
	}

	// Forget t/0: its records are no longer answered.
	resp = rc.do(sessionFetch(id, 4, nil, map[string][]int32{"t": {0}})).(*kmsg.FetchResponse)
	expectAnswered(t, "forgot t/0", resp)
	b.produce(t, "t", 0, batch(t, "c", 1))
	resp = rc.do(sessionFetch(id, 5, nil, nil)).(*kmsg.FetchResponse)
	expectAnswered(t, "t/0 forgotten", resp)

	// A partition with an error is answered at once, and every time.
	bad := map[string]map[int32]int64{"nope": {0: 0}}
	unknown := fmt.Sprintf("nope/0:%d", kerr.UnknownTopicOrPartition.Code)
	resp = rc.do(sessionFetch(id, 6, bad, nil)).(*kmsg.FetchResponse)
	expectAnswered(t, "unknown partition added", resp, unknown)
	resp = rc.do(sessionFetch(id, 7, nil, nil)).(*kmsg.FetchResponse)
	expectAnswered(t, "unknown partition again", resp, unknown)
	resp = rc.do(sessionFetch(id, 8, nil, map[string][]int32{"nope": {0}})).(*kmsg.FetchResponse)
	expectAnswered(t, "unknown partition forgotten", resp)

	// Epoch -1 closes the session: a sessionless answer, then the ID is
	// unknown.
	resp = rc.do(sessionFetch(id, -1, map[string]map[int32]int64{"t": {2: 0}}, nil)).(*kmsg.FetchResponse)
	if resp.SessionID != 0 {
		t.Fatalf("closing fetch answered with session %d", resp.SessionID)
	}
	expectAnswered(t, "closing", resp, "t/2")
	resp = rc.do(sessionFetch(id, 9, nil, nil)).(*kmsg.FetchResponse)
	if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: error %d", resp.ErrorCode)
	}

	rc.do(kmsg.NewPtrApiVersionsRequest()) // settles the metrics of the last Fetch
	reg := b.node.Metrics()
	for kind, want := range map[string]float64{"sessionless": 2, "full": 1, "incremental": 8, "error": 4} {
		if got := metricValue(t, reg, "weir_fetch_requests_total", map[string]string{"session": kind}); got != want {
			t.Errorf("%s fetches: %v, want %v", kind, got, want)
		}
	}
	if got := metricValue(t, reg, "weir_fetch_sessions", nil); got != 0 {
		t.Errorf("sessions cached: %v", got)
	}
}

// A long poll in a session is woken by an append to one of its partitions
// and answers that partition only.
func TestFetchSessionLongPoll(t *testing.T) {
	waiting := setFetchHook(t)
	b := startBroker(t)
	b.createTopic(t, "t", 4, nil)
	rc := b.dial(t)
	resp := rc.do(sessionFetch(0, 0, map[string]map[int32]int64{"t": {0: 0, 1: 0, 2: 0, 3: 0}}, nil)).(*kmsg.FetchResponse)
	id := resp.SessionID
	req := sessionFetch(id, 1, nil, nil)
	req.MaxWaitMillis = int32(time.Minute / time.Millisecond)
	corr := rc.send(req)
	<-waiting
	b.produce(t, "t", 2, batch(t, "x", 1))
	resp = rc.recv(req, corr).(*kmsg.FetchResponse)
	expectAnswered(t, "woken", resp, "t/2:records")
}

// The cache's slots are bounded: a full cache refuses a new consumer
// session (ID 0) until a session has been unused for the eviction age; a
// follower's session evicts a consumer's at once.
func TestFetchSessionEviction(t *testing.T) {
	clock := newFakeClock()
	b := startBroker(t, withSeams(&seams{now: clock.Now}), func(c *Config, _ *node.Config) { c.FetchSessionSlots = 1 })
	b.createTopic(t, "t", 2, nil)
	rc := b.dial(t)
	one := map[string]map[int32]int64{"t": {0: 0}}
	reg := b.node.Metrics()

	first := rc.do(sessionFetch(0, 0, one, nil)).(*kmsg.FetchResponse).SessionID
	if first == 0 {
		t.Fatal("no session in an empty cache")
	}
	clock.Advance(time.Minute)
	if id := rc.do(sessionFetch(0, 0, one, nil)).(*kmsg.FetchResponse).SessionID; id != 0 {
		t.Fatalf("full cache made room (session %d) for a session of equal worth", id)
	}
	clock.Advance(time.Minute + time.Second) // first unused for more than 2 min
	second := rc.do(sessionFetch(0, 0, one, nil)).(*kmsg.FetchResponse)
	if second.SessionID == 0 || second.SessionID == first {
		t.Fatalf("stale session not evicted: got session %d", second.SessionID)
	}
	if resp := rc.do(sessionFetch(first, 1, nil, nil)).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("evicted session answered: error %d", resp.ErrorCode)
	}
	// A follower's full fetch (broker 7, not a replica here: its partitions
	// fail, but its session is privileged) evicts the consumer's.
	req := sessionFetch(0, 0, map[string]map[int32]int64{"t": {1: 0}}, nil)
	req.ReplicaID = 7
	if id := rc.do(req).(*kmsg.FetchResponse).SessionID; id == 0 {
		t.Fatal("follower session not created")
	}
	if resp := rc.do(sessionFetch(second.SessionID, 1, nil, nil)).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("consumer session survived a follower's: error %d", resp.ErrorCode)
	}
	rc.do(kmsg.NewPtrApiVersionsRequest())
	if got := metricValue(t, reg, "weir_fetch_session_evictions_total", nil); got != 2 {
		t.Fatalf("evictions %v, want 2", got)
	}
	if got := metricValue(t, reg, "weir_fetch_sessions", nil); got != 1 {
		t.Fatalf("sessions %v, want 1", got)
	}
}

// With FetchSessionSlots negative the broker keeps no sessions: clients are
// told so (session ID 0) and send full requests.
func TestFetchSessionsOff(t *testing.T) {
	b := startBroker(t, func(c *Config, _ *node.Config) { c.FetchSessionSlots = -1 })
	b.createTopic(t, "t", 1, nil)
	rc := b.dial(t)
	resp := rc.do(sessionFetch(0, 0, map[string]map[int32]int64{"t": {0: 0}}, nil)).(*kmsg.FetchResponse)
	if resp.SessionID != 0 || resp.ErrorCode != 0 {
		t.Fatalf("session %d, error %d", resp.SessionID, resp.ErrorCode)
	}
	expectAnswered(t, "full", resp, "t/0")
}
