package partitioner

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var builtinNames = []string{"crc32", "fnv1a", "murmur2", "random", "round-robin", "sticky"}

func TestNamesAndInfos(t *testing.T) {
	if got := Names(); !slices.Equal(got, builtinNames) {
		t.Fatalf("Names() = %q, want %q", got, builtinNames)
	}
	for i, info := range Infos() {
		if info.Name != builtinNames[i] {
			t.Errorf("Infos()[%d].Name = %q, want %q", i, info.Name, builtinNames[i])
		}
		if info.Summary == "" || info.Usage == "" || strings.Contains(info.Summary, "\n") {
			t.Errorf("%s: want a one-line Summary and a Usage, got %+v", info.Name, info)
		}
		p, err := New(info.Example)
		if err != nil {
			t.Errorf("%s: Example %q: %v", info.Name, info.Example, err)
			continue
		}
		if got := fmt.Sprint(p); got != info.Example {
			t.Errorf("%s: New(%q).String() = %q, want the example back", info.Name, info.Example, got)
		}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		spec    string
		target  error
		wantMsg string
	}{
		{"nope", ErrUnknownPartitioner,
			`partitioner: unknown partitioner "nope" (known: crc32, fnv1a, murmur2, random, round-robin, sticky)`},
		{"", ErrInvalidSpec,
			`partitioner: invalid spec "": no name (known: crc32, fnv1a, murmur2, random, round-robin, sticky)`},
		{"murmur2:", ErrInvalidSpec, `partitioner: invalid spec "murmur2:": no parameters after ':'`},
		{"murmur2:seed=-1", ErrInvalidSpec,
			`partitioner: invalid spec "murmur2:seed=-1": seed="-1": want a whole number from 0 to 18446744073709551615 (e.g. "murmur2:seed=42")`},
		{"sticky:seed=18446744073709551616", ErrInvalidSpec,
			`partitioner: invalid spec "sticky:seed=18446744073709551616": seed="18446744073709551616": want a whole number from 0 to 18446744073709551615 (e.g. "sticky:seed=42")`},
		{"crc32:seed=0x10", ErrInvalidSpec,
			`partitioner: invalid spec "crc32:seed=0x10": seed="0x10": want a whole number from 0 to 18446744073709551615 (e.g. "crc32:seed=42")`},
		{"random:sead=1", ErrInvalidSpec,
			`partitioner: invalid spec "random:sead=1": unknown parameter "sead" (known: seed)`},
		{"round-robin:seed=1", ErrInvalidSpec,
			`partitioner: invalid spec "round-robin:seed=1": unknown parameter "seed" (this one takes none)`},
		{"fnv1a:seed=1,seed=2", ErrInvalidSpec,
			`partitioner: invalid spec "fnv1a:seed=1,seed=2": parameter seed given twice`},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			p, err := New(tc.spec)
			if err == nil || p != nil {
				t.Fatalf("New(%q) = %v, %v; want only an error", tc.spec, p, err)
			}
			if !errors.Is(err, tc.target) || err.Error() != tc.wantMsg {
				t.Errorf("New(%q) error\n got: %v\nwant: %s (wrapping %v)", tc.spec, err, tc.wantMsg, tc.target)
			}
		})
	}
}

type fixedPartitioner struct{ params map[string]string }

func (fixedPartitioner) Partition(_ context.Context, req Request) (Response, error) {
	return Response{Partitions: make([]int32, len(req.Keys))}, nil
}

func TestRegister(t *testing.T) {
	const name = "test-fixed"
	Register(name, func(params map[string]string) (Partitioner, error) {
		if params["nil"] != "" {
			return nil, nil
		}
		return &fixedPartitioner{params}, nil
	})
	t.Cleanup(func() { registry.Unregister(name) })
	p, err := New(name + ": a = 1")
	if err != nil || !reflect.DeepEqual(p.(*fixedPartitioner).params, map[string]string{"a": "1"}) {
		t.Fatalf("New = %#v, %v", p, err)
	}
	if _, err := New(name + ":nil=1"); !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), "returned no partitioner") {
		t.Errorf("nil partitioner came back as %v", err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `Register called twice for "murmur2"`) {
			t.Errorf("registering murmur2 again: recover() = %v", r)
		}
	}()
	Register("murmur2", func(map[string]string) (Partitioner, error) { return NewRoundRobin(), nil })
}

// FuzzNew: New never panics, errors wrap one of the two sentinels, and a
// partitioner it builds prints a spec that builds an equal one.
func FuzzNew(f *testing.F) {
	for _, s := range []string{"", ":", "murmur2", "murmur2:seed=1", "crc32:seed=18446744073709551615",
		"round-robin", "sticky:seed=01", "random:seed= 5 ", "fnv1a:x=1", "murmur2:seed=1\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := New(s)
		if err != nil {
			if p != nil || !errors.Is(err, ErrUnknownPartitioner) && !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("New(%q) = %v, %v", s, p, err)
			}
			return
		}
		q, err := New(fmt.Sprint(p))
		if err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("New(%q) = %v; rebuilt from its String: %v, %v", s, p, q, err)
		}
	})
}

func ExampleNew() {
	p, err := New("murmur2:seed=42")
	if err != nil {
		panic(err)
	}
	resp, err := p.Partition(context.Background(), Request{
		Topic: "orders", Partitions: 12,
		Keys: [][]byte{[]byte("customer-17"), []byte("customer-17"), []byte("customer-4")},
	})
	fmt.Println(p, resp.Partitions, err)
	// Output:
	// murmur2:seed=42 [4 4 1] <nil>
}
