package bench_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkLeaderFailover: one op is one cycle of stopping the leader of a
// 3-replica partition (min.insync.replicas 2) and producing to it with
// acks=all, one record at a time, where the Metadata of a survivor says
// the leader is, until one succeeds; then the stopped broker is restarted
// and the cycle ends once it is back in the ISR. how=kill is a SIGKILL (the
// failover waits for ZooKeeper to expire the session); how=term a SIGTERM
// (the controlled shutdown hands the leadership over before the broker
// stops). Reports the median, minimum and maximum of failover-s (stop →
// the first acknowledged acks=all produce) and p99-failover-s. See the
// package doc.
func BenchmarkLeaderFailover(b *testing.B) {
	session := *zkSession
	for _, how := range []string{"kill", "term"} {
		b.Run(fmt.Sprintf("brokers=%d/session=%v/how=%s", clusterSize, session, how), func(b *testing.B) {
			c := startZKCluster(b, clusterSize, session, "info")
			createTopicRF(b, c.addrs()[0], 1, 3, map[string]string{"min.insync.replicas": "2"})
			var failover durations
			cycle := 0
			for b.Loop() {
				failover = append(failover, leaderFailover(b, c, session, how, cycle))
				b.Logf("cycle %d (%s): failover %.3f s", cycle, how, failover[len(failover)-1].Seconds())
				cycle++
			}
			b.ReportMetric(session.Seconds(), "session-s")
			failover.report(b, "failover-s")
			s := slices.Sorted(slices.Values(failover))
			b.ReportMetric(s[min(len(s)-1, len(s)*99/100)].Seconds(), "p99-failover-s")
		})
	}
}

// leaderFailover runs one cycle and returns stop → first acks=all success.
func leaderFailover(tb testing.TB, c *brokerSet, session time.Duration, how string, cycle int) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cycleDeadline(session))
	defer cancel()
	live := c.live()
	var leader int32
	if err := poll(ctx, func() error { // a new topic's or a restarted broker's leader may not be named yet
		var err error
		if leader, err = partitionLeader(ctx, c, c.addr(live[0])); err == nil && leader < 0 {
			err = fmt.Errorf("no leader yet")
		}
		return err
	}); err != nil {
		tb.Fatalf("cycle %d: %v", cycle, err)
	}
	var watcher int32
	for _, id := range live {
		if id != leader {
			watcher = id
			break
		}
	}
	watcherAddr := c.addr(watcher)
	var stopped time.Time
	var exited <-chan struct{}
	if how == "kill" {
		stopped = c.kill(leader)
	} else {
		stopped, exited = c.term(leader)
	}
	err := poll(ctx, func() error {
		l, err := partitionLeader(ctx, c, watcherAddr)
		if err != nil {
			return err
		}
		if l == leader || l < 0 {
			return fmt.Errorf("leader %d", l)
		}
		return c.produceOneAcks(ctx, c.addr(l), topic, 0, -1)
	})
	took := time.Since(stopped)
	if err != nil {
		tb.Fatalf("cycle %d: broker %d stopped (%s): no acks=all produce: %v%s", cycle, leader, how, err, c.outputs())
	}
	if exited != nil {
		<-exited
	}
	c.start(leader)
	if err := poll(ctx, func() error {
		resp, err := c.metadata(ctx, watcherAddr, topic)
		if err != nil {
			return err
		}
		isr := isrOf(resp, topic)
		if len(isr) != clusterSize {
			return fmt.Errorf("ISR %v", isr)
		}
		return nil
	}); err != nil {
		tb.Fatalf("cycle %d: broker %d restarted: not back in the ISR: %v%s", cycle, leader, err, c.outputs())
	}
	return took
}

// partitionLeader is partition 0's leader of topic in addr's Metadata.
func partitionLeader(ctx context.Context, c *brokerSet, addr string) (int32, error) {
	resp, err := c.metadata(ctx, addr, topic)
	if err != nil {
		return -1, err
	}
	l, err := leaders(resp, topic, 1)
	if err != nil {
		return -1, err
	}
	return l[0], nil
}

// isrOf is partition 0's ISR of topic in resp.
func isrOf(resp *kmsg.MetadataResponse, topic string) []int32 {
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic && len(t.Partitions) > 0 {
			return t.Partitions[0].ISR
		}
	}
	return nil
}
