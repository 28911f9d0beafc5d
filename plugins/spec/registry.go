package spec

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Info describes a registered implementation for listings such as
// `weir flush-policies` and `weir codecs`.
type Info struct {
	Name    string // registry name, e.g. "zstd"
	Usage   string // spec syntax, e.g. "zstd[:level=1..4]"; may be empty
	Example string // a valid spec, e.g. "zstd:level=3"; may be empty
	Summary string // one line: what it does; may be empty
}

// Factory builds an implementation from a spec's parameters (never nil). It
// must reject parameters it does not know and values out of range with an
// error that names the parameter; the registry adds the spec.
type Factory[T any] func(params map[string]string) (T, error)

// Registry maps names to factories of one plugin kind. The zero value is not
// usable; make one with NewRegistry. It is safe for concurrent use.
type Registry[T any] struct {
	kind       string // "codec", used in messages
	errUnknown error  // wrapped when a name is not registered
	errInvalid error  // wrapped when a spec or its parameters are bad

	mu sync.RWMutex
	m  map[string]entry[T]
}

type entry[T any] struct {
	info    Info
	factory Factory[T]
}

// NewRegistry returns an empty registry for a kind of plugin. Errors from
// New wrap errUnknown (name not registered) or errInvalid (bad spec or
// parameters), so each kind keeps its own sentinels.
func NewRegistry[T any](kind string, errUnknown, errInvalid error) *Registry[T] {
	return &Registry[T]{kind: kind, errUnknown: errUnknown, errInvalid: errInvalid, m: make(map[string]entry[T])}
}

// Register adds a factory under info.Name. It is meant for init functions and
// panics if the name is taken, empty or contains ':', ',', '=', '/' or white
// space (the spec syntax reserves them), or if f is nil.
func (r *Registry[T]) Register(info Info, f Factory[T]) {
	name := info.Name
	if name == "" || strings.ContainsAny(name, ":,=/ \t\r\n") {
		panic(fmt.Sprintf("%s: Register: invalid name %q", r.kind, name))
	}
	if f == nil {
		panic(fmt.Sprintf("%s: Register(%q): nil factory", r.kind, name))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[name]; dup {
		panic(fmt.Sprintf("%s: Register called twice for %q", r.kind, name))
	}
	r.m[name] = entry[T]{info: info, factory: f}
}

// Names returns the registered names, sorted.
func (r *Registry[T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.m))
}

// Infos returns the registered descriptions, sorted by name.
func (r *Registry[T]) Infos() []Info {
	r.mu.RLock()
	defer r.mu.RUnlock()
	infos := make([]Info, 0, len(r.m))
	for _, name := range slices.Sorted(maps.Keys(r.m)) {
		infos = append(infos, r.m[name].info)
	}
	return infos
}

// Has reports whether name is registered.
func (r *Registry[T]) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.m[name]
	return ok
}

// New parses s and builds a fresh implementation from the registered factory.
// An unregistered name returns an error wrapping the registry's errUnknown
// that lists the known names; a malformed spec or a parameter the factory
// rejects returns an error wrapping errInvalid (and ErrInvalid for syntax).
func (r *Registry[T]) New(s string) (T, error) {
	var zero T
	sp, err := Parse(s)
	if err != nil {
		if pe, ok := err.(*parseError); ok {
			pe.sentinel = r.errInvalid
			if pe.detail == "no name" {
				pe.detail += " (known: " + strings.Join(r.Names(), ", ") + ")"
			}
		}
		return zero, err
	}
	return r.newSpec(sp, s)
}

// NewSpec is New for a parsed spec.
func (r *Registry[T]) NewSpec(sp Spec) (T, error) { return r.newSpec(sp, sp.String()) }

// newSpec builds from sp; orig is the spec as the user wrote it, for errors.
func (r *Registry[T]) newSpec(sp Spec, orig string) (T, error) {
	var zero T
	r.mu.RLock()
	e, ok := r.m[sp.Name]
	r.mu.RUnlock()
	if !ok {
		return zero, fmt.Errorf("%w %q (known: %s)", r.errUnknown, sp.Name, strings.Join(r.Names(), ", "))
	}
	params := maps.Clone(sp.Params)
	if params == nil {
		params = make(map[string]string)
	}
	v, err := e.factory(params)
	if err != nil {
		return zero, fmt.Errorf("%w %q: %w", r.errInvalid, orig, err)
	}
	return v, nil
}

// Unregister removes name; it exists for tests that register temporary
// implementations.
func (r *Registry[T]) Unregister(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, name)
}

// OnlyParams returns an error naming the first parameter (in key order) that
// is not in known, for factories that reject what they do not understand.
func OnlyParams(params map[string]string, known ...string) error {
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !slices.Contains(known, k) {
			if len(known) == 0 {
				return fmt.Errorf("unknown parameter %q (this one takes none)", k)
			}
			return fmt.Errorf("unknown parameter %q (known: %s)", k, strings.Join(known, ", "))
		}
	}
	return nil
}
