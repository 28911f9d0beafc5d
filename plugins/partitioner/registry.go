package partitioner

import (
	"fmt"

	"github.com/weir-broker/weir/plugins/spec"
)

// Factory builds a Partitioner from a spec's parameters, as split by New:
// keys and values are trimmed and non-empty, and each key appears once.
// params belongs to the factory. A factory must reject parameters it does not
// know and values out of range with an error that names the parameter; New
// adds the spec and wraps it with ErrInvalidSpec.
type Factory = spec.Factory[Partitioner]

// Info describes a registered partitioner for listings such as
// `weir partitioners`.
type Info = spec.Info

var registry = spec.NewRegistry[Partitioner]("partitioner", ErrUnknownPartitioner, ErrInvalidSpec)

// Register makes a partitioner available to New under name. It is meant to be
// called from init functions. It panics if name is already registered, if f
// is nil, or if name is empty or contains ':', ',', '=', '/' or white space
// (which the spec syntax reserves).
func Register(name string, f Factory) { RegisterInfo(Info{Name: name}, f) }

// RegisterInfo is Register with a description for listings; it registers
// under info.Name and panics in the same cases.
func RegisterInfo(info Info, f Factory) { registry.Register(info, f) }

// Names returns the registered partitioner names, sorted.
func Names() []string { return registry.Names() }

// Infos returns the descriptions of the registered partitioners, sorted by
// name.
func Infos() []Info { return registry.Infos() }

// New builds a fresh Partitioner from a spec: a registered name alone, or the
// name, a colon and comma-separated key=value parameters. Examples:
//
//	murmur2
//	murmur2:seed=42
//	crc32
//	round-robin
//
// An unregistered name returns an error wrapping ErrUnknownPartitioner that
// lists the known names; any other problem (syntax, unknown parameter, bad
// value) returns an error wrapping ErrInvalidSpec that names the offending
// part.
func New(s string) (Partitioner, error) {
	p, err := registry.New(s)
	if err == nil && p == nil {
		return nil, fmt.Errorf("%w %q: factory returned no partitioner", ErrInvalidSpec, s)
	}
	return p, err
}
