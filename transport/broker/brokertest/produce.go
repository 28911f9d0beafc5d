package brokertest

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceAcked produces the values "<prefix>-<i>" (i zero-padded to 5
// digits) for i in [from, to) with cl, all at once, and returns those
// acknowledged (in no particular order), for checks that every acknowledged
// record is read exactly once.
func ProduceAcked(ctx context.Context, cl *kgo.Client, prefix string, from, to int) []string {
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
	)
	for i := from; i < to; i++ {
		v := fmt.Sprintf("%s-%05d", prefix, i)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked = append(acked, v)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return acked
}
