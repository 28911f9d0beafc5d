package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/weir-broker/weir/cluster/zk/zkserver"
)

// clusterStateFile is the name of DIR's record of a running cluster.
const clusterStateFile = "cluster.json"

// clusterState is DIR/cluster.json: what `weir cluster up` started.
type clusterState struct {
	Dir       string        `json:"dir"`       // absolute
	ZooKeeper string        `json:"zookeeper"` // the brokers' --zookeeper
	Bootstrap string        `json:"bootstrap"` // the brokers' addresses, comma-separated
	Processes []clusterProc `json:"processes"` // ZooKeeper first (when up started it), then the brokers
}

// clusterProc is one process of the cluster.
type clusterProc struct {
	Name    string `json:"name"` // zookeeper, broker-N
	Pid     int    `json:"pid"`
	Addr    string `json:"addr"`              // client address
	Metrics string `json:"metrics,omitempty"` // a broker's /metrics address
	Log     string `json:"log"`
	// Match is an argument of the process's command line (ZooKeeper's
	// zoo.cfg, a broker's data dir), to tell it from another process that
	// got the pid later.
	Match string `json:"match"`
}

func (st *clusterState) path() string { return filepath.Join(st.Dir, clusterStateFile) }

// create writes cluster.json, failing if it exists: two ups in one DIR
// cannot both pass.
func (st *clusterState) create() error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(st.path(), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w in %s: %s appeared meanwhile", errClusterUp, st.Dir, clusterStateFile)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", clusterStateFile, err)
	}
	_, err = f.Write(append(data, '\n'))
	return errors.Join(err, f.Close())
}

// save replaces cluster.json (write a temporary file, rename).
func (st *clusterState) save() error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := st.path() + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("%s: %w", clusterStateFile, err)
	}
	if err := os.Rename(tmp, st.path()); err != nil {
		return fmt.Errorf("%s: %w", clusterStateFile, err)
	}
	return nil
}

// readClusterState reads DIR/cluster.json; without one, the error wraps
// errNoCluster.
func readClusterState(dir string) (*clusterState, error) {
	path := filepath.Join(dir, clusterStateFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s (no %s)", errNoCluster, dir, clusterStateFile)
	}
	if err != nil {
		return nil, err
	}
	var st clusterState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	st.Dir = dir
	return &st, nil
}

// alive reports whether the pid runs, and runs this process's command line
// (a zombie's is empty). Without /proc, only whether the pid exists.
func (p clusterProc) alive() bool {
	if p.Pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid))
	if err != nil {
		if _, err := os.Stat("/proc/self/cmdline"); err == nil {
			return false // there is a /proc, and the pid is not in it
		}
		return syscall.Kill(p.Pid, 0) == nil
	}
	return slices.Contains(strings.Split(string(cmdline), "\x00"), p.Match)
}

// state is serving, running or dead (see `weir cluster status --help`).
func (p clusterProc) state() string {
	if !p.alive() {
		return "dead"
	}
	if p.Name == "zookeeper" {
		if reply, err := zkserver.FourLetterWord(p.Addr, "ruok", time.Second); err == nil && reply == "imok" {
			return "serving"
		}
		return "running"
	}
	conn, err := net.DialTimeout("tcp", p.Addr, time.Second)
	if err != nil {
		return "running"
	}
	conn.Close()
	return "serving"
}

// stopProc sends SIGTERM, waits up to timeout for the process to go, then
// SIGKILL. It says what happened.
func stopProc(p clusterProc, timeout time.Duration) (string, error) {
	if !p.alive() {
		return "was not running", nil
	}
	if err := syscall.Kill(p.Pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return "", fmt.Errorf("%s (pid %d): SIGTERM: %w", p.Name, p.Pid, err)
	}
	t0 := time.Now()
	if waitGone(p, timeout) {
		return fmt.Sprintf("stopped (%.1fs)", time.Since(t0).Seconds()), nil
	}
	if err := syscall.Kill(p.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return "", fmt.Errorf("%s (pid %d): SIGKILL: %w", p.Name, p.Pid, err)
	}
	if waitGone(p, 10*time.Second) {
		return fmt.Sprintf("killed: still running %v after SIGTERM", timeout), nil
	}
	return "", fmt.Errorf("%s (pid %d) survived SIGKILL for 10 s", p.Name, p.Pid)
}

// waitGone polls until the process is no longer alive or timeout passes.
func waitGone(p clusterProc, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for p.alive() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}
