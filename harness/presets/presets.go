// Package presets holds the experiment specs weir ships, embedded in the
// binary so `weir run --preset NAME` works from any directory, and so a
// preset's run records the exact spec it ran (result.Run.Spec).
//
// Each preset is an ordinary spec file (package spec) in this directory;
// its opening comment says what it is for. Published figures to print
// beside this machine's (Kreps 2014) are the spec's references, so a copy
// of a preset edited by hand keeps them.
package presets

import (
	"bufio"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/weir-broker/weir/harness/spec"
)

//go:embed *.yaml
var files embed.FS

// ErrUnknown: no preset has the name.
var ErrUnknown = errors.New("presets: unknown preset")

// Preset is one embedded spec.
type Preset struct {
	Name    string
	Summary string // the first line of its opening comment, after "NAME: "
	Text    string // the spec file
}

// All returns the presets, sorted by name.
func All() []Preset {
	entries, err := fs.Glob(files, "*.yaml")
	if err != nil {
		panic(err) // a constant, valid pattern
	}
	var out []Preset
	for _, e := range entries {
		b, err := files.ReadFile(e)
		if err != nil {
			panic(err) // embedded files are always readable
		}
		name := strings.TrimSuffix(e, ".yaml")
		out = append(out, Preset{Name: name, Summary: summary(name, string(b)), Text: string(b)})
	}
	slices.SortFunc(out, func(a, b Preset) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Names returns the presets' names, sorted.
func Names() []string {
	var names []string
	for _, p := range All() {
		names = append(names, p.Name)
	}
	return names
}

// Spec parses the named preset.
func Spec(name string) (*spec.Spec, error) {
	for _, p := range All() {
		if p.Name == name {
			s, err := spec.Parse([]byte(p.Text), "")
			if err != nil {
				return nil, fmt.Errorf("presets: %s: %w", name, err)
			}
			return s, nil
		}
	}
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknown, name, strings.Join(Names(), ", "))
}

// summary reads "# NAME: what it is" from the file's first line.
func summary(name, text string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	if !sc.Scan() {
		return ""
	}
	line := strings.TrimSpace(strings.TrimPrefix(sc.Text(), "#"))
	return strings.TrimSpace(strings.TrimPrefix(line, name+":"))
}
