package cluster_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
)

// redis6Error is a reply error as Redis before 7.0 words a refusal met
// inside a script: ERR, the script's name, then the refusal with its dash.
type redis6Error string

func (e redis6Error) Error() string { return string(e) }
func (redis6Error) RedisError()     {}

// refuseClaims is a go-redis hook that answers the claim script with the
// refusal err, as a Redis 6 out of memory or read-only would.
type refuseClaims struct{ err error }

func (refuseClaims) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h refuseClaims) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && (a[0] == "evalsha" || a[0] == "eval") && a[1] == cluster.ClaimOpenSHA {
			cmd.SetErr(h.err)
			return h.err
		}
		return next(ctx, cmd)
	}
}
func (refuseClaims) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A Redis before 7.0 wraps a refusal met inside a script in an ERR that
// names the script (ERR Error running script (call to f_…): @user_script:1:
// @user_script: 1: -OOM command not allowed …). That is Redis refusing
// service, not the key's content: the pod must not delete the open record
// (another pod's open, in force) as a key "that held what no instance
// writes", nor log a repair. (Out of memory, a Redis 6 lets the repair's
// DEL through: DEL does not grow memory. keyProblem's test covers the
// other refusals, whose DEL Redis 6 refuses too.)
func TestARedis6RefusalInAScriptIsNotTheKeys(t *testing.T) {
	for _, refusal := range []string{
		"ERR Error running script (call to f_0a9a51ee96320953ec7bde8e63f3f060b9dac00c): @user_script:41: @user_script: 41: -OOM command not allowed when used memory > 'maxmemory'.",
	} {
		t.Run("OOM", func(t *testing.T) {
			w := newWorld(t)
			admin := w.admin()
			b := w.pod("b", false)
			rdb := redis.NewClient(&redis.Options{Addr: w.srv.Addr(), MaxRetries: -1})
			rdb.AddHook(refuseClaims{err: redis6Error(refusal)})
			a := w.podOn("a", rdb)
			a.sync()
			b.sync()
			b.calls(6, fail)
			b.sync() // b's open claimed
			before := admin.Get(t.Context(), "test:open:svc").Val()
			if before == "" {
				t.Fatal("b's open was not claimed")
			}
			w.clk.Advance(interval)
			a.calls(6, fail) // a opens on its own window: its claim meets the refusal
			a.wantState(circuitbreaker.StateOpen)
			_ = a.c.Sync(t.Context())
			_ = a.c.Sync(t.Context())
			if got := admin.Get(t.Context(), "test:open:svc").Val(); got != before {
				t.Errorf("the open record is %q after a's refused claims, was %q", got, before)
			}
			if n := a.l.repairs.Load(); n != 0 {
				t.Errorf("%d repairs logged for a refusal", n)
			}
		})
	}
}
