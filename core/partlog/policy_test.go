package partlog

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Tests of how the log calls its flush policy: outside its locks, one call at
// a time, in log order (see "Flushing and durability" in the package doc).

// within bounds every wait for something that must happen.
const within = 10 * time.Second

// await returns what c delivers, failing the test if nothing comes within
// the deadline.
func await[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(within):
		t.Fatalf("%s: nothing within %v", what, within)
		panic("unreachable")
	}
}

// goRun runs f in a goroutine and delivers its result.
func goRun[T any](f func() T) <-chan T {
	c := make(chan T, 1)
	go func() { c <- f() }()
	return c
}

// Readers and long polls take none of the writer's locks: Wait, EndOffset,
// FlushedOffset and Read proceed while appendMu, syncMu and statMu are all
// held (as an append, an fsync and a recovery hold them).
func TestReadersTakeNoWriterLocks(t *testing.T) {
	l, _ := mustOpen(t, memFS(t), Config{})
	defer l.Close()
	if _, err := l.Append(ctx, batch(1, 2, 50), 0); err != nil {
		t.Fatal(err)
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.statMu.Lock()
	defer l.statMu.Unlock()
	err := await(t, goRun(func() error {
		wake := l.Wait()
		if got := l.EndOffset(); got != 2 {
			return fmt.Errorf("EndOffset %d, want 2", got)
		}
		if got := l.FlushedOffset(); got != 0 {
			return fmt.Errorf("FlushedOffset %d, want 0", got)
		}
		sl, err := l.Read(0, 1<<20, NoLimit)
		if err != nil {
			return err
		}
		sl.Release()
		if sl.NextOffset != 2 {
			return fmt.Errorf("read 0 up to %d, want 2", sl.NextOffset)
		}
		select {
		case <-wake:
			return errors.New("Wait's channel closed with no append")
		default:
		}
		return nil
	}), "Wait, EndOffset, FlushedOffset and Read with the writer's locks held")
	if err != nil {
		t.Fatal(err)
	}
}
