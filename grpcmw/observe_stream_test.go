package grpcmw_test

import (
	"context"
	"io"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// Observe mode changes nothing about a stream (configuration.md): once the
// server has ended it, SendMsg returns io.EOF, as gRPC's does, and the
// caller learns the status from RecvMsg. Before, a method with retries in
// observe mode kept every message to replay it (up to 256 KiB a stream),
// though it never replays, and reported a message sent on an ended stream
// as sent, as a stream that will retry does: a client-streaming upload
// whose server had failed went on sending into it to its end.
func TestAnObservedStreamSendsAsWithoutMeshless(t *testing.T) {
	for _, yaml := range []string{
		"defaults: { retry: { enabled: false } }\n", // no replay: gRPC's own answers
		"defaults: { mode: observe }\n",
		"defaults: { mode: observe, retry: { enabled: false }, hedging: { hedgingDelay: 1h } }\n",
	} {
		t.Run(yaml, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				failingBidi(f, codes.Unavailable)
				client, _, metrics, stop := observed(t, f, yaml)
				defer stop()
				s, err := client.FullDuplexCall(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // the server has failed the stream
				var sent int
				for ; sent < 10; sent++ {
					if err = s.Send(&testgrpc.StreamingOutputCallRequest{}); err != nil {
						break
					}
				}
				if err != io.EOF {
					t.Errorf("after %d messages SendMsg = %v on a stream the server had ended, want io.EOF", sent, err)
				}
				if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
					t.Errorf("Recv = %v, want the server's UNAVAILABLE", err)
				}
				if f.calls.Load() != 1 {
					t.Errorf("%d attempts, want 1", f.calls.Load())
				}
				if yaml == "defaults: { mode: observe }\n" && metrics()["meshless.observe.decisions retry retry"] != 1 {
					t.Errorf("the would-be retry was not counted: %v", metrics())
				}
			})
		})
	}
}
