package flushpolicy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNewValid(t *testing.T) {
	tests := []struct {
		spec string
		want Policy
	}{
		{"every-batch", EveryBatch()},
		{"never", Never()},
		{"messages:n=1000", EveryMessages(1000)},
		{"messages:n=1", EveryMessages(1)},
		{"bytes:n=1048576", EveryBytes(1 << 20)},
		{"bytes:n=9223372036854775807", EveryBytes(1<<63 - 1)},
		{"interval:ms=50", EveryInterval(50 * time.Millisecond)},
		{"interval:d=50ms", EveryInterval(50 * time.Millisecond)},
		{"interval:d=1.5ms", EveryInterval(1500 * time.Microsecond)},
		{"interval:d=2s", EveryInterval(2 * time.Second)},
		{"interval:d=1ns", EveryInterval(time.Nanosecond)},
		{"  messages : n = 7 ", EveryMessages(7)}, // white space around parts
		{"interval: ms=10", EveryInterval(10 * time.Millisecond)},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			p, err := New(tc.spec)
			if err != nil {
				t.Fatalf("New(%q): %v", tc.spec, err)
			}
			if p != tc.want {
				t.Errorf("New(%q) = %#v, want %#v", tc.spec, p, tc.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		spec    string
		target  error
		wantMsg string // exact error text
	}{
		{"x", ErrUnknownPolicy,
			`flushpolicy: unknown policy "x" (known: adaptive, bytes, every-batch, interval, messages, never)`},
		{"x:n=1", ErrUnknownPolicy,
			`flushpolicy: unknown policy "x" (known: adaptive, bytes, every-batch, interval, messages, never)`},
		{"Never", ErrUnknownPolicy, // names are case-sensitive
			`flushpolicy: unknown policy "Never" (known: adaptive, bytes, every-batch, interval, messages, never)`},
		{"", ErrInvalidSpec,
			`flushpolicy: invalid spec "": no name (known: adaptive, bytes, every-batch, interval, messages, never)`},
		{":n=1", ErrInvalidSpec,
			`flushpolicy: invalid spec ":n=1": no name (known: adaptive, bytes, every-batch, interval, messages, never)`},
		{"messages:", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages:": no parameters after ':'`},
		{"messages", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages": missing parameter n (e.g. "messages:n=1000")`},
		{"messages:n", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages:n": parameter "n" is not key=value`},
		{"messages:=5", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages:=5": parameter "=5" is not key=value`},
		{"messages:n=", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages:n=": parameter n has no value`},
		{"messages:n=1,", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages:n=1,": parameter "" is not key=value`},
		{"messages:n=1,n=2", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages:n=1,n=2": parameter n given twice`},
		{"messages:n=0", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages:n=0": n="0": want a positive whole number`},
		{"messages:n=-3", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages:n=-3": n="-3": want a positive whole number`},
		{"messages:n=1k", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages:n=1k": n="1k": want a positive whole number`},
		{"messages:n=9223372036854775808", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages:n=9223372036854775808": n="9223372036854775808": want a positive whole number`},
		{"messages:m=5", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages:m=5": unknown parameter "m" (known: n)`},
		{"messages:n=5,x=1", ErrInvalidSpec,
			`flushpolicy: invalid spec "messages:n=5,x=1": unknown parameter "x" (known: n)`},
		{"bytes:n=0", ErrInvalidSpec,
			`flushpolicy: invalid spec "bytes:n=0": n="0": want a positive whole number`},
		{"bytes", ErrInvalidSpec,
			`flushpolicy: invalid spec "bytes": missing parameter n (e.g. "bytes:n=1048576")`},
		{"every-batch:n=1", ErrInvalidSpec,
			`flushpolicy: invalid spec "every-batch:n=1": unknown parameter "n" (this one takes none)`},
		{"never:ms=5", ErrInvalidSpec,
			`flushpolicy: invalid spec "never:ms=5": unknown parameter "ms" (this one takes none)`},
		{"interval", ErrInvalidSpec,
			`flushpolicy: invalid spec "interval": missing parameter ms or d (e.g. "interval:ms=50")`},
		{"interval:ms=0", ErrInvalidSpec,
			`flushpolicy: invalid spec "interval:ms=0": ms="0": want a positive whole number of milliseconds (or d=DURATION, e.g. d=1.5ms)`},
		{"interval:ms=1.5", ErrInvalidSpec,
			`flushpolicy: invalid spec "interval:ms=1.5": ms="1.5": want a positive whole number of milliseconds (or d=DURATION, e.g. d=1.5ms)`},
		{"interval:ms=9223372036855", ErrInvalidSpec,
			`flushpolicy: invalid spec "interval:ms=9223372036855": ms="9223372036855": too long`},
		{"interval:d=0s", ErrInvalidSpec,
			`flushpolicy: invalid spec "interval:d=0s": d="0s": want a positive duration such as 50ms or 1.5ms`},
		{"interval:d=-5ms", ErrInvalidSpec,
			`flushpolicy: invalid spec "interval:d=-5ms": d="-5ms": want a positive duration such as 50ms or 1.5ms`},
		{"interval:d=50", ErrInvalidSpec, // a duration needs its unit
			`flushpolicy: invalid spec "interval:d=50": d="50": want a positive duration such as 50ms or 1.5ms`},
		{"interval:ms=5,d=5ms", ErrInvalidSpec,
			`flushpolicy: invalid spec "interval:ms=5,d=5ms": give ms or d, not both`},
		{"interval:n=5", ErrInvalidSpec,
			`flushpolicy: invalid spec "interval:n=5": unknown parameter "n" (known: ms, d)`},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			p, err := New(tc.spec)
			if err == nil {
				t.Fatalf("New(%q) = %v, want an error", tc.spec, p)
			}
			if p != nil {
				t.Errorf("New(%q) returned a policy %v with its error", tc.spec, p)
			}
			if !errors.Is(err, tc.target) {
				t.Errorf("New(%q) error %q does not wrap %q", tc.spec, err, tc.target)
			}
			if err.Error() != tc.wantMsg {
				t.Errorf("New(%q) error\n got: %s\nwant: %s", tc.spec, err, tc.wantMsg)
			}
		})
	}
}

func TestStringRoundTrips(t *testing.T) {
	policies := []Policy{
		EveryBatch(), Never(),
		EveryMessages(1), EveryMessages(1000), EveryMessages(1<<63 - 1),
		EveryBytes(1), EveryBytes(1 << 20),
		EveryInterval(time.Nanosecond), EveryInterval(1500 * time.Microsecond),
		EveryInterval(50 * time.Millisecond), EveryInterval(time.Hour),
		EveryInterval(1<<63 - 1),
	}
	for _, p := range policies {
		s, ok := p.(fmt.Stringer)
		if !ok {
			t.Fatalf("%#v does not implement fmt.Stringer", p)
		}
		spec := s.String()
		t.Run(spec, func(t *testing.T) {
			q, err := New(spec)
			if err != nil {
				t.Fatalf("New(%q) of %#v's String: %v", spec, p, err)
			}
			if q != p {
				t.Errorf("New(%q) = %#v, want %#v", spec, q, p)
			}
		})
	}
}

func TestStringForms(t *testing.T) {
	tests := []struct {
		p    Policy
		want string
	}{
		{EveryBatch(), "every-batch"},
		{Never(), "never"},
		{EveryMessages(1000), "messages:n=1000"},
		{EveryBytes(1048576), "bytes:n=1048576"},
		{EveryInterval(50 * time.Millisecond), "interval:ms=50"},
		{EveryInterval(2 * time.Second), "interval:ms=2000"},
		{EveryInterval(1500 * time.Microsecond), "interval:d=1.5ms"},
	}
	for _, tc := range tests {
		if got := fmt.Sprint(tc.p); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

func TestNamesAndInfos(t *testing.T) {
	want := []string{"adaptive", "bytes", "every-batch", "interval", "messages", "never"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %q, want %q", got, want)
	}
	infos := Infos()
	if len(infos) != len(want) {
		t.Fatalf("Infos() has %d entries, want %d", len(infos), len(want))
	}
	for i, info := range infos {
		if info.Name != want[i] {
			t.Errorf("Infos()[%d].Name = %q, want %q", i, info.Name, want[i])
		}
		if info.Summary == "" || info.Usage == "" || strings.Contains(info.Summary, "\n") {
			t.Errorf("%s: want a one-line Summary and a Usage, got %+v", info.Name, info)
		}
		p, err := New(info.Example)
		if err != nil {
			t.Errorf("%s: Example %q does not parse: %v", info.Name, info.Example, err)
			continue
		}
		if got := fmt.Sprint(p); got != info.Example {
			t.Errorf("%s: New(%q).String() = %q, want the example back", info.Name, info.Example, got)
		}
	}
}

// paramsPolicy hands the params its factory got back to the test.
type paramsPolicy struct{ params map[string]string }

func (paramsPolicy) Appended(context.Context, AppendInfo) (Decision, error) {
	return Decision{}, nil
}
func (paramsPolicy) Flushed(context.Context, FlushInfo) error { return nil }

func TestRegister(t *testing.T) {
	name := "test-register-" + t.Name()
	Register(name, func(params map[string]string) (Policy, error) {
		if params["fail"] != "" {
			return nil, fmt.Errorf("fail=%q: asked to fail", params["fail"])
		}
		if params["nil"] != "" {
			return nil, nil
		}
		return &paramsPolicy{params: params}, nil
	})
	t.Cleanup(func() { unregister(name) })

	if !slices.Contains(Names(), name) {
		t.Fatalf("Names() = %q, missing %q", Names(), name)
	}
	p, err := New(name + ":a=1, b = two")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	got := p.(*paramsPolicy).params
	if len(got) != 2 || got["a"] != "1" || got["b"] != "two" {
		t.Errorf("factory got params %q, want map[a:1 b:two]", got)
	}
	p, err = New(name)
	if err != nil || len(p.(*paramsPolicy).params) != 0 {
		t.Errorf("New(%q) = %v, %v; want a policy with no params", name, p, err)
	}

	_, err = New(name + ":fail=yes")
	if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), `fail="yes": asked to fail`) {
		t.Errorf("factory error came back as %v, want it wrapped in ErrInvalidSpec", err)
	}
	_, err = New(name + ":nil=yes")
	if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), "returned no policy") {
		t.Errorf("nil policy came back as %v, want ErrInvalidSpec", err)
	}

	// Infos lists a plain Register with only its name.
	for _, info := range Infos() {
		if info.Name == name && (info != Info{Name: name}) {
			t.Errorf("Infos() entry for %q = %+v, want only the name", name, info)
		}
	}
}

func TestRegisterPanics(t *testing.T) {
	ok := func(map[string]string) (Policy, error) { return Never(), nil }
	tests := []struct {
		name    string
		regName string
		f       Factory
		want    string
	}{
		{"duplicate built-in", "never", ok, `Register called twice for "never"`},
		{"empty name", "", ok, `invalid name ""`},
		{"colon", "a:b", ok, `invalid name "a:b"`},
		{"comma", "a,b", ok, `invalid name "a,b"`},
		{"equals", "a=b", ok, `invalid name "a=b"`},
		{"space", "a b", ok, `invalid name "a b"`},
		{"nil factory", "test-nil-factory", nil, `Register("test-nil-factory"): nil factory`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if r == nil || !strings.Contains(msg, tc.want) {
					t.Errorf("Register(%q) panicked with %v, want %q", tc.regName, r, tc.want)
				}
			}()
			Register(tc.regName, tc.f)
		})
	}
	// A panicking Register leaves the registry unchanged.
	if got := Names(); !slices.Equal(got, []string{"adaptive", "bytes", "every-batch", "interval", "messages", "never"}) {
		t.Errorf("Names() after failed Registers = %q", got)
	}
}

func TestRegisterDuplicateOfNewName(t *testing.T) {
	name := "test-dup"
	f := func(map[string]string) (Policy, error) { return Never(), nil }
	Register(name, f)
	t.Cleanup(func() { unregister(name) })
	defer func() {
		if recover() == nil {
			t.Errorf("second Register(%q) did not panic", name)
		}
	}()
	Register(name, f)
}

// unregister removes a test registration, so other tests see only built-ins.
func unregister(name string) {
	registry.Unregister(name)
}

// FuzzNew: New never panics, errors wrap one of the two sentinels, and a
// policy it builds prints a spec that builds an equal policy.
func FuzzNew(f *testing.F) {
	for _, s := range []string{
		"", ":", ",", "=", "every-batch", "never", "messages:n=1000", "bytes:n=1048576",
		"interval:ms=50", "interval:d=1.5ms", "messages:n=1,n=2", "interval:ms=5,d=5ms",
		"messages:n=0", "messages:n=-1", "interval:d=1e9h", "messages:n=1000\x00garbage",
		"adaptive", "adaptive:budget=2ms", "adaptive:budget=1ms,max=1ms", "adaptive:max=0s",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		p, err := New(spec)
		if err != nil {
			if p != nil {
				t.Fatalf("New(%q) returned a policy with error %v", spec, err)
			}
			if !errors.Is(err, ErrUnknownPolicy) && !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("New(%q) error %v wraps neither sentinel", spec, err)
			}
			return
		}
		s := fmt.Sprint(p)
		q, err := New(s)
		if err != nil || !reflect.DeepEqual(q, p) { // DeepEqual: adaptive is a pointer
			t.Fatalf("New(%q) = %v; its String %q rebuilt %v, %v", spec, p, s, q, err)
		}
	})
}

func ExampleNew() {
	p, err := New("messages:n=1000")
	if err != nil {
		panic(err)
	}
	d, _ := p.Appended(context.Background(), AppendInfo{Messages: 400, UnflushedMessages: 1200})
	fmt.Println(p, d.Flush)

	_, err = New("messages:n=0")
	fmt.Println(err)
	// Output:
	// messages:n=1000 true
	// flushpolicy: invalid spec "messages:n=0": n="0": want a positive whole number
}
