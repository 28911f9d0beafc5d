package topicconfig

import (
	"errors"
	"io"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// ErrInvalidConfig: an unknown topic config key, or a value out of range for
// its key. The error names both.
var ErrInvalidConfig = errors.New("topicconfig: invalid config")

// Plugins builds the flush policies and codecs that topic configs name by
// spec: a built-in ("interval:ms=50", "zstd:level=4") or an external plugin
// (a path, or a name in the plugin directory). *host.Host (plugins/host)
// implements it; BuiltinPlugins knows the built-ins only.
//
// FlushPolicy returns a new policy per call (one per partition). Codec may
// return a shared codec (codecs are safe for concurrent use). What either
// returns may implement io.Closer; whoever only built one to validate a
// config closes it (ClosePlugin).
type Plugins interface {
	FlushPolicy(spec string) (flushpolicy.Policy, error)
	Codec(spec string) (codec.Codec, error)
}

// BuiltinPlugins resolves specs to compiled-in implementations only.
type BuiltinPlugins struct{}

// FlushPolicy implements Plugins with flushpolicy.New.
func (BuiltinPlugins) FlushPolicy(spec string) (flushpolicy.Policy, error) {
	return flushpolicy.New(spec)
}

// Codec implements Plugins with codec.New.
func (BuiltinPlugins) Codec(spec string) (codec.Codec, error) { return codec.New(spec) }

// ClosePlugin closes v if it is an io.Closer (an external plugin's instance).
func ClosePlugin(v any) {
	if c, ok := v.(io.Closer); ok {
		_ = c.Close()
	}
}
