package topics

import (
	"fmt"
	"sync"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
)

// TestConcurrentRegistry races creates, deletes, lookups, producer ids and
// retention.
func TestConcurrentRegistry(t *testing.T) {
	r := open(t, vfs.NewMem(), "/d")
	defer r.Close()
	var wg sync.WaitGroup
	ids := make(chan int64, 4*200)
	fail := make(chan error, 16)
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				id, _, err := r.InitProducerID()
				if err != nil {
					fail <- err
					return
				}
				ids <- id
				if i%20 == 0 {
					name := fmt.Sprintf("t%d-%d", g, i)
					if _, err := r.Create(name, 2, nil); err != nil {
						fail <- err
						return
					}
					p, err := r.Partition(name, 1)
					if err != nil {
						fail <- err
						return
					}
					if _, err := p.Append(ctx, idem(t, id, 0, 0, 1)); err != nil {
						fail <- err
						return
					}
					if i%40 == 0 {
						if err := r.Delete(name); err != nil {
							fail <- err
							return
						}
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			for _, tp := range r.Topics() {
				_, _ = r.Partition(tp.Name, 0)
			}
			if err := r.ApplyRetention(); err != nil {
				fail <- err
				return
			}
		}
	})
	wg.Wait()
	close(ids)
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("producer id %d handed out twice", id)
		}
		seen[id] = true
	}
	if n := len(r.Topics()); n != 20 {
		t.Errorf("%d topics, want 20", n)
	}
}
