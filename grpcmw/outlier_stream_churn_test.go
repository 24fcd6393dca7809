package grpcmw_test

import (
	"context"
	"io"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// A hedged server stream over real gRPC and the outlier balancer: pod 0
// sends its first response after 50 ms, pod 1 at once and then ends after
// 100 ms; the hedge (10 ms) wins on pod 1. The stream's time (100 ms, over
// the 40 ms threshold) is told to pod 1, the endpoint it ran on; pod 0's
// cancelled copy is ignored. An abandoned stream (read once, its context
// cancelled) counts for no one.
func TestAHedgedStreamIsChargedToTheEndpointItRanOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := []time.Duration{50 * time.Millisecond, 0}
		var fs []*faultServer
		for _, d := range first {
			f := new(faultServer)
			f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
				time.Sleep(d)
				if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
					return err
				}
				select {
				case <-time.After(100 * time.Millisecond):
				case <-s.Context().Done():
				}
				return nil
			})
			fs = append(fs, f)
		}
		yaml := `
defaults:
  circuitBreaker: { enabled: false }
  hedging: { maxAttempts: 2, hedgingDelay: 10ms }
outlierDetection:
  interval: 10s
  baseEjectionTime: 1h
  maxEjectionTime: 1h
  consecutiveFailures: 0
  failurePercentage: { enabled: false }
  successRate: { enabled: false }
  slowCalls: { durationThreshold: 40ms, rateThreshold: 50, requestVolume: 1 }
`
		client, chain, stop := inPods(t, yaml, fs...)
		defer stop()
		for range 2 { // round_robin: each pod gets the first copy once
			s, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); err != io.EOF {
				t.Fatalf("the stream's end: %v, want io.EOF", err)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		s, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(90 * time.Millisecond)
		cancel()
		time.Sleep(10 * time.Second) // the interval ends
		synctest.Wait()
		if got := chain.Outlier().Ejected(); !slices.Equal(got, []string{"pod1"}) {
			t.Fatalf("ejected %v, want pod1, the endpoint the streams ran on", got)
		}
	})
}
