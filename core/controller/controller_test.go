package controller

import (
	"slices"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/meta"
)

// scripts are sequences of inputs, each with the exact actions the
// controller hands out after it. The controller's epoch is 5 unless the
// script fails over; "ce" in a state is the controller epoch it carries.
var scripts = []struct {
	name    string
	unclean bool
	steps   []step
}{
	{name: "new topic: leader the first live replica, ISR the live replicas in assignment order", steps: []step{
		{all(live(1, 2, 3), newTopic("t", r(2, 3, 1), r(3, 1, 2))), []string{
			"create t/0 leader=2 epoch=0 isr=[2 3 1] ce=5",
			"create t/1 leader=3 epoch=0 isr=[3 1 2] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "new partition without a live replica waits for one (Kafka leaves it NewPartition)", steps: []step{
		{all(live(1), newTopic("t", r(2, 3), r(1, 2))), []string{"create t/1 leader=1 epoch=0 isr=[1] ce=5"}},
		{apply, nil},
		{tick, nil},
		{live(1, 3), []string{"create t/0 leader=3 epoch=0 isr=[3] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "leader dies: the first live ISR member in assignment order leads, the ISR keeps its order", steps: []step{
		{all(live(1, 2, 3), stored("t", [][]int32{{1, 2, 3}}, st(1, 4, 2, 7, 1, 3, 2))), nil},
		{live(2, 3), []string{"update t/0@7 leader=2 epoch=5 isr=[3 2] ce=5"}},
		{apply, nil},
		// Back, but out of sync: its leader adds it to the ISR, not the
		// controller.
		{live(1, 2, 3), nil},
		{settled("t"), nil},
	}},
	{name: "follower dies: it leaves the ISR, the leader stays, the epoch moves", steps: []step{
		{all(live(1, 2, 3), newTopic("t", r(1, 2, 3))), []string{"create t/0 leader=1 epoch=0 isr=[1 2 3] ce=5"}},
		{apply, nil},
		{live(1, 2), []string{"update t/0@0 leader=1 epoch=1 isr=[1 2] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "replication factor 1: offline with its broker, leader again when it returns", steps: []step{
		{all(live(1, 2), newTopic("t", r(1), r(2))), []string{
			"create t/0 leader=1 epoch=0 isr=[1] ce=5",
			"create t/1 leader=2 epoch=0 isr=[2] ce=5"}},
		{apply, nil},
		{live(2), []string{"update t/0@0 leader=-1 epoch=1 isr=[1] ce=5"}},
		{apply, nil},
		{live(2, 3), nil},
		{live(1, 2, 3), []string{"update t/0@1 leader=1 epoch=2 isr=[1] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "the last ISR member is kept, and a clean election waits for it", steps: []step{
		{all(live(1, 2, 3), newTopic("t", r(1, 2, 3))), []string{"create t/0 leader=1 epoch=0 isr=[1 2 3] ce=5"}},
		{apply, nil},
		{live(1, 3), []string{"update t/0@0 leader=1 epoch=1 isr=[1 3] ce=5"}},
		{apply, nil},
		{live(1), []string{"update t/0@1 leader=1 epoch=2 isr=[1] ce=5"}},
		{apply, nil},
		{live(2, 3), []string{"update t/0@2 leader=-1 epoch=3 isr=[1] ce=5"}},
		{apply, nil},
		{tick, nil},
		{live(1, 2, 3), []string{"update t/0@3 leader=1 epoch=4 isr=[1] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "an ISR that dies at once keeps its old leader", steps: []step{
		{all(live(1, 2, 3), newTopic("t", r(3, 1, 2))), []string{"create t/0 leader=3 epoch=0 isr=[3 1 2] ce=5"}},
		{apply, nil},
		{live(), []string{"update t/0@0 leader=-1 epoch=1 isr=[3] ce=5"}},
		{apply, nil},
		{live(1, 2), nil},
		{live(1, 2, 3), []string{"update t/0@1 leader=3 epoch=2 isr=[3] ce=5"}},
		{apply, nil},
	}},
	{name: "a resigned leader (its log failed) hands over to the next ISR member, or leads alone in a new epoch", steps: []step{
		{all(live(1, 2, 3), newTopic("t", r(1, 2, 3), r(1, 2, 3), r(2, 1, 3))), []string{
			"create t/0 leader=1 epoch=0 isr=[1 2 3] ce=5",
			"create t/1 leader=1 epoch=0 isr=[1 2 3] ce=5",
			"create t/2 leader=2 epoch=0 isr=[2 1 3] ce=5"}},
		{apply, nil},
		// t/0 is handed over; t/2's follower 1 leaves its ISR; a resignation
		// of another epoch (t/1's) is stale.
		{resigned(resignation(1, "t", 0, 0), resignation(1, "t", 1, 7), resignation(1, "t", 2, 0)), []string{
			"update t/0@0 leader=2 epoch=1 isr=[2 3] ce=5",
			"update t/2@0 leader=2 epoch=1 isr=[2 3] ce=5"}},
		// Applied: the epochs moved on, and the same resignations ask nothing more.
		{apply, nil},
		{resigned(resignation(1, "t", 0, 0), resignation(1, "t", 1, 7), resignation(1, "t", 2, 0)), nil},
		// The sole ISR member of t/0 resigns: it leads again, in a new epoch.
		{all(isrChange("t", 0, 2), feedTopic("t")), nil},
		{resigned(resignation(2, "t", 0, 1)), []string{"update t/0@2 leader=2 epoch=2 isr=[2] ce=5"}},
		{all(apply, resigned(), settled("t")), nil},
	}},
	{name: "controlled shutdown: leaders move to the next ISR member, the broker leaves the ISRs; a sole replica stays", steps: []step{
		{all(live(1, 2, 3), newTopic("t", r(1, 2, 3), r(2, 1, 3), r(1))), []string{
			"create t/0 leader=1 epoch=0 isr=[1 2 3] ce=5",
			"create t/1 leader=2 epoch=0 isr=[2 1 3] ce=5",
			"create t/2 leader=1 epoch=0 isr=[1] ce=5"}},
		{apply, nil},
		{shuttingDown(1), []string{
			"update t/0@0 leader=2 epoch=1 isr=[2 3] ce=5",
			"update t/1@0 leader=2 epoch=1 isr=[2 3] ce=5"}},
		{all(apply, shutdownDone(1, true)), nil},
		// It stops, and comes back out of sync: leaders add it again.
		{all(shuttingDown(), live(2, 3)), []string{"update t/2@0 leader=-1 epoch=1 isr=[1] ce=5"}},
		{apply, nil},
		{live(1, 2, 3), []string{"update t/2@1 leader=1 epoch=2 isr=[1] ce=5"}},
		{apply, nil},
		// Back in the ISRs, a preferred election gives t/0 back to 1.
		{all(isrChange("t", 0, 2, 3, 1), isrChange("t", 1, 2, 3, 1), feedTopic("t")), nil},
		{preferredElection, []string{"update t/0@2 leader=1 epoch=2 isr=[2 3 1] ce=5"}},
		{all(apply, settled("t")), nil},
		{preferredElection, nil},
	}},
	{name: "controlled shutdown waits while another ISR member could take over", steps: []step{
		{all(live(1, 2), newTopic("t", r(1, 2))), []string{"create t/0 leader=1 epoch=0 isr=[1 2] ce=5"}},
		{apply, nil},
		{all(shuttingDown(1), shutdownDone(1, false)), []string{"update t/0@0 leader=2 epoch=1 isr=[2] ce=5"}},
		{all(shutdownDone(1, false), apply, shutdownDone(1, true)), nil},
	}},
	{name: "unclean election: the first live replica leads with the ISR [leader]", unclean: true, steps: []step{
		{all(live(1, 2, 3), newTopic("t", r(1, 2, 3))), []string{"create t/0 leader=1 epoch=0 isr=[1 2 3] ce=5"}},
		{apply, nil},
		{live(1), []string{"update t/0@0 leader=1 epoch=1 isr=[1] ce=5"}},
		{apply, nil},
		{live(3, 2), []string{"update t/0@1 leader=2 epoch=2 isr=[2] ce=5"}},
		{apply, nil},
		{live(1, 2, 3), nil},
	}},
	{name: "a topic's unclean.leader.election.enable overrides the default (off)", steps: []step{
		{all(live(1, 2), newTopic("t", r(1, 2))), []string{"create t/0 leader=1 epoch=0 isr=[1 2] ce=5"}},
		{apply, nil},
		{live(1), []string{"update t/0@0 leader=1 epoch=1 isr=[1] ce=5"}},
		{apply, nil},
		{live(2), []string{"update t/0@1 leader=-1 epoch=2 isr=[1] ce=5"}},
		{apply, nil},
		{config("t", UncleanConfig, "TRUE"), []string{"update t/0@2 leader=2 epoch=3 isr=[2] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a topic's unclean.leader.election.enable overrides the default (on)", unclean: true, steps: []step{
		{all(live(1, 2), newTopic("t", r(1, 2)), config("t", UncleanConfig, "false")), []string{
			"create t/0 leader=1 epoch=0 isr=[1 2] ce=5"}},
		{apply, nil},
		{live(1), []string{"update t/0@0 leader=1 epoch=1 isr=[1] ce=5"}},
		{apply, nil},
		{live(2), []string{"update t/0@1 leader=-1 epoch=2 isr=[1] ce=5"}},
		{apply, nil},
	}},
	{name: "a bounce (the broker epoch grew) is a failure and then a startup, in one write", steps: []step{
		{all(live(1, 2, 3), newTopic("t", r(1, 2, 3), r(2, 1), r(3))), []string{
			"create t/0 leader=1 epoch=0 isr=[1 2 3] ce=5",
			"create t/1 leader=2 epoch=0 isr=[2 1] ce=5",
			"create t/2 leader=3 epoch=0 isr=[3] ce=5"}},
		{apply, nil},
		{bounce(1), []string{
			"update t/0@0 leader=2 epoch=1 isr=[2 3] ce=5",
			"update t/1@0 leader=2 epoch=1 isr=[2] ce=5"}},
		{apply, nil},
		// A bounced sole replica leads again, in a new epoch.
		{bounce(3), []string{
			"update t/0@1 leader=2 epoch=2 isr=[2] ce=5",
			"update t/2@0 leader=3 epoch=1 isr=[3] ce=5"}},
		{apply, nil},
		{live(1, 2, 3), nil},
		{settled("t"), nil},
	}},
	{name: "a bounce while a write is in flight is handled once the write settles", steps: []step{
		{all(live(1, 2, 3), newTopic("t", r(1, 2, 3))), []string{"create t/0 leader=1 epoch=0 isr=[1 2 3] ce=5"}},
		{apply, nil},
		{live(1, 2), []string{"update t/0@0 leader=1 epoch=1 isr=[1 2] ce=5"}},
		{bounce(1), nil},
		{apply, []string{"update t/0@1 leader=2 epoch=2 isr=[2] ce=5"}},
		{apply, nil},
		{all(live(1, 2, 3), bounce(3)), nil}, // not in the ISR, not the leader: nothing to do
	}},
	{name: "a new controller finds a broker back from an unclean shutdown still recorded in place: its resignations move its leaderships and take it out of the ISRs", steps: []step{
		// Broker 1 led t/0, followed in t/1's ISR, led t/2 alone, and
		// was out of t/3's ISR. It restarted while the controller was cut
		// off, and the new controller cannot see the bounce: it knows only
		// the new registration.
		{all(live(1, 2, 3), stored("t", [][]int32{{1, 2, 3}, {2, 1, 3}, {1, 2, 3}, {3, 2, 1}},
			st(1, 4, 4, 7, 1, 2, 3), st(2, 3, 4, 2, 2, 1, 3), st(1, 2, 4, 5, 1), st(3, 1, 4, 3, 3, 2))), nil},
		{all(reregister(1), failover(6)), nil},
		{resigned(resignation(1, "t", 0, 4), resignation(1, "t", 1, 3), resignation(1, "t", 2, 2)), []string{
			"update t/0@7 leader=2 epoch=5 isr=[2 3] ce=6",
			"update t/1@2 leader=2 epoch=4 isr=[2 3] ce=6",
			"update t/2@5 leader=1 epoch=3 isr=[1] ce=6"}}, // no one else in sync: it leads again, in a new epoch
		{apply, nil},
		{resigned(resignation(1, "t", 0, 4), resignation(1, "t", 1, 3), resignation(1, "t", 2, 2)), nil}, // stale now
		{all(resigned(), settled("t")), nil},
	}},
	{name: "a controller that saw the bounce and reads the resignations too writes once per partition", steps: []step{
		{all(live(1, 2, 3), stored("t", [][]int32{{1, 2, 3}, {1, 2, 3}}, st(1, 4, 4, 7, 1, 2, 3), st(1, 2, 4, 5, 1))), nil},
		// The controller reads the new registration (a bounce) and the
		// resignations together.
		{all(reregister(1), resigned(resignation(1, "t", 0, 4), resignation(1, "t", 1, 2)), live(1, 2, 3)), []string{
			"update t/0@7 leader=2 epoch=5 isr=[2 3] ce=5",
			"update t/1@5 leader=1 epoch=3 isr=[1] ce=5"}},
		{apply, nil},
		{resigned(resignation(1, "t", 0, 4), resignation(1, "t", 1, 2)), nil},
		{all(resigned(), settled("t")), nil},
	}},
	{name: "a resignation with the leader dead: the next live ISR member leads, never the resigned broker", steps: []step{
		{all(live(1, 2, 3), stored("t", [][]int32{{2, 1, 3}}, st(2, 4, 4, 7, 2, 1, 3))), nil},
		{all(failover(6), resigned(resignation(1, "t", 0, 4)), live(1, 3)), []string{
			"update t/0@7 leader=3 epoch=5 isr=[3] ce=6"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a resignation read with the death of the only other in-sync replica: the partition waits for the dead one, not the resigned", steps: []step{
		{all(live(1, 2, 3), stored("t", [][]int32{{2, 3, 1}}, st(2, 4, 4, 7, 2, 3))), nil},
		{all(resigned(resignation(2, "t", 0, 4)), live(1, 2)), []string{"update t/0@7 leader=-1 epoch=5 isr=[3] ce=5"}},
		{apply, nil},
		{live(1, 2, 3), []string{"update t/0@8 leader=3 epoch=6 isr=[3] ce=5"}},
		{all(apply, resigned(), settled("t")), nil},
	}},
	{name: "a sole in-sync replica back from an unclean shutdown, with unclean election: another live replica leads (Kafka's offline election)", unclean: true, steps: []step{
		{all(live(1, 2, 3), stored("t", [][]int32{{1, 2, 3}}, st(1, 2, 4, 5, 1))), nil},
		{all(failover(6), resigned(resignation(1, "t", 0, 2))), []string{"update t/0@5 leader=2 epoch=3 isr=[2] ce=6"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a controller that starts while brokers are down treats them as failed", steps: []step{
		{all(live(2, 3), stored("t", [][]int32{{1, 2, 3}, {2, 3, 1}, {1}, {3, 2}},
			st(1, 4, 2, 7, 1, 2, 3), st(2, 1, 2, 3, 2, 1), st(1, 0, 2, 0, 1), st(3, 2, 2, 5, 3, 2))), []string{
			"update t/0@7 leader=2 epoch=5 isr=[2 3] ce=5",
			"update t/1@3 leader=2 epoch=2 isr=[2] ce=5",
			"update t/2@0 leader=-1 epoch=1 isr=[1] ce=5"}},
		{all(apply, settled("t")), nil},
		// A controller that starts on a settled cluster writes nothing.
		{failover(6), nil},
		{live(1, 2, 3), []string{"update t/2@1 leader=1 epoch=2 isr=[1] ce=6"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a conflict asks for a re-read; nothing is written for the topic until it comes", steps: []step{
		{all(live(1, 2, 3), newTopic("t", r(1, 2, 3), r(2, 3, 1))), []string{
			"create t/0 leader=1 epoch=0 isr=[1 2 3] ce=5",
			"create t/1 leader=2 epoch=0 isr=[2 3 1] ce=5"}},
		{apply, nil},
		{isrChange("t", 0, 1, 2), nil}, // leader 1 shrank its ISR: version 1
		{live(1, 2), []string{
			"update t/0@0 leader=1 epoch=1 isr=[1 2] ce=5",
			"update t/1@0 leader=2 epoch=1 isr=[2 1] ce=5"}},
		{apply, []string{"reread t"}}, // t/0 conflicted, t/1 was applied
		{live(2), nil},
		{tick, nil},
		{reread("t"), []string{
			"update t/0@1 leader=2 epoch=1 isr=[2] ce=5",
			"update t/1@1 leader=2 epoch=2 isr=[2] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a failed write waits for Tick, then is computed afresh", steps: []step{
		{all(live(1, 2), newTopic("t", r(1, 2))), []string{"create t/0 leader=1 epoch=0 isr=[1 2] ce=5"}},
		{apply, nil},
		{live(1), []string{"update t/0@0 leader=1 epoch=1 isr=[1] ce=5"}},
		{fail("update t/0@0", coord.ErrConnectionLoss), nil},
		{live(), nil},
		{tick, []string{"update t/0@0 leader=-1 epoch=1 isr=[1] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a write applied but reported lost conflicts on retry, and the re-read settles it", steps: []step{
		{all(live(1, 2), newTopic("t", r(1, 2))), []string{"create t/0 leader=1 epoch=0 isr=[1 2] ce=5"}},
		{lost("create t/0"), nil},
		{tick, []string{"create t/0 leader=1 epoch=0 isr=[1 2] ce=5"}},
		{apply, []string{"reread t"}}, // node exists
		{reread("t"), nil},
		{live(1), []string{"update t/0@0 leader=1 epoch=1 isr=[1] ce=5"}},
		{lost("update t/0@0"), nil},
		{tick, []string{"update t/0@0 leader=1 epoch=1 isr=[1] ce=5"}},
		{apply, []string{"reread t"}}, // bad version
		{all(reread("t"), settled("t")), nil},
	}},
	{name: "deletion waits for writes in flight and for the live replicas' acks, not for dead ones", steps: []step{
		{all(live(1, 2, 3), newTopic("t", r(1, 2), r(2, 3))), []string{
			"create t/0 leader=1 epoch=0 isr=[1 2] ce=5",
			"create t/1 leader=2 epoch=0 isr=[2 3] ce=5"}},
		{apply, nil},
		{live(1, 2), []string{"update t/1@0 leader=2 epoch=1 isr=[2] ce=5"}},
		{askDelete("t"), nil},
		{apply, nil},
		{ack("t", 1), nil},
		{live(1, 3), nil}, // no elections for a topic being deleted; 3 has not acked
		{live(1, 2, 3), nil},
		{ack("t", 2), nil},
		{live(1, 2), []string{"delete t"}}, // 3 never acked, but is dead
		{all(apply, settled("t")), nil},
	}},
	{name: "a failed deletion is retried after Tick", steps: []step{
		{all(live(1), newTopic("t", r(1))), []string{"create t/0 leader=1 epoch=0 isr=[1] ce=5"}},
		{apply, nil},
		{askDelete("t"), nil},
		{ack("t", 1), []string{"delete t"}},
		{fail("delete t", coord.ErrConnectionLoss), nil},
		{tick, []string{"delete t"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a deletion whose replicas are all dead goes ahead", steps: []step{
		{all(live(1), stored("t", [][]int32{{2, 3}}, st(2, 0, 1, 0, 2))), []string{
			"update t/0@0 leader=-1 epoch=1 isr=[2] ce=5"}},
		{all(apply, askDelete("t")), []string{"delete t"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a state written by a newer controller deposes this one", steps: []step{
		{all(live(1, 2), stored("t", [][]int32{{1, 2}}, st(1, 3, 9, 4, 1, 2))), nil},
		{deposed(true), nil},
		{live(2), nil},
	}},
	{name: "partitions added later are created, the others left alone", steps: []step{
		{all(live(1, 2), newTopic("t", r(1, 2))), []string{"create t/0 leader=1 epoch=0 isr=[1 2] ce=5"}},
		{apply, nil},
		{all(snapshot("t"), addPartitions("t", r(2, 1), r(3))), []string{"create t/1 leader=2 epoch=0 isr=[2 1] ce=5"}},
		{feedSnapshot("t"), nil}, // a read from before the partitions were added
		{all(apply, settled("t"), deposed(false)), nil},
		{live(1, 2, 3), []string{"create t/2 leader=3 epoch=0 isr=[3] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a read older than an applied write does not undo it", steps: []step{
		{all(live(1, 2), newTopic("t", r(1, 2))), []string{"create t/0 leader=1 epoch=0 isr=[1 2] ce=5"}},
		{apply, nil},
		{snapshot("t"), nil},
		{live(1), []string{"update t/0@0 leader=1 epoch=1 isr=[1] ce=5"}},
		{apply, nil},
		{feedSnapshot("t"), nil},
		{settled("t"), nil},
	}},
	{name: "a late read of a deleted topic does not bring it back, nor touch its successor", steps: []step{
		{all(live(1, 2), newTopic("t", r(1, 2))), []string{"create t/0 leader=1 epoch=0 isr=[1 2] ce=5"}},
		{all(apply, snapshot("t"), askDelete("t"), ack("t", 1), ack("t", 2)), []string{"delete t"}},
		{apply, nil},
		{feedSnapshot("t"), nil}, // taken before the deletion, fed after
		{all(settled("t"), newTopic("t", r(2, 1))), []string{"create t/0 leader=2 epoch=0 isr=[2 1] ce=5"}},
		{all(apply, feedSnapshot("t")), nil},
		{all(settled("t"), live(1)), []string{"update t/0@0 leader=1 epoch=1 isr=[1] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a new incarnation read before the old one's deletion is reported stays", steps: []step{
		{all(live(1), newTopic("t", r(1)), apply, askDelete("t"), ack("t", 1)), []string{"delete t"}},
		{func(h *harness) {
			h.t.Helper()
			del := h.pending[0].(Write)
			if _, err := h.write(del); err != nil {
				h.t.Fatal(err)
			}
			newTopic("t", r(1), r(1))(h) // re-created and read at once
			h.must(h.c.Applied(del, 0))
			h.pending = nil
		}, []string{"create t/0 leader=1 epoch=0 isr=[1] ce=5", "create t/1 leader=1 epoch=0 isr=[1] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a removed topic's writes in flight keep a new topic of the name off their records", steps: []step{
		{all(live(1), newTopic("t", r(1))), []string{"create t/0 leader=1 epoch=0 isr=[1] ce=5"}},
		{func(h *harness) {
			delete(h.store, "t")
			h.feed("t")
		}, nil},
		{newTopic("t", r(1), r(1)), []string{"create t/1 leader=1 epoch=0 isr=[1] ce=5"}}, // not t/0 yet
		{fail("create t/0", coord.ErrNoNode), []string{"reread t"}},                       // fenced by topic ID
		{reread("t"), []string{"create t/0 leader=1 epoch=0 isr=[1] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a new incarnation with fewer partitions keeps the others' writes in flight", steps: []step{
		{all(live(1), newTopic("t", r(1), r(1))), []string{
			"create t/0 leader=1 epoch=0 isr=[1] ce=5",
			"create t/1 leader=1 epoch=0 isr=[1] ce=5"}},
		{func(h *harness) {
			delete(h.store, "t")
			h.feed("t")
		}, nil},
		{newTopic("t", r(1)), nil},
		{addPartitions("t", r(1)), nil}, // t/1's record still has a write in flight
		{all(fail("create t/0", coord.ErrNoNode), fail("create t/1", coord.ErrNoNode)), []string{"reread t"}},
		{reread("t"), []string{
			"create t/0 leader=1 epoch=0 isr=[1] ce=5",
			"create t/1 leader=1 epoch=0 isr=[1] ce=5"}},
		{all(apply, settled("t")), nil},
	}},
	{name: "a removed topic is forgotten once its writes settle", steps: []step{
		{all(live(1), newTopic("t", r(1))), []string{"create t/0 leader=1 epoch=0 isr=[1] ce=5"}},
		{func(h *harness) {
			delete(h.store, "t")
			h.feed("t")
			if h.c.Topic("t") != nil {
				h.t.Fatal("a removed topic is still known")
			}
			h.must(h.c.Applied(h.pending[0].(Write), 0)) // accepted, ignored
			h.pending = nil
			if len(h.c.topics) != 0 {
				h.t.Fatalf("the removed topic's entry stays: %v", h.c.topics)
			}
		}, nil},
		{live(), nil},
	}},
}

func TestScripts(t *testing.T) {
	for _, sc := range scripts {
		t.Run(sc.name, func(t *testing.T) {
			h := newHarness(t, Config{ControllerEpoch: 5, UncleanLeaderElection: sc.unclean})
			for i, s := range sc.steps {
				s.do(h)
				if got := h.ready(); !slices.Equal(got, s.want) && (len(got) != 0 || len(s.want) != 0) {
					t.Fatalf("step %d: Ready\n got %q\nwant %q", i, got, s.want)
				}
			}
		})
	}
}

func TestInvalidInputs(t *testing.T) {
	if _, err := New(Config{ControllerEpoch: -1}); err == nil {
		t.Fatal("New accepted a negative controller epoch")
	}
	c, err := New(Config{ControllerEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	wantErrIs(t, "broker under another id", c.SetBrokers(map[int32]meta.Broker{1: {ID: 2}}), ErrInvalidInput)
	for name, top := range map[string]*meta.Topic{
		"nil":              nil,
		"no name":          {Assignment: [][]int32{{1}}},
		"no partitions":    {Name: "t"},
		"no replicas":      {Name: "t", Assignment: [][]int32{{}}},
		"too many states":  {Name: "t", Assignment: [][]int32{{1}}, States: []*meta.PartitionState{nil, nil}},
		"empty ISR":        {Name: "t", Assignment: [][]int32{{1}}, States: []*meta.PartitionState{st(1, 0, 1, 0)}},
		"negative version": {Name: "t", Assignment: [][]int32{{1}}, States: []*meta.PartitionState{st(1, 0, 1, -1, 1)}},
	} {
		wantErrIs(t, name, c.SetTopic(top), ErrInvalidInput)
	}
	if c.Topic("t") != nil {
		t.Fatal("an invalid topic was kept")
	}
	w := &UpdateState{Topic: "t", Partition: 0, Version: 0}
	wantErrIs(t, "Applied, unknown topic", c.Applied(w, 1), ErrUnknownWrite)
	wantErrIs(t, "Failed, nil", c.Failed(nil, coord.ErrBadVersion), ErrUnknownWrite)

	h := newHarness(t, Config{ControllerEpoch: 1})
	all(live(1), newTopic("t", r(1)))(h)
	got := h.c.Ready()
	if len(got) != 1 {
		t.Fatalf("Ready: %v", got)
	}
	cs := *got[0].(*CreateState)
	other := cs
	other.State.Leader = 2
	wantErrIs(t, "Applied, another write", h.c.Applied(&other, 0), ErrUnknownWrite)
	wantErrIs(t, "Applied, another partition", h.c.Applied(&CreateState{Topic: "t", Partition: 7}, 0), ErrUnknownWrite)
	// A copy of the write handed out is the write.
	cs.State.ISR = slices.Clone(cs.State.ISR)
	if err := h.c.Applied(&cs, 0); err != nil {
		t.Fatal(err)
	}
	wantErrIs(t, "Applied twice", h.c.Applied(&cs, 0), ErrUnknownWrite)
	// The action belongs to the caller: changing it changes nothing inside.
	got[0].(*CreateState).State.ISR[0] = 99
	if s := h.c.Topic("t").States[0]; s.ISR[0] != 1 {
		t.Fatalf("the controller shares the action's ISR: %v", s.ISR)
	}
}
