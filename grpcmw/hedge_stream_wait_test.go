package grpcmw_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// A hedged server stream on a method whose bulkhead queues (maxWaitDuration):
// copy 1 holds the only slot, copy 2 (sent at hedgingDelay) waits in the
// queue. Copy 1's first response commits the call and the hedge cancels
// copy 2's wait (as the unary path does). Before, copy 2 waited under the
// stream's context, the hedge could not return until the wait timed out —
// for the slot the committed copy held — and the caller's first message was
// held back by maxWaitDuration.
func TestAHedgedStreamLoserQueuedInABulkheadDoesNotDelayTheWinner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &streamScript{delays: []time.Duration{100 * time.Millisecond}, count: 2}
		f := new(faultServer)
		f.setStream(s.handler)
		client, chain, stop := inBubble(t, f, `
defaults:
  retry: { enabled: false }
  timeout: { perAttempt: 0s, overall: 0s }
  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 10s }
  hedging: { maxAttempts: 2, hedgingDelay: 50ms, nonFatalStatusCodes: [UNAVAILABLE] }
`)
		defer stop()
		start := time.Now()
		st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := recvBodies(st)
		if err != nil || string(got) != "\x01\x01" {
			t.Fatalf("got %v, %v; want copy 1's two responses", got, err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("the stream took %v; want 100ms (copy 1's first response), not held by copy 2's queue wait", d)
		}
		synctest.Wait()
		if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
			t.Fatalf("%d bulkhead permits held", bh.Active())
		}
	})
}
