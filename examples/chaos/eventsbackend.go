// This file holds the events scenario's events, its backends (which count
// what they handled, by event id and replay id) and its consumers (a
// broker's redelivery loop around each call).

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/deadletter"
)

// event is one message from the broker.
type event struct {
	ID     int64 // in order of publication, from 0
	Key    int   // the entity it is about
	Seq    int   // its place among its key's events, from 0
	Poison bool  // the backend can never handle it
}

func (e event) request() *testgrpc.SimpleRequest {
	p := 0
	if e.Poison {
		p = 1
	}
	return &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: fmt.Appendf(nil, "%d %d %d %d", e.ID, e.Key, e.Seq, p)}}
}

// parseEvent reads a request's event; ok false for a body that is not one
// of the first limit events.
func parseEvent(body []byte, limit int) (event, bool) {
	f := strings.Fields(string(body))
	if len(body) > 64 || len(f) != 4 {
		return event{}, false
	}
	var n [4]int64
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 || v >= int64(limit) {
			return event{}, false
		}
		n[i] = v
	}
	return event{ID: n[0], Key: int(n[1]), Seq: int(n[2]), Poison: n[3] == 1}, n[3] <= 1
}

// served is an event the backend handled.
type served struct {
	event
	Replay bool          // the call carried a meshless-replay-id
	At     time.Duration // since the scenario's start
}

// eventBackend is one consumer's backend: it fails while its mode says so,
// never handles a poison event, and records every request and every event
// it handled, with its replay id. Its tables are bounded by the events the
// schedule publishes (limit).
type eventBackend struct {
	testgrpc.UnimplementedTestServiceServer
	start time.Time
	limit int
	mode  atomic.Int32 // healthy or failing

	mu         sync.Mutex
	requests   int
	requestsAt []time.Duration // bounded by maxTallies
	served     []served        // in the order handled; an event once per delivery
	seen       []uint8         // by event id: times handled, up to 255
	replayIDs  map[string]int  // times each replay id was handled
}

func newEventBackend(limit int) *eventBackend {
	return &eventBackend{limit: limit, seen: make([]uint8, limit), replayIDs: map[string]int{}}
}

func (b *eventBackend) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at := time.Since(b.start)
	b.requests++
	if len(b.requestsAt) < maxTallies {
		b.requestsAt = append(b.requestsAt, at)
	}
	e, ok := parseEvent(req.GetPayload().GetBody(), b.limit)
	switch {
	case !ok:
		return nil, status.Error(codes.InvalidArgument, "not an event")
	case behaviour(b.mode.Load()) == failing:
		return nil, status.Error(codes.Unavailable, msgDown)
	case e.Poison:
		return nil, status.Error(codes.Internal, "cannot handle this event")
	}
	s := served{event: e, At: at}
	md, _ := metadata.FromIncomingContext(ctx)
	if ids := md.Get(deadletter.ReplayIDHeader); len(ids) == 1 && len(ids[0]) <= 128 {
		s.Replay = true
		if _, known := b.replayIDs[ids[0]]; known || len(b.replayIDs) < b.limit {
			b.replayIDs[ids[0]]++
		}
	}
	if b.seen[e.ID] < 255 {
		b.seen[e.ID]++
	}
	b.served = append(b.served, s)
	return &testgrpc.SimpleResponse{}, nil
}

// eventConsumer is one of the scenario's consumers.
type eventConsumer struct {
	name       string
	about      string
	backend    *eventBackend
	srv        *grpc.Server
	conn       *grpc.ClientConn
	stub       testgrpc.TestServiceClient
	deliveries int

	// How each event ended for the consumer: acked once its call returned
	// OK, acked as kept (DEFERRED), or given up after its deliveries.
	handled, deferred, lost, redelivered atomic.Int64
}

// consume handles e as a broker consumer does: a call per delivery, acked
// on OK or DEFERRED, redelivered at once otherwise, up to c.deliveries.
func (c *eventConsumer) consume(ctx context.Context, e event) {
	req := e.request()
	for d := range c.deliveries {
		if d > 0 {
			c.redelivered.Add(1)
		}
		_, err := c.stub.UnaryCall(ctx, req)
		switch {
		case err == nil:
			c.handled.Add(1)
			return
		case errors.Is(err, deadletter.ErrDeferred):
			c.deferred.Add(1)
			return
		case ctx.Err() != nil:
			c.lost.Add(1)
			return
		}
	}
	c.lost.Add(1)
}
