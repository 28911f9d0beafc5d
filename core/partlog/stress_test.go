package partlog

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// TestStress runs appenders that roll often, durable flushes, retention,
// truncation, readers and timestamp lookups all at once (run it with -race).
// The background loops run until the appenders are done; nothing sleeps.
func TestStress(t *testing.T) {
	for _, truncating := range []bool{false, true} {
		t.Run(fmt.Sprint(truncating), func(t *testing.T) {
			mem := memFS(t)
			l, _ := mustOpen(t, mem, Config{SegmentBytes: 2048, IndexIntervalBytes: 256, RetentionBytes: 20000, RetentionAge: -1,
				FlushPolicy: flushpolicy.EveryMessages(7)})
			var wg, writers sync.WaitGroup
			stop := make(chan struct{})
			for w := 0; w < 3; w++ {
				writers.Add(1)
				go func() {
					defer writers.Done()
					for i := 0; i < 400; i++ {
						res, err := l.Append(ctx, batch(w*1000+i, 1+i%3, 100), 7)
						if err != nil {
							t.Error(err)
							return
						}
						if i%5 == 0 {
							if err := l.Flush(res.NextOffset); err != nil {
								t.Error(err)
								return
							}
						}
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := l.ApplyRetention(); err != nil {
						t.Error(err)
					}
					if e := l.EndOffset(); truncating && e > 50 {
						if err := l.Truncate(e - 3); err != nil && !isOOR(err) {
							t.Error(err)
						}
					}
				}
			}()
			for r := 0; r < 2; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						off := l.StartOffset()
						sl, err := l.Read(off, 4096, NoLimit)
						if err == nil && sl.Size > 0 {
							if _, err := sl.Bytes(); err != nil && !truncating {
								t.Errorf("read %d: %v", off, err)
							}
							sl.Release()
						}
						_, _, _ = l.OffsetForTimestamp(1_700_000_000_000 + 5000)
					}
				}()
			}
			writers.Wait()
			close(stop)
			wg.Wait()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func isOOR(err error) bool { return err != nil && (errors.Is(err, ErrOffsetOutOfRange)) }
