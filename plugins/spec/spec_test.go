package spec

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, name, str string
		params        map[string]string
		path          bool
	}{
		{"zstd", "zstd", "zstd", map[string]string{}, false},
		{" zstd : level = 4 ", "zstd", "zstd:level=4", map[string]string{"level": "4"}, false},
		{"interval:ms=50,x=y", "interval", "interval:ms=50,x=y", map[string]string{"ms": "50", "x": "y"}, false},
		{"b:z=1,a=2", "b", "b:a=2,z=1", map[string]string{"a": "2", "z": "1"}, false}, // String sorts keys
		{"./bin/plugins/weir-codec-s2", "./bin/plugins/weir-codec-s2", "./bin/plugins/weir-codec-s2", map[string]string{}, true},
		{"/opt/p/weir-codec-s2:level=best", "/opt/p/weir-codec-s2", "/opt/p/weir-codec-s2:level=best", map[string]string{"level": "best"}, true},
	} {
		sp, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if sp.Name != tc.name || sp.IsPath() != tc.path || sp.String() != tc.str || len(sp.Params) != len(tc.params) {
			t.Errorf("Parse(%q) = %+v (path %v, %q), want name %q path %v %q", tc.in, sp, sp.IsPath(), sp.String(), tc.name, tc.path, tc.str)
		}
		for k, v := range tc.params {
			if sp.Params[k] != v {
				t.Errorf("Parse(%q).Params[%q] = %q, want %q", tc.in, k, sp.Params[k], v)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "no name",
		":a=1":                 "no name",
		"zstd:":                "no parameters after ':'",
		"zstd:level":           `parameter "level" is not key=value`,
		"zstd:=4":              `parameter "=4" is not key=value`,
		"zstd:level=":          "parameter level has no value",
		"zstd:level=1,":        `parameter "" is not key=value`,
		"zstd:level=1,level=2": "parameter level given twice",
	} {
		_, err := Parse(in)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "invalid spec") {
			t.Errorf("Parse(%q) = %v, want ErrInvalid saying %q", in, err, want)
		}
	}
}

var (
	errUnknown = errors.New("test: unknown")
	errBad     = errors.New("test: invalid spec")
)

func TestRegistry(t *testing.T) {
	r := NewRegistry[string]("test", errUnknown, errBad)
	r.Register(Info{Name: "echo", Summary: "returns its x"}, func(p map[string]string) (string, error) {
		if err := OnlyParams(p, "x"); err != nil {
			return "", err
		}
		return p["x"], nil
	})
	if v, err := r.New("echo:x=hi"); err != nil || v != "hi" {
		t.Fatalf("New(echo:x=hi) = %q, %v", v, err)
	}
	if _, err := r.New("nope"); !errors.Is(err, errUnknown) || !strings.Contains(err.Error(), "known: echo") {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := r.New("echo:y=1"); !errors.Is(err, errBad) || !strings.Contains(err.Error(), `unknown parameter "y"`) {
		t.Errorf("unknown parameter: %v", err)
	}
	if _, err := r.New("echo:"); !errors.Is(err, errBad) || !errors.Is(err, ErrInvalid) {
		t.Errorf("syntax error: %v", err)
	}
	if got := r.Names(); len(got) != 1 || got[0] != "echo" || !r.Has("echo") || r.Infos()[0].Summary != "returns its x" {
		t.Errorf("Names %v, Infos %v", got, r.Infos())
	}
	for _, bad := range []string{"", "a:b", "a,b", "a=b", "a/b", "a b", "echo"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", bad)
				}
			}()
			r.Register(Info{Name: bad}, func(map[string]string) (string, error) { return "", nil })
		}()
	}
	r.Unregister("echo")
	if r.Has("echo") {
		t.Error("Unregister left echo")
	}
}
