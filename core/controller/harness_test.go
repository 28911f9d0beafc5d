package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/meta"
)

// harness drives one Controller the way the loop would, over a tiny store
// of topics (assignments, states with versions, deletion requests): steps
// change the brokers or the store and feed the controller; Ready's actions
// are kept pending until a step settles them.
type harness struct {
	t       *testing.T
	c       *Controller
	cfg     Config
	zxid    int64
	brokers map[int32]meta.Broker
	store   map[string]*meta.Topic
	pending []Action
	// topicIDs numbers topic incarnations: each creation gets a new ID.
	topicIDs byte
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, c: c, cfg: cfg, brokers: map[int32]meta.Broker{}, store: map[string]*meta.Topic{}}
}

// ready collects Ready's actions, adds them to pending and returns them as
// strings.
func (h *harness) ready() []string {
	var out []string
	for _, a := range h.c.Ready() {
		h.pending = append(h.pending, a)
		out = append(out, a.String())
	}
	return out
}

func (h *harness) must(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) setBrokers() { h.must(h.c.SetBrokers(maps.Clone(h.brokers))) }

// write executes w against the store: the new version, or the store's error.
func (h *harness) write(w Write) (int32, error) {
	st := h.store[w.TopicName()]
	if st == nil {
		return 0, coord.ErrNoNode
	}
	switch w := w.(type) {
	case *CreateState:
		if st.States[w.Partition] != nil {
			return 0, coord.ErrNodeExists
		}
		s := w.State.Clone()
		s.Version = 0
		st.States[w.Partition] = &s
		return 0, nil
	case *UpdateState:
		cur := st.States[w.Partition]
		if cur == nil {
			return 0, coord.ErrNoNode
		}
		if cur.Version != w.Version {
			return 0, fmt.Errorf("multi: %w", coord.ErrBadVersion)
		}
		s := w.State.Clone()
		s.Version = w.Version + 1
		st.States[w.Partition] = &s
		return s.Version, nil
	case *DeleteTopic:
		delete(h.store, w.Name)
		return 0, nil
	}
	panic(w)
}

// feed gives the controller the store's copy of a topic (or removes it).
func (h *harness) feed(name string) {
	if st := h.store[name]; st != nil {
		h.must(h.c.SetTopic(st.Clone()))
	} else {
		h.c.RemoveTopic(name)
	}
}

// Steps. Each returns what it does to the harness.

type step struct {
	do   func(h *harness)
	want []string // Ready's actions after do, in order
}

func all(fs ...func(*harness)) func(*harness) {
	return func(h *harness) {
		for _, f := range fs {
			f(h)
		}
	}
}

// live makes exactly ids live: new ones register with a fresh epoch, the
// others keep theirs, the missing ones die.
func live(ids ...int32) func(*harness) {
	return func(h *harness) {
		next := map[int32]meta.Broker{}
		for _, id := range ids {
			b, ok := h.brokers[id]
			if !ok {
				h.zxid++
				b = meta.Broker{ID: id, Host: "h", Port: 9092, Epoch: h.zxid}
			}
			next[id] = b
		}
		h.brokers = next
		h.setBrokers()
	}
}

// bounce re-registers broker id (a larger epoch) between two reads.
func bounce(id int32) func(*harness) {
	return func(h *harness) {
		b, ok := h.brokers[id]
		if !ok {
			h.t.Fatalf("bounce of broker %d, which is not live", id)
		}
		h.zxid++
		b.Epoch = h.zxid
		h.brokers[id] = b
		h.setBrokers()
	}
}

// reregister gives broker id a new registration (a larger epoch) that the
// controller is not told of: it restarted while the controller was cut off
// from the store. A later SetBrokers (live, or failover) reads it.
func reregister(id int32) func(*harness) {
	return func(h *harness) {
		b, ok := h.brokers[id]
		if !ok {
			h.t.Fatalf("re-registration of broker %d, which is not live", id)
		}
		h.zxid++
		b.Epoch = h.zxid
		h.brokers[id] = b
	}
}

// newTopic creates a topic (no states) with one assignment per partition.
func newTopic(name string, assignment ...[]int32) func(*harness) {
	return stored(name, assignment)
}

// stored puts a topic with states in the store (a cluster the controller
// finds when it starts) and feeds it.
func stored(name string, assignment [][]int32, states ...*meta.PartitionState) func(*harness) {
	return func(h *harness) {
		h.topicIDs++
		t := &meta.Topic{Name: name, ID: [16]byte{h.topicIDs}, Assignment: assignment,
			States: make([]*meta.PartitionState, len(assignment))}
		copy(t.States, states)
		h.store[name] = t
		h.feed(name)
	}
}

// st is a stored state (leader, leader epoch, controller epoch, version, ISR).
func st(leader, epoch, ce, version int32, isr ...int32) *meta.PartitionState {
	return &meta.PartitionState{Leader: leader, LeaderEpoch: epoch, ControllerEpoch: ce, Version: version, ISR: isr}
}

func r(ids ...int32) []int32 { return ids }

// apply executes every pending write in order and reports each outcome.
func apply(h *harness) {
	h.t.Helper()
	var keep []Action
	for _, a := range h.pending {
		w, ok := a.(Write)
		if !ok {
			keep = append(keep, a)
			continue
		}
		if v, err := h.write(w); err != nil {
			h.must(h.c.Failed(w, err))
		} else {
			h.must(h.c.Applied(w, v))
		}
	}
	h.pending = keep
}

// fail fails the pending write that prints as prefix… with err, unapplied.
func fail(prefix string, err error) func(*harness) {
	return func(h *harness) {
		h.t.Helper()
		i := slices.IndexFunc(h.pending, func(a Action) bool { return strings.HasPrefix(a.String(), prefix) })
		if i < 0 {
			h.t.Fatalf("no pending action %q in %v", prefix, h.pending)
		}
		h.must(h.c.Failed(h.pending[i].(Write), err))
		h.pending = slices.Delete(h.pending, i, i+1)
	}
}

// reread answers the pending Reread of name from the store.
func reread(name string) func(*harness) {
	return func(h *harness) {
		h.t.Helper()
		i := slices.IndexFunc(h.pending, func(a Action) bool { return a.String() == "reread "+name })
		if i < 0 {
			h.t.Fatalf("no pending reread of %s in %v", name, h.pending)
		}
		h.pending = slices.Delete(h.pending, i, i+1)
		h.feed(name)
	}
}

// isrChange is a leader's own ISR change in the store (the version moves,
// the leader epoch does not); the controller is not told.
func isrChange(name string, p int32, isr ...int32) func(*harness) {
	return func(h *harness) {
		s := h.store[name].States[p]
		s.ISR = isr
		s.Version++
	}
}

// askDelete files a deletion request for a topic and feeds it.
func askDelete(name string) func(*harness) {
	return func(h *harness) {
		h.store[name].Deleting = true
		h.feed(name)
	}
}

func ack(name string, broker int32) func(*harness) {
	return func(h *harness) { h.c.DeletionAcked(name, broker) }
}

func config(name, key, value string) func(*harness) {
	return func(h *harness) {
		t := h.store[name]
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		t.Configs[key] = value
		h.feed(name)
	}
}

func tick(h *harness) { h.c.Tick() }

// failover replaces the controller with a new one of epoch ce that reads
// the brokers and every topic, as onControllerFailover does; what the old
// one had pending is dropped (it is fenced).
func failover(ce int32) func(*harness) {
	return func(h *harness) {
		h.cfg.ControllerEpoch = ce
		c, err := New(h.cfg)
		h.must(err)
		h.c, h.pending = c, nil
		h.setBrokers()
		for _, name := range slices.Sorted(maps.Keys(h.store)) {
			h.feed(name)
		}
	}
}

// settled fails unless the controller's view of name is the store's.
func settled(name string) func(*harness) {
	return func(h *harness) {
		h.t.Helper()
		got, want := h.c.Topic(name), h.store[name]
		if (got == nil) != (want == nil) {
			h.t.Fatalf("topic %s: controller has %v, store %v", name, got, want)
		}
		if want == nil {
			return
		}
		for p := range want.States {
			g, w := got.States[p], want.States[p]
			if (g == nil) != (w == nil) || g != nil && (!g.Equal(*w) || g.Version != w.Version) {
				h.t.Fatalf("topic %s partition %d: controller has %+v, store %+v", name, p, g, w)
			}
		}
	}
}

func wantErrIs(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

// lost executes the pending write that prints as prefix… in the store but
// reports it as a lost connection (the outcome unknown to the loop).
func lost(prefix string) func(*harness) {
	return func(h *harness) {
		h.t.Helper()
		i := slices.IndexFunc(h.pending, func(a Action) bool { return strings.HasPrefix(a.String(), prefix) })
		if i < 0 {
			h.t.Fatalf("no pending action %q in %v", prefix, h.pending)
		}
		w := h.pending[i].(Write)
		if _, err := h.write(w); err != nil {
			h.t.Fatalf("%v: %v", w, err)
		}
		h.must(h.c.Failed(w, fmt.Errorf("multi: %w", coord.ErrConnectionLoss)))
		h.pending = slices.Delete(h.pending, i, i+1)
	}
}

// addPartitions appends partitions to a topic's assignment and feeds it.
func addPartitions(name string, assignment ...[]int32) func(*harness) {
	return func(h *harness) {
		t := h.store[name]
		t.Assignment = append(t.Assignment, assignment...)
		t.States = append(t.States, make([]*meta.PartitionState, len(assignment))...)
		h.feed(name)
	}
}

// snapshots hold reads taken earlier, to feed late (a lagging watch).
var snapshots = map[*harness]map[string]*meta.Topic{}

func snapshot(name string) func(*harness) {
	return func(h *harness) {
		if snapshots[h] == nil {
			snapshots[h] = map[string]*meta.Topic{}
		}
		snapshots[h][name] = h.store[name].Clone()
	}
}

func feedSnapshot(name string) func(*harness) {
	return func(h *harness) { h.must(h.c.SetTopic(snapshots[h][name])) }
}

func deposed(want bool) func(*harness) {
	return func(h *harness) {
		h.t.Helper()
		if h.c.Deposed() != want {
			h.t.Fatalf("Deposed() = %v, want %v", !want, want)
		}
	}
}

// shuttingDown sets the brokers in controlled shutdown.
func shuttingDown(ids ...int32) func(*harness) {
	return func(h *harness) { h.c.SetShuttingDown(ids) }
}

// shutdownDone checks ShuttingDownDone.
func shutdownDone(id int32, want bool) func(*harness) {
	return func(h *harness) {
		h.t.Helper()
		if got := h.c.ShuttingDownDone(id); got != want {
			h.t.Fatalf("ShuttingDownDone(%d) = %v, want %v", id, got, want)
		}
	}
}

func preferredElection(h *harness) { h.c.PreferredElection() }

// feedTopic feeds the stored topic to the controller (a read).
func feedTopic(name string) func(*harness) {
	return func(h *harness) { h.feed(name) }
}

// resigned sets the resignations (SetResignations).
func resigned(rs ...meta.Resignation) func(*harness) {
	return func(h *harness) { h.c.SetResignations(rs) }
}

func resignation(broker int32, topic string, p, epoch int32) meta.Resignation {
	return meta.Resignation{Broker: broker, Topic: topic, Partition: p, LeaderEpoch: epoch}
}
