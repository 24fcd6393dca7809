package cluster_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
)

// cutPipeline is a go-redis hook that sends only the first n commands of
// each pipeline and fails the rest, as a pod that crashes (or whose
// connection drops) in the middle of writing its sync does: Redis runs
// what reached it, and nothing after.
type cutPipeline struct {
	n    int
	sent atomic.Int64 // the length of the last pipeline, uncut
}

var errCut = errors.New("write tcp: connection reset by peer")

func (h *cutPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *cutPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *cutPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !isSync(cmds) {
			return next(ctx, cmds) // the connection's handshake
		}
		h.sent.Store(int64(len(cmds)))
		if h.n >= len(cmds) {
			return next(ctx, cmds)
		}
		for _, c := range cmds[h.n:] {
			c.SetErr(errCut)
		}
		if h.n > 0 {
			if err := next(ctx, cmds[:h.n]); err != nil {
				return err
			}
		}
		return errCut
	}
}

// isSync reports whether cmds are a sync's exchange: it writes the pod's
// presence key.
func isSync(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if args := c.Args(); len(args) > 1 && c.Name() == "set" {
			if k, _ := args[1].(string); strings.HasPrefix(k, "test:alive:") {
				return true
			}
		}
	}
	return false
}

// However a sync's pipeline is cut (the pod crashed, its connection
// dropped), the window hash it wrote has a TTL: it never outlives the
// instances that write it. Before, the window was written with HSET and
// then PEXPIRE, two commands: a cut between them left a hash with no TTL,
// for ever in a shared Redis once no other instance wrote it again (a
// breaker renamed, a namespace changed, the last pod gone).
func TestAWindowHashNeverLosesItsTTLToACut(t *testing.T) {
	w := newWorld(t)
	admin := w.admin()
	ctx := t.Context()
	for n := 0; ; n++ {
		if err := admin.Del(ctx, "test:w:svc").Err(); err != nil {
			t.Fatal(err)
		}
		cut := &cutPipeline{n: n}
		rdb := redis.NewClient(&redis.Options{Addr: w.srv.Addr(), MaxRetries: -1})
		rdb.AddHook(cut)
		p := w.podOn("pod"+strconv.Itoa(n), rdb)
		p.calls(3, ok)
		err := p.c.Sync(ctx)
		switch ttl, perr := admin.PTTL(ctx, "test:w:svc").Result(); {
		case perr != nil:
			t.Fatal(perr)
		case ttl == -1:
			t.Fatalf("cut after %d of %d commands: the window hash has no TTL (%v)", n, cut.sent.Load(), admin.HGetAll(ctx, "test:w:svc").Val())
		}
		if err == nil {
			if n == 0 {
				t.Fatal("a sync with nothing sent succeeded: the hook cut nothing")
			}
			return // the whole pipeline went through: every cut was tried
		}
	}
}

// A window hash left without a TTL (by an older release, or by hand) is
// judged by its fields' own dates: a peer counts a field while it is fresh,
// then deletes it, and the hash gets a TTL from the peer's own write.
func TestAWindowHashWithoutTTLIsNotTrustedForEver(t *testing.T) {
	w := newWorld(t)
	admin := w.admin()
	ctx := t.Context()
	now := w.clk.Now()
	// 5 failures of a pod that crashed just after writing them.
	if err := admin.HSet(ctx, "test:w:svc", "dead", "5 5 0 "+ms(now)+" "+ms(now)).Err(); err != nil {
		t.Fatal(err)
	}
	b := w.pod("b", false, decideOn(cluster.DecideCluster))
	b.calls(1, ok)
	b.sync() // the dead pod's fresh failures count: 5 of 6
	b.wantState(circuitbreaker.StateOpen)
	if ttl := admin.PTTL(ctx, "test:w:svc").Val(); ttl != -2 && ttl <= 0 {
		t.Fatalf("the window hash has TTL %v after a peer's sync, want one", ttl)
	}
	b.b.Reset()
	b.calls(1, ok)
	w.clk.Advance(3*interval + time.Millisecond)
	b.sync() // stale now: not counted, marked
	b.wantState(circuitbreaker.StateClosed)
	w.clk.Advance(interval)
	b.sync() // deleted
	if _, ok := admin.HGetAll(ctx, "test:w:svc").Val()["dead"]; ok {
		t.Fatal("the dead pod's field is still in the hash four intervals later")
	}
	if ttl := admin.PTTL(ctx, "test:w:svc").Val(); ttl <= 0 || ttl > 3*interval {
		t.Fatalf("window TTL %v, want (0, %v]", ttl, 3*interval)
	}
}
