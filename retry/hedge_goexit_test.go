package retry_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/retry"
)

// A first copy whose goroutine exits (runtime.Goexit: a test's t.FailNow in
// the copy) after a hedge was sent ends the call: the goroutine that
// coordinates the copies does not outlive it. Before, it waited for the
// first copy's answer for ever.
func TestAFirstCopyThatExitsAfterAHedgeLeavesNoGoroutine(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
		c.MaxAttempts = 2
		c.HedgingDelay = time.Millisecond
	})))
	second := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = h.Run(context.Background(), func(ctx context.Context, n int) error {
			if n == 2 {
				defer close(second)
				return errNonFatal
			}
			<-second // the hedge was sent, and copy 2 answered
			runtime.Goexit()
			return nil
		})
	}()
	wg.Wait()
	goleak.VerifyNone(t, ignore)
}
