package main

// `weir cluster up|down|status`: a local cluster for development, N
// `weir broker` processes (this binary) on one ZooKeeper, all on loopback,
// all under one directory:
//
//	DIR/cluster.json       what is running: pids, addresses, logs (cluster_state.go)
//	DIR/zookeeper/         ZooKeeper's zoo.cfg, data/ and zookeeper.log (unless --zookeeper)
//	DIR/broker-N/          broker N's --data-dir
//	DIR/broker-N.log       broker N's log
//
// The processes are detached (setsid), so they outlive `up` and a
// terminal's Ctrl-C; `down` stops them by the pids in cluster.json, after
// checking that each pid still runs the command line `up` started (so a
// recycled pid is never signalled).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cluster/zk/zkserver"
	"github.com/weir-broker/weir/harness/clusterproc"
)

// Errors of the cluster commands.
var (
	// errClusterUp: DIR already has a cluster with live processes.
	errClusterUp = errors.New("a cluster is already up")
	// errNoCluster: DIR has no cluster.json.
	errNoCluster = errors.New("no cluster")
	// errPortTaken: a port the cluster needs is in use.
	errPortTaken = errors.New("port taken")
	// errClusterStart: a process did not start or the cluster did not
	// become ready; everything started was stopped.
	errClusterStart = errors.New("cluster did not start")
	// errNotRunning: status found processes of the cluster not running.
	errNotRunning = errors.New("not running")
)

// clusterEnv is what the cluster commands take from their surroundings,
// so tests can change it.
type clusterEnv struct {
	zookeeper zkserver.Install // where ZooKeeper is (Debian's package)
	weir      func() (string, error)
}

func newClusterCmd() *cobra.Command {
	return newClusterCmdWith(clusterEnv{zookeeper: zkserver.Debian(), weir: os.Executable})
}

func newClusterCmdWith(env clusterEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Start, stop and inspect a local cluster: ZooKeeper and N brokers on loopback",
		Long: `Run a local cluster for development: a ZooKeeper (Debian's zookeeper
package) and N ` + "`weir broker`" + ` processes on 127.0.0.1, with their data and logs
under one directory. The processes outlive the command; ` + "`weir cluster down`" + `
stops them. DIR/cluster.json records what runs.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newClusterUpCmd(env), newClusterDownCmd(), newClusterStatusCmd())
	return cmd
}

// upSettings are `weir cluster up`'s flags.
type upSettings struct {
	dir             string
	brokers         int
	zookeeper       string
	zookeeperPort   int
	basePort        int
	metricsBasePort int
	timeout         time.Duration
	brokerFlags     []string // after --
}

const clusterUpLong = `Start a local cluster in DIR and return once it serves: unless --zookeeper
is given, a ZooKeeper on 127.0.0.1 with its data in DIR/zookeeper; then
--brokers ` + "`weir broker`" + ` processes with --broker-id 1..N, --data-dir
DIR/broker-N, --listen 127.0.0.1:<--base-port + N - 1>, logging to
DIR/broker-N.log. It waits until every broker answers a Kafka Metadata
request listing all N brokers and a controller, then prints the bootstrap
list, the log files and how to stop the cluster.

Flags after -- go to every broker (see ` + "`weir broker --help`" + `). Data in DIR is
kept across down and up. up refuses to start when DIR has a cluster up or
a port is taken; if it fails midway, it stops everything it started.`

const clusterUpExample = `  weir cluster up --dir ./local-cluster
  weir cluster up --dir /tmp/c5 --brokers 5 --base-port 19092 -- --default-partitions 6
  weir cluster up --dir ./local-cluster --zookeeper zk1:2181/weir`

func newClusterUpCmd(env clusterEnv) *cobra.Command {
	s := upSettings{brokers: 3, basePort: 9092, metricsBasePort: 9644, timeout: time.Minute}
	cmd := &cobra.Command{
		Use:     "up --dir DIR [flags] [-- broker flags]",
		Short:   "Start ZooKeeper and N brokers in DIR, and wait until they serve",
		Long:    clusterUpLong,
		Example: clusterUpExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash > 0 || (dash < 0 && len(args) > 0) {
				return fmt.Errorf("%w: unexpected arguments %q (broker flags go after --)", errBadFlag, args)
			}
			s.brokerFlags = args
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return clusterUp(ctx, env, s, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&s.dir, "dir", "", "`dir`ectory holding the cluster's data, logs and cluster.json (required)")
	f.IntVar(&s.brokers, "brokers", s.brokers, "number of brokers, with ids 1..`n`")
	f.StringVar(&s.zookeeper, "zookeeper", "", "use this ZooKeeper, `host:port[,host:port][/chroot]`, instead of starting one (default: start one in DIR/zookeeper)")
	f.IntVar(&s.zookeeperPort, "zookeeper-port", 0, "client `port` of the ZooKeeper started on 127.0.0.1 (default 0: a free port)")
	f.IntVar(&s.basePort, "base-port", s.basePort, "Kafka `port` of broker 1; broker N listens on base-port + N - 1")
	f.IntVar(&s.metricsBasePort, "metrics-base-port", s.metricsBasePort, "metrics `port` of broker 1; broker N serves /metrics on metrics-base-port + N - 1 (0: free ports)")
	f.DurationVar(&s.timeout, "timeout", s.timeout, "how long to wait for ZooKeeper and every broker to serve")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func (s *upSettings) validate() error {
	if s.brokers < 1 {
		return fmt.Errorf("%w: --brokers %d: want 1 or more", errBadFlag, s.brokers)
	}
	if s.basePort < 1 || s.basePort+s.brokers-1 > 65535 {
		return fmt.Errorf("%w: --base-port %d: ports %d-%d out of range", errBadFlag, s.basePort, s.basePort, s.basePort+s.brokers-1)
	}
	if s.metricsBasePort < 0 || s.metricsBasePort+s.brokers-1 > 65535 {
		return fmt.Errorf("%w: --metrics-base-port %d out of range", errBadFlag, s.metricsBasePort)
	}
	if s.metricsBasePort > 0 && s.metricsBasePort < s.basePort+s.brokers && s.basePort < s.metricsBasePort+s.brokers {
		return fmt.Errorf("%w: --metrics-base-port %d overlaps the Kafka ports %d-%d", errBadFlag, s.metricsBasePort, s.basePort, s.basePort+s.brokers-1)
	}
	if s.zookeeperPort < 0 || s.zookeeperPort > 65535 {
		return fmt.Errorf("%w: --zookeeper-port %d out of range", errBadFlag, s.zookeeperPort)
	}
	if s.zookeeper != "" && s.zookeeperPort != 0 {
		return fmt.Errorf("%w: --zookeeper-port is for the ZooKeeper up starts; not with --zookeeper", errBadFlag)
	}
	if s.timeout <= 0 {
		return fmt.Errorf("%w: --timeout %v: want more than 0", errBadFlag, s.timeout)
	}
	return nil
}

// clusterUp starts the cluster. Every process it starts is recorded in
// cluster.json as soon as it runs, so a `down` can stop it even if up
// itself is killed; if up fails, it stops them and removes the file.
func clusterUp(ctx context.Context, env clusterEnv, s upSettings, stdout, stderr io.Writer) (err error) {
	t0 := time.Now()
	if err := s.validate(); err != nil {
		return err
	}
	dir, err := filepath.Abs(s.dir)
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	if err := refuseLiveCluster(dir, s.dir, stderr); err != nil {
		return err
	}
	if s.zookeeper == "" {
		if err := env.zookeeper.Check(); err != nil {
			return fmt.Errorf("%w (or give --zookeeper host:port)", err)
		}
	}
	weir, err := env.weir()
	if err != nil {
		return fmt.Errorf("the weir binary to run brokers: %w", err)
	}
	ports, err := s.ports()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	st := &clusterState{Dir: dir}
	if err := st.create(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var started []*startedBroker
	var zks *zkserver.Server
	defer func() {
		if err == nil {
			return
		}
		fmt.Fprintf(stderr, "weir cluster up: failed; stopping what was started\n")
		if stopErr := stopStarted(started, zks); stopErr != nil {
			err = fmt.Errorf("%w\n%w (%s kept for weir cluster down)", err, stopErr, st.path())
			return
		}
		_ = os.Remove(st.path())
	}()

	st.ZooKeeper = s.zookeeper
	if s.zookeeper == "" {
		zks, err = zkserver.Start(ctx, zkserver.Config{Dir: filepath.Join(dir, "zookeeper"), Port: s.zookeeperPort,
			Install: env.zookeeper, Detach: true, StartTimeout: s.timeout})
		if err != nil {
			log := filepath.Join(dir, "zookeeper", "zookeeper.log")
			return fmt.Errorf("%w: ZooKeeper: %w; last lines of %s:\n%s", errClusterStart, err, log, zkserver.TailLog(log, 20))
		}
		st.ZooKeeper = zks.Addr
		st.Processes = append(st.Processes, clusterProc{Name: "zookeeper", Pid: zks.Pid(), Addr: zks.Addr,
			Log: zks.LogPath, Match: zks.ConfigPath})
		if err := st.save(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "zookeeper: serving on %s (%.1fs)\n", zks.Addr, time.Since(t0).Seconds())
	}

	for i := 1; i <= s.brokers; i++ {
		b, err := startBroker(weir, dir, i, st.ZooKeeper, ports[i-1], s.brokerFlags)
		if err != nil {
			return err
		}
		started = append(started, b)
		st.Processes = append(st.Processes, b.proc)
		if err := st.save(); err != nil {
			return err
		}
	}
	var addrs []string
	for _, b := range started {
		addrs = append(addrs, b.proc.Addr)
	}
	st.Bootstrap = strings.Join(addrs, ",")
	if err := st.save(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "brokers: started %d, waiting until each lists all of them\n", s.brokers)
	if err := waitBrokersReady(ctx, started); err != nil {
		return err
	}

	rel := func(p string) string {
		return filepath.Join(s.dir, strings.TrimPrefix(p, dir+string(filepath.Separator)))
	}
	fmt.Fprintf(stdout, "cluster up in %s: %d brokers on ZooKeeper %s, ready in %.1fs\n", s.dir, s.brokers, st.ZooKeeper, time.Since(t0).Seconds())
	fmt.Fprintf(stdout, "bootstrap: %s\n", st.Bootstrap)
	fmt.Fprintln(stdout, "logs:")
	for _, p := range st.Processes {
		fmt.Fprintf(stdout, "  %-10s %s\n", p.Name, rel(p.Log))
	}
	fmt.Fprintf(stdout, "stop it:   %s cluster down --dir %s\n", os.Args[0], s.dir)
	return nil
}

// brokerPorts are one broker's Kafka and metrics ports.
type brokerPorts struct{ kafka, metrics int }

// ports checks that every port the cluster needs is free now, and picks
// the free metrics ports.
func (s *upSettings) ports() ([]brokerPorts, error) {
	var taken []string
	check := func(port int, what string) {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			taken = append(taken, fmt.Sprintf("%d (%s)", port, what))
			return
		}
		ln.Close()
	}
	if s.zookeeper == "" && s.zookeeperPort != 0 {
		check(s.zookeeperPort, "ZooKeeper")
	}
	var free []int
	if s.metricsBasePort == 0 {
		var err error
		if free, err = zkserver.FreePorts(s.brokers); err != nil {
			return nil, err
		}
	}
	var ports []brokerPorts
	for i := 1; i <= s.brokers; i++ {
		p := brokerPorts{kafka: s.basePort + i - 1}
		check(p.kafka, fmt.Sprintf("broker %d --listen", i))
		if free != nil {
			p.metrics = free[i-1]
		} else {
			p.metrics = s.metricsBasePort + i - 1
			check(p.metrics, fmt.Sprintf("broker %d --metrics-listen", i))
		}
		ports = append(ports, p)
	}
	if len(taken) > 0 {
		return nil, fmt.Errorf("%w on 127.0.0.1: %s; is another broker running? choose other ports with --base-port / --metrics-base-port",
			errPortTaken, strings.Join(taken, ", "))
	}
	return ports, nil
}

// refuseLiveCluster fails if DIR's cluster.json names a live process; a
// cluster.json whose processes are all gone is removed.
func refuseLiveCluster(dir, given string, stderr io.Writer) error {
	st, err := readClusterState(dir)
	if errors.Is(err, errNoCluster) {
		return nil
	}
	if err != nil {
		return err
	}
	var live []string
	for _, p := range st.Processes {
		if p.alive() {
			live = append(live, fmt.Sprintf("%s pid %d", p.Name, p.Pid))
		}
	}
	if len(live) > 0 {
		return fmt.Errorf("%w in %s (%s): stop it first with `weir cluster down --dir %s`", errClusterUp, given, strings.Join(live, ", "), given)
	}
	fmt.Fprintf(stderr, "weir cluster up: %s names no live process (a cluster that died); replacing it\n", st.path())
	if err := os.Remove(st.path()); err != nil {
		return fmt.Errorf("stale cluster.json: %w", err)
	}
	return nil
}

// startedBroker is a broker process this `up` started (and may reap).
type startedBroker struct {
	id      int
	proc    clusterProc
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process has exited
	exitErr error         // set before exited is closed
}

func startBroker(weir, dir string, id int, zookeeper string, ports brokerPorts, extra []string) (*startedBroker, error) {
	name := fmt.Sprintf("broker-%d", id)
	dataDir := filepath.Join(dir, name)
	logPath := filepath.Join(dir, name+".log")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.kafka))
	metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.metrics))
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errClusterStart, name, err)
	}
	defer logf.Close() // the child has its own descriptor
	fmt.Fprintf(logf, "%s broker %d at %s\n", startMarker, id, time.Now().Format(time.RFC3339Nano))
	args := append([]string{"broker"}, clusterproc.MemberArgs(int32(id), zookeeper)...)
	args = append(append(args, "--data-dir", dataDir, "--listen", addr, "--metrics-listen", metrics), extra...)
	cmd := exec.Command(weir, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errClusterStart, name, err)
	}
	b := &startedBroker{id: id, cmd: cmd, exited: make(chan struct{}),
		proc: clusterProc{Name: name, Pid: cmd.Process.Pid, Addr: addr, Metrics: metrics, Log: logPath, Match: dataDir}}
	go func() {
		b.exitErr = cmd.Wait()
		close(b.exited)
	}()
	return b, nil
}

// startMarker opens what each start of a broker appends to its log.
const startMarker = "==== weir cluster up: starting"

// lastStart returns the last n lines a broker logged since its last start.
func lastStart(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	if i := bytes.LastIndex(data, []byte(startMarker)); i >= 0 {
		data = data[i:]
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitBrokersReady waits until every broker lists all of them and a
// controller (clusterproc.WaitFormed), a broker exits, or ctx ends.
func waitBrokersReady(ctx context.Context, brokers []*startedBroker) error {
	members := make([]clusterproc.Member, len(brokers))
	for i, b := range brokers {
		members[i] = clusterproc.Member{ID: int32(b.id), Addr: b.proc.Addr, Exited: b.exited, Describe: func() string {
			select {
			case <-b.exited:
				return fmt.Sprintf("exit: %v; its log, %s, ends:\n%s", b.exitErr, b.proc.Log, lastStart(b.proc.Log, 20))
			default:
				return "see " + b.proc.Log
			}
		}}
	}
	if err := clusterproc.WaitFormed(ctx, members); err != nil {
		return fmt.Errorf("%w: %w", errClusterStart, err)
	}
	return nil
}

// stopStarted stops what a failed up started: brokers, then ZooKeeper.
func stopStarted(brokers []*startedBroker, zks *zkserver.Server) error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, b := range brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A broker that never served has nothing to flush; one still
			// waiting for ZooKeeper does not act on SIGTERM.
			if _, err := stopProc(b.proc, 5*time.Second); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if zks != nil {
		errs = append(errs, zks.Stop())
	}
	return errors.Join(errs...)
}

// downSettings are `weir cluster down`'s flags.
type downSettings struct {
	dir     string
	purge   bool
	timeout time.Duration
}

func newClusterDownCmd() *cobra.Command {
	s := downSettings{timeout: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "down --dir DIR",
		Short: "Stop the cluster in DIR: the brokers, then ZooKeeper",
		Long: `Stop the cluster that ` + "`weir cluster up`" + ` started in DIR: each broker gets SIGTERM
(a graceful shutdown: its logs are flushed and sealed) and SIGKILL if it has
not exited after --timeout; then ZooKeeper the same way. cluster.json is
removed; the data is kept for the next up, unless --purge.`,
		Example: `  weir cluster down --dir ./local-cluster
  weir cluster down --dir ./local-cluster --purge`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return clusterDown(s, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&s.dir, "dir", "", "`dir`ectory of the cluster (required)")
	f.BoolVar(&s.purge, "purge", false, "also remove the cluster's data and logs, and DIR if that leaves it empty")
	f.DurationVar(&s.timeout, "timeout", s.timeout, "how long each process has to exit after SIGTERM before SIGKILL")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func clusterDown(s downSettings, stdout io.Writer) error {
	dir, err := filepath.Abs(s.dir)
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	st, err := readClusterState(dir)
	if errors.Is(err, errNoCluster) && s.purge {
		return purgeCluster(dir, s.dir, stdout)
	}
	if err != nil {
		return err
	}
	// Brokers first (concurrently), so they leave ZooKeeper cleanly.
	results := make([]string, len(st.Processes))
	errs := make([]error, len(st.Processes))
	var wg sync.WaitGroup
	for i, p := range st.Processes {
		if p.Name == "zookeeper" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = stopProc(p, s.timeout)
		}()
	}
	wg.Wait()
	for i, p := range st.Processes {
		if p.Name == "zookeeper" {
			results[i], errs[i] = stopProc(p, s.timeout)
		}
	}
	for _, zookeeper := range []bool{false, true} { // in the order they were stopped
		for i, p := range st.Processes {
			if (p.Name == "zookeeper") == zookeeper && errs[i] == nil {
				fmt.Fprintf(stdout, "%-10s pid %-8d %s\n", p.Name, p.Pid, results[i])
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w (%s kept)", err, st.path())
	}
	if err := os.Remove(st.path()); err != nil {
		return fmt.Errorf("remove cluster.json: %w", err)
	}
	if s.purge {
		return purgeCluster(dir, s.dir, stdout)
	}
	fmt.Fprintf(stdout, "cluster in %s is down; its data is kept (--purge removes it)\n", s.dir)
	return nil
}

// purgeCluster removes what up creates in DIR, then DIR if it is empty:
// never anything else that was there.
func purgeCluster(dir, given string, stdout io.Writer) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "%s does not exist: nothing to purge\n", given)
		return nil
	}
	if err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	var removed int
	for _, e := range entries {
		if !isClusterEntry(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("purge: %w", err)
		}
		removed++
	}
	if rest, err := os.ReadDir(dir); err == nil && len(rest) == 0 {
		if err := os.Remove(dir); err != nil {
			return fmt.Errorf("purge: %w", err)
		}
		fmt.Fprintf(stdout, "removed %s\n", given)
		return nil
	}
	fmt.Fprintf(stdout, "removed the cluster's %d entries from %s; other files there are left\n", removed, given)
	return nil
}

// isClusterEntry reports whether a name in DIR is one up creates.
func isClusterEntry(name string) bool {
	if name == "zookeeper" || name == clusterStateFile {
		return true
	}
	n, ok := strings.CutPrefix(name, "broker-")
	if !ok {
		return false
	}
	n = strings.TrimSuffix(n, ".log")
	id, err := strconv.Atoi(n)
	return err == nil && id > 0 && strconv.Itoa(id) == n
}

func newClusterStatusCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "status --dir DIR",
		Short: "Print which processes of the cluster in DIR are alive and serving",
		Long: `Print each process of the cluster in DIR (from its cluster.json) with its pid,
address and state: serving (alive, and its port answers: ZooKeeper's ruok,
a broker's Kafka port accepts a connection), running (alive, not answering)
or dead. Exits with an error when a process is not running.`,
		Example: "  weir cluster status --dir ./local-cluster",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return clusterStatus(dir, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "`dir`ectory of the cluster (required)")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func clusterStatus(given string, stdout io.Writer) error {
	dir, err := filepath.Abs(given)
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	st, err := readClusterState(dir)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPID\tADDRESS\tSTATE\tLOG")
	var dead []string
	for _, p := range st.Processes {
		state := p.state()
		if state == "dead" {
			dead = append(dead, p.Name)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", p.Name, p.Pid, p.Addr, state, p.Log)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Processes) == 0 || st.Processes[0].Name != "zookeeper" {
		fmt.Fprintf(stdout, "zookeeper: %s (not started by weir cluster up)\n", st.ZooKeeper)
	}
	fmt.Fprintf(stdout, "bootstrap: %s\n", st.Bootstrap)
	if len(dead) > 0 {
		return fmt.Errorf("%s: %w: %s", given, errNotRunning, strings.Join(dead, ", "))
	}
	return nil
}
