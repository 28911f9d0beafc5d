package bench_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterSize is the number of brokers of the failover benchmarks.
const clusterSize = 3

// cycleDeadline bounds one failover cycle's waits: far above the session
// timeout (a broker restarted before its old session expired waits up to
// twice that), far below -timeout.
func cycleDeadline(session time.Duration) time.Duration { return 10*session + time.Minute }

// BenchmarkControllerFailover: one op is one cycle of SIGKILLing the
// controller of a 3-broker cluster, waiting for a surviving broker to create
// a topic again, and restarting the killed broker. See the package doc.
func BenchmarkControllerFailover(b *testing.B) {
	session := *zkSession
	b.Run(fmt.Sprintf("brokers=%d/session=%v", clusterSize, session), func(b *testing.B) {
		c := startZKCluster(b, clusterSize, session, "info")
		var gone, elect, create durations
		cycle := 0
		for b.Loop() {
			r := controllerFailover(b, c, session, cycle)
			gone, elect, create = append(gone, r.gone), append(elect, r.elect), append(create, r.create)
			b.Logf("cycle %d: controller %d killed: gone %.3f s, elect %.3f s (broker %d, seen by %d), create %.3f s (on %d)",
				cycle, r.killed, r.gone.Seconds(), r.elect.Seconds(), r.elected, r.watcher, r.create.Seconds(), r.creator)
			cycle++
		}
		b.ReportMetric(session.Seconds(), "session-s")
		create.report(b, "create-s")
		elect.report(b, "elect-s")
		gone.report(b, "gone-s")
	})
}

// failoverTimes are one controller failover's times, each from the SIGKILL.
type failoverTimes struct {
	killed, elected  int32         // the controller killed, the one the watcher saw next
	creator, watcher int32         // the survivors sent CreateTopics and Metadata
	gone             time.Duration // until a survivor's Metadata no longer lists the killed broker
	elect            time.Duration // until a survivor's Metadata names another controller
	create           time.Duration // until a CreateTopics on a survivor returned with the topic led
}

// controllerFailover runs one cycle: it finds the controller (Metadata's
// ControllerID), SIGKILLs it, and then at once, concurrently, sends
// CreateTopics of a fresh one-partition topic to one survivor (first) and
// polls the other's Metadata. weir answers CreateTopics once the new topic's
// partitions have leaders, which needs a controller, so the first attempt
// normally waits through the whole failover; an attempt that fails, or
// answers without a leader, is followed by another with a fresh name. The
// topic's only replica is that survivor (an explicit assignment: assigned
// over the registered brokers, it could land on the dead broker until its
// session expires, and wait for it). Then the killed broker is restarted on
// its data directory and the cycle ends when every broker's Metadata shows
// all three and a controller.
func controllerFailover(tb testing.TB, c *brokerSet, session time.Duration, cycle int) failoverTimes {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cycleDeadline(session))
	defer cancel()
	live := c.live()
	ctrl, err := c.controller(ctx, live[0])
	if err != nil || !slices.Contains(live, ctrl) {
		tb.Fatalf("cycle %d: controller %d: %v", cycle, ctrl, err)
	}
	survivors := slices.DeleteFunc(slices.Clone(live), func(id int32) bool { return id == ctrl })
	creator, watcher := survivors[0], survivors[1]
	creatorAddr, watcherAddr := c.addr(creator), c.addr(watcher)

	killed := c.kill(ctrl)
	type watched struct {
		gone, elect time.Duration
		elected     int32
		err         error
	}
	watchDone := make(chan watched, 1)
	go func() {
		var w watched
		w.err = poll(ctx, func() error {
			resp, err := c.metadata(ctx, watcherAddr, "")
			if err != nil {
				return err
			}
			now := time.Since(killed)
			if w.gone == 0 && brokerAddr(resp, ctrl) == "" {
				w.gone = now
			}
			if w.elect == 0 && resp.ControllerID >= 0 && resp.ControllerID != ctrl {
				w.elect, w.elected = now, resp.ControllerID
			}
			if w.gone == 0 || w.elect == 0 {
				return fmt.Errorf("broker %d still listed or controller %d", ctrl, resp.ControllerID)
			}
			return nil
		})
		watchDone <- w
	}()

	var created time.Duration
	attempt := 0
	err = poll(ctx, func() error {
		attempt++
		name := fmt.Sprintf("failover-%d-%d", cycle, attempt)
		if err := createOn(ctx, c, creatorAddr, name, creator); err != nil {
			return err
		}
		created = time.Since(killed)
		resp, err := c.metadata(ctx, creatorAddr, name)
		if err != nil {
			return err
		}
		l, err := leaders(resp, name, 1)
		if err != nil {
			return err
		}
		if l[0] != creator {
			return fmt.Errorf("CreateTopics %s answered with partition 0 led by %d", name, l[0])
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("cycle %d: controller %d killed: no topic created on broker %d after %d attempts: %v%s", cycle, ctrl, creator, attempt, err, c.outputs())
	}
	w := <-watchDone
	if w.err != nil {
		tb.Fatalf("cycle %d: controller %d killed: broker %d: %v%s", cycle, ctrl, watcher, w.err, c.outputs())
	}
	if attempt > 1 {
		tb.Logf("cycle %d: CreateTopics took %d attempts", cycle, attempt)
	}

	c.start(ctrl)
	if err := c.awaitHealthy(ctx, "", 0); err != nil {
		tb.Fatalf("cycle %d: broker %d restarted: %v%s", cycle, ctrl, err, c.outputs())
	}
	c.saveLogs(tb, fmt.Sprintf("controller-failover-%d", cycle), killed)
	return failoverTimes{killed: ctrl, elected: w.elected, creator: creator, watcher: watcher, gone: w.gone, elect: w.elect, create: created}
}

// createOn creates topic name with one partition whose only replica is
// broker replica, through a CreateTopics request to addr.
func createOn(ctx context.Context, c *brokerSet, addr, name string, replica int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = name
	rt.NumPartitions, rt.ReplicationFactor = -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{replica}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	resp, err := c.pinned(ctx, addr, req)
	if err != nil {
		return err
	}
	ct := resp.(*kmsg.CreateTopicsResponse)
	if len(ct.Topics) != 1 {
		return fmt.Errorf("CreateTopics %s: %d topics in response", name, len(ct.Topics))
	}
	if err := kerr.ErrorForCode(ct.Topics[0].ErrorCode); err != nil {
		return fmt.Errorf("CreateTopics %s: %w", name, err)
	}
	return nil
}

// restartPartitions is the partition count of BenchmarkBrokerRestart's
// topic: two per broker.
const restartPartitions = 6

// BenchmarkBrokerRestart: one op is one cycle of SIGKILLing a broker that is
// not the controller, waiting until its partitions are leaderless, and
// restarting it until a produce to each of them succeeds. See the package
// doc.
func BenchmarkBrokerRestart(b *testing.B) {
	session := *zkSession
	b.Run(fmt.Sprintf("brokers=%d/session=%v", clusterSize, session), func(b *testing.B) {
		c := startZKCluster(b, clusterSize, session, "info")
		createTopic(b, c.addrs()[0], restartPartitions, nil)
		var leaderless, serve, down durations
		cycle := 0
		for b.Loop() {
			r := brokerRestart(b, c, session, cycle)
			leaderless, serve, down = append(leaderless, r.leaderless), append(serve, r.serve), append(down, r.down)
			b.Logf("cycle %d: broker %d (partitions %v) killed: leaderless %.3f s; restarted: serve %.3f s; down %.3f s", cycle, r.killed, r.partitions, r.leaderless.Seconds(), r.serve.Seconds(), r.down.Seconds())
			cycle++
		}
		b.ReportMetric(session.Seconds(), "session-s")
		serve.report(b, "serve-s")
		leaderless.report(b, "leaderless-s")
		down.report(b, "down-s")
	})
}

// restartTimes are one broker restart's times.
type restartTimes struct {
	killed     int32         // the broker killed
	partitions []int32       // the partitions it led
	leaderless time.Duration // SIGKILL until a survivor's Metadata shows all its partitions leaderless
	serve      time.Duration // restart until a produce to each of them succeeded
	down       time.Duration // SIGKILL until then: how long its partitions could not be written
}

// brokerRestart runs one cycle on topic (restartPartitions partitions, each
// led by the broker it is assigned to): it SIGKILLs a broker that is not the
// controller (the two take turns), polls the Metadata of the other survivor
// (neither the dead broker nor the controller: what a client asking a
// bystander sees) until all the dead broker's partitions are leaderless
// (its ZooKeeper session expired and the controller moved them to leader
// -1, as Kafka's hard_bounce test waits for), restarts it on its data
// directory, and polls until a produce (acks=1, one record) to each of
// those partitions, sent where that survivor's Metadata says the leader is,
// has succeeded. The cycle ends when every broker's Metadata shows every
// broker and every partition led.
func brokerRestart(tb testing.TB, c *brokerSet, session time.Duration, cycle int) restartTimes {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cycleDeadline(session))
	defer cancel()
	live := c.live()
	ctrl, err := c.controller(ctx, live[0])
	if err != nil || !slices.Contains(live, ctrl) {
		tb.Fatalf("cycle %d: controller %d: %v", cycle, ctrl, err)
	}
	others := slices.DeleteFunc(slices.Clone(live), func(id int32) bool { return id == ctrl })
	victim, watcher := others[cycle%2], others[(cycle+1)%2]
	watcherAddr := c.addr(watcher)
	resp, err := c.metadata(ctx, watcherAddr, topic)
	if err != nil {
		tb.Fatalf("cycle %d: %v", cycle, err)
	}
	l, err := leaders(resp, topic, restartPartitions)
	if err != nil {
		tb.Fatalf("cycle %d: %v", cycle, err)
	}
	var led []int32
	for p, id := range l {
		if id == victim {
			led = append(led, int32(p))
		}
	}
	if len(led) == 0 {
		tb.Fatalf("cycle %d: broker %d leads no partition of %s (leaders %v)", cycle, victim, topic, l)
	}

	killed := c.kill(victim)
	r := restartTimes{killed: victim, partitions: led}
	err = poll(ctx, func() error {
		resp, err := c.metadata(ctx, watcherAddr, topic)
		if err != nil {
			return err
		}
		l, err := leaders(resp, topic, restartPartitions)
		if err != nil {
			return err
		}
		for _, p := range led {
			if l[p] != -1 {
				return fmt.Errorf("partition %d led by %d", p, l[p])
			}
		}
		return nil
	})
	r.leaderless = time.Since(killed)
	if err != nil {
		tb.Fatalf("cycle %d: broker %d killed: its partitions %v still led: %v%s", cycle, victim, led, err, c.outputs())
	}

	restarted := time.Now()
	c.start(victim)
	served := make(map[int32]bool, len(led))
	err = poll(ctx, func() error {
		resp, err := c.metadata(ctx, watcherAddr, topic)
		if err != nil {
			return err
		}
		l, err := leaders(resp, topic, restartPartitions)
		if err != nil {
			return err
		}
		var last error
		for _, p := range led {
			if served[p] {
				continue
			}
			if l[p] < 0 {
				last = fmt.Errorf("partition %d: no leader", p)
				continue
			}
			addr := brokerAddr(resp, l[p])
			if err := c.produceOne(ctx, addr, topic, p); err != nil {
				last = fmt.Errorf("partition %d at broker %d (%s): %w", p, l[p], addr, err)
				continue
			}
			served[p] = true
		}
		return last
	})
	now := time.Now()
	r.serve, r.down = now.Sub(restarted), now.Sub(killed)
	if err != nil {
		tb.Fatalf("cycle %d: broker %d restarted: partitions %v not all served: %v%s", cycle, victim, led, err, c.outputs())
	}
	if err := c.awaitHealthy(ctx, topic, restartPartitions); err != nil {
		tb.Fatalf("cycle %d: broker %d restarted: %v%s", cycle, victim, err, c.outputs())
	}
	c.saveLogs(tb, fmt.Sprintf("broker-restart-%d", cycle), killed)
	return r
}

// clusterLogs names a directory for the brokers' logs of every failover
// cycle, to explain a slow one.
var clusterLogs = flag.String("cluster-logs", "", "write the end of every broker's log to `dir`/<benchmark>-<cycle>.log after each failover cycle")

// saveLogs writes the end of every running broker's log (brokerproc keeps
// the last 16 KiB) to -cluster-logs/name.log, after the time of the kill.
func (s *brokerSet) saveLogs(tb testing.TB, name string, killed time.Time) {
	tb.Helper()
	if *clusterLogs == "" {
		return
	}
	out := fmt.Sprintf("SIGKILL at %s%s\n", killed.UTC().Format(time.RFC3339Nano), s.outputs())
	if err := os.WriteFile(filepath.Join(*clusterLogs, name+".log"), []byte(out), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// durations are one time per cycle.
type durations []time.Duration

// report reports the median, the minimum and the maximum, in seconds, as
// median-<unit>, min-<unit> and max-<unit>.
func (d durations) report(b *testing.B, unit string) {
	if len(d) == 0 {
		return
	}
	s := slices.Sorted(slices.Values(d))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	b.ReportMetric(med.Seconds(), "median-"+unit)
	b.ReportMetric(s[0].Seconds(), "min-"+unit)
	b.ReportMetric(s[len(s)-1].Seconds(), "max-"+unit)
}
