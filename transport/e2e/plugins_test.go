package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/host"
	"github.com/weir-broker/weir/plugins/kgoadapt"
	"github.com/weir-broker/weir/transport/broker"
)

var (
	pluginDirOnce sync.Once
	pluginDir     string
	pluginDirErr  error
)

// examplePlugins builds the example plugins once per test binary into a
// directory laid out as a plugin directory (weir-<kind>-<name>).
func examplePlugins(t *testing.T) string {
	t.Helper()
	pluginDirOnce.Do(func() {
		dir, err := os.MkdirTemp("", "weir-e2e-plugins-")
		if err != nil {
			pluginDirErr = err
			return
		}
		const mod = "github.com/weir-broker/weir/plugins/cmd/"
		cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
			mod+"weir-codec-s2", mod+"weir-flushpolicy-ratelimit")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			pluginDirErr = fmt.Errorf("go build of the example plugins: %w\n%s", err, out.Bytes())
		}
		pluginDir = dir
	})
	if pluginDirErr != nil {
		t.Fatal(pluginDirErr)
	}
	return pluginDir
}

// TestBrokerExternalPlugins: a topic recompresses with an external codec and
// fsyncs by an external flush policy, both plugin subprocesses found in the
// broker's plugin directory. franz-go reads the records back through the same
// codec. When the codec plugin is SIGKILLed, its topic's next produce fails
// with an error, another topic keeps being served, and the plugin comes back
// (the host restarts it) so produces to its topic succeed again.
func TestBrokerExternalPlugins(t *testing.T) {
	dir := examplePlugins(t)
	t.Cleanup(func() { os.RemoveAll(dir) })
	b := startBroker(t, t.TempDir(), func(c *broker.Config) { c.PluginDir = dir })
	addr := b.Addr()
	createTopic(t, addr, "s2", 1, map[string]string{
		"compression.type":  "s2:level=better",
		"weir.flush.policy": "ratelimit:hz=50",
	})
	createTopic(t, addr, "plain", 1, nil)

	msgs := textMessages("s2", 50)
	produceFranz(t, addr, "s2", "snappy", msgs)
	cl := newClient(t, addr)
	for i, batch := range fetchBatches(t, cl, "s2", len(msgs)) {
		h, _ := record.ParseHeader(batch)
		if codec.ID(h.Codec()) != 5 {
			t.Fatalf("stored batch %d under codec %d, want the s2 plugin's id 5", i, h.Codec())
		}
	}
	// The consumer decompresses with the same plugin, through its own host.
	ch := host.New(host.Config{Dir: dir})
	t.Cleanup(func() { ch.Close() })
	s2, err := ch.Codec("s2")
	if err != nil {
		t.Fatal(err)
	}
	recs := consumeFranzWith(t, addr, "s2", len(msgs), kgo.WithDecompressor(kgoadapt.Decompressor(s2)))
	sameMessages(t, "franz-go with the s2 plugin", franzMessages(recs), msgs)

	// Both plugins run as the broker's subprocesses; kill the codec.
	var pid, policyPid int
	for _, p := range b.Node().Plugins().Processes() {
		switch filepath.Base(p.Path) {
		case "weir-codec-s2":
			pid = p.Pid
		case "weir-flushpolicy-ratelimit":
			policyPid = p.Pid
		}
	}
	if policyPid == 0 {
		t.Fatalf("no running weir-flushpolicy-ratelimit among the broker's plugins: %+v", b.Node().Plugins().Processes())
	}
	if pid == 0 {
		t.Fatalf("no running weir-codec-s2 among the broker's plugins: %+v", b.Node().Plugins().Processes())
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	produceFranz(t, addr, "plain", "none", textMessages("plain", 5)) // other topics are unaffected

	// Produce to the s2 topic until it works again: the first attempt may
	// fail (the call that finds the plugin dead), a later one restarts it.
	one := newClient(t, addr, kgo.RecordRetries(0))
	deadline := time.Now().Add(waitTimeout)
	failures := 0
	for {
		err := one.ProduceSync(testContext(t), &kgo.Record{Topic: "s2", Value: []byte("after-restart")}).FirstErr()
		if err == nil {
			break
		}
		failures++
		if time.Now().After(deadline) {
			t.Fatalf("produce to the s2 topic still failing %d attempts after the plugin was killed: %v", failures, err)
		}
	}
	var newPid int
	for _, p := range b.Node().Plugins().Processes() {
		if filepath.Base(p.Path) == "weir-codec-s2" {
			newPid = p.Pid
		}
	}
	if newPid == 0 || newPid == pid {
		t.Fatalf("plugin pid after the restart %d, before %d: want a new process", newPid, pid)
	}
	t.Logf("produce failed %d times before the codec plugin was restarted (pid %d -> %d)", failures, pid, newPid)
}

// consumeFranzWith reads n records of topic from the beginning with extra
// client options.
func consumeFranzWith(t *testing.T, addr, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	cl := newClient(t, addr, opts...)
	ctx, cancel := context.WithTimeout(testContext(t), waitTimeout)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: %d of %d records: %v", topic, len(recs), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("consume %s/%d: %v", topic, p, err) })
		recs = append(recs, fs.Records()...)
	}
	return recs
}
