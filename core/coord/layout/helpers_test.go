package layout_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/meta"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr fails unless err wraps every sentinel and mentions each text.
func wantErr(t *testing.T, err error, sentinels []error, texts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %v", sentinels)
	}
	for _, s := range sentinels {
		if !errors.Is(err, s) {
			t.Fatalf("error %v: want it to wrap %v", err, s)
		}
	}
	for _, s := range texts {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %v: want it to say %q", err, s)
		}
	}
}

func errs(e ...error) []error { return e }

// fired returns the watch's event if it has one now: memstore delivers
// events as the change commits, so no waiting is needed.
func fired(t *testing.T, ch <-chan coord.Event, typ coord.EventType) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok || ev.Type != typ {
			t.Fatalf("watch delivered %+v (open %v), want %v", ev, ok, typ)
		}
	default:
		t.Fatalf("watch did not fire, want %v", typ)
	}
}

func quiet(t *testing.T, chs ...<-chan coord.Event) {
	t.Helper()
	for i, ch := range chs {
		select {
		case ev := <-ch:
			t.Fatalf("watch %d fired: %+v", i, ev)
		default:
		}
	}
}

// dump is every node below the root: path, data and version, for
// comparing whole trees.
func dump(t *testing.T, s coord.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(path string)
	walk = func(path string) {
		names, _, err := s.Children(t.Context(), path)
		must(t, err)
		for _, n := range names {
			p := coord.Join(path, n)
			data, st, err := s.Get(t.Context(), p)
			must(t, err)
			out[p] = fmt.Sprintf("%s v%d owner %d", data, st.Version, st.EphemeralOwner)
			walk(p)
		}
	}
	walk("/")
	return out
}

func get(t *testing.T, s coord.Store, path string) (string, coord.Stat) {
	t.Helper()
	data, st, err := s.Get(t.Context(), path)
	must(t, err)
	return string(data), st
}

func exists(t *testing.T, s coord.Store, path string) bool {
	t.Helper()
	ok, _, err := s.Exists(t.Context(), path)
	must(t, err)
	return ok
}

// cluster is a memstore server with n sessions.
func cluster(n int) (*memstore.Server, []*memstore.Store) {
	srv := memstore.NewServer()
	ss := make([]*memstore.Store, n)
	for i := range ss {
		ss[i] = srv.Connect()
	}
	return srv, ss
}

func ctx(t *testing.T) context.Context { return t.Context() }

func topic(name string, asg ...[]int32) *meta.Topic {
	return &meta.Topic{Name: name, ID: [16]byte{1, byte(len(name))}, Assignment: asg,
		Configs: map[string]string{"min.insync.replicas": "2"}}
}
