package clusterlink

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/internal/redistest"
)

// warnings records what is logged at warning level or above through
// slog's default logger, for the test's life.
type warnings struct {
	mu   sync.Mutex
	recs []slog.Record
}

func captureWarnings(t *testing.T) *warnings {
	w := new(warnings)
	old := slog.Default()
	slog.SetDefault(slog.New(w))
	t.Cleanup(func() { slog.SetDefault(old) })
	return w
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recs = append(w.recs, r.Clone())
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// all returns the warnings about a second target (a cluster may log
// others, Redis being slow on a loaded machine).
func (w *warnings) all() []slog.Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []slog.Record
	for _, r := range w.recs {
		if strings.Contains(r.Message, "one chain calls two targets") {
			out = append(out, r)
		}
	}
	return out
}

// attrs returns r's attributes as strings.
func attrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

// client returns a client of srv, closed when the test ends.
func client(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// start is Start of the default cluster settings with namespace ns (nil:
// unwritten), wanting no error; the link is closed when the test ends.
func start(t *testing.T, ns *string, rdb redis.UniversalClient, sec *config.ClusterSection) *Link {
	t.Helper()
	ccfg := cluster.DefaultConfig()
	if sec == nil {
		sec = &config.ClusterSection{}
	}
	sec.Namespace = ns
	if ns != nil {
		ccfg.Namespace = *ns
	}
	l, err := Start(ccfg, sec, rdb, []cluster.Option{cluster.WithInstanceID("pod-1")})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(l.Close)
	return &l
}

// breaker returns a breaker named name, closed when the test ends.
func breaker(t *testing.T, name string) *circuitbreaker.Breaker {
	t.Helper()
	b, err := circuitbreaker.New(circuitbreaker.WithName(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// joins counts the calls of a join function and keeps the cluster it got.
type joins struct {
	n  int
	cl *cluster.Cluster
	bs []*circuitbreaker.Breaker // added to the cluster it gets
}

func (j *joins) join(cl *cluster.Cluster) {
	j.n++
	j.cl = cl
	for _, b := range j.bs {
		cl.Add(b)
	}
}

// The zero Link is no cluster: nothing to bind, nothing to close.
func TestZeroLinkIsNoCluster(t *testing.T) {
	var l Link
	if l.WantsTarget() || !l.Bound("dns:///x") || l.Cluster() != nil || l.Redis() != nil {
		t.Fatal("the zero Link is not inert")
	}
	var j joins
	l.Bind("dns:///x", j.join)
	b := breaker(t, "svc")
	l.Add(b)
	l.Remove(b)
	l.Close()
	l.Close()
	if j.n != 0 || l.Cluster() != nil {
		t.Fatalf("Bind on the zero Link joined %d times", j.n)
	}
}

// With a namespace written, the cluster starts at once, in it; targets
// change nothing.
func TestStartWithANamespaceStartsAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	ns := "payments-client"
	l := start(t, &ns, client(t, srv), nil)
	cl := l.Cluster()
	if cl == nil || cl.Config().Namespace != ns {
		t.Fatalf("cluster %v, want one started in %q", cl, ns)
	}
	if l.WantsTarget() || !l.Bound("dns:///a:443") || !l.Bound("dns:///b:443") {
		t.Fatal("a cluster with a written namespace wants a target")
	}
	var j joins
	l.Bind("dns:///a:443", j.join)
	if j.n != 0 || l.Cluster() != cl {
		t.Fatal("Bind changed a cluster with a written namespace")
	}
	if l.Redis() != nil {
		t.Fatal("Redis() is not nil, though the client was given")
	}
}

// Left unwritten, the namespace comes from the first target: no cluster
// until Bind, which joins the engine's breakers and starts it once; a later
// target changes nothing.
func TestBindStartsTheClusterOnTheFirstTarget(t *testing.T) {
	srv := redistest.Start(t)
	l := start(t, nil, client(t, srv), nil)
	if l.Cluster() != nil {
		t.Fatal("a cluster before the first target")
	}
	if !l.WantsTarget() || l.Bound("dns:///a:443") {
		t.Fatal("the link does not want its target")
	}
	b := breaker(t, "svc")
	l.Add(b) // no cluster yet: the engine's join adds it at Bind
	l.Remove(b)
	j := joins{bs: []*circuitbreaker.Breaker{b}}
	l.Bind("dns:///a:443", j.join)
	if j.n != 1 || j.cl == nil || l.Cluster() != j.cl {
		t.Fatalf("Bind joined %d times, cluster %v; want once, the link's", j.n, l.Cluster())
	}
	if got := l.Cluster().Config().Namespace; got != "meshless@dns:///a:443" {
		t.Fatalf("namespace %q", got)
	}
	if !l.Bound("dns:///a:443") {
		t.Fatal("not Bound to its own target")
	}
	if !l.WantsTarget() {
		t.Fatal("WantsTarget false before any second target was reported")
	}
	var j2 joins
	l.Bind("dns:///b:443", j2.join)
	if j2.n != 0 || l.Cluster() != j.cl {
		t.Fatal("a second Bind changed the cluster")
	}
}

// The first target other than the bound one is logged once, redacted;
// then the link wants no target any more.
func TestASecondTargetIsLoggedOnce(t *testing.T) {
	srv := redistest.Start(t)
	w := captureWarnings(t)
	l := start(t, nil, client(t, srv), nil)
	if l.Bound("dns://u:secret@r/b:443") {
		t.Fatal("Bound before Bind")
	}
	if n := len(w.all()); n != 0 {
		t.Fatalf("%d warnings before Bind", n)
	}
	l.Bind("dns:///a:443", func(*cluster.Cluster) {})
	l.Bound("dns:///a:443")
	if n := len(w.all()); n != 0 {
		t.Fatalf("%d warnings for the bound target", n)
	}
	for _, target := range []string{"dns://u:secret@r/b:443", "dns:///c:443", "dns:///a:443"} {
		if !l.Bound(target) {
			t.Fatalf("Bound(%q) false after Bind", target)
		}
	}
	recs := w.all()
	if len(recs) != 1 {
		t.Fatalf("%d warnings, want 1", len(recs))
	}
	a := attrs(recs[0])
	if a["first"] != "dns:///a:443" || a["namespace"] != "meshless@dns:///a:443" ||
		strings.Contains(a["other"], "secret") || !strings.Contains(a["other"], "r/b:443") {
		t.Fatalf("warning %q %v", recs[0].Message, a)
	}
	if l.WantsTarget() {
		t.Fatal("WantsTarget after the second target was reported")
	}
}

// The engine's pattern — Bound without a lock, Bind under its lock — from
// many goroutines with two targets: one join, one cluster, one warning.
func TestConcurrentFirstCallsBindOnce(t *testing.T) {
	srv := redistest.Start(t)
	w := captureWarnings(t)
	l := start(t, nil, client(t, srv), nil)
	var mu sync.Mutex // the engine's lock
	var j joins
	var wg sync.WaitGroup
	for i := range 16 {
		target := []string{"dns:///a:443", "dns:///b:443"}[i%2]
		wg.Go(func() {
			if l.Bound(target) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			l.Bind(target, j.join)
		})
	}
	wg.Wait()
	for _, target := range []string{"dns:///a:443", "dns:///b:443"} {
		l.Bound(target) // one of them is the other target, if no goroutine reported it
	}
	if j.n != 1 {
		t.Fatalf("joined %d times, want 1", j.n)
	}
	if n := len(w.all()); n != 1 {
		t.Fatalf("%d warnings, want 1", n)
	}
}

// Breakers join the bound cluster and leave it: a joined breaker's window
// is written to Redis at a sync, a removed one's no more.
func TestBreakersJoinAndLeave(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	l := start(t, nil, rdb, nil)
	l.Bind("dns:///a:443", func(*cluster.Cluster) {})
	b := breaker(t, "svc")
	ctx := context.Background()
	sync := func() {
		t.Helper()
		if err := l.Cluster().Sync(ctx); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	// calls makes one call, syncs, and returns the calls of the breaker's
	// window in Redis ("" when none is written).
	calls := func() string {
		t.Helper()
		_ = b.Execute(ctx, func(context.Context) error { return nil })
		sync()
		v, err := rdb.HGet(ctx, "meshless@dns:///a:443:w:svc", "pod-1").Result()
		if errors.Is(err, redis.Nil) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		n, _, _ := strings.Cut(v, " ")
		return n
	}
	if n := calls(); n != "" {
		t.Fatalf("window of a breaker not added: %q calls", n)
	}
	l.Add(b)
	if n := calls(); n != "2" {
		t.Fatalf("window of the added breaker: %q calls, want 2", n)
	}
	l.Remove(b)
	// The cluster's own loop may have a sync in flight that listed b
	// before Remove: syncs take turns, so it is over once this one is.
	sync()
	if n := calls(); n == "3" {
		t.Fatal("the removed breaker's window is still written")
	}
}

// Without a client given, Start dials the section's redis, every exchange
// bounded by the cluster's timeout; Close leaves that client to the engine.
func TestStartDialsTheSectionsRedis(t *testing.T) {
	srv := redistest.Start(t)
	addr := srv.Addr()
	ns := "n"
	l := start(t, &ns, nil, &config.ClusterSection{Redis: &config.RedisSection{Addr: &addr}})
	c, ok := l.Redis().(*redis.Client)
	if !ok {
		t.Fatalf("Redis() is %T, want the client Start dialled", l.Redis())
	}
	defer c.Close()
	o := c.Options()
	if o.Addr != addr || o.ReadTimeout != 500*time.Millisecond || o.WriteTimeout != o.ReadTimeout || o.DialTimeout != o.ReadTimeout || !o.ContextTimeoutEnabled {
		t.Fatalf("dialled %s with timeouts %v/%v/%v (context: %v), want %s with half the 1s sync interval", o.Addr, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled, addr)
	}
	l.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the dialled client after Close: %v, want it open (the engine closes it last)", err)
	}
}

// Start's errors: no server at all, a bad one, invalid settings (the
// client it dialled is closed).
func TestStartErrors(t *testing.T) {
	if _, err := Start(cluster.DefaultConfig(), &config.ClusterSection{}, nil, nil); err == nil {
		t.Fatal("Start without a server or a client: no error")
	} else if pe := (*config.PathError)(nil); !errors.As(err, &pe) || pe.Path != "cluster.redis" {
		t.Fatalf("Start without a server or a client: %v, want a PathError on cluster.redis", err)
	}
	bad := "not a host"
	if _, err := Start(cluster.DefaultConfig(), &config.ClusterSection{Redis: &config.RedisSection{Addr: &bad}}, nil, nil); err == nil {
		t.Fatal("Start with a bad addr: no error")
	}
	addr := "127.0.0.1:1"
	ccfg := cluster.DefaultConfig()
	ccfg.Timeout = -1
	l, err := Start(ccfg, &config.ClusterSection{Redis: &config.RedisSection{Addr: &addr}}, nil, nil)
	if err == nil {
		l.Close()
		t.Fatal("Start with a negative timeout: no error")
	}
	if c := l.Redis(); c != nil && !errors.Is(c.Ping(context.Background()).Err(), redis.ErrClosed) {
		t.Fatal("the client Start dialled is left open after its error")
	}
}

// Close is idempotent, and a Bind after it starts nothing; goleak (TestMain)
// checks that nothing is left running.
func TestCloseIsIdempotentAndEndsBinding(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	waiting := start(t, nil, rdb, nil)
	waiting.Close()
	var j joins
	waiting.Bind("dns:///a:443", j.join)
	if j.n != 0 || waiting.Cluster() != nil {
		t.Fatal("Bind after Close started a cluster")
	}
	waiting.Close()

	bound := start(t, nil, rdb, nil)
	bound.Bind("dns:///a:443", j.join)
	bound.Close()
	bound.Close()
	if err := bound.Cluster().Sync(context.Background()); err == nil {
		t.Fatal("Sync of a closed cluster: no error")
	}
}
