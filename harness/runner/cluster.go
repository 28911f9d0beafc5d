package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/weir-broker/weir/harness/clusterproc"
	"github.com/weir-broker/weir/harness/load"
	"github.com/weir-broker/weir/harness/spec"
)

// startCluster starts the cluster of one matrix point (index) in dir: an
// embedded ZooKeeper, or a fresh chroot of the external one named by the
// spec, and the brokers (package clusterproc). Errors wrap ErrBroker.
func (r *runner) startCluster(ctx context.Context, index int, dir string, flags []string, ls *listenerSecurity) (*clusterproc.Cluster, error) {
	sc := r.spec.Target.Cluster
	cfg := clusterproc.Config{Weir: r.weir, Dir: dir, Brokers: sc.Brokers, SessionTimeout: sc.SessionTimeout, BrokerFlags: flags,
		Networking: r.networking}
	if ls != nil {
		// Every broker serves the point's listener beside the PLAINTEXT
		// one, which stays the inter-broker listener (the first of
		// --listeners) and the runner's.
		cfg.SecureProtocol = ls.protocol
		cfg.BrokerFlags = append(slices.Clone(ls.flags), flags...)
	}
	if sc.ZooKeeper != spec.ZooKeeperEmbedded {
		// Each point's brokers and topics under a chroot of their own, so
		// no point sees another's (the external ensemble keeps them).
		zk, err := clusterproc.Chroot(sc.ZooKeeper, fmt.Sprintf("weir-run-%s-p%03d", r.runStamp, index))
		if err != nil {
			return nil, fmt.Errorf("%w: target.cluster.zookeeper: %w", ErrBroker, err)
		}
		cfg.ZooKeeper = zk
	}
	c, err := clusterproc.Start(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: cluster of %d: %w", ErrBroker, sc.Brokers, err)
	}
	return c, nil
}

// startClusterTarget is startTarget for a cluster target: the point's
// cluster in dir, and for a listener other than PLAINTEXT (ls, its
// certificates in secDir) the load's clients pointed at every broker's
// listener of that protocol once each serves their settings.
func (r *runner) startClusterTarget(ctx context.Context, index int, dir, secDir string, ls *listenerSecurity, flags []string,
	cfg *load.Config) (alive, stop func() error, err error) {
	cl, err := r.startCluster(ctx, index, dir, flags, ls)
	if err != nil {
		os.RemoveAll(dir)
		os.RemoveAll(secDir)
		return nil, nil, err
	}
	stop = func() error {
		err := removeAfter(dir, cl.Stop())
		os.RemoveAll(secDir)
		return err
	}
	cfg.Bootstrap, cfg.Broker = cl.Bootstrap(), clusterStats{cl}
	if ls != nil {
		opts, err := ls.ready(ctx, cl.Addrs()[0], cl.SecureAddrs()) // security.go
		if err != nil {
			return nil, nil, errors.Join(err, stop())
		}
		cfg.Bootstrap, cfg.ClientOpts = cl.SecureBootstrap(), opts
	}
	alive = func() error {
		if err := cl.CheckRunning(); err != nil {
			return fmt.Errorf("%w: %w", ErrBroker, err)
		}
		return nil
	}
	return alive, stop, nil
}

// clusterStats samples every broker of a cluster (load.BrokerStats).
type clusterStats struct{ c *clusterproc.Cluster }

// Sample implements load.BrokerStats. CPU time, bytes written and fsyncs
// are summed over the brokers (and kept per broker); stored bytes count
// each partition once, by its largest replica (its leader's, which the
// followers trail), so that the compression ratio does not fall with the
// replication factor.
func (cs clusterStats) Sample(ctx context.Context, topics []string) (load.BrokerSample, error) {
	bs := cs.c.Brokers
	samples := make([]load.BrokerSample, len(bs))
	sizes := make([]map[string]int64, len(bs))
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Go(func() {
			samples[i], sizes[i], errs[i] = sampleProcess(ctx, b.Process, topics)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("broker %d: %w", b.ID, errs[i])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return load.BrokerSample{}, err
	}
	return sumSamples(bs, samples, sizes), nil
}

// sumSamples adds the brokers' samples up (see Sample).
func sumSamples(bs []*clusterproc.Broker, samples []load.BrokerSample, sizes []map[string]int64) load.BrokerSample {
	sum := load.BrokerSample{Brokers: map[int32]load.BrokerSample{}}
	largest := map[string]int64{}
	for i, s := range samples {
		sum.CPUSeconds += s.CPUSeconds
		sum.Fsyncs += s.Fsyncs
		switch {
		case s.WriteBytes < 0 || sum.WriteBytes < 0:
			sum.WriteBytes = -1 // unknown for one: unknown for the sum
		default:
			sum.WriteBytes += s.WriteBytes
		}
		for tp, n := range sizes[i] {
			largest[tp] = max(largest[tp], n)
		}
		sum.Brokers[bs[i].ID] = s
	}
	for _, n := range largest {
		sum.StoredBytes += n
	}
	return sum
}
