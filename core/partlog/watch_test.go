package partlog

import (
	"context"
	"slices"
	"testing"

	"github.com/weir-broker/weir/core/wakeup"
)

// Watch: an append fires the registered waiter (once per registration),
// Close fires it, and a registration after Close says to look now.
func TestWatch(t *testing.T) {
	l, _ := mustOpen(t, memFS(t), Config{})
	w := wakeup.NewWaiter(2)
	defer w.Close()
	if !l.Watch(w, 3) {
		t.Fatal("open log: Watch reports closed")
	}
	if got := w.Fired(nil); len(got) != 0 {
		t.Fatalf("fired %v before any append", got)
	}
	if _, err := l.Append(context.Background(), batch(0, 1, 10), 0); err != nil {
		t.Fatal(err)
	}
	<-w.C()
	if got := w.Fired(nil); !slices.Equal(got, []int{3}) {
		t.Fatalf("after an append: fired %v, want [3]", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := w.Fired(nil); !slices.Equal(got, []int{3}) {
		t.Fatalf("after Close: fired %v, want [3]", got)
	}
	late := wakeup.NewWaiter(1)
	defer late.Close()
	if l.Watch(late, 0) {
		t.Fatal("closed log: Watch reports open")
	}
}
