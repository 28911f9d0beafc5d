package txn

import (
	"errors"
	"testing"
	"time"
)

// harness drives one machine with explicit times and keeps what it asked
// for: the records it wrote (in order), the marker writes outstanding, and
// the replies given.
type harness struct {
	t       *testing.T
	m       *machine
	now     time.Time
	nextPID int64
	// writes are the records asked for and not yet answered, in order;
	// log the records answered as committed, in order.
	writes  []Write
	log     []Write
	markers []MarkerWrite
	replies map[uint64]Reply
	lastW   uint64
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newHarness(t *testing.T) *harness {
	cfg := &config{maxTimeout: DefaultMaxTimeout, expiration: DefaultExpiration, markerBackoff: DefaultMarkerBackoff}
	return &harness{t: t, m: newMachine(cfg, 7), now: t0, nextPID: 1000, replies: map[uint64]Reply{}}
}

func (h *harness) newPID() (int64, error) {
	h.nextPID++
	return h.nextPID, nil
}

// collect takes what the machine asks for.
func (h *harness) collect() {
	rd := h.m.ready()
	h.writes = append(h.writes, rd.Writes...)
	h.markers = append(h.markers, rd.Markers...)
	for _, r := range rd.Replies {
		if _, dup := h.replies[r.Waiter]; dup {
			h.t.Fatalf("waiter %d answered twice", r.Waiter)
		}
		h.replies[r.Waiter] = r
	}
}

func (h *harness) waiter() uint64 {
	h.lastW++
	return h.lastW
}

// commit answers the oldest outstanding write with err (nil: committed).
func (h *harness) commit(err error) Write {
	h.t.Helper()
	if len(h.writes) == 0 {
		h.t.Fatalf("no write outstanding")
	}
	w := h.writes[0]
	h.writes = h.writes[1:]
	if err == nil {
		h.log = append(h.log, w)
	}
	h.m.written(h.now, w.ID, err)
	h.collect()
	return w
}

// commitAll commits every outstanding write, including those the commits
// lead to.
func (h *harness) commitAll() {
	for len(h.writes) > 0 {
		h.commit(nil)
	}
}

// mark answers the oldest marker write: the partitions for which ok says
// so are done.
func (h *harness) mark(ok func(TopicPartition) bool) MarkerWrite {
	h.t.Helper()
	if len(h.markers) == 0 {
		h.t.Fatalf("no marker write outstanding")
	}
	mw := h.markers[0]
	h.markers = h.markers[1:]
	var done []TopicPartition
	for _, tp := range mw.Partitions {
		if ok(tp) {
			done = append(done, tp)
		}
	}
	h.m.marked(h.now, mw.ID, done)
	h.collect()
	return mw
}

func all(TopicPartition) bool { return true }

// init runs InitProducerId and settles it (every write committed); it
// returns the answer.
func (h *harness) init(id string, timeout time.Duration, pid int64, epoch int16) (int64, int16, error) {
	h.t.Helper()
	w := h.waiter()
	parked, err := h.m.initProducerID(h.now, InitRequest{ID: id, Timeout: timeout, ProducerID: pid, Epoch: epoch}, w, h.newPID)
	h.collect()
	if !parked {
		return -1, -1, err
	}
	h.commitAll()
	r, ok := h.replies[w]
	if !ok {
		h.t.Fatalf("InitProducerId of %q parked and never answered", id)
	}
	return r.ProducerID, r.Epoch, r.Err
}

func (h *harness) add(id string, pid int64, epoch int16, parts ...TopicPartition) error {
	h.t.Helper()
	w := h.waiter()
	parked, err := h.m.addPartitions(h.now, AddRequest{ID: id, ProducerID: pid, Epoch: epoch, Partitions: parts}, w)
	h.collect()
	if !parked {
		return err
	}
	h.commit(nil)
	r, ok := h.replies[w]
	if !ok {
		h.t.Fatalf("AddPartitions of %q parked and never answered", id)
	}
	return r.Err
}

// end runs EndTxn and commits its Prepare record (not the markers).
func (h *harness) end(id string, pid int64, epoch int16, commit bool) error {
	h.t.Helper()
	w := h.waiter()
	parked, err := h.m.endTxn(h.now, EndRequest{ID: id, ProducerID: pid, Epoch: epoch, Commit: commit}, w)
	h.collect()
	if !parked {
		return err
	}
	h.commit(nil)
	r, ok := h.replies[w]
	if !ok {
		h.t.Fatalf("EndTxn of %q parked and never answered", id)
	}
	return r.Err
}

func (h *harness) state(id string) meta {
	h.t.Helper()
	e := h.m.txns[id]
	if e == nil {
		h.t.Fatalf("%q is not known", id)
	}
	return e.meta
}

// lastValue decodes the last record written for id.
func (h *harness) lastValue(id string) (meta, bool) {
	h.t.Helper()
	for i := len(h.log) - 1; i >= 0; i-- {
		if h.log[i].ID != id {
			continue
		}
		got, err := decodeKey(h.log[i].Key)
		if err != nil || got != id {
			h.t.Fatalf("key of %q decodes to %q, %v", id, got, err)
		}
		if h.log[i].Value == nil {
			return meta{}, false
		}
		m, err := decodeValue(h.log[i].Value)
		if err != nil {
			h.t.Fatalf("value of %q: %v", id, err)
		}
		return m, true
	}
	h.t.Fatalf("no record of %q", id)
	return meta{}, false
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func tp(topic string, p int32) TopicPartition { return TopicPartition{Topic: topic, Partition: p} }
