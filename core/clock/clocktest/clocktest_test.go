package clocktest

import (
	"testing"
	"time"
)

func TestAdvanceRunsDueTimersInOrder(t *testing.T) {
	c := New(time.UnixMilli(0))
	var ran []string
	c.AfterFunc(2*time.Second, func() { ran = append(ran, "b") })
	c.AfterFunc(time.Second, func() { ran = append(ran, "a") })
	stopped := c.AfterFunc(time.Second, func() { ran = append(ran, "stopped") })
	later := c.AfterFunc(time.Minute, func() { ran = append(ran, "later") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop must report true once, then false")
	}
	if c.Pending() != 3 {
		t.Fatalf("pending %d, want 3", c.Pending())
	}
	c.Advance(1500 * time.Millisecond)
	c.Advance(500 * time.Millisecond)
	if got := c.Now(); !got.Equal(time.UnixMilli(2000)) {
		t.Fatalf("now %v", got)
	}
	if len(ran) != 2 || ran[0] != "a" || ran[1] != "b" || c.Pending() != 1 {
		t.Fatalf("ran %v, pending %d", ran, c.Pending())
	}
	if later.Stop() != true || c.Pending() != 0 {
		t.Fatal("stopping the last timer")
	}
	c.Advance(time.Hour)
	if len(ran) != 2 {
		t.Fatalf("a stopped timer ran: %v", ran)
	}
}
