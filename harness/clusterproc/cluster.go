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
// lab can signal a broker's process (Broker.Cmd.Process) or restart it on
// its data directory from the same value. Networking is always
// NetworkingLoopback here: every process listens on 127.0.0.1.
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-broker/weir/cluster/zk"
	"github.com/weir-broker/weir/cluster/zk/zkserver"
	"github.com/weir-broker/weir/harness/brokerproc"
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
)

// NetworkingLoopback is the networking of clusters this package starts:
// every process on 127.0.0.1, no namespaces, no faults on the links.
const NetworkingLoopback = "loopback"

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
	// Install is where ZooKeeper is. Default zkserver.Debian().
	Install zkserver.Install
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
	}
	if c.ZooKeeper != "" {
		if _, err := zk.ParseConnectString(c.ZooKeeper); err != nil {
			return fmt.Errorf("%w: ZooKeeper: %w", ErrConfig, err)
		}
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
	// NetworkingLoopback.
	Networking string
	// Dir is Config.Dir.
	Dir string

	stopOnce sync.Once
	stopErr  error
}

// Broker is one member of a Cluster.
type Broker struct {
	ID      int32
	DataDir string // Dir/broker-N
	// Process is the running `weir broker`: Addr, MetricsAddr, Pid,
	// Exited, Output, Stop.
	*brokerproc.Process
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
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	c := &Cluster{ZooKeeper: cfg.ZooKeeper, Networking: NetworkingLoopback, Dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	if c.ZooKeeper == "" {
		zkDir := filepath.Join(dir, "zookeeper")
		c.ZooKeeperServer, err = zkserver.Start(ctx, zkserver.Config{Dir: zkDir, Install: cfg.Install,
			TickTime: ZooKeeperTickTime, MinSessionTimeout: ZooKeeperMinSessionTimeout, MaxSessionTimeout: ZooKeeperMaxSessionTimeout,
			StartTimeout: cfg.StartTimeout, StopTimeout: cfg.StopTimeout})
		if err != nil {
			log := filepath.Join(zkDir, "zookeeper.log")
			return nil, fmt.Errorf("%w: ZooKeeper: %w; last lines of %s:\n%s", ErrStart, err, log, zkserver.TailLog(log, 20))
		}
		c.ZooKeeper = c.ZooKeeperServer.Addr
	}

	// The brokers start concurrently: each waits for its port, and the
	// JVM-free start of a broker is mostly waiting for ZooKeeper.
	c.Brokers = make([]*Broker, cfg.Brokers)
	errs := make([]error, cfg.Brokers)
	var wg sync.WaitGroup
	for i := range c.Brokers {
		id := int32(i + 1)
		wg.Go(func() { c.Brokers[i], errs[i] = startBroker(ctx, &cfg, dir, id, c.ZooKeeper) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	members := make([]Member, len(c.Brokers))
	for i, b := range c.Brokers {
		members[i] = Member{ID: b.ID, Addr: b.Addr, Exited: b.Exited(), Describe: b.describe}
	}
	if err := WaitFormed(ctx, members); err != nil {
		return nil, err
	}
	return c, nil
}

// MemberArgs are the `weir broker` flags that make a broker member id of
// the cluster coordinated by the ZooKeeper connect string zookeeper.
func MemberArgs(id int32, zookeeper string) []string {
	return []string{"--broker-id", strconv.Itoa(int(id)), "--zookeeper", zookeeper}
}

func startBroker(ctx context.Context, cfg *Config, dir string, id int32, zookeeper string) (*Broker, error) {
	dataDir := filepath.Join(dir, fmt.Sprintf("broker-%d", id))
	// brokerproc sets --data-dir, --listen and --metrics-listen itself.
	flags := MemberArgs(id, zookeeper)
	if cfg.SessionTimeout > 0 {
		flags = append(flags, "--zookeeper-session-timeout", cfg.SessionTimeout.String())
	}
	flags = append(flags, cfg.BrokerFlags...)
	p, err := brokerproc.Start(ctx, brokerproc.Options{Weir: cfg.Weir, DataDir: dataDir, Flags: flags, Metrics: true,
		StartTimeout: cfg.StartTimeout, StopTimeout: cfg.StopTimeout})
	if err != nil {
		return nil, fmt.Errorf("%w: broker %d: %w", ErrStart, id, err)
	}
	return &Broker{ID: id, DataDir: dataDir, Process: p}, nil
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
	if id < 1 || int(id) > len(c.Brokers) {
		return nil
	}
	return c.Brokers[id-1]
}

// Addrs are the brokers' Kafka addresses, in id order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Brokers))
	for i, b := range c.Brokers {
		out[i] = b.Addr
	}
	return out
}

// Bootstrap is Addrs joined with commas, a client's seed list.
func (c *Cluster) Bootstrap() string { return strings.Join(c.Addrs(), ",") }

// CheckRunning returns an error naming the first broker whose process has
// exited, with how and the end of its output; nil while all run.
func (c *Cluster) CheckRunning() error {
	for _, b := range c.Brokers {
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
// then the ZooKeeper started for the cluster. Stopping twice is stopping
// once. A process that had to be killed, or had exited with an error
// before, makes the error, which wraps ErrStop.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		errs := make([]error, len(c.Brokers))
		var wg sync.WaitGroup
		for i, b := range c.Brokers {
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
