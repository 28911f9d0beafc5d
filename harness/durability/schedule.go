package durability

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// ClusterFault is a kind of fault the cluster lab injects into a running
// cluster (see RunCluster). Each strikes one broker, or ZooKeeper, and
// heals after a hold time; the cluster keeps serving through it with the
// brokers that remain.
type ClusterFault string

// The cluster faults.
const (
	// KillLeader sends SIGKILL to the leader of a partition drawn for the
	// fault, and restarts it on its data directory after the hold.
	KillLeader ClusterFault = "kill-leader"
	// KillController sends SIGKILL to the controller; restarted after the
	// hold.
	KillController ClusterFault = "kill-controller"
	// KillRandom sends SIGKILL to a broker drawn for the fault; restarted
	// after the hold.
	KillRandom ClusterFault = "kill-random"
	// Pause stops the leader of a partition with SIGSTOP for the hold
	// (shorter than the ZooKeeper session timeout: a long GC pause), then
	// continues it: it wakes up believing it still leads, its followers
	// and clients having moved on or waited.
	Pause ClusterFault = "pause"
	// SessionExpiry stops the leader of a partition with SIGSTOP until
	// ZooKeeper expires its session (its registration is gone), holds it
	// stopped a little longer, and continues it: the broker learns that
	// its session ended the way it does in production, after a stall.
	SessionExpiry ClusterFault = "session-expiry"
	// Term sends SIGTERM (a controlled shutdown: leaderships handed over
	// first) to the leader of a partition; restarted after the hold.
	Term ClusterFault = "term"
	// RollingRestart restarts every broker in turn with SIGTERM, each
	// after the cluster is whole again (every partition's ISR full): an
	// upgrade. It ignores the hold.
	RollingRestart ClusterFault = "rolling-restart"
	// ZooKeeperStop stops the cluster's ZooKeeper (SIGTERM) for the hold
	// and starts it again on its data: no broker can change the cluster
	// meanwhile, and leaders keep serving what they lead.
	ZooKeeperStop ClusterFault = "zk-stop"
	// LinkDown sets the network link of the leader of a partition down
	// (its veth pair, with netns networking) for the hold, and at least
	// the session timeout and 2 s, so that its session expires and its
	// partitions move: the broker runs on, cut off from clients, peers
	// and ZooKeeper alike, believing it leads, until the link comes back.
	LinkDown ClusterFault = "link-down"
	// SlowLinks delays every replication link to and from the leader of a
	// partition by LinkDelay each way for the hold (the fault proxies
	// between brokers).
	SlowLinks ClusterFault = "slow-links"
	// FlakyLinks resets the replication connections to and from the
	// leader of a partition at random (LinkDropRate per chunk forwarded)
	// for the hold: the packet loss a TCP connection cannot ride out.
	FlakyLinks ClusterFault = "flaky-links"
	// OneWay cuts one way of the links between the leader of a partition
	// and its followers for the hold: the leader hears their fetches, they
	// never hear its answers.
	OneWay ClusterFault = "one-way"
	// DiskFull fills the data directory of a follower of a partition
	// (a tmpfs of its own size) for the hold, so its appends fail with
	// ENOSPC, then frees it.
	DiskFull ClusterFault = "disk-full"
	// PowerCut cuts the power of the power-cut broker (the highest id,
	// which a run whose schedule has a power cut starts with `weir broker
	// --power-cut-fs`), whatever its role: it loses everything it did not
	// fsync (file contents as of their last fsync, directory entries as
	// of their directory's last fsync, unsynced tails torn at random) and
	// its process ends at once, without a controlled shutdown or a goodbye
	// to ZooKeeper; restarted after the hold on what survived.
	PowerCut ClusterFault = "power-cut"
	// DiskPowerCut cuts the power of a broker drawn for the fault, whose
	// data directory is an emulated disk of its own (a cluster run with
	// ClusterConfig.Device): SIGKILL, its disk loses every write no fsync
	// covered, the disk is mounted again; restarted after the hold on what
	// survived. Drawn by mixed only when the brokers run on emulated disks.
	DiskPowerCut ClusterFault = "disk-power-cut"
	// Mixed draws each fault of a run from ClusterFaults (those the
	// cluster's networking allows).
	Mixed ClusterFault = "mixed"
)

// Parameters of the link faults.
const (
	LinkDelay    = 100 * time.Millisecond
	LinkDropRate = 0.02
)

// ClusterFaults lists the cluster faults, in the order reports use.
var ClusterFaults = []ClusterFault{KillLeader, KillController, KillRandom, Pause, SessionExpiry, Term, RollingRestart,
	ZooKeeperStop, LinkDown, SlowLinks, FlakyLinks, OneWay, DiskFull, PowerCut, DiskPowerCut}

// needsProxies reports whether the fault acts on the fault proxies
// between brokers.
func (f ClusterFault) needsProxies() bool { return f == SlowLinks || f == FlakyLinks || f == OneWay }

// needsNetns reports whether the fault needs brokers in network
// namespaces.
func (f ClusterFault) needsNetns() bool { return f == LinkDown }

// needsPowerCutBroker reports whether the fault needs a broker on the
// power-cut file system (clusterproc.Config.PowerCutBroker).
func (f ClusterFault) needsPowerCutBroker() bool { return f == PowerCut }

// needsRoot reports whether the fault needs root (a tmpfs per broker).
func (f ClusterFault) needsRoot() bool { return f == DiskFull }

// needsDisk reports whether the fault needs the brokers on emulated disks
// (ClusterConfig.Device).
func (f ClusterFault) needsDisk() bool { return f == DiskPowerCut }

// available are the kinds a cluster with or without namespaces, by root
// or not, on emulated disks or not, can take. On emulated disks a broker's
// disk cannot be filled (its backing directory is on the machine's disk).
func available(netns, root, disk bool) []ClusterFault {
	var out []ClusterFault
	for _, k := range ClusterFaults {
		switch {
		case k.needsNetns() && !netns, k.needsRoot() && !root, k.needsDisk() && !disk, k == DiskFull && disk:
			continue
		}
		out = append(out, k)
	}
	return out
}

// ParseClusterFault checks a fault's name.
func ParseClusterFault(s string) (ClusterFault, error) {
	f := ClusterFault(s)
	if f == Mixed || slices.Contains(ClusterFaults, f) {
		return f, nil
	}
	names := make([]string, len(ClusterFaults))
	for i, k := range ClusterFaults {
		names[i] = string(k)
	}
	return "", fmt.Errorf("%w: unknown cluster fault %q (known: %s, %s)", ErrConfig, s, strings.Join(names, ", "), Mixed)
}

// needsZooKeeper reports whether the fault acts on a ZooKeeper the lab
// started (not an external one).
func (f ClusterFault) needsZooKeeper() bool { return f == ZooKeeperStop }

// Planned is one fault of a run's schedule: what strikes, when, and on
// what. The broker a leader-targeted fault strikes is the partition's
// leader at the moment it strikes, so the schedule names the partition.
type Planned struct {
	Kind ClusterFault
	// At is when the fault strikes, after the first acknowledgement.
	At time.Duration
	// Hold is how long the fault lasts before it heals.
	Hold time.Duration
	// Topic and Partition (topic index) name the partition whose leader a
	// kill-leader, pause, session-expiry or term fault strikes.
	Topic, Partition int
	// Broker is the broker a kill-random or disk-power-cut fault strikes
	// (1..brokers).
	Broker int32
}

func (p Planned) String() string {
	switch p.Kind {
	case KillLeader, Pause, SessionExpiry, Term, LinkDown, SlowLinks, FlakyLinks, OneWay:
		return fmt.Sprintf("%s of %d/%d at %v for %v", p.Kind, p.Topic, p.Partition, p.At, p.Hold)
	case DiskFull:
		return fmt.Sprintf("%s of a follower of %d/%d at %v for %v", p.Kind, p.Topic, p.Partition, p.At, p.Hold)
	case KillRandom:
		return fmt.Sprintf("%s of broker %d at %v for %v", p.Kind, p.Broker, p.At, p.Hold)
	case PowerCut:
		return fmt.Sprintf("%s of the power-cut broker at %v for %v", p.Kind, p.At, p.Hold)
	case DiskPowerCut:
		return fmt.Sprintf("%s of broker %d at %v for %v", p.Kind, p.Broker, p.At, p.Hold)
	}
	return fmt.Sprintf("%s at %v for %v", p.Kind, p.At, p.Hold)
}

// Plan draws a run's schedule: count faults of kind (each drawn from
// ClusterFaults when kind is Mixed; kinds limits that draw when given),
// one after the other over [warmup, warmup+duration): the window is cut
// into count equal slots, and each fault strikes at a seeded moment of the
// first half of its slot, so faults never overlap when hold is at most a
// quarter of a slot. Its targets (partition, broker) are drawn too. The
// same arguments give the same schedule.
func Plan(seed int64, kind ClusterFault, kinds []ClusterFault, count int, warmup, duration, hold time.Duration,
	topics, partitions, brokers int) ([]Planned, error) {
	switch {
	case count < 1:
		return nil, fmt.Errorf("%w: faults per run %d: want 1 or more", ErrConfig, count)
	case duration <= 0:
		return nil, fmt.Errorf("%w: a cluster run needs a duration to place its faults in", ErrConfig)
	case hold <= 0:
		return nil, fmt.Errorf("%w: fault hold %v: want > 0", ErrConfig, hold)
	case topics < 1 || partitions < 1 || brokers < 1:
		return nil, fmt.Errorf("%w: %d topics of %d partitions on %d brokers", ErrConfig, topics, partitions, brokers)
	}
	if len(kinds) == 0 {
		kinds = available(true, true, false)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5c4ed))
	slot := duration / time.Duration(count)
	out := make([]Planned, count)
	for i := range out {
		k := kind
		if k == Mixed {
			k = kinds[rng.IntN(len(kinds))]
		}
		at := warmup + time.Duration(i)*slot
		if half := int64(slot / 2); half > 0 {
			at += time.Duration(rng.Int64N(half))
		}
		out[i] = Planned{Kind: k, At: at, Hold: hold, Topic: rng.IntN(topics), Partition: rng.IntN(partitions),
			Broker: int32(1 + rng.IntN(brokers))}
	}
	return out, nil
}
