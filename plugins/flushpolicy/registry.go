package flushpolicy

import (
	"errors"
	"fmt"

	"github.com/weir-broker/weir/plugins/spec"
)

// Errors returned by New, always wrapped with the offending part of the spec.
var (
	// ErrUnknownPolicy: the spec names no registered policy.
	ErrUnknownPolicy = errors.New("flushpolicy: unknown policy")
	// ErrInvalidSpec: the spec is malformed, or its factory rejected its
	// parameters (unknown, missing, repeated or out-of-range values).
	ErrInvalidSpec = errors.New("flushpolicy: invalid spec")
	// ErrPluginFailed: an external policy's process failed (handshake, crash,
	// deadline, garbage); the error names the plugin.
	ErrPluginFailed = errors.New("flushpolicy: plugin failed")
)

// Factory builds a Policy from a spec's parameters, as split by New: keys and
// values are trimmed and non-empty, and each key appears once. params belongs
// to the factory. A factory must reject parameters it does not know and
// values out of range with an error that names the parameter; New adds the
// spec and wraps it with ErrInvalidSpec.
type Factory = spec.Factory[Policy]

// Info describes a registered policy for listings such as
// `weir flush-policies`.
type Info = spec.Info

var registry = spec.NewRegistry[Policy]("flushpolicy", ErrUnknownPolicy, ErrInvalidSpec)

// Register makes a policy available to New under name. It is meant to be
// called from init functions. It panics if name is already registered, if f
// is nil, or if name is empty or contains ':', ',', '=', '/' or white space
// (which the spec syntax reserves).
func Register(name string, f Factory) {
	RegisterInfo(Info{Name: name}, f)
}

// RegisterInfo is Register with a description for listings; it registers
// under info.Name and panics in the same cases.
func RegisterInfo(info Info, f Factory) { registry.Register(info, f) }

// Names returns the registered policy names, sorted.
func Names() []string { return registry.Names() }

// Infos returns the descriptions of the registered policies, sorted by name.
func Infos() []Info { return registry.Infos() }

// New builds a fresh Policy from a spec: a registered name alone, or the name,
// a colon and comma-separated key=value parameters. White space around the
// parts is ignored. Examples:
//
//	every-batch
//	never
//	messages:n=1000
//	bytes:n=1048576
//	interval:ms=50
//	interval:d=1.5ms
//
// An unregistered name returns an error wrapping ErrUnknownPolicy that lists
// the known names; any other problem (syntax, unknown or missing parameter,
// non-positive count or duration) returns an error wrapping ErrInvalidSpec
// that names the offending part.
func New(s string) (Policy, error) {
	p, err := registry.New(s)
	if err == nil && p == nil {
		return nil, fmt.Errorf("%w %q: factory returned no policy", ErrInvalidSpec, s)
	}
	return p, err
}
