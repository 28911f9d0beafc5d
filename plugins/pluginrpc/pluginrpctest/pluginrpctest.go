// Package pluginrpctest connects a kind's RPC shim to itself in process, so
// conformance suites can run every built-in through the shim quickly and
// under the race detector.
//
// Both ends are go-plugin's real ones: plugin.Serve in its test mode (no
// subprocess, no handshake on stdout: it hands over a reattach config
// instead) with pluginrpc's gRPC server, and a plugin.Client that reattaches
// to it with pluginrpc's dial options. go-plugin's lighter helper,
// plugin.TestPluginGRPCConn, would do as well but for one thing: it builds
// its gRPC server with the default 4 MiB message limit, which a batch (and
// the codec suite's 8 MiB decompression bomb) exceeds, while real plugins
// serve with pluginrpc.MaxMessageSize.
package pluginrpctest

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"

	"github.com/weir-broker/weir/plugins/pluginrpc"
)

// Connect serves p (a kind's plugin-side Plugin, e.g. codecrpc.Plugin(f))
// under the plugin name kind and returns a Supervisor connected to it, named
// name in errors. Both ends stop when the test ends. cfg.Path is set to name;
// cfg's other fields (CallTimeout, ...) apply as usual.
func Connect(t testing.TB, kind, name string, p plugin.Plugin, cfg pluginrpc.Config) *pluginrpc.Supervisor {
	t.Helper()
	ps := plugin.PluginSet{kind: p}
	ctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *plugin.ReattachConfig, 1)
	served := make(chan struct{})
	go plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: pluginrpc.Handshake,
		Plugins:         ps,
		GRPCServer:      pluginrpc.NewGRPCServer,
		Logger:          hclog.NewNullLogger(),
		Test:            &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: reattach, CloseCh: served},
	})
	var rc *plugin.ReattachConfig
	select {
	case rc = <-reattach:
	case <-served:
		cancel()
		t.Fatal("pluginrpctest: plugin.Serve ended before serving")
	}
	// A runner that ends the in-process server instead of killing a pid
	// (which here would be the test's own).
	r := &server{cancel: cancel, served: served}
	rc.ReattachFunc = func() (runner.AttachedRunner, error) { return r, nil }
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  pluginrpc.Handshake,
		Plugins:          ps,
		Reattach:         rc,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
		GRPCDialOptions:  pluginrpc.DialOptions(),
	})
	cp, err := client.Client()
	if err != nil {
		client.Kill()
		cancel()
		t.Fatalf("pluginrpctest: connecting to the in-process plugin: %v", err)
	}
	cfg.Path = name
	sup, err := pluginrpc.Connect(cp, cfg)
	if err != nil {
		client.Kill()
		cancel()
		t.Fatalf("pluginrpc.Connect: %v", err)
	}
	t.Cleanup(func() {
		_ = sup.Close()
		client.Kill()
		cancel()
		<-served
	})
	return sup
}

// server is the runner.AttachedRunner of the in-process plugin server.
type server struct {
	cancel context.CancelFunc
	served chan struct{}
}

func (s *server) Wait(context.Context) error {
	<-s.served
	return nil
}

func (s *server) Kill(context.Context) error {
	s.cancel()
	<-s.served
	return nil
}

func (s *server) ID() string { return "in-process" }

func (s *server) PluginToHost(n, a string) (string, string, error) { return n, a, nil }
func (s *server) HostToPlugin(n, a string) (string, string, error) { return n, a, nil }
