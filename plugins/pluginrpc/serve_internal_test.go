package pluginrpc

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestParentWatch runs the watch's decision over scripted parent pids: how
// the plugin's parent looks at each check, with the host (pid 100) alive or
// not. A wrapper script between host and plugin, and a stale HostPidEnv, must
// not look like a dead host.
func TestParentWatch(t *testing.T) {
	tests := []struct {
		name      string
		hostEnv   string
		ppids     []int // getppid at start, then at each check
		hostAlive bool
		goneAt    int // index in ppids of the check that finds the host gone; 0: never
		why       string
	}{
		{"the host's child", "100", []int{100, 100, 100, 100}, true, 0, ""},
		{"the host's child, re-parented to init", "100", []int{100, 100, 1}, false, 2, "re-parented from pid 100 to 1"},
		{"re-parented to a subreaper", "100", []int{100, 100, 555}, false, 2, "re-parented from pid 100 to 555"},
		{"under a wrapper", "100", []int{200, 200, 200, 200, 200}, true, 0, ""},
		{"under a wrapper that died", "100", []int{200, 200, 200, 1}, true, 3, "re-parented from pid 200 to 1"},
		{"under a wrapper, the host died", "100", []int{200, 200, 200}, false, 1, "host pid 100 no longer runs"},
		{"orphaned before the watch", "100", []int{1, 1}, false, 1, "started as init's child, not host 100's"},
		{"subreaper adopted it before the watch", "100", []int{555, 555}, false, 1, "host pid 100 no longer runs"},
		{"the host is init (a container)", "1", []int{1, 1, 1, 1}, true, 0, ""},
		{"a stale host pid inherited", "1", []int{300, 300, 300, 300}, true, 0, ""},
		{"no host pid", "", []int{77, 77, 77}, true, 0, ""},
		{"no host pid, re-parented", "junk", []int{77, 77, 1}, true, 2, "re-parented from pid 77 to 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			i := 0
			getppid := func() int {
				p := tc.ppids[min(i, len(tc.ppids)-1)]
				i++
				return p
			}
			alive := func(pid int) bool {
				if pid != 100 && pid != 1 {
					t.Errorf("alive(%d): the watch asked about a pid other than the host's", pid)
				}
				return tc.hostAlive || pid != 100
			}
			w := newParentWatch(tc.hostEnv, getppid, alive)
			for check := 1; check < len(tc.ppids); check++ {
				why, gone := w.gone()
				if gone != (check == tc.goneAt) {
					t.Fatalf("check %d: gone = %v (%s), want gone at check %d", check, gone, why, tc.goneAt)
				}
				if gone {
					if why != tc.why {
						t.Errorf("why = %q, want %q", why, tc.why)
					}
					return
				}
			}
		})
	}
}

// TestParentWatchRun: the loop checks at once and then every interval, and
// reports once.
func TestParentWatchRun(t *testing.T) {
	var calls atomic.Int32
	getppid := func() int {
		if calls.Add(1) <= 3 { // at start, and two checks
			return 42
		}
		return 1
	}
	w := newParentWatch("42", getppid, func(int) bool { return true })
	gone := make(chan string)
	go w.run(time.Millisecond, func(why string) { gone <- why })
	if why := <-gone; why != "re-parented from pid 42 to 1" {
		t.Errorf("why = %q", why)
	}
	if n := calls.Load(); n != 4 {
		t.Fatalf("gone after %d getppid calls, want 4 (start, two checks with the parent, one without)", n)
	}
}

func TestCheckInterval(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"": ParentCheckInterval, "50ms": 50 * time.Millisecond, "0s": ParentCheckInterval,
		"-1s": ParentCheckInterval, "soon": ParentCheckInterval, "2": ParentCheckInterval,
	} {
		if got := checkInterval(in); got != want {
			t.Errorf("checkInterval(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestPluginEnv: the plugin gets the host's environment with our HostPidEnv
// last and only once, whatever the host inherited.
func TestPluginEnv(t *testing.T) {
	got := pluginEnv([]string{"A=1", HostPidEnv + "=1", "B=2", HostPidEnv + "=junk", HostPidEnv + "X=3"}, 4242)
	want := []string{"A=1", "B=2", HostPidEnv + "X=3", HostPidEnv + "=4242"}
	if !slices.Equal(got, want) {
		t.Errorf("pluginEnv = %q, want %q", got, want)
	}
}

type closer struct{ closed int }

func (c *closer) Close() error { c.closed++; return nil }

func TestInstances(t *testing.T) {
	var r Instances[*closer]
	a, b := &closer{}, &closer{}
	ida, idb := r.Add(a), r.Add(b)
	if ida == 0 || idb == 0 || ida == idb {
		t.Fatalf("ids %d and %d: want distinct and non-zero", ida, idb)
	}
	if got, err := r.Get(idb); err != nil || got != b {
		t.Fatalf("Get(%d) = %v, %v", idb, got, err)
	}
	if _, err := r.Get(99); !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("Get(99): %v, want ErrUnknownInstance", err)
	}
	if err := r.Remove(ida); err != nil || a.closed != 1 {
		t.Fatalf("Remove: %v, closed %d times", err, a.closed)
	}
	if err := r.Remove(ida); err != nil || a.closed != 1 {
		t.Fatalf("second Remove: %v, closed %d times", err, a.closed)
	}
	if r.Len() != 1 {
		t.Fatalf("Len = %d, want 1", r.Len())
	}
}
