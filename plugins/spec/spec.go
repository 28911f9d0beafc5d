// Package spec parses plugin specs and keeps registries of built-in plugin
// factories, one registry per plugin kind (codec, partitioner, flush policy).
//
// A spec names an implementation and its parameters in one string, the form
// used in config files, topic configs, harness specs and CLI flags:
//
//	zstd                         a registered built-in, default parameters
//	zstd:level=3                 a built-in with parameters
//	interval:ms=50,x=y           several parameters, comma-separated
//	./bin/plugins/weir-codec-s2  an external plugin by path (contains a '/')
//	/opt/p/weir-codec-s2:level=2 an external plugin by path, with parameters
//
// White space around names, keys and values is ignored. Keys appear once.
// Names of built-ins never contain '/', so a '/' marks a path.
package spec

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ErrInvalid: the spec is malformed (no name, a parameter that is not
// key=value, an empty value, a key given twice).
var ErrInvalid = errors.New("invalid spec")

// parseError is a Parse failure: the spec and what is wrong with it, so a
// registry can restate it under its own sentinel.
type parseError struct {
	sentinel error // ErrInvalid, or a registry's own sentinel
	spec     string
	detail   string
}

func (e *parseError) Error() string {
	return fmt.Sprintf("%v %q: %s", e.sentinel, e.spec, e.detail)
}

// Unwrap lets errors.Is find both the sentinel and ErrInvalid.
func (e *parseError) Unwrap() []error { return []error{e.sentinel, ErrInvalid} }

func invalid(s, format string, args ...any) error {
	return &parseError{sentinel: ErrInvalid, spec: s, detail: fmt.Sprintf(format, args...)}
}

// Spec is a parsed spec.
type Spec struct {
	// Name is the built-in's name, or the path when IsPath.
	Name string
	// Params holds the parameters; it is never nil.
	Params map[string]string
}

// IsPath reports whether the spec names an external plugin by path.
func (s Spec) IsPath() bool { return strings.Contains(s.Name, "/") }

// String formats the spec back: name, then the parameters sorted by key.
func (s Spec) String() string {
	if len(s.Params) == 0 {
		return s.Name
	}
	var b strings.Builder
	b.WriteString(s.Name)
	for i, k := range slices.Sorted(maps.Keys(s.Params)) {
		if i == 0 {
			b.WriteByte(':')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + s.Params[k])
	}
	return b.String()
}

// Parse splits a spec into its name and parameters. Errors wrap ErrInvalid
// and quote the spec and the offending part.
func Parse(s string) (Spec, error) {
	nameStr, paramStr, hasParams := strings.Cut(s, ":")
	name := strings.TrimSpace(nameStr)
	if name == "" {
		return Spec{}, invalid(s, "no name")
	}
	params := make(map[string]string)
	if hasParams {
		if strings.TrimSpace(paramStr) == "" {
			return Spec{}, invalid(s, "no parameters after ':'")
		}
		for kv := range strings.SplitSeq(paramStr, ",") {
			k, v, ok := strings.Cut(kv, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch {
			case !ok || k == "":
				return Spec{}, invalid(s, "parameter %q is not key=value", strings.TrimSpace(kv))
			case v == "":
				return Spec{}, invalid(s, "parameter %s has no value", k)
			}
			if _, dup := params[k]; dup {
				return Spec{}, invalid(s, "parameter %s given twice", k)
			}
			params[k] = v
		}
	}
	return Spec{Name: name, Params: params}, nil
}
