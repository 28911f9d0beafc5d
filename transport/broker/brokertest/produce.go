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
	acked, _ := ProduceTry(ctx, cl, prefix, from, to)
	return acked
}

// ProduceTry is ProduceAcked that also returns why each record that was not
// acknowledged failed, by value.
func ProduceTry(ctx context.Context, cl *kgo.Client, prefix string, from, to int) (acked []string, failed map[string]error) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	failed = map[string]error{}
	for i := from; i < to; i++ {
		v := fmt.Sprintf("%s-%05d", prefix, i)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[v] = err
				return
			}
			acked = append(acked, v)
		})
	}
	wg.Wait()
	return acked, failed
}
