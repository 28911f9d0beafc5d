package errorfs

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
)

type call struct {
	op   Op
	path string
}

// recorder is an Injector that fails nothing and records every question.
type recorder struct {
	mu    sync.Mutex
	calls []call
}

func (r *recorder) MaybeError(op Op, path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{op, path})
	return nil
}

// workload does every kind of operation once or more and returns the errors it met. It goes on after an error
// whenever it can, so one injected failure does not hide the operations after it.
func workload(fs vfs.FS) []error {
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	note(fs.MkdirAll("/d", 0o755))
	f, err := fs.Create("/d/0000.log")
	note(err)
	if f != nil {
		_, err = f.Write([]byte("hello"))
		note(err)
		_, err = f.Write([]byte("world"))
		note(err)
		note(f.Sync())
		note(f.Truncate(5))
		_, err = f.Size()
		note(err)
		_, err = f.ReadAt(make([]byte, 1), 0)
		note(err)
		note(f.Close())
	}
	note(fs.SyncDir("/d"))
	r, err := fs.Open("/d/0000.log")
	note(err)
	if r != nil {
		note(r.Close())
	}
	_, err = fs.Stat("/d/0000.log")
	note(err)
	_, err = fs.List("/d")
	note(err)
	note(fs.Rename("/d/0000.log", "/d/0001.log"))
	note(fs.Remove("/d/0001.log"))
	note(fs.RemoveAll("/d"))
	return errs
}

func TestFailAtEveryIndex(t *testing.T) {
	rec := &recorder{}
	if errs := workload(Wrap(vfs.NewMem(), rec)); len(errs) > 0 {
		t.Fatalf("workload fails without injection: %v", errs)
	}
	probe := &FailAt{K: -1}
	workload(Wrap(vfs.NewMem(), probe))
	n := probe.Count()
	if n != len(rec.calls) || probe.Fired() {
		t.Fatalf("probe counted %d operations (fired %v); recorder saw %d", n, probe.Fired(), len(rec.calls))
	}
	seen := map[Op]bool{}
	for _, c := range rec.calls {
		seen[c.op] = true
	}
	for op := range numOps {
		if !seen[op] {
			t.Errorf("workload never does %s", op)
		}
	}
	for k := range n {
		inj := &FailAt{K: k}
		errs := workload(Wrap(vfs.NewMem(), inj))
		var injected []*Error
		for _, err := range errs {
			var e *Error
			if errors.As(err, &e) {
				injected = append(injected, e)
			}
		}
		if len(injected) != 1 || !inj.Fired() {
			t.Errorf("K=%d: %d injected errors (fired %v), want exactly 1: %v", k, len(injected), inj.Fired(), errs)
			continue
		}
		if got, want := (call{injected[0].Op, injected[0].Path}), rec.calls[k]; got != want {
			t.Errorf("K=%d failed %v, want %v", k, got, want)
		}
		if !errors.Is(injected[0], ErrInjected) {
			t.Errorf("K=%d: %v does not wrap ErrInjected", k, injected[0])
		}
	}
}

func TestFailAtOpsAndSticky(t *testing.T) {
	tests := []struct {
		name  string
		inj   *FailAt
		fails []bool // outcome of writes 0..4
	}{
		{"never", &FailAt{K: -1, Ops: []Op{OpWrite}}, []bool{false, false, false, false, false}},
		{"second write", &FailAt{K: 1, Ops: []Op{OpWrite}}, []bool{false, true, false, false, false}},
		{"sticky from third", &FailAt{K: 2, Ops: []Op{OpWrite}, Sticky: true}, []bool{false, false, true, true, true}},
		{"syncs only", &FailAt{K: 0, Ops: []Op{OpSync}}, []bool{false, false, false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := Wrap(vfs.NewMem(), tt.inj)
			f, err := fs.Create("/f")
			if err != nil {
				t.Fatal(err)
			}
			for i, wantFail := range tt.fails {
				_, err := f.Write([]byte("x"))
				if (err != nil) != wantFail {
					t.Errorf("write %d: err %v, want failure %v", i, err, wantFail)
				}
			}
			if err := f.Sync(); (err != nil) != (tt.name == "syncs only") {
				t.Errorf("Sync = %v", err)
			}
			wantCount := len(tt.fails)
			if tt.name == "syncs only" {
				wantCount = 1
			}
			if tt.inj.Count() != wantCount {
				t.Errorf("Count = %d, want %d", tt.inj.Count(), wantCount)
			}
		})
	}
}

func TestPartialWrite(t *testing.T) {
	mem := vfs.NewMem()
	inj := &FailAt{K: 1, Ops: []Op{OpWrite}, PartialWrite: true}
	f, err := Wrap(mem, inj).Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.Write([]byte("full")); n != 4 || err != nil {
		t.Fatalf("first write = %d, %v", n, err)
	}
	n, err := f.Write([]byte("0123456789"))
	if n != 5 || !errors.Is(err, ErrInjected) {
		t.Fatalf("partial write = %d, %v; want 5, injected", n, err)
	}
	got, err := vfs.ReadFile(mem, "/f")
	if err != nil || string(got) != "full01234" {
		t.Errorf("contents %q, %v; want full01234", got, err)
	}
	// A partial mark on a non-write operation is ignored: nothing happens and the error is plain.
	fs := Wrap(mem, InjectorFunc(func(op Op, path string) error {
		if op == OpSync {
			return WithPartialWrite(syscall.EIO)
		}
		return nil
	}))
	g, err := fs.OpenReadWrite("/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrInjected) {
		t.Errorf("Sync = %v, want EIO and ErrInjected", err)
	}
}

func TestErrorMessageAndIs(t *testing.T) {
	tests := []struct {
		name    string
		inj     *FailAt
		want    string
		wantIs  []error
		wantNot error
	}{
		{"default", &FailAt{K: 0, Ops: []Op{OpWrite}}, "errorfs: injected error: write /d/0000.log",
			[]error{ErrInjected}, syscall.ENOSPC},
		{"enospc", &FailAt{K: 0, Ops: []Op{OpWrite}, Err: syscall.ENOSPC},
			"errorfs: injected error: write /d/0000.log: no space left on device",
			[]error{ErrInjected, syscall.ENOSPC}, syscall.EIO},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			if err := mem.MkdirAll("/d", 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := Wrap(mem, tt.inj).Create("/d/0000.log")
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Write([]byte("x"))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %q, want %q", err, tt.want)
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = false", err, target)
				}
			}
			if errors.Is(err, tt.wantNot) {
				t.Errorf("errors.Is(%v, %v) = true", err, tt.wantNot)
			}
			if wrapped := fmt.Errorf("segment: append: %w", err); !errors.Is(wrapped, ErrInjected) {
				t.Errorf("errors.Is lost through %%w wrapping")
			}
		})
	}
	var e *Error
	err := Wrap(vfs.NewMem(), &FailAt{K: 0}).Rename("/old", "/new")
	if !errors.As(err, &e) || e.Op != OpRename || e.Path != "/old" || !strings.Contains(err.Error(), "rename /old") {
		t.Errorf("Rename error %v", err)
	}
}

func TestFailedCloseStillCloses(t *testing.T) {
	dir := t.TempDir()
	f, err := Wrap(vfs.Default, &FailAt{K: 0, Ops: []Op{OpClose}}).Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, ErrInjected) {
		t.Fatalf("Close = %v, want injected", err)
	}
	if _, err := f.(vfs.OSFiler).OSFile().Write([]byte("x")); err == nil {
		t.Error("underlying file still open after a failed Close")
	}
}

func TestOSFileThroughWrap(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	fs := Wrap(vfs.Default, &FailAt{K: -1})
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("sendfile me")); err != nil {
		t.Fatal(err)
	}
	of, ok := f.(vfs.OSFiler)
	if !ok {
		t.Fatal("wrapped OS file does not implement vfs.OSFiler")
	}
	buf := make([]byte, 11)
	if n, err := of.OSFile().ReadAt(buf, 0); n != 11 || (err != nil && err != io.EOF) || string(buf) != "sendfile me" {
		t.Errorf("OSFile().ReadAt = %d, %v, %q", n, err, buf)
	}
	mf, err := Wrap(vfs.NewMem(), &FailAt{K: -1}).Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mf.(vfs.OSFiler); ok {
		t.Error("wrapped MemFS file claims to be an OS file")
	}
}

func TestOpString(t *testing.T) {
	seen := map[string]bool{}
	for op := range numOps {
		s := op.String()
		if s == "" || strings.HasPrefix(s, "op(") || seen[s] {
			t.Errorf("Op(%d).String() = %q", int(op), s)
		}
		seen[s] = true
	}
	if got := Op(99).String(); got != "op(99)" {
		t.Errorf("Op(99).String() = %q", got)
	}
}

func TestFailAtConcurrent(t *testing.T) {
	inj := &FailAt{K: 50}
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if inj.MaybeError(OpRead, "/f") != nil {
					mu.Lock()
					failures++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if failures != 1 || inj.Count() != 400 || !inj.Fired() {
		t.Errorf("failures %d, count %d, fired %v; want 1, 400, true", failures, inj.Count(), inj.Fired())
	}
}
