package acl

import (
	"cmp"
	"slices"
	"strings"
)

// Set is an immutable set of bindings, indexed for Authorize: per resource
// type, the entries of each literal name and of each prefix. Methods that
// change it return a new Set sharing what did not change.
type Set struct {
	literal  map[ResourceType]map[string][]Entry
	prefixed map[ResourceType]map[string][]Entry
	// prefixLens are the distinct lengths of each type's prefixes, sorted:
	// the only prefixes of a name worth looking up.
	prefixLens map[ResourceType][]int
	n          int
}

// NewSet returns the set of bs (duplicates kept once).
func NewSet(bs ...Binding) *Set {
	s := &Set{literal: map[ResourceType]map[string][]Entry{}, prefixed: map[ResourceType]map[string][]Entry{}}
	byPattern := map[Pattern][]Entry{}
	for _, b := range bs {
		byPattern[b.Pattern] = append(byPattern[b.Pattern], b.Entry)
	}
	for p, es := range byPattern {
		s.put(p, es)
	}
	s.prefixLens = map[ResourceType][]int{}
	for t := range s.prefixed {
		s.indexLens(t)
	}
	return s
}

// indexLens sets prefixLens[t] from the prefixes of t.
func (s *Set) indexLens(t ResourceType) {
	var lens []int
	for name := range s.prefixed[t] {
		lens = append(lens, len(name))
	}
	slices.Sort(lens)
	s.prefixLens[t] = slices.Compact(lens)
}

func (s *Set) index(p PatternType) map[ResourceType]map[string][]Entry {
	if p == PatternPrefixed {
		return s.prefixed
	}
	return s.literal
}

// put sets p's entries (sorted, deduplicated; none removes p) in s, which
// must not be shared yet.
func (s *Set) put(p Pattern, es []Entry) {
	es = sortEntries(es)
	idx := s.index(p.Pattern)
	byName := idx[p.Type]
	s.n -= len(byName[p.Name])
	if len(es) == 0 {
		delete(byName, p.Name)
		return
	}
	if byName == nil {
		byName = map[string][]Entry{}
		idx[p.Type] = byName
	}
	byName[p.Name] = es
	s.n += len(es)
}

func sortEntries(es []Entry) []Entry {
	es = slices.Clone(es)
	slices.SortFunc(es, compareEntries)
	return slices.Compact(es)
}

func compareEntries(a, b Entry) int {
	return cmp.Or(strings.Compare(a.Principal, b.Principal), strings.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission))
}

// Len is the number of bindings.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// Entries returns p's entries, sorted (nil for none). The slice is shared:
// do not modify it.
func (s *Set) Entries(p Pattern) []Entry {
	if s == nil {
		return nil
	}
	return s.index(p.Pattern)[p.Type][p.Name]
}

// With returns a set in which p has exactly the entries es (none: p has no
// bindings), sharing the rest with s.
func (s *Set) With(p Pattern, es []Entry) *Set {
	t := &Set{literal: maps1(s.literal), prefixed: maps1(s.prefixed), n: s.Len(), prefixLens: map[ResourceType][]int{}}
	idx := t.index(p.Pattern)
	idx[p.Type] = copyMap(idx[p.Type])
	t.put(p, es)
	if s != nil {
		for rt, lens := range s.prefixLens {
			t.prefixLens[rt] = lens
		}
	}
	if p.Pattern == PatternPrefixed {
		t.indexLens(p.Type)
	}
	return t
}

func maps1(m map[ResourceType]map[string][]Entry) map[ResourceType]map[string][]Entry {
	c := make(map[ResourceType]map[string][]Entry, len(m)+1)
	for k, v := range m {
		c[k] = v
	}
	return c
}

func copyMap(m map[string][]Entry) map[string][]Entry {
	c := make(map[string][]Entry, len(m)+1)
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Patterns returns every pattern with bindings, sorted by type, pattern
// type and name.
func (s *Set) Patterns() []Pattern {
	if s == nil {
		return nil
	}
	var ps []Pattern
	for pt, idx := range map[PatternType]map[ResourceType]map[string][]Entry{PatternLiteral: s.literal, PatternPrefixed: s.prefixed} {
		for t, byName := range idx {
			for name := range byName {
				ps = append(ps, Pattern{Type: t, Pattern: pt, Name: name})
			}
		}
	}
	slices.SortFunc(ps, func(a, b Pattern) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Pattern, b.Pattern), strings.Compare(a.Name, b.Name))
	})
	return ps
}

// Bindings returns every binding, sorted by pattern then entry.
func (s *Set) Bindings() []Binding {
	var bs []Binding
	for _, p := range s.Patterns() {
		for _, e := range s.Entries(p) {
			bs = append(bs, Binding{Pattern: p, Entry: e})
		}
	}
	return bs
}

// Select returns the bindings f matches, sorted.
func (s *Set) Select(f Filter) []Binding {
	var bs []Binding
	for _, p := range s.Patterns() {
		if !f.MatchesPattern(p) {
			continue
		}
		for _, e := range s.Entries(p) {
			if f.MatchesEntry(e) {
				bs = append(bs, Binding{Pattern: p, Entry: e})
			}
		}
	}
	return bs
}

// matching appends to dst the entries of every pattern that applies to r:
// its literal name, the literal wildcard, and each prefix of its name.
func (s *Set) matching(r Resource, dst [][]Entry) [][]Entry {
	if s == nil {
		return dst
	}
	lit := s.literal[r.Type]
	if es, ok := lit[r.Name]; ok {
		dst = append(dst, es)
	}
	if r.Name != WildcardResource {
		if es, ok := lit[WildcardResource]; ok {
			dst = append(dst, es)
		}
	}
	if pre := s.prefixed[r.Type]; len(pre) > 0 {
		for _, n := range s.prefixLens[r.Type] {
			if n > len(r.Name) {
				break
			}
			if es, ok := pre[r.Name[:n]]; ok {
				dst = append(dst, es)
			}
		}
	}
	return dst
}
