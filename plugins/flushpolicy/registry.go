package flushpolicy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Errors returned by New, always wrapped with the offending part of the spec.
var (
	// ErrUnknownPolicy: the spec names no registered policy.
	ErrUnknownPolicy = errors.New("flushpolicy: unknown policy")
	// ErrInvalidSpec: the spec is malformed, or its factory rejected its
	// parameters (unknown, missing, repeated or out-of-range values).
	ErrInvalidSpec = errors.New("flushpolicy: invalid spec")
)

// Factory builds a Policy from a spec's parameters, as split by New: keys and
// values are trimmed and non-empty, and each key appears once. params belongs
// to the factory. A factory must reject parameters it does not know and
// values out of range with an error that names the parameter; New adds the
// spec and wraps it with ErrInvalidSpec.
type Factory func(params map[string]string) (Policy, error)

// Info describes a registered policy for listings such as
// `weir flush-policies`.
type Info struct {
	Name    string // registry name, e.g. "messages"
	Usage   string // spec syntax, e.g. "messages:n=RECORDS"; may be empty
	Example string // a valid spec, e.g. "messages:n=1000"; may be empty
	Summary string // one line: what it does and what a power cut loses; may be empty
}

type entry struct {
	info    Info
	factory Factory
}

var registry struct {
	sync.RWMutex
	m map[string]entry
}

// Register makes a policy available to New under name. It is meant to be
// called from init functions. It panics if name is already registered, if f
// is nil, or if name is empty or contains ':', ',', '=' or white space (which
// the spec syntax reserves).
func Register(name string, f Factory) {
	RegisterInfo(Info{Name: name}, f)
}

// RegisterInfo is Register with a description for listings; it registers
// under info.Name and panics in the same cases.
func RegisterInfo(info Info, f Factory) {
	name := info.Name
	if name == "" || strings.ContainsAny(name, ":,= \t\r\n") {
		panic(fmt.Sprintf("flushpolicy: Register: invalid policy name %q", name))
	}
	if f == nil {
		panic(fmt.Sprintf("flushpolicy: Register(%q): nil factory", name))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[name]; dup {
		panic(fmt.Sprintf("flushpolicy: Register called twice for policy %q", name))
	}
	if registry.m == nil {
		registry.m = make(map[string]entry)
	}
	registry.m[name] = entry{info: info, factory: f}
}

// Names returns the registered policy names, sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	return sortedKeys(registry.m)
}

// Infos returns the descriptions of the registered policies, sorted by name.
func Infos() []Info {
	registry.RLock()
	defer registry.RUnlock()
	infos := make([]Info, 0, len(registry.m))
	for _, name := range sortedKeys(registry.m) {
		infos = append(infos, registry.m[name].info)
	}
	return infos
}

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
func New(spec string) (Policy, error) {
	nameStr, paramStr, hasParams := strings.Cut(spec, ":")
	name := strings.TrimSpace(nameStr)
	if name == "" {
		return nil, fmt.Errorf("%w %q: no policy name (known: %s)", ErrInvalidSpec, spec, joinComma(Names()))
	}
	registry.RLock()
	e, ok := registry.m[name]
	registry.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownPolicy, name, joinComma(Names()))
	}
	params := make(map[string]string)
	if hasParams {
		if strings.TrimSpace(paramStr) == "" {
			return nil, fmt.Errorf("%w %q: no parameters after ':'", ErrInvalidSpec, spec)
		}
		for kv := range strings.SplitSeq(paramStr, ",") {
			k, v, ok := strings.Cut(kv, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch {
			case !ok || k == "":
				return nil, fmt.Errorf("%w %q: parameter %q is not key=value", ErrInvalidSpec, spec, strings.TrimSpace(kv))
			case v == "":
				return nil, fmt.Errorf("%w %q: parameter %s has no value", ErrInvalidSpec, spec, k)
			}
			if _, dup := params[k]; dup {
				return nil, fmt.Errorf("%w %q: parameter %s given twice", ErrInvalidSpec, spec, k)
			}
			params[k] = v
		}
	}
	p, err := e.factory(params)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidSpec, spec, err)
	}
	if p == nil {
		return nil, fmt.Errorf("%w %q: factory for %q returned no policy", ErrInvalidSpec, spec, name)
	}
	return p, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func joinComma(list []string) string { return strings.Join(list, ", ") }
