package grpcmw

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/engine"
)

// This file is the gRPC side of the dead-letter queue (the deadLetter
// section, docs/deadletter.md): what a deferred unary call keeps (its full
// method, its request encoded, its outgoing metadata — the queue keeps only
// the allowed keys), and how a replay makes the call again, through the
// connection's interceptors (this chain: breaker, rate limiter, bulkhead…),
// with the entry's meshless-replay-id. Streams are never deferred.

// conn is the connection replays go through: the first one a call of the
// chain came on.
type conn struct {
	cc atomic.Pointer[grpc.ClientConn]
}

// learn keeps cc when it is the chain's first, and reports whether it was.
func (c *conn) learn(cc *grpc.ClientConn) bool {
	return cc != nil && c.cc.Load() == nil && c.cc.CompareAndSwap(nil, cc)
}

// Entry is what a deferred unary call keeps: false for a request that is
// not a protocol buffer (its encoding is not known here).
func (u *unaryCall) Entry(ctx context.Context) (deadletter.Entry, bool) {
	msg, ok := u.req.(proto.Message)
	if !ok {
		return deadletter.Entry{}, false
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		return deadletter.Entry{}, false
	}
	e := deadletter.Entry{Method: u.fullMethod, Payload: b}
	if u.cc != nil {
		e.Target = u.cc.Target()
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		e.Metadata = md
	}
	return e, true
}

// errNoConn: no call has come yet, so there is no connection to replay on.
var errNoConn = engine.NotYet("grpcmw: no connection to replay on yet")

// Replay makes a deferred call again on the chain's connection, with its
// kept metadata and the meshless-replay-id header; the answer is dropped
// (the caller was told the call was deferred).
//
// An entry whose method is not one of its key's calls (a store shared with
// another client, or edited by hand) is not sent: a failed replay, parked
// after maxReplays.
func (t *transport) Replay(ctx context.Context, e deadletter.Entry) error {
	if !ofKey(e.Method, e.Key) {
		return errNotOfKey
	}
	cc := t.conn.cc.Load()
	if cc == nil {
		return errNoConn
	}
	md := metadata.MD{}
	for k, vs := range e.Metadata {
		md[k] = append([]string(nil), vs...)
	}
	if id, ok := deadletter.ReplayID(ctx); ok {
		md.Set(deadletter.ReplayIDHeader, id)
	}
	ctx = metadata.NewOutgoingContext(ctx, md)
	var reply rawMessage
	return cc.Invoke(ctx, e.Method, rawMessage(e.Payload), &reply, grpc.ForceCodecV2(rawCodec{}))
}

// errNotOfKey: the entry names a call its key's calls never are.
var errNotOfKey = errors.New("grpcmw: the entry's method is not one of its key's calls; not replayed")

// ofKey reports whether a call of method could have been kept under key:
// a method of the service key names (keyBy: service), the method key
// names, or any method of key's service for its fallback entry
// ("SERVICE/_OTHER", keyBy: method); any method for the defaults'
// fallback ("_OTHER", "_OTHER/_OTHER"), where a chain keeps the calls of
// methods it does not know. It reads names only, not the configuration,
// so that a reload does not strand the entries of a key it retired.
func ofKey(method, key string) bool {
	group, name, byMethod := strings.Cut(key, "/")
	if group == engine.Other {
		return true
	}
	svc, mname, ok := splitMethod(method)
	switch {
	case !ok || svc != group:
		return false
	case !byMethod || name == engine.Other:
		return true
	default:
		return mname == name
	}
}

// rawMessage is a message already encoded.
type rawMessage []byte

// rawCodec sends a rawMessage as it is and drops what comes back. It is
// named "proto" so that the server decodes the request with its own proto
// codec.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(rawMessage)
	if !ok {
		return nil, errors.New("grpcmw: a replay sends encoded messages only")
	}
	return mem.BufferSlice{mem.SliceBuffer(m)}, nil
}

func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }

func (rawCodec) Name() string { return "proto" }
