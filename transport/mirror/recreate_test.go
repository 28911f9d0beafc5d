package mirror_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/mirror"
)

// TestMirrorSourceTopicRecreated: a source topic is deleted and created
// again under the same name, with fewer records than the mirror's
// position in the old one, while the mirror runs (it notices the new
// topic id, or the deletion, at a refresh) or while it is stopped. The
// position committed for the old topic (with its id) does not apply to
// the new one: every record of the new topic is copied after the old
// topic's, in order, on both paths (forwarding takes a fresh producer id,
// since the target partition holds the old topic's sequences).
func TestMirrorSourceTopicRecreated(t *testing.T) {
	for _, forward := range []bool{false, true} {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("forward=%v/restart=%v", forward, restart), func(t *testing.T) {
				testMirrorSourceTopicRecreated(t, forward, restart)
			})
		}
	}
}

func testMirrorSourceTopicRecreated(t *testing.T, forward, restart bool) {
	src := brokertest.Start(t, "").Addr()
	dst := brokertest.Start(t, "").Addr()
	const topic = "again"
	brokertest.CreateTopic(t, src, topic, 1, nil)
	produce(t, src, topic, 1, 0, 20)
	cfg := testConfig(t, src, dst, topic)
	cfg.Forward = forward
	_, stop := runMirror(t, cfg)
	waitFor(t, "the first topic's records committed", func() bool {
		return brokertest.CommittedOffsets(t, dst, mirror.DefaultName, topic, 1)[0] == 20
	})
	if restart {
		stop()
	}
	adm := kadm.NewClient(brokertest.Client(t, src))
	if _, err := adm.DeleteTopics(brokertest.Context(t), topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the topic created again", func() bool {
		resp, err := adm.CreateTopic(brokertest.Context(t), 1, -1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return false // its deletion still pending
		}
		if err != nil {
			t.Fatal(err)
		}
		return true
	})
	produce(t, src, topic, 1, 1000, 5) // offsets 0..4, below the old position 20
	if restart {
		_, stop = runMirror(t, cfg)
	}
	waitFor(t, "the new topic's records on the target", func() bool { return mirroredAll(t, dst, topic, 1, 25) })
	stop()
	got := readAll(t, dst, topic, 1)[0]
	if len(got) != 25 {
		t.Fatalf("the target holds %d records, want 25", len(got))
	}
	for i, r := range got {
		n := i
		if i >= 20 {
			n = 1000 + i - 20
		}
		if want := fmt.Sprintf("%s 0 %d", topic, n); string(r.Value) != want {
			t.Fatalf("target record %d is %q, want %q", i, r.Value, want)
		}
	}
}
