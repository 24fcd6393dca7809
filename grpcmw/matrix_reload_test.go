package grpcmw_test

import (
	"context"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/circuitbreaker"
)

// A reload that changes a kept breaker's mode moves the breaker to that
// mode's state when Reload returns (operations.md, grpc.md's Reload: a kept
// breaker is the same instance, so the calls already running see it too),
// not at the next call of its key: before, chain.Breaker(key).State() and
// the state gauge still read CLOSED after a reload to FORCED_OPEN, and a
// call waiting out a backoff sent its retries through it.
func TestAReloadThatChangesABreakersModeMovesItAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		f.setUnary(failing(codes.Unavailable))
		const retries = "defaults:\n  retry: { initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\n"
		client, chain, _, stop := observed(t, f, retries)
		defer stop()
		e := &matrixEnv{f: f, client: client, chain: chain}
		done := make(chan outcomes, 1)
		go func() { done <- e.calls(context.Background(), 1) }()
		synctest.Wait() // the first attempt failed; the call waits its backoff
		reload(t, chain, retries+"  circuitBreaker: { mode: FORCED_OPEN }\n")
		if st := e.breaker(t).State(); st != circuitbreaker.StateForcedOpen {
			t.Errorf("after a reload to mode FORCED_OPEN the breaker is %v", st)
		}
		got := <-done
		if got["Unavailable CIRCUIT_OPEN"] != 1 || f.calls.Load() != 1 {
			t.Errorf("call = %v after %d attempts, want its retry refused by the FORCED_OPEN breaker", got, f.calls.Load())
		}
		reload(t, chain, retries+"  circuitBreaker: { mode: METRICS_ONLY }\n")
		if st := e.breaker(t).State(); st != circuitbreaker.StateMetricsOnly {
			t.Errorf("after a reload to mode METRICS_ONLY the breaker is %v", st)
		}
	})
}
