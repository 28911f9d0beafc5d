package node

import "testing"

func TestAppendGate(t *testing.T) {
	var g appendGate
	if _, busy := g.mark(); busy {
		t.Fatal("a new gate has appends in progress")
	}
	if ch := g.landed(0); ch != nil {
		t.Fatal("nothing to wait for, and a channel")
	}
	g.begin()
	g.begin()
	mark, busy := g.mark()
	if !busy || mark != 2 {
		t.Fatalf("two appends begun: mark %d, busy %v", mark, busy)
	}
	ch := g.landed(mark)
	if ch == nil {
		t.Fatal("appends in progress, and no channel")
	}
	g.begin() // a later append: not waited for
	g.end()
	select {
	case <-ch:
	default:
		t.Fatal("an end did not close the channel")
	}
	ch = g.landed(mark)
	if ch == nil {
		t.Fatal("one of two appends ended, and no channel")
	}
	g.end()
	<-ch
	if ch := g.landed(mark); ch != nil {
		t.Fatal("both appends ended (the later one still in progress), and still a channel")
	}
	if _, busy := g.mark(); !busy {
		t.Fatal("the later append is in progress")
	}
	g.end()
	if _, busy := g.mark(); busy {
		t.Fatal("every append ended, and busy")
	}
}
