package producers

import (
	"sync"
	"testing"
)

// TestList lists the producers known with their latest batch, by id, and
// leaves out one whose first batch was rejected; it runs beside appends
// (go test -race).
func TestList(t *testing.T) {
	var ps Table
	for _, id := range []int64{9, 3} {
		e := ps.Lock(id)
		e.State.Push(2, Batch{FirstSeq: 0, LastSeq: 4, Base: 10 * id, Next: 10*id + 5})
		e.State.Push(2, Batch{FirstSeq: 5, LastSeq: 6, Base: 10*id + 5, Next: 10*id + 7})
		e.Used = id
		ps.Unlock(id, e)
	}
	ps.Unlock(5, ps.Lock(5)) // never appended: dropped
	got := ps.List()
	want := []Info{{ID: 3, Epoch: 2, LastSequence: 6, LastOffset: 36, Used: 3, CoordinatorEpoch: -1, CurrentTxnStartOffset: -1},
		{ID: 9, Epoch: 2, LastSequence: 6, LastOffset: 96, Used: 9, CoordinatorEpoch: -1, CurrentTxnStartOffset: -1}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("List = %+v, want %+v", got, want)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := int64(100 + g*1000 + i%7)
				e := ps.Lock(id)
				e.State.Push(0, Batch{FirstSeq: int32(i), LastSeq: int32(i), Base: int64(i), Next: int64(i + 1)})
				ps.Unlock(id, e)
				_ = ps.List()
			}
		}()
	}
	wg.Wait()
	if n := len(ps.List()); n != 2+4*7 {
		t.Fatalf("%d producers listed, want %d", n, 2+4*7)
	}
}
