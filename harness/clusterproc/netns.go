package clusterproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The network of a netns cluster. Each cluster holds a slot K (0..255)
// for its life, and everything it creates is named after K:
//
//	bridge            weirbr<K>    10.213.K.1/24, root namespace (ZooKeeper listens here)
//	namespace         weir-<K>-b<I>              broker I's
//	veth, host end    weir<K>h<I>  on the bridge (LinkDown sets it down)
//	veth, inside      weir<K>n<I>  10.213.K.(10+I)/24, default route via 10.213.K.1
//	lock              /run/weir-netns/<K>.lock   flock, held while the slot is in use
//
// A slot is claimed by taking its lock without waiting (a taken one is
// skipped: another cluster, perhaps of another process, holds it) and
// then deleting whatever carries its names: the lock dies with its holder,
// so anything left under a free slot's names is a crashed run's. A slot
// whose subnet an interface or route of the machine already uses is
// skipped too. The names stay within Linux's 15 bytes ("weir255h64").

// ErrNetns: netns networking cannot be set up here (not root, no ip
// command, no namespaces), or an ip command failed; the error names the
// command and quotes its output.
var ErrNetns = errors.New("clusterproc: netns networking")

const (
	netnsLockDir = "/run/weir-netns"
	netnsSlots   = 256
	// NetnsKafkaPort, NetnsSecurePort (Config.SecureProtocol's listener)
	// and NetnsMetricsPort are the ports a broker of a netns cluster
	// listens on, at its own address: the namespace is its alone, so they
	// are always free.
	NetnsKafkaPort   = 9092
	NetnsSecurePort  = 9093
	NetnsMetricsPort = 9644
)

// network is one netns cluster's bridge, namespaces and veth pairs.
type network struct {
	slot int
	lock *os.File // flocked; closing it frees the slot
}

func (n *network) bridge() string            { return fmt.Sprintf("weirbr%d", n.slot) }
func (n *network) bridgeIP() string          { return fmt.Sprintf("10.213.%d.1", n.slot) }
func (n *network) subnet() string            { return fmt.Sprintf("10.213.%d.0/24", n.slot) }
func (n *network) namespace(id int32) string { return fmt.Sprintf("%s%d", n.nsPrefix(), id) }
func (n *network) hostVeth(id int32) string  { return fmt.Sprintf("%s%d", n.vethPrefix(), id) }
func (n *network) innerVeth(id int32) string { return fmt.Sprintf("weir%dn%d", n.slot, id) }
func (n *network) brokerIP(id int32) string  { return fmt.Sprintf("10.213.%d.%d", n.slot, 10+id) }
func (n *network) nsPrefix() string          { return fmt.Sprintf("weir-%d-b", n.slot) }
func (n *network) vethPrefix() string        { return fmt.Sprintf("weir%dh", n.slot) }

// netnsUsable checks what can be checked without creating anything: root,
// and the ip command.
func netnsUsable() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root (euid %d)", ErrNetns, os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: %w (install iproute2)", ErrNetns, err)
	}
	return nil
}

// setupNetwork claims a slot and creates the bridge and, for brokers
// 1..brokers, a namespace and a veth pair each. On error nothing of it is
// left.
func setupNetwork(brokers int) (*network, error) {
	if err := netnsUsable(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(netnsLockDir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNetns, err)
	}
	var skipped []string
	for slot := range netnsSlots {
		n, why, err := claimSlot(slot)
		if err != nil {
			return nil, err
		}
		if n == nil {
			if why != "" {
				skipped = append(skipped, why)
			}
			continue
		}
		if err := n.create(brokers); err != nil {
			return nil, errors.Join(err, n.close())
		}
		return n, nil
	}
	return nil, fmt.Errorf("%w: no free slot of %d (%s)", ErrNetns, netnsSlots, strings.Join(skipped, "; "))
}

// claimSlot takes slot's lock and clears a crashed run's leftovers. It
// returns nil, and why when it is not merely held by another cluster, if
// the slot cannot be had.
func claimSlot(slot int) (_ *network, why string, _ error) {
	path := filepath.Join(netnsLockDir, fmt.Sprintf("%d.lock", slot))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrNetns, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, "", nil
		}
		return nil, "", fmt.Errorf("%w: flock %s: %w", ErrNetns, path, err)
	}
	n := &network{slot: slot, lock: f}
	if err := n.purge(); err != nil {
		return nil, "", errors.Join(err, n.release())
	}
	if clash := n.subnetInUse(); clash != "" {
		return nil, fmt.Sprintf("%s: %s", n.subnet(), clash), n.release()
	}
	return n, "", nil
}

// subnetInUse names an address or route of the machine inside the slot's
// subnet ("" when there is none).
func (n *network) subnetInUse() string {
	_, subnet, _ := net.ParseCIDR(n.subnet())
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && subnet.Contains(ipn.IP) {
				return "address " + ipn.String()
			}
		}
	}
	if out, err := ip("-4", "route", "show", "root", n.subnet()); err == nil && out != "" {
		return "route " + out
	}
	return ""
}

// create makes the bridge, then each broker's namespace and veth pair.
func (n *network) create(brokers int) error {
	br := n.bridge()
	steps := [][]string{
		{"link", "add", br, "type", "bridge"},
		{"addr", "add", n.bridgeIP() + "/24", "dev", br},
		{"link", "set", br, "up"},
	}
	for i := 1; i <= brokers; i++ {
		id := int32(i)
		ns, host, inner := n.namespace(id), n.hostVeth(id), n.innerVeth(id)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", host, "type", "veth", "peer", "name", inner, "netns", ns},
			[]string{"link", "set", host, "master", br, "up"},
			[]string{"-n", ns, "addr", "add", n.brokerIP(id) + "/24", "dev", inner},
			[]string{"-n", ns, "link", "set", inner, "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			// ZooKeeper on another address of this machine (an external
			// one) is reached through the bridge too.
			[]string{"-n", ns, "route", "add", "default", "via", n.bridgeIP()},
		)
	}
	for _, args := range steps {
		if _, err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

// setLink sets the host end of broker id's veth pair up or down.
func (n *network) setLink(id int32, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	_, err := ip("link", "set", n.hostVeth(id), state)
	return err
}

// purge deletes everything named after the slot: the host ends of the
// veth pairs (each takes its peer along), the namespaces, the bridge.
func (n *network) purge() error {
	var errs []error
	del := func(args ...string) {
		if _, err := ip(args...); err != nil {
			errs = append(errs, err)
		}
	}
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNetns, err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Name(), n.vethPrefix()) {
			del("link", "del", l.Name())
		}
	}
	namespaces, err := Namespaces()
	if err != nil {
		return err
	}
	for _, ns := range namespaces {
		if strings.HasPrefix(ns, n.nsPrefix()) {
			del("netns", "del", ns)
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.bridge())); err == nil {
		del("link", "del", n.bridge())
	}
	return errors.Join(errs...)
}

// close deletes the network and frees its slot.
func (n *network) close() error {
	return errors.Join(n.purge(), n.release())
}

func (n *network) release() error {
	if err := n.lock.Close(); err != nil {
		return fmt.Errorf("%w: release slot %d: %w", ErrNetns, n.slot, err)
	}
	return nil
}

// Namespaces lists the network namespaces `ip netns list` shows, by name.
func Namespaces() ([]string, error) {
	out, err := ip("netns", "list")
	if err != nil {
		return nil, err
	}
	var names []string
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// ip runs the ip command; its error wraps ErrNetns and names the command,
// how it exited and what it said.
func ip(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		return text, fmt.Errorf("%w: ip %s: %w: %s", ErrNetns, strings.Join(args, " "), err, text)
	}
	return text, nil
}
