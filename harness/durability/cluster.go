package durability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/harness/clusterproc"
	"github.com/weir-broker/weir/harness/device/diskfs"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// Defaults of ClusterConfig.
const (
	DefaultFaultsPerRun = 3
	DefaultFaultHold    = 2 * time.Second
	// DefaultClusterSessionTimeout is the brokers' ZooKeeper session
	// timeout in the cluster lab: short, so a dead broker's partitions
	// move within seconds (Kafka's default is 18 s).
	DefaultClusterSessionTimeout = 4 * time.Second
	// DefaultHealTimeout bounds the wait, after the last fault, until the
	// cluster is whole again: every partition led, every ISR full.
	DefaultHealTimeout = time.Minute
	// sampleEvery is how often the cluster is sampled during a run.
	sampleEvery = 100 * time.Millisecond
)

// ClusterConfig is one run of the cluster lab: a fresh cluster of
// `weir broker` processes, one load, and a schedule of faults.
type ClusterConfig struct {
	// Workload is the load, as Config's, plus replication_factor,
	// min_insync and unclean_election (the topics' configs), and its
	// warmup and duration place the faults (see Plan).
	Workload spec.Workload
	// Fault is the kind of every fault of the run, or Mixed; Kinds limits
	// Mixed's draw (default: ClusterFaults).
	Fault ClusterFault
	Kinds []ClusterFault
	// Faults is how many faults a run injects (default
	// DefaultFaultsPerRun); Hold how long each lasts (default
	// DefaultFaultHold).
	Faults int
	Hold   time.Duration
	// Schedule, when set, is the run's schedule, in place of one drawn
	// from Fault, Kinds, Faults and Hold.
	Schedule []Planned
	// Seed seeds the schedule, the payloads and the message sizes.
	Seed int64
	// Codec compresses the producers' batches; nil: none.
	Codec codec.Codec

	// Weir is the weir binary. Required.
	Weir string
	// Dir holds the cluster's files (clusterproc.Config.Dir); the caller
	// removes it. Required.
	Dir string
	// Brokers is the cluster's size. Default 3.
	Brokers int
	// ZooKeeper is an external ZooKeeper's connect string; "" starts one
	// (required by ZooKeeperStop).
	ZooKeeper string
	// SessionTimeout is the brokers' ZooKeeper session timeout. Default
	// DefaultClusterSessionTimeout.
	SessionTimeout time.Duration
	// BrokerFlags are more `weir broker` flags for every broker.
	BrokerFlags []string
	// Networking is the cluster's (clusterproc.Config.Networking):
	// link-down needs netns; "" is loopback. The fault proxies between
	// brokers are started when a fault may need them.
	Networking string
	// VerifyRecords are produced per partition after the cluster healed,
	// acks=all. Default DefaultVerifyRecords.
	VerifyRecords int
	// HealTimeout bounds the wait after the last fault until every
	// partition is led with a full ISR. Default DefaultHealTimeout.
	HealTimeout time.Duration
	// Device, when set, runs each broker on an emulated disk of its own
	// (clusterproc.Config.Disk), whose power disk-power-cut cuts; loopback
	// networking only (see RunCluster);
	// Device.Backing is not used: DiskBacking is where the disks' backing
	// directories go (default Dir). Not with disk-full.
	Device      *Device
	DiskBacking string
	// Progress, when set, hears of each fault as it strikes and heals.
	Progress func(string)
	// Logger receives the lab's own warnings. Default: discarded.
	Logger *slog.Logger
}

func (c ClusterConfig) validate() (ClusterConfig, error) {
	bad := func(format string, args ...any) (ClusterConfig, error) {
		return c, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	w := &c.Workload
	if c.Brokers == 0 {
		c.Brokers = 3
	}
	if w.ReplicationFactor == 0 {
		w.ReplicationFactor = 1
	}
	if w.MinInsync == 0 {
		w.MinInsync = 1
	}
	if c.Faults == 0 {
		c.Faults = DefaultFaultsPerRun
	}
	if c.Hold == 0 {
		c.Hold = DefaultFaultHold
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultClusterSessionTimeout
	}
	if c.VerifyRecords == 0 {
		c.VerifyRecords = DefaultVerifyRecords
	}
	if c.HealTimeout == 0 {
		c.HealTimeout = DefaultHealTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Weir == "":
		return bad("Weir (the weir binary) is required")
	case c.Dir == "":
		return bad("Dir is required")
	case c.Brokers < 1:
		return bad("Brokers %d: want 1 or more", c.Brokers)
	case w.ReplicationFactor < 1 || w.ReplicationFactor > c.Brokers:
		return bad("Workload.ReplicationFactor %d: want 1..%d (the brokers)", w.ReplicationFactor, c.Brokers)
	case w.MinInsync < 1 || w.MinInsync > w.ReplicationFactor:
		return bad("Workload.MinInsync %d: want 1..%d (the replication factor)", w.MinInsync, w.ReplicationFactor)
	case w.Topics < 1 || w.Partitions < 1:
		return bad("Workload: %d topics of %d partitions: want 1 or more of each", w.Topics, w.Partitions)
	case w.Producers < 1 || w.Producers > maxProducers-1:
		return bad("Workload.Producers %d: want 1..%d", w.Producers, maxProducers-1)
	case w.Rate < 0 || w.Warmup < 0 || w.Duration <= 0:
		return bad("Workload: rate %v, warmup %v, duration %v: want rate >= 0, warmup >= 0, duration > 0", w.Rate, w.Warmup, w.Duration)
	case c.SessionTimeout < time.Second:
		return bad("SessionTimeout %v: want 1s or more (the ZooKeeper the lab starts grants no less)", c.SessionTimeout)
	case c.Hold < 0 || c.VerifyRecords < 0 || c.HealTimeout < 0:
		return bad("Hold %v, VerifyRecords %d, HealTimeout %v: want >= 0", c.Hold, c.VerifyRecords, c.HealTimeout)
	}
	if lo, _ := w.MessageSize.Bounds(); lo < MinMessageSize {
		return bad("Workload.MessageSize %v: records need at least %d bytes (id, send time, checksum)", w.MessageSize, MinMessageSize)
	}
	if _, err := requiredAcks(w.Acks); err != nil {
		return c, err
	}
	if c.Schedule == nil {
		if _, err := ParseClusterFault(string(c.Fault)); err != nil {
			return c, err
		}
		for _, k := range c.Kinds {
			if _, err := ParseClusterFault(string(k)); err != nil || k == Mixed {
				return bad("Kinds: %q is not a cluster fault", k)
			}
		}
	}
	return c, nil
}

// ClusterBound is what a cluster setting may lose: nothing with acks=all,
// clean elections, and either min.insync.replicas of at least 2 or durable
// acks (an acknowledged record is on at least two in-sync replicas, or on
// the disk of every one, and only those can lead), whatever the faults, as
// long as one in-sync replica's disk survives and at most one broker loses
// its power at a time; otherwise no bound (acks=1 acknowledges what only
// the leader has; an unclean election makes a replica that lacks
// acknowledged records the leader; with min.insync.replicas 1 an ISR of
// the leader alone acknowledges what a power cut of it takes).
func ClusterBound(w spec.Workload) flushpolicy.Bound {
	if (w.Acks == "all" || w.Acks == "-1") && !w.UncleanElection && (w.MinInsync >= 2 || w.DurableAcks) {
		return Nothing
	}
	return flushpolicy.Bound{}
}

// RunCluster runs the cluster lab once: a fresh cluster (its highest broker
// on the power-cut file system when the schedule has a power cut), topics
// with the workload's replication factor, min.insync.replicas, unclean
// election, flush policy and durable-ack mode, producers recording every
// record in their ledgers, a consumer recording every record it was served,
// the cluster sampled throughout, and the schedule's faults injected one
// after the other while the load runs. After the last fault, the producers
// stop, the cluster heals (every partition led with a full ISR), a few
// records per partition are produced (acks=all), every partition is read
// back from its leader and checked as Run checks one broker's, the
// replicas' logs are compared with each other from the log start the leader
// served, and the cluster stops.
//
// As with Run, the error is for a run that could not be carried out;
// what it found is in the Outcome, which Outcome.Verify judges against
// ClusterBound. A fault that could not be injected (or healed) ends the
// schedule: the run still heals and is checked, and both come back.
func RunCluster(ctx context.Context, cfg ClusterConfig) (*Outcome, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	w := cfg.Workload
	if cfg.Networking == clusterproc.NetworkingAuto {
		// Decided now, so that the schedule knows whether link-down is in.
		cfg.Networking, _ = clusterproc.ResolveNetworking(cfg.Networking, cfg.ZooKeeper)
	}
	netns := cfg.Networking == clusterproc.NetworkingNetns
	schedule := cfg.Schedule
	if schedule == nil {
		kinds := cfg.Kinds
		if len(kinds) == 0 {
			kinds = available(netns, os.Geteuid() == 0, cfg.Device != nil)
			if cfg.ZooKeeper != "" {
				kinds = slices.DeleteFunc(kinds, ClusterFault.needsZooKeeper)
			}
		}
		if schedule, err = Plan(cfg.Seed, cfg.Fault, kinds, cfg.Faults, w.Warmup, w.Duration, cfg.Hold,
			w.Topics, w.Partitions, cfg.Brokers); err != nil {
			return nil, err
		}
	}
	proxies, dataSize, powerCut := false, int64(0), int32(0)
	for _, p := range schedule {
		if p.Kind.needsZooKeeper() && cfg.ZooKeeper != "" {
			return nil, fmt.Errorf("%w: %s needs the ZooKeeper the lab starts, not an external one", ErrConfig, p.Kind)
		}
		if p.Kind.needsNetns() && !netns {
			return nil, fmt.Errorf("%w: %s needs netns networking (brokers in network namespaces)", ErrConfig, p.Kind)
		}
		proxies = proxies || p.Kind.needsProxies()
		if p.Kind.needsRoot() {
			dataSize = diskFullDataSize
		}
		if p.Kind.needsPowerCutBroker() {
			powerCut = int32(cfg.Brokers) // the highest id
		}
		if p.Kind.needsDisk() && cfg.Device == nil {
			return nil, fmt.Errorf("%w: %s needs the brokers on emulated disks (Device)", ErrConfig, p.Kind)
		}
	}
	var disk *diskfs.Options
	if d := cfg.Device; d != nil {
		if netns {
			// ip netns exec gives each broker a mount namespace of its own,
			// holding a copy of every disk mounted before it started: a
			// disk then cannot be unmounted at its power cut (EBUSY).
			return nil, fmt.Errorf("%w: brokers on emulated disks need loopback networking, not netns (each broker's mount namespace would pin the other brokers' disks)", ErrConfig)
		}
		if dataSize > 0 {
			return nil, fmt.Errorf("%w: %s cannot fill an emulated disk (its backing directory is this machine's disk)", ErrConfig, DiskFull)
		}
		disk = &diskfs.Options{Profile: d.Profile, RealTime: d.RealTime, Logger: cfg.Logger}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBroker, err)
	}
	c, err := clusterproc.Start(ctx, clusterproc.Config{Weir: cfg.Weir, Dir: cfg.Dir, Brokers: cfg.Brokers,
		ZooKeeper: cfg.ZooKeeper, SessionTimeout: cfg.SessionTimeout, BrokerFlags: cfg.BrokerFlags,
		Networking: cfg.Networking, LinkProxies: proxies, DataSize: dataSize, PowerCutBroker: powerCut,
		Disk: disk, DiskBacking: cfg.DiskBacking})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBroker, err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	lab := &lab{cfg: cfg, c: c}

	names, configs := topics("chaos-", w)
	configs[topicconfig.MinInsyncReplicas] = strconv.Itoa(w.MinInsync)
	configs[topicconfig.UncleanLeaderElection] = strconv.FormatBool(w.UncleanElection)

	ps, err := newProducers(ctx, c.Bootstrap(), names, w, cfg.Codec, cfg.Seed, clientMetadataMinAge)
	if err != nil {
		return nil, err
	}
	defer ps.close()
	cctx, cancel := context.WithTimeout(ctx, firstAckTimeout)
	defer cancel()
	if err := createTopicsRF(cctx, ps.ps[0].cl, names, w.Partitions, w.ReplicationFactor, configs); err != nil {
		return nil, err
	}
	obs, err := newObserver(c, names, w.Partitions)
	if err != nil {
		return nil, err
	}
	defer obs.close()
	if _, err := obs.waitWhole(ctx, cfg.HealTimeout); err != nil {
		return nil, fmt.Errorf("%w: the new topics never had a full ISR: %w", ErrBroker, err)
	}
	cons, err := newConsumer(c.Bootstrap(), names)
	if err != nil {
		return nil, err
	}
	defer cons.close()

	ps.start(w)
	select {
	case <-cctx.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: no record acknowledged within %v", ErrClient, firstAckTimeout)
	case <-ps.first:
	}
	obs.startSampling(ps.firstAt)

	// The faults, one after the other, each at its moment.
	var done []result.Fault
	var faultErr error
	for _, p := range schedule {
		t := time.NewTimer(time.Until(ps.firstAt.Add(p.At)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		f, err := lab.inject(ctx, p, obs, ps.firstAt)
		done = append(done, f)
		if cfg.Progress != nil {
			cfg.Progress(fmt.Sprintf("%s on %s at %v, healed at %v", f.Kind, f.Target, f.At.Round(time.Millisecond), f.Healed.Round(time.Millisecond)))
		}
		if err != nil {
			// The run goes on to heal and be checked: what the faults
			// cost so far is a finding; the error comes back beside it.
			faultErr = err
			break
		}
	}
	// The load runs to the end of its window, at least a second after the
	// last fault healed, so producers see the healed cluster.
	end := ps.firstAt.Add(w.Warmup + w.Duration)
	if len(done) > 0 {
		end = later(end, ps.firstAt.Add(done[len(done)-1].Healed+time.Second))
	}
	t := time.NewTimer(time.Until(end))
	select {
	case <-ctx.Done():
		t.Stop()
		return nil, ctx.Err()
	case <-t.C:
	}
	stop := time.Now()
	ps.close() // every promise resolved: the ledgers are final
	failedBy := ps.failures()
	in := checkInput{fault: Fault("cluster"), start: ps.firstAt, warmup: w.Warmup, ledgers: ps.entries(), faults: done,
		allowDuplicates: w.Acks != "all" && w.Acks != "-1", unclean: w.UncleanElection}
	if len(done) > 0 {
		in.cut = ps.firstAt.Add(done[0].At)
	} else {
		in.cut = stop
	}
	in.stop = stop

	// Heal: every partition led, every ISR full.
	healBegin := time.Now()
	if _, err := obs.waitWhole(ctx, cfg.HealTimeout); err != nil {
		// What happened up to here goes back with the error.
		cons.stop()
		partial := &Outcome{Cluster: true, Partial: true, Seed: cfg.Seed, Schedule: done}
		partial.Timeline, _ = obs.stopSampling()
		return partial, fmt.Errorf("%w: the cluster did not heal: %w%s", ErrBroker, err, exited(c))
	}
	recovery := time.Since(healBegin)
	in.seen = cons.stop()
	in.timeline, in.counts = obs.stopSampling()

	err = withClient(c.Bootstrap(), func(cl *kgo.Client) error {
		f := &fetcher{cl: cl, topics: names, parts: w.Partitions, codec: cfg.Codec, routed: true}
		var err error
		// Serving, that is; the high watermark it reports is no end to
		// check the records produced after healing against, as it can
		// still trail the log end (produce requests that were on the wire
		// when the clients closed).
		if _, err = f.waitServing(ctx, cfg.HealTimeout); err != nil {
			return err
		}
		lo, _ := w.MessageSize.Bounds()
		if in.post, err = producePost(ctx, cl, names, w.Partitions, cfg.VerifyRecords, int(lo)); err != nil {
			return err
		}
		in.served, err = f.readAll(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The replicas hold what their leader does once each has caught up
	// with the records produced after healing: wait for full ISRs again,
	// then stop the cluster so the logs are still, and compare them.
	if _, err := obs.waitWhole(ctx, cfg.HealTimeout); err != nil {
		return nil, fmt.Errorf("%w: the cluster fell apart after healing: %w", ErrBroker, err)
	}
	assignment, assignErr := obs.assignment()
	obs.close()
	// The logs are compared while the brokers run, with nothing written
	// any more (every replica in sync with the records produced after
	// healing): stopping them first would move leaderships among
	// brokers going down, and with unclean election allowed the last one
	// standing may take a partition it lags in and truncate the others.
	members := c.Members()
	dirs := map[int32]string{}
	for _, b := range members {
		dirs[b.ID] = b.DataDir
	}
	starts := map[tp]int64{}
	for k, sv := range in.served {
		starts[k] = sv.start
	}
	in.replicas = compareReplicas(dirs, names, assignment, starts)
	if len(assignment) != len(in.served) {
		in.replicas = append(in.replicas, fmt.Sprintf("replicas of %d of %d partitions compared: Metadata did not describe the rest (%v)",
			len(assignment), len(in.served), assignErr))
	}
	stopped = true
	stopErr := c.Stop()

	o := check(in)
	o.Seed, o.Recovery, o.Cluster = cfg.Seed, recovery, true
	o.FailedBy = failedBy // o.Schedule: check charged the losses to the faults
	if faultErr != nil {
		o.Problems = append(o.Problems, "fault: "+faultErr.Error())
	}
	if stopErr != nil {
		// A broker that had to be killed at the end is a finding, not a
		// reason to throw the run away.
		o.Problems = append(o.Problems, "stop: "+stopErr.Error())
	}
	return o, faultErr
}

// exited names the brokers whose processes have ended, with the last
// lines they wrote ("" when all run): a broker that died on its own is why
// a cluster does not heal.
func exited(c *clusterproc.Cluster) string {
	var b strings.Builder
	for _, m := range c.Members() {
		select {
		case <-m.Exited():
			fmt.Fprintf(&b, "; broker %d exited (%v): %s", m.ID, m.ExitErr(), lastLines(m.Output(), 3))
		default:
		}
	}
	return b.String()
}

// lastLines returns the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' })
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// lab injects faults into a running cluster.
type lab struct {
	cfg ClusterConfig
	c   *clusterproc.Cluster
}

// restart starts broker id again on its data directory, at its old
// addresses (clients and peers know them), with the flags it had.
func (l *lab) restart(ctx context.Context, id int32) error {
	if err := l.c.StartBroker(ctx, id); err != nil {
		return fmt.Errorf("%w: restart: %w", ErrBroker, err)
	}
	return nil
}

var errNoLeader = errors.New("no leader")

// diskFullDataSize is each broker's data directory when a run may fill
// one (disk-full): a tmpfs of this size, room for minutes of the lab's
// load.
const diskFullDataSize = 1 << 30

// clientMetadataMinAge lets the lab's clients refresh metadata every
// 250 ms when a leader moves, rather than franz-go's default of at most
// every 5 s, so that unavailability measures the cluster's failover and
// not the client's throttle. (The Java client retries after
// retry.backoff.ms, 100 ms.)
var clientMetadataMinAge = kgo.MetadataMinAge(250 * time.Millisecond)
