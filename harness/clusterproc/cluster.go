// Package clusterproc runs a weir cluster as processes on this machine: a
// ZooKeeper (Debian's package, through cluster/zk/zkserver) or an external
// one, and N `weir broker` subprocesses (through harness/brokerproc) with
// broker ids 1..N, each with its own data directory and free loopback
// ports. The runner starts one per matrix point of a spec whose target is
// a cluster, so every point starts clean; `weir cluster up` shares the
// wait that decides when a cluster is formed (WaitFormed).
//
// A Cluster is a value its holder keeps for the point's whole life: the
// brokers by id with their processes, addresses and data directories, the
// ZooKeeper connect string and server, and the networking in use. The
// runner samples the brokers' CPU time and metrics through it, and a fault
// lab can signal a broker's process (Broker.Cmd.Process), start it again
// on its data directory and address (StartBroker, Restart), cut its link
// (LinkDown, LinkUp), and cut the power of the one broker started on the
// power-cut file system (Config.PowerCutBroker, PowerCut) from the same
// value. With Config.Disk every broker's data directory is an emulated
// disk of its own (harness/device/diskfs), and DiskPowerCut cuts the power
// of any broker for real: SIGKILL, its disk loses what no fsync covered,
// the disk is mounted again over the same backing directory.
//
// # Networking
//
// NetworkingLoopback: every process listens on 127.0.0.1, on free ports.
//
// NetworkingNetns (root and the ip command): each broker runs in a network
// namespace of its own (`ip netns exec`, which execs, so Broker.Pid is the
// broker's), with one address, 10.213.K.(10+id), on ports NetnsKafkaPort
// and NetnsMetricsPort (and NetnsSecurePort), joined by a veth pair to a bridge in the root
// namespace at 10.213.K.1, where ZooKeeper listens and the harness's
// clients dial from (netns.go has the names, and how K is chosen so that
// clusters never collide and a crashed run's leftovers are removed).
// LinkDown sets the bridge end of a broker's veth pair down: the broker
// keeps running, cut from clients, peers and ZooKeeper alike.
//
// NetworkingAuto: netns when it can be set up, else loopback, and the
// Cluster says which it got and why (Networking, NetworkingFallback).
//
// Why processes, not brokers in the harness's own process: each broker's
// CPU time and disk writes can be read apart (/proc/<pid>), a broker can
// be killed or paused like a real one, and the load generator's garbage
// collector does not share a heap with the brokers'.
//
// Start returns once every broker lists all N in Metadata and a controller
// (polled with a deadline, never a guessed sleep). On any error it stops
// what it started. The brokers run in process groups of their own and die
// with the harness (brokerproc's DeathSignal), as does the ZooKeeper
// (zkserver's attached servers), so a terminal's Ctrl-C reaches only the
// harness, which stops the brokers (SIGTERM: a controlled shutdown) and
// then ZooKeeper.
package clusterproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weir-broker/weir/cluster/faultproxy"
	"github.com/weir-broker/weir/cluster/zk"
	"github.com/weir-broker/weir/cluster/zk/zkserver"
	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/harness/device/diskfs"
)

// Errors of Start and Stop, besides ErrNotFormed.
var (
	// ErrConfig: the Config is incomplete or out of range.
	ErrConfig = errors.New("clusterproc: invalid config")
	// ErrStart: ZooKeeper or a broker did not start; everything started
	// was stopped.
	ErrStart = errors.New("clusterproc: cluster did not start")
	// ErrStop: a process did not stop cleanly (it was killed).
	ErrStop = errors.New("clusterproc: cluster did not stop cleanly")
	// ErrPowerCut: a broker's power could not be cut (PowerCut).
	ErrPowerCut = errors.New("clusterproc: power cut")
)

// Networking modes (Config.Networking, Cluster.Networking); see the
// package doc.
const (
	NetworkingLoopback = "loopback" // every process on 127.0.0.1; links cannot be cut
	NetworkingNetns    = "netns"    // a namespace and an address per broker, on a bridge
	NetworkingAuto     = "auto"     // netns if it can be set up, else loopback
)

// Defaults of Config.
const (
	DefaultStartTimeout = time.Minute // ZooKeeper, the brokers, and the cluster formed
	// ZooKeeper started here ticks every 500 ms and grants session
	// timeouts from 1 s (so a fault lab can make failovers short) to
	// 60 s (above the brokers' default of 18 s).
	ZooKeeperTickTime          = 500 * time.Millisecond
	ZooKeeperMinSessionTimeout = time.Second
	ZooKeeperMaxSessionTimeout = time.Minute
)

// Config says what cluster to start. Weir, Dir and Brokers are required.
type Config struct {
	// Weir is the weir binary that serves `weir broker`.
	Weir string
	// Dir holds the cluster's files: zookeeper/ (zoo.cfg, data, log) when
	// ZooKeeper is started here, and broker-N/, broker N's data
	// directory. Created if missing; nothing in it is removed.
	Dir string
	// Brokers is the number of brokers, with ids 1..Brokers.
	Brokers int
	// ZooKeeper is the connect string the brokers join,
	// host:port[,host:port][/chroot]. Default "": start a standalone
	// ZooKeeper from Debian's package in Dir/zookeeper on a free loopback
	// port (see the ZooKeeper* constants).
	ZooKeeper string
	// SessionTimeout is the brokers' --zookeeper-session-timeout. Default
	// 0: the broker's default (18 s, Kafka's).
	SessionTimeout time.Duration
	// SecureProtocol, when SSL, SASL_PLAINTEXT or SASL_SSL, gives every
	// broker a second listener of that protocol for clients
	// (Broker.SecureAddr, SecureBootstrap) beside the PLAINTEXT one on
	// Broker.Addr, which stays the inter-broker listener and the one the
	// cluster is polled on (brokerproc.Options.SecureProtocol). The
	// certificate and SASL flags it needs come in BrokerFlags. Default
	// "": only the PLAINTEXT listener.
	SecureProtocol string
	// BrokerFlags are more `weir broker` flags for every broker, after
	// those this package sets (--broker-id, --zookeeper, --data-dir,
	// --listen, --metrics-listen, --log-level, --zookeeper-session-timeout).
	BrokerFlags []string
	// StartTimeout bounds Start: ZooKeeper serving, every broker
	// listening, and the cluster formed. Default DefaultStartTimeout.
	StartTimeout time.Duration
	// StopTimeout bounds each process's exit after SIGTERM before SIGKILL.
	// Default brokerproc.DefaultStopTimeout.
	StopTimeout time.Duration
	// LinkProxies routes every broker's replication from each other
	// broker through a fault proxy of its own (cluster/faultproxy, with
	// the brokers' --replica-route), one per directed link, so that a
	// fault lab can delay, drop or cut one way of one link
	// (Cluster.Link). Clients and ZooKeeper connect directly.
	LinkProxies bool
	// DataSize, when positive, gives each broker a data directory of
	// its own size: a tmpfs of DataSize bytes mounted on it (root only),
	// so that a fault lab can fill one broker's disk (Cluster.FillDisk).
	// Unmounted by Stop.
	DataSize int64
	// PowerCutBroker, when positive, is the broker (1..Brokers) that runs
	// on the power-cut file system (`weir broker --power-cut-fs`, through
	// brokerproc.Options.PowerCutFS), so that a fault lab can cut its
	// power (Cluster.PowerCut) and start it again on what survived
	// (StartBroker). Default 0: none.
	PowerCutBroker int32
	// Disk, when set, gives each broker an emulated disk of its own
	// (harness/device/diskfs) mounted at its data directory, with these
	// options; each disk's backing directory is DiskBacking/broker-N.disk
	// (Backing is ignored). DiskPowerCut cuts the power of any broker's
	// disk. Unmounted, and the backing directories removed, by Stop. Not
	// with DataSize. Needs root and /dev/fuse.
	Disk *diskfs.Options
	// DiskBacking is where the emulated disks' backing directories go; it
	// must not be on an emulated disk itself. Default Dir.
	DiskBacking string
	// Install is where ZooKeeper is. Default zkserver.Debian().
	Install zkserver.Install
	// Networking is NetworkingLoopback (the default, ""),
	// NetworkingNetns or NetworkingAuto. Netns needs root and the ip
	// command, and an external ZooKeeper named by an address the
	// namespaces can reach (not loopback).
	Networking string
}

func (c *Config) validate() error {
	switch {
	case c.Weir == "":
		return fmt.Errorf("%w: Weir (the weir binary) is required", ErrConfig)
	case c.Dir == "":
		return fmt.Errorf("%w: Dir is required", ErrConfig)
	case c.Brokers < 1:
		return fmt.Errorf("%w: Brokers %d: want 1 or more", ErrConfig, c.Brokers)
	case c.SessionTimeout < 0:
		return fmt.Errorf("%w: SessionTimeout %v: want 0 (the broker's default) or more", ErrConfig, c.SessionTimeout)
	case c.PowerCutBroker < 0 || int(c.PowerCutBroker) > c.Brokers:
		return fmt.Errorf("%w: PowerCutBroker %d: want 0 (none) or 1..%d", ErrConfig, c.PowerCutBroker, c.Brokers)
	case c.Disk != nil && c.DataSize > 0:
		return fmt.Errorf("%w: Disk and DataSize: a broker's data directory is an emulated disk or a tmpfs, not both", ErrConfig)
	case !slices.Contains([]string{"", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}, c.SecureProtocol):
		return fmt.Errorf("%w: SecureProtocol %q: want SSL, SASL_PLAINTEXT or SASL_SSL", ErrConfig, c.SecureProtocol)
	}
	if c.ZooKeeper != "" {
		if _, err := zk.ParseConnectString(c.ZooKeeper); err != nil {
			return fmt.Errorf("%w: ZooKeeper: %w", ErrConfig, err)
		}
	}
	switch c.Networking {
	case "":
		c.Networking = NetworkingLoopback
	case NetworkingLoopback, NetworkingAuto:
	case NetworkingNetns:
		if err := NetnsReachable(c.ZooKeeper); err != nil {
			return fmt.Errorf("%w: Networking netns: %w", ErrConfig, err)
		}
	default:
		return fmt.Errorf("%w: Networking %q: want %s, %s or %s", ErrConfig, c.Networking, NetworkingLoopback, NetworkingNetns, NetworkingAuto)
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = brokerproc.DefaultStopTimeout
	}
	if c.Install.Java == "" && c.Install.Classpath == nil {
		c.Install = zkserver.Debian()
	}
	return nil
}

// Cluster is a running cluster: a value to hold for its life.
type Cluster struct {
	// ZooKeeper is the connect string the brokers were given.
	ZooKeeper string
	// ZooKeeperServer is the ZooKeeper started for the cluster; nil when
	// Config.ZooKeeper named an external one.
	ZooKeeperServer *zkserver.Server
	// Brokers are the brokers in id order: Brokers[i].ID == i+1.
	Brokers []*Broker
	// Networking is how the processes reach each other:
	// NetworkingLoopback or NetworkingNetns (never auto).
	Networking string
	// NetworkingFallback, when Config.Networking was auto and netns could
	// not be had, says why; "" otherwise.
	NetworkingFallback string
	// Dir is Config.Dir.
	Dir string
	// PowerCutBroker is Config.PowerCutBroker: the broker whose power
	// PowerCut can cut, 0 for none.
	PowerCutBroker int32

	cfg   Config
	net   *network                       // nil with loopback
	links map[[2]int32]*faultproxy.Proxy // from, to; nil without LinkProxies
	// mu guards Brokers' elements, which StartBroker replaces (a new
	// *Broker, never a change to the old one) while others read them
	// through Broker and Members.
	mu       sync.Mutex
	logs     []*os.File              // the brokers' logs, closed by Stop
	mounts   []string                // tmpfs data directories (DataSize), unmounted by Stop
	disks    map[int32]*diskfs.Mount // emulated disks by broker (Disk), unmounted by Stop
	stopOnce sync.Once
	stopErr  error
}

// Broker is one member of a Cluster.
type Broker struct {
	ID      int32
	DataDir string // Dir/broker-N
	LogPath string // Dir/broker-N.log: everything its processes wrote
	// Namespace is the broker's network namespace and Veth the bridge end
	// of its veth pair (netns networking; "" with loopback).
	Namespace, Veth string
	// Process is the running `weir broker`: Addr, MetricsAddr, Pid,
	// Exited, Output, Stop. StartBroker and Restart replace it.
	*brokerproc.Process

	opts brokerproc.Options // how it was started
}

// Start starts the cluster and returns once it is formed (see the package
// doc). Errors wrap ErrConfig, ErrStart or ErrNotFormed, and name the
// process at fault with the end of its log; everything started is stopped.
// When ctx ends first, the error wraps ctx's.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: Dir: %w", ErrConfig, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: Dir: %w", ErrStart, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	c := &Cluster{ZooKeeper: cfg.ZooKeeper, Networking: NetworkingLoopback, Dir: dir, PowerCutBroker: cfg.PowerCutBroker, cfg: cfg}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	switch cfg.Networking {
	case NetworkingNetns:
		if c.net, err = setupNetwork(cfg.Brokers); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStart, err)
		}
	case NetworkingAuto:
		err := NetnsReachable(cfg.ZooKeeper)
		if err == nil {
			c.net, err = setupNetwork(cfg.Brokers)
		}
		if err != nil {
			c.NetworkingFallback = err.Error()
		}
	}
	zkHost := ""
	if c.net != nil {
		c.Networking = NetworkingNetns
		zkHost = c.net.bridgeIP()
	}
	if c.ZooKeeper == "" {
		zkDir := filepath.Join(dir, "zookeeper")
		c.ZooKeeperServer, err = zkserver.Start(ctx, zkserver.Config{Dir: zkDir, Install: cfg.Install, Host: zkHost,
			TickTime: ZooKeeperTickTime, MinSessionTimeout: ZooKeeperMinSessionTimeout, MaxSessionTimeout: ZooKeeperMaxSessionTimeout,
			StartTimeout: cfg.StartTimeout, StopTimeout: cfg.StopTimeout})
		if err != nil {
			log := filepath.Join(zkDir, "zookeeper.log")
			return nil, fmt.Errorf("%w: ZooKeeper: %w; last lines of %s:\n%s", ErrStart, err, log, zkserver.TailLog(log, 20))
		}
		c.ZooKeeper = c.ZooKeeperServer.Addr
	}

	if cfg.LinkProxies && cfg.Brokers > 1 {
		// The proxies listen where the brokers can reach them (the
		// bridge's address in netns mode) and refuse connections until
		// their targets are set below.
		host := "127.0.0.1"
		if c.net != nil {
			host = c.net.bridgeIP()
		}
		c.links = map[[2]int32]*faultproxy.Proxy{}
		for a := int32(1); a <= int32(cfg.Brokers); a++ {
			for b := int32(1); b <= int32(cfg.Brokers); b++ {
				if a == b {
					continue
				}
				p, err := faultproxy.New(net.JoinHostPort(host, "0"), "")
				if err != nil {
					return nil, fmt.Errorf("%w: link proxy %d->%d: %w", ErrStart, a, b, err)
				}
				c.links[[2]int32{a, b}] = p
			}
		}
	}

	// The brokers start concurrently: each waits for its port, and the
	// JVM-free start of a broker is mostly waiting for ZooKeeper.
	c.Brokers = make([]*Broker, cfg.Brokers)
	errs := make([]error, cfg.Brokers)
	var wg sync.WaitGroup
	for i := range c.Brokers {
		id := int32(i + 1)
		wg.Go(func() { c.Brokers[i], errs[i] = c.startBroker(ctx, id) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for l, p := range c.links {
		p.SetTarget(c.Brokers[l[1]-1].Addr)
	}
	if err := c.WaitFormed(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// WaitFormed waits until every broker lists all of the cluster's and a
// controller (see the function WaitFormed): after a Restart, or a LinkUp,
// that the cluster is whole again. Errors wrap ErrNotFormed.
func (c *Cluster) WaitFormed(ctx context.Context) error {
	bs := c.Members()
	members := make([]Member, len(bs))
	for i, b := range bs {
		members[i] = Member{ID: b.ID, Addr: b.Addr, Exited: b.Exited(), Describe: b.describe}
	}
	return WaitFormed(ctx, members)
}

// NetnsReachable reports why brokers in network namespaces could not
// reach the ZooKeeper of the connect string zookeeper ("": the embedded
// one, which listens on the bridge): a server named by a loopback
// address. Nil when nothing speaks against it.
func NetnsReachable(zookeeper string) error {
	if zookeeper == "" {
		return nil
	}
	cfg, err := zk.ParseConnectString(zookeeper)
	if err != nil {
		return err
	}
	for _, s := range cfg.Servers {
		host, _, _ := net.SplitHostPort(s)
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return fmt.Errorf("ZooKeeper server %s is on loopback, which a broker in a namespace of its own cannot reach; name it by another address of this machine", s)
		}
	}
	return nil
}

// NetnsAvailable reports why netns networking cannot be had here, nil
// when it can: root, the ip command, a ZooKeeper (the connect string;
// "": an embedded one) the namespaces can reach, and a probe that claims
// a slot and creates its bridge and one namespace with its veth pair, then
// deletes them. Errors wrap ErrNetns or ErrConfig.
func NetnsAvailable(zookeeper string) error {
	if err := NetnsReachable(zookeeper); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	n, err := setupNetwork(1)
	if err != nil {
		return err
	}
	return n.close()
}

// ResolveNetworking turns a networking mode (Config.Networking) into the
// one a cluster will get: auto becomes netns when NetnsAvailable(zookeeper)
// says so, else loopback with why; loopback ("") and netns stay (Start
// then finds out whether netns can be had). A runner resolves once, so
// every point of a run gets the same networking, and records it.
func ResolveNetworking(networking, zookeeper string) (used string, why error) {
	switch networking {
	case "", NetworkingLoopback:
		return NetworkingLoopback, nil
	case NetworkingAuto:
		if err := NetnsAvailable(zookeeper); err != nil {
			return NetworkingLoopback, err
		}
		return NetworkingNetns, nil
	}
	return networking, nil
}

// MemberArgs are the `weir broker` flags that make a broker member id of
// the cluster coordinated by the ZooKeeper connect string zookeeper.
func MemberArgs(id int32, zookeeper string) []string {
	return []string{"--broker-id", strconv.Itoa(int(id)), "--zookeeper", zookeeper}
}

func (c *Cluster) startBroker(ctx context.Context, id int32) (*Broker, error) {
	cfg := &c.cfg
	b := &Broker{ID: id, DataDir: filepath.Join(c.Dir, fmt.Sprintf("broker-%d", id))}
	if cfg.DataSize > 0 {
		if err := c.mountData(b.DataDir, cfg.DataSize); err != nil {
			return nil, fmt.Errorf("%w: broker %d: %w", ErrStart, id, err)
		}
	}
	if cfg.Disk != nil {
		if err := c.mountDisk(id, b.DataDir); err != nil {
			return nil, fmt.Errorf("%w: broker %d: %w", ErrStart, id, err)
		}
	}
	// brokerproc sets --data-dir, --listen and --metrics-listen itself.
	flags := MemberArgs(id, c.ZooKeeper)
	if cfg.SessionTimeout > 0 {
		flags = append(flags, "--zookeeper-session-timeout", cfg.SessionTimeout.String())
	}
	flags = append(flags, cfg.BrokerFlags...)
	for l, p := range c.links {
		if l[0] == id {
			flags = append(flags, "--replica-route", fmt.Sprintf("%d=%s", l[1], p.Addr()))
		}
	}
	// Every process of the broker writes to one log beside its data
	// directory, so what a restarted broker said before is kept.
	logPath := filepath.Join(c.Dir, fmt.Sprintf("broker-%d.log", id))
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: broker %d: log: %w", ErrStart, id, err)
	}
	c.mu.Lock()
	c.logs = append(c.logs, logFile)
	c.mu.Unlock()
	b.LogPath = logPath
	// SIGKILL if the harness dies first: it reaches a broker a fault lab
	// stopped with SIGSTOP, which a SIGTERM would leave stopped forever.
	b.opts = brokerproc.Options{Weir: cfg.Weir, DataDir: b.DataDir, Flags: flags, Metrics: true, Log: logFile,
		DeathSignal: syscall.SIGKILL, StartTimeout: cfg.StartTimeout, StopTimeout: cfg.StopTimeout,
		PowerCutFS: id == cfg.PowerCutBroker, SecureProtocol: cfg.SecureProtocol}
	if c.net != nil {
		b.Namespace, b.Veth = c.net.namespace(id), c.net.hostVeth(id)
		host := c.net.brokerIP(id)
		b.opts.Listen = net.JoinHostPort(host, strconv.Itoa(NetnsKafkaPort))
		b.opts.MetricsListen = net.JoinHostPort(host, strconv.Itoa(NetnsMetricsPort))
		if cfg.SecureProtocol != "" {
			b.opts.SecureListen = net.JoinHostPort(host, strconv.Itoa(NetnsSecurePort))
		}
		b.opts.Exec = []string{"ip", "netns", "exec", b.Namespace}
	}
	p, err := brokerproc.Start(ctx, b.opts)
	if err != nil {
		return nil, fmt.Errorf("%w: broker %d: %w", ErrStart, id, err)
	}
	b.Process = p
	// A start again keeps the addresses clients and the broker's old
	// registration know.
	b.opts.Listen, b.opts.MetricsListen, b.opts.SecureListen = p.Addr, p.MetricsAddr, p.SecureAddr
	return b, nil
}

// StartBroker starts broker id again, on its data directory, addresses
// and (netns) namespace, once its process has exited (a fault lab's
// SIGKILL, or Stop), and returns when its port accepts connections (not
// when it has rejoined: WaitFormed tells). The broker's new value replaces
// the old one in Brokers (read it again with Broker or Members; holders of
// the old value keep seeing the exited process). Errors wrap ErrStart.
func (c *Cluster) StartBroker(ctx context.Context, id int32) error {
	b := c.Broker(id)
	if b == nil {
		return fmt.Errorf("%w: no broker %d (the cluster has 1..%d)", ErrStart, id, len(c.Brokers))
	}
	select {
	case <-b.Exited():
	default:
		return fmt.Errorf("%w: broker %d is running (pid %d)", ErrStart, id, b.Pid())
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	p, err := brokerproc.Start(ctx, b.opts)
	if err != nil {
		return fmt.Errorf("%w: broker %d: %w", ErrStart, id, err)
	}
	nb := *b
	nb.Process = p
	c.mu.Lock()
	c.Brokers[id-1] = &nb
	c.mu.Unlock()
	return nil
}

// Restart stops broker id (SIGTERM: a controlled shutdown, SIGKILL after
// the stop timeout) and starts it again (StartBroker). An unclean stop is
// reported (wrapping ErrStop) after the start again.
func (c *Cluster) Restart(ctx context.Context, id int32) error {
	b := c.Broker(id)
	if b == nil {
		return fmt.Errorf("%w: no broker %d (the cluster has 1..%d)", ErrStart, id, len(c.Brokers))
	}
	var stopErr error
	if err := b.Stop(); err != nil {
		stopErr = fmt.Errorf("%w: broker %d: %w", ErrStop, id, err)
	}
	return errors.Join(stopErr, c.StartBroker(ctx, id))
}

// PowerCut cuts the power of broker id, which must be the PowerCutBroker:
// it loses everything it did not fsync (its data directory keeps file
// contents as of their last fsync, directory entries as of their
// directory's last fsync) and its process exits at once, without a
// controlled shutdown or closing its ZooKeeper session, which expires
// after the session timeout as after a crash. PowerCut returns once the
// process has exited; StartBroker starts it again on what survived (on
// the power-cut file system again). Errors wrap ErrPowerCut.
func (c *Cluster) PowerCut(id int32) error {
	if id != c.PowerCutBroker || id == 0 {
		return fmt.Errorf("%w: broker %d does not run on the power-cut file system (Config.PowerCutBroker is %d)", ErrPowerCut, id, c.PowerCutBroker)
	}
	b := c.Broker(id)
	if b == nil {
		return fmt.Errorf("%w: no broker %d (the cluster has 1..%d)", ErrPowerCut, id, len(c.Brokers))
	}
	if err := b.Process.PowerCut(); err != nil {
		return fmt.Errorf("%w: broker %d: %w", ErrPowerCut, id, err)
	}
	return nil
}

// mountDisk mounts broker id's emulated disk on dir (Config.Disk).
func (c *Cluster) mountDisk(id int32, dir string) error {
	o := *c.cfg.Disk
	root := c.cfg.DiskBacking
	if root == "" {
		root = c.Dir
	}
	o.Backing = filepath.Join(root, fmt.Sprintf("broker-%d.disk", id))
	m, err := diskfs.New(dir, o)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.disks == nil {
		c.disks = map[int32]*diskfs.Mount{}
	}
	c.disks[id] = m
	c.mu.Unlock()
	return nil
}

// Disk returns broker id's emulated disk (Config.Disk) as mounted now, or
// nil.
func (c *Cluster) Disk(id int32) *diskfs.Mount {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.disks[id]
}

// DiskPowerCut cuts the power of broker id on its emulated disk
// (Config.Disk): SIGKILL of its process, then every write its disk had
// not covered by an fsync is lost (diskfs.Mount.PowerCycle: file data as
// of its last fsync, directory entries as of their directory's last
// fsync), and the disk is mounted again over the same backing directory,
// as a machine powers on. Its ZooKeeper session expires after the session
// timeout, as after a crash. It returns what the cut took back once the
// disk is mounted again; StartBroker starts the broker on what survived.
// Errors wrap ErrPowerCut.
func (c *Cluster) DiskPowerCut(id int32) (diskfs.CutReport, error) {
	b, m := c.Broker(id), c.Disk(id)
	if b == nil || m == nil {
		return diskfs.CutReport{}, fmt.Errorf("%w: broker %d has no emulated disk (Config.Disk)", ErrPowerCut, id)
	}
	select {
	case <-b.Exited():
	default:
		if err := b.Cmd.Process.Kill(); err != nil {
			return diskfs.CutReport{}, fmt.Errorf("%w: broker %d: SIGKILL: %w", ErrPowerCut, id, err)
		}
		<-b.Exited()
	}
	nm, rep, err := m.PowerCycle()
	c.mu.Lock()
	if nm != nil {
		c.disks[id] = nm
	} else {
		delete(c.disks, id)
	}
	c.mu.Unlock()
	if err != nil {
		return rep, fmt.Errorf("%w: broker %d: %w", ErrPowerCut, id, err)
	}
	return rep, nil
}

// LinkDown sets the bridge end of broker id's veth pair down: the broker
// keeps running, and nothing reaches it or leaves it (clients, peers,
// ZooKeeper) until LinkUp. Only with netns networking; errors wrap
// ErrNetns and name the ip command.
func (c *Cluster) LinkDown(id int32) error { return c.setLink(id, false) }

// LinkUp undoes LinkDown.
func (c *Cluster) LinkUp(id int32) error { return c.setLink(id, true) }

func (c *Cluster) setLink(id int32, up bool) error {
	if c.net == nil {
		return fmt.Errorf("%w: links can be cut with netns networking only, not %s", ErrNetns, c.Networking)
	}
	if c.Broker(id) == nil {
		return fmt.Errorf("%w: no broker %d (the cluster has 1..%d)", ErrNetns, id, len(c.Brokers))
	}
	return c.net.setLink(id, up)
}

// describe tells how a broker exited, and how its output ends.
func (b *Broker) describe() string {
	select {
	case <-b.Exited():
		return fmt.Sprintf("exit: %v; %s", b.ExitErr(), b.Output())
	default:
		return b.Output()
	}
}

// Broker returns broker id, or nil when the cluster has none.
func (c *Cluster) Broker(id int32) *Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id < 1 || int(id) > len(c.Brokers) {
		return nil
	}
	return c.Brokers[id-1]
}

// mountData mounts a tmpfs of size bytes on dir (Config.DataSize).
func (c *Cluster) mountData(dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		return fmt.Errorf("mount a tmpfs of %d bytes on %s (DataSize needs root): %w", size, dir, err)
	}
	c.mu.Lock()
	c.mounts = append(c.mounts, dir)
	c.mu.Unlock()
	return nil
}

// FillDisk fills broker id's data directory (Config.DataSize) with a
// file until no byte is left, so that its next write fails with ENOSPC,
// and returns the function that removes the file again.
func (c *Cluster) FillDisk(id int32) (free func() error, err error) {
	b := c.Broker(id)
	if b == nil {
		return nil, fmt.Errorf("clusterproc: no broker %d", id)
	}
	if c.cfg.DataSize <= 0 {
		return nil, fmt.Errorf("%w: FillDisk needs Config.DataSize (a data directory of its own size)", ErrConfig)
	}
	path := filepath.Join(b.DataDir, "disk-full.filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("clusterproc: fill broker %d's disk: %w", id, err)
	}
	// Megabytes while they fit, then pages (what a tmpfs allocates).
	buf := make([]byte, 1<<20)
	for _, size := range []int{len(buf), 4096} {
		for err == nil {
			_, err = f.Write(buf[:size])
		}
		if !errors.Is(err, syscall.ENOSPC) {
			f.Close()
			os.Remove(path)
			return nil, fmt.Errorf("clusterproc: fill broker %d's disk: %w", id, err)
		}
		err = nil
	}
	f.Close()
	return func() error { return os.Remove(path) }, nil
}

// Link returns the fault proxy broker from replicates from broker to
// through (Config.LinkProxies), or nil.
func (c *Cluster) Link(from, to int32) *faultproxy.Proxy { return c.links[[2]int32{from, to}] }

// Members returns the brokers as they are now, in id order: safe while a
// fault lab restarts brokers (StartBroker), unlike reading Brokers.
func (c *Cluster) Members() []*Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.Brokers)
}

// Addrs are the brokers' Kafka addresses, in id order.
func (c *Cluster) Addrs() []string {
	bs := c.Members()
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Addr
	}
	return out
}

// Bootstrap is Addrs joined with commas, a client's seed list.
func (c *Cluster) Bootstrap() string { return strings.Join(c.Addrs(), ",") }

// SecureAddrs are the brokers' Config.SecureProtocol listeners, in id
// order; nil without one.
func (c *Cluster) SecureAddrs() []string {
	if c.cfg.SecureProtocol == "" || c.cfg.SecureProtocol == "PLAINTEXT" {
		return nil
	}
	bs := c.Members()
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.SecureAddr
	}
	return out
}

// SecureBootstrap is SecureAddrs joined with commas: the seed list of
// clients with the Config.SecureProtocol settings; "" without one.
func (c *Cluster) SecureBootstrap() string { return strings.Join(c.SecureAddrs(), ",") }

// CheckRunning returns an error naming the first broker whose process has
// exited, with how and the end of its output; nil while all run.
func (c *Cluster) CheckRunning() error {
	for _, b := range c.Members() {
		if b == nil {
			continue
		}
		select {
		case <-b.Exited():
			return fmt.Errorf("clusterproc: broker %d exited: %s", b.ID, b.describe())
		default:
		}
	}
	return nil
}

// Stop stops the brokers concurrently (SIGTERM: each hands its
// leaderships over and flushes its logs; SIGKILL after the stop timeout),
// then the ZooKeeper started for the cluster, then (netns) deletes the
// namespaces, veth pairs and bridge; links cut are set up first, so that
// the brokers can shut down in order. Stopping twice is stopping once. A
// process that had to be killed, or had exited with an error before, makes
// the error, which wraps ErrStop.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		brokers := c.Members()
		var netErrs []error
		if c.net != nil {
			for _, b := range brokers {
				if b != nil {
					if err := c.net.setLink(b.ID, true); err != nil {
						netErrs = append(netErrs, err)
					}
				}
			}
		}
		errs := make([]error, len(brokers))
		var wg sync.WaitGroup
		for i, b := range brokers {
			if b == nil {
				continue
			}
			wg.Go(func() {
				if err := b.Stop(); err != nil {
					errs[i] = fmt.Errorf("%w: broker %d: %w", ErrStop, b.ID, err)
				}
			})
		}
		wg.Wait()
		if c.ZooKeeperServer != nil {
			if err := c.ZooKeeperServer.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("%w: ZooKeeper: %w", ErrStop, err))
			}
		}
		for _, p := range c.links {
			p.Close()
		}
		c.mu.Lock()
		for _, f := range c.logs {
			f.Close()
		}
		for _, m := range c.mounts {
			if err := syscall.Unmount(m, 0); err != nil {
				errs = append(errs, fmt.Errorf("%w: unmount %s: %w", ErrStop, m, err))
			}
		}
		c.mounts = nil
		disks := c.disks
		c.disks = nil
		c.mu.Unlock()
		for id, m := range disks {
			if err := m.Unmount(); err != nil {
				errs = append(errs, fmt.Errorf("%w: broker %d's emulated disk: %w", ErrStop, id, err))
			} else if err := os.RemoveAll(m.Backing()); err != nil {
				errs = append(errs, fmt.Errorf("%w: broker %d's emulated disk: %w", ErrStop, id, err))
			}
		}
		if c.net != nil {
			if err := c.net.close(); err != nil {
				netErrs = append(netErrs, err)
			}
		}
		for _, err := range netErrs {
			errs = append(errs, fmt.Errorf("%w: %w", ErrStop, err))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// Chroot returns the connect string zookeeper with path appended to its
// chroot ("a:2181/weir" and "run-1" give "a:2181/weir/run-1"), so that
// clusters sharing one external ZooKeeper do not see each other's
// brokers and topics.
func Chroot(zookeeper, path string) (string, error) {
	cfg, err := zk.ParseConnectString(zookeeper)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if path == "" || strings.ContainsAny(path, "/,") {
		return "", fmt.Errorf("%w: chroot element %q: want one path element", ErrConfig, path)
	}
	return strings.Join(cfg.Servers, ",") + cfg.Chroot + "/" + path, nil
}

// Reachable dials each server of the connect string zookeeper within
// timeout and reports the first that does not accept a connection.
func Reachable(ctx context.Context, zookeeper string, timeout time.Duration) error {
	cfg, err := zk.ParseConnectString(zookeeper)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	d := net.Dialer{Timeout: timeout}
	for _, s := range cfg.Servers {
		conn, err := d.DialContext(ctx, "tcp", s)
		if err != nil {
			return fmt.Errorf("ZooKeeper server %s: %w", s, err)
		}
		conn.Close()
	}
	return nil
}

// ProcessesMentioning lists the processes (but this one) whose command
// line mentions s, as "pid N: command line", from Linux's /proc (elsewhere
// none). Every process a Cluster starts names its directory on its
// command line (a broker's --data-dir, ZooKeeper's zoo.cfg), so tests
// check with it that nothing of a cluster is left.
func ProcessesMentioning(s string) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			found = append(found, fmt.Sprintf("pid %d: %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return found
}
