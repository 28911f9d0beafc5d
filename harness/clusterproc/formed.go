package clusterproc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrNotFormed: a broker exited, or did not list every broker of the
// cluster and a controller, before the deadline.
var ErrNotFormed = errors.New("clusterproc: cluster not formed")

// pollInterval is how often the waits of this package ask again.
const pollInterval = 50 * time.Millisecond

// Member is one broker as WaitFormed watches it.
type Member struct {
	ID   int32
	Addr string // its Kafka address, host:port
	// Exited, when not nil, is closed once the broker's process exits:
	// the wait then fails at once instead of at the deadline.
	Exited <-chan struct{}
	// Describe, when not nil, says what is known about the process for
	// an error (how it exited, where its log is, how the log ends).
	Describe func() string
}

// WaitFormed polls every member with a Metadata request (naming no topic)
// until each lists exactly the members' ids and a controller, a member
// exits, or ctx ends. A cluster whose brokers all agree on who is in it
// assigns new topics over all of them, which is why both `weir cluster up`
// and the harness wait for this before they report a cluster as up. The
// error wraps ErrNotFormed and names each broker that was not ready, with
// what it last answered.
func WaitFormed(ctx context.Context, members []Member) error {
	want := make([]int32, len(members))
	for i, m := range members {
		want[i] = m.ID
	}
	slices.Sort(want)
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { errs[i] = m.waitFormed(ctx, want) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (m Member) waitFormed(ctx context.Context, want []int32) error {
	name := fmt.Sprintf("broker %d", m.ID)
	describe := func() string {
		if m.Describe == nil {
			return ""
		}
		return "; " + m.Describe()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.Addr), kgo.DialTimeout(time.Second))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotFormed, name, err)
	}
	defer cl.Close()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	last := "no answer"
	for {
		got, err := BrokersSeen(ctx, cl)
		if err == nil && slices.Equal(got.IDs, want) && got.Controller >= 0 {
			return nil
		}
		if err != nil {
			if ctx.Err() == nil {
				last = err.Error()
			}
		} else {
			last = fmt.Sprintf("lists brokers %v, controller %d", got.IDs, got.Controller)
		}
		select {
		case <-m.Exited:
			return fmt.Errorf("%w: %s exited%s", ErrNotFormed, name, describe())
		case <-ctx.Done():
			return fmt.Errorf("%w: %s on %s not ready (%w): %s, want brokers %v and a controller%s",
				ErrNotFormed, name, m.Addr, context.Cause(ctx), last, want, describe())
		case <-tick.C:
		}
	}
}

// Seen is what one broker's Metadata says of the cluster.
type Seen struct {
	IDs        []int32 // the brokers it lists, sorted
	Controller int32   // -1: none
}

// BrokersSeen asks the client's first seed broker (and only it) for the
// brokers it knows and the controller, naming no topic; each request is
// bounded by 2 s.
func BrokersSeen(ctx context.Context, cl *kgo.Client) (Seen, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none (nil would be all)
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return Seen{}, err
	}
	m := resp.(*kmsg.MetadataResponse)
	v := Seen{Controller: m.ControllerID}
	for _, b := range m.Brokers {
		v.IDs = append(v.IDs, b.NodeID)
	}
	slices.Sort(v.IDs)
	return v, nil
}
