package layout_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/meta"
)

// setupDeletion: a controller, topics t (2 partitions, states written) and
// u (untouched by t's deletion).
func setupDeletion(t *testing.T, s coord.Store) layout.Controllership {
	t.Helper()
	c, err := layout.Elect(ctx(t), s, 1, 0)
	must(t, err)
	for _, name := range []string{"t", "u"} {
		must(t, layout.CreateTopic(ctx(t), s, topic(name, []int32{1, 2}, []int32{2, 10})))
		for p := range int32(2) {
			_, err := layout.WriteState(ctx(t), s, c, name, p, meta.PartitionState{Leader: 2, ISR: []int32{2}, ControllerEpoch: 1}, true)
			must(t, err)
		}
	}
	return c
}

// without returns the tree without topic name's nodes.
func without(tree map[string]string, name string) map[string]string {
	out := maps.Clone(tree)
	for p := range out {
		for _, root := range []string{layout.TopicPath(name), layout.ConfigTopicPath(name), layout.DeleteTopicPath(name)} {
			if p == root || strings.HasPrefix(p, root+"/") {
				delete(out, p)
			}
		}
	}
	return out
}

func TestDeletion(t *testing.T) {
	_, ss := cluster(2)
	ctl, broker := ss[0], ss[1]
	c := setupDeletion(t, ctl)
	must(t, layout.RequestDeletion(ctx(t), broker, "t"))
	must(t, layout.RequestDeletion(ctx(t), broker, "t")) // again: fine
	if got, err := layout.ReadTopic(ctx(t), ctl, "t"); err != nil || !got.Deleting {
		t.Fatalf("topic %+v, %v", got, err)
	}
	acks, watch, err := layout.DeletionAcks(ctx(t), ctl, "t")
	must(t, err)
	if len(acks) != 0 {
		t.Fatalf("acks %v", acks)
	}
	for _, b := range []int32{10, 2, 1, 2} {
		must(t, layout.AckDeletion(ctx(t), broker, "t", b))
	}
	fired(t, watch, coord.EventNodeChildrenChanged)
	if acks, _, err = layout.DeletionAcks(ctx(t), ctl, "t"); err != nil || !slices.Equal(acks, []int32{1, 2, 10}) {
		t.Fatalf("acks %v, %v", acks, err)
	}

	before := dump(t, ctl)
	must(t, layout.DeleteTopic(ctx(t), ctl, c, "t"))
	after := dump(t, ctl)
	if want := without(before, "t"); !maps.Equal(after, want) {
		t.Fatalf("after deleting t:\n got %v\nwant %v", after, want)
	}
	for _, p := range []string{layout.TopicsPath, layout.ConfigTopicsPath, layout.DeleteTopicsPath, layout.TopicPath("u")} {
		if _, ok := after[p]; !ok {
			t.Fatalf("%s was deleted too", p)
		}
	}
	if _, err := layout.ReadTopic(ctx(t), ctl, "t"); err == nil {
		t.Fatal("t still reads")
	}
	_, _, err = layout.DeletionAcks(ctx(t), ctl, "t")
	wantErr(t, err, errs(coord.ErrNoNode))
	wantErr(t, layout.AckDeletion(ctx(t), broker, "t", 3), errs(coord.ErrNoNode))
	if exists(t, ctl, layout.DeleteTopicPath("t")) {
		t.Fatal("a late ack re-created the deletion request")
	}
	must(t, layout.DeleteTopic(ctx(t), ctl, c, "t")) // nothing left: fine
}

// An ack arriving between DeleteTopic's read and its Multi: read again.
func TestDeleteTopicLateAck(t *testing.T) {
	srv, ss := cluster(2)
	c := setupDeletion(t, ss[0])
	must(t, layout.RequestDeletion(ctx(t), ss[0], "t"))
	must(t, layout.AckDeletion(ctx(t), ss[1], "t", 1))
	before := dump(t, ss[0])
	inj := srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindMulti, layout.DeleteTopicPath("t")),
		Before: func(memstore.Request) { must(t, layout.AckDeletion(ctx(t), ss[1], "t", 2)) }})
	must(t, layout.DeleteTopic(ctx(t), ss[0], c, "t"))
	if after := dump(t, ss[0]); inj.Struck() != 1 || !maps.Equal(after, without(before, "t")) {
		t.Fatalf("struck %d, left %v", inj.Struck(), after)
	}
}

func TestDeletionAcksMalformed(t *testing.T) {
	_, ss := cluster(1)
	must(t, layout.RequestDeletion(ctx(t), ss[0], "t"))
	must(t, ss[0].Create(ctx(t), "/admin/delete_topics/t/x", nil, coord.Persistent))
	_, _, err := layout.DeletionAcks(ctx(t), ss[0], "t")
	wantErr(t, err, errs(layout.ErrMalformed), "/admin/delete_topics/t/x")
}

// A topic cannot be created again while its predecessor's deletion request
// is pending (Kafka's "marked for deletion"); once the controller removed
// the request with the topic, it can.
func TestCreateTopicMarkedForDeletion(t *testing.T) {
	_, ss := cluster(2)
	ctl, broker := ss[0], ss[1]
	c := setupDeletion(t, ctl)
	must(t, layout.RequestDeletion(ctx(t), broker, "t"))
	must(t, layout.AckDeletion(ctx(t), broker, "t", 1))
	before := dump(t, ctl)
	err := layout.CreateTopic(ctx(t), broker, topic("t", []int32{1}))
	wantErr(t, err, errs(layout.ErrTopicExists, layout.ErrMarkedForDeletion), layout.DeleteTopicPath("t"))
	if after := dump(t, ctl); !maps.Equal(after, before) {
		t.Fatalf("a refused creation wrote:\n got %v\nwant %v", after, before)
	}

	// The request alone (its topic gone already, as a stale broker may
	// leave it) refuses the name too.
	must(t, layout.DeleteTopic(ctx(t), ctl, c, "t"))
	must(t, layout.RequestDeletion(ctx(t), broker, "t"))
	err = layout.CreateTopic(ctx(t), broker, topic("t", []int32{1}))
	wantErr(t, err, errs(layout.ErrTopicExists, layout.ErrMarkedForDeletion))
	must(t, ctl.Delete(ctx(t), layout.DeleteTopicPath("t"), coord.AnyVersion))

	next := topic("t", []int32{1})
	must(t, layout.CreateTopic(ctx(t), broker, next))
	got, err := layout.ReadTopic(ctx(t), ctl, "t")
	if err != nil || got.ID != next.ID || got.Deleting {
		t.Fatalf("re-created topic %+v, %v; want id %x, not deleting", got, err, next.ID)
	}
}

// A deletion request without its topic is dropped, acks and all; one with
// its topic is not; a deposed controller drops nothing.
func TestDropOrphanDeletion(t *testing.T) {
	_, ss := cluster(2)
	ctl, broker := ss[0], ss[1]
	c := setupDeletion(t, ctl)
	must(t, layout.RequestDeletion(ctx(t), broker, "gone"))
	must(t, layout.AckDeletion(ctx(t), broker, "gone", 2))
	must(t, layout.RequestDeletion(ctx(t), broker, "t"))
	before := dump(t, ctl)

	_, err := layout.DropOrphanDeletion(ctx(t), ctl, c, "t")
	wantErr(t, err, errs(layout.ErrTopicExists), layout.TopicPath("t"))
	if after := dump(t, ctl); !maps.Equal(after, before) {
		t.Fatalf("dropping the request of an existing topic wrote:\n got %v\nwant %v", after, before)
	}

	stale := c
	stale.EpochVersion--
	_, err = layout.DropOrphanDeletion(ctx(t), ctl, stale, "gone")
	wantErr(t, err, errs(layout.ErrFenced))
	if !exists(t, ctl, layout.DeleteTopicPath("gone")) {
		t.Fatal("a deposed controller dropped the request")
	}

	if dropped, err := layout.DropOrphanDeletion(ctx(t), ctl, c, "gone"); err != nil || !dropped {
		t.Fatalf("dropping the orphan: dropped %v, %v", dropped, err)
	}
	if after := dump(t, ctl); !maps.Equal(after, without(before, "gone")) {
		t.Fatalf("after dropping the orphan:\n got %v\nwant %v", after, without(before, "gone"))
	}
	if dropped, err := layout.DropOrphanDeletion(ctx(t), ctl, c, "gone"); err != nil || dropped {
		t.Fatalf("nothing left to drop: dropped %v, %v", dropped, err)
	}
	must(t, layout.CreateTopic(ctx(t), broker, topic("gone", []int32{1})))
}
