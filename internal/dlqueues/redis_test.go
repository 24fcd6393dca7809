package dlqueues

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/redisstore"
	"github.com/meshless/meshless/internal/redistest"
)

// client returns a client of srv, closed when the test ends (after the
// rig's queues, registered later).
func client(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// onRedis is a section of the Redis store in namespace ns, on the server
// at addr ("": the client given in Options).
func onRedis(ns, addr string) config.DeadLetter {
	c := deadletter.DefaultConfig()
	c.Store = deadletter.StoreRedis
	c.Path = ""
	dl := config.DeadLetter{Config: c, Namespace: ns}
	if addr != "" {
		dl.Redis = &config.RedisSection{Addr: &addr}
	}
	return dl
}

// nClients returns how many clients the queues dialled.
func (r *rig) nClients() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.rdbs)
}

// A Redis store is its server and its namespace: keys naming both share
// it; another namespace, or a section that names a server of its own, is
// another store; a server is dialled once per store.
func TestRedisStoresAreSharedByServerAndNamespace(t *testing.T) {
	srv := redistest.Start(t)
	r := newRig(t, Options{Redis: client(t, srv)})
	r.queue(t, "pkg.A", onRedis("n1", ""))
	r.queue(t, "pkg.B", onRedis("n1", ""))
	if n := r.nStores(); n != 1 {
		t.Fatalf("%d stores for one namespace on the given client, want 1", n)
	}
	r.queue(t, "pkg.C", onRedis("n2", ""))
	if n := r.nStores(); n != 2 {
		t.Fatalf("%d stores for two namespaces, want 2", n)
	}
	r.queue(t, "pkg.D", onRedis("n1", srv.Addr()))
	r.queue(t, "pkg.E", onRedis("n1", srv.Addr()))
	if n, c := r.nStores(), r.nClients(); n != 3 || c != 1 {
		t.Fatalf("%d stores and %d clients dialled after two keys on a section's own server, want 3 and 1", n, c)
	}
}

// A Redis store with neither a section's server nor a client given is an
// error naming what is missing.
func TestRedisStoreWithoutAServerIsAnError(t *testing.T) {
	r := newRig(t, Options{})
	_, err := r.Queue("pkg.A", onRedis("n", ""))
	var pe *config.PathError
	if !errors.As(err, &pe) || pe.Path != "deadLetter.redis" {
		t.Fatalf("Queue: %v, want a PathError on deadLetter.redis", err)
	}
}

// The clients dialled for sections' own servers close with the queues,
// after them; the client given in Options stays the caller's.
func TestCloseClosesTheClientsItDialled(t *testing.T) {
	srv := redistest.Start(t)
	given := client(t, srv)
	r := newRig(t, Options{Redis: given})
	r.queue(t, "pkg.A", onRedis("n", srv.Addr()))
	r.queue(t, "pkg.B", onRedis("n", ""))
	r.mu.Lock()
	dialled := r.rdbs[0]
	r.mu.Unlock()
	ctx := context.Background()
	if err := dialled.Ping(ctx).Err(); err != nil {
		t.Fatalf("dialled client: %v", err)
	}
	r.Detach()()
	if err := dialled.Ping(ctx).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("dialled client after close: %v, want redis.ErrClosed", err)
	}
	if err := given.Ping(ctx).Err(); err != nil {
		t.Fatalf("given client after close: %v, want it open", err)
	}
}

// A queue is kept across a reload that names the same server (a new
// section), and replaced when the server changes.
func TestRedisQueueFollowsItsServer(t *testing.T) {
	srv1, srv2 := redistest.Start(t), redistest.Start(t)
	r := newRig(t, Options{})
	q := r.queue(t, "pkg.A", onRedis("n", srv1.Addr()))
	if again := r.queue(t, "pkg.A", onRedis("n", srv1.Addr())); again != q {
		t.Fatal("a new section naming the same server got a new queue")
	}
	if moved := r.queue(t, "pkg.A", onRedis("n", srv2.Addr())); moved == q {
		t.Fatal("a section naming another server kept the queue")
	}
	if n := r.nStores(); n != 2 {
		t.Fatalf("%d stores, want one per server", n)
	}
}

// Two sections with one namespace on two servers are two stores: Resume
// reads the keys of each, and gives a queue to the keys with entries in
// either.
func TestResumeReadsEachServerOfANamespace(t *testing.T) {
	srv1, srv2 := redistest.Start(t), redistest.Start(t)
	for srv, key := range map[*redistest.Server]string{srv1: "pkg.A", srv2: "pkg.B"} {
		st, err := redisstore.New(client(t, srv), redisstore.WithNamespace("n"))
		if err != nil {
			t.Fatal(err)
		}
		appendTo(t, st, map[string]int{key: 1})
		_ = st.Close()
	}
	cfg := parse(t, `
services:
  pkg.A: { deadLetter: { store: redis, namespace: n, redis: { addr: "`+srv1.Addr()+`" } } }
  pkg.B: { deadLetter: { store: redis, namespace: n, redis: { addr: "`+srv2.Addr()+`" } } }
`)
	r := newRig(t, Options{})
	if err := r.Resume(cfg, config.GRPC, other, anyKey); err != nil {
		t.Fatal(err)
	}
	if ks := r.keys(); len(ks) != 2 || !ks["pkg.A"] || !ks["pkg.B"] {
		t.Fatalf("keys with a queue after Resume: %v, want pkg.A (on %s) and pkg.B (on %s)", ks, srv1.Addr(), srv2.Addr())
	}
}

// A section that writes redis without a server (redis: {}) uses the given
// client, as one without redis does: the key's methods, each asking for the
// key's queue on its first call, get the same queue.
func TestRedisSectionWithoutAServerKeepsItsQueue(t *testing.T) {
	srv := redistest.Start(t)
	cfg := parse(t, `
services:
  pkg.A: { deadLetter: { store: redis, namespace: n, redis: {} } }
`)
	r := newRig(t, Options{Redis: client(t, srv)})
	get, put := cfg.Resolve(config.GRPC, "pkg.A", "Get"), cfg.Resolve(config.GRPC, "pkg.A", "Put")
	q := r.queue(t, get.Key, *get.DeadLetter)
	if again := r.queue(t, put.Key, *put.DeadLetter); again != q {
		t.Fatal("the key's second method got a new queue: the first method's is closed, and its calls are not deferred")
	}
	r.retiring.Wait()
	deferTo(t, q, entry("pkg.A", "after-second-method"))
}
