package timely_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/timely"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// userPolicy is a policy of the user's: comparable, unlike a PolicyFunc.
type userPolicy struct{ _ byte }

func (*userPolicy) Apply(ctx context.Context, next resilience.Next) error { return next.Run(ctx) }

func asPolicy(p any) (resilience.Policy, bool) { q, ok := p.(resilience.Policy); return q, ok }

// Tellers replaces a timeout with its telling copy only when a breaker is
// outside it with nothing between them but policies that hand errors on
// unchanged (a fixed bulkhead without an observer or a maxWaitDuration, a
// rate limiter, nil ones); the copy tells, the caller's policies and slice stay as they were.
func TestTellersReplacesOnlyATimeoutBehindABreakerAndPassingPolicies(t *testing.T) {
	cb := must(circuitbreaker.New())
	cb2 := must(circuitbreaker.New())
	observedCB := must(circuitbreaker.New(circuitbreaker.WithObserver(new(resiliencetest.Observer))))
	bh := must(bulkhead.New())
	cfg := bulkhead.DefaultConfig()
	cfg.Adaptive = true
	adaptive := must(bulkhead.New(bulkhead.WithConfig(cfg)))
	defer adaptive.Close()
	observedBH := must(bulkhead.New(bulkhead.WithObserver(new(resiliencetest.Observer))))
	qcfg := bulkhead.DefaultConfig()
	qcfg.MaxWaitDuration = time.Second
	queuing := must(bulkhead.New(bulkhead.WithConfig(qcfg)))
	rl := must(ratelimiter.New())
	rt := must(retry.New())
	to := must(timeout.New(time.Second))
	to2 := must(timeout.New(time.Second))
	plain := new(userPolicy)

	for _, tt := range []struct {
		name string
		ps   []resilience.Policy
		told []int // the indexes replaced by a telling copy
	}{
		{"breaker, timeout", []resilience.Policy{cb, to}, []int{1}},
		{"retry, breaker, bulkhead, timeout", []resilience.Policy{rt, cb, bh, to}, []int{3}},
		{"breaker, nil, rate limiter, bulkhead, timeout", []resilience.Policy{cb, nil, rl, bh, to}, []int{4}},
		{"two breakers, timeout", []resilience.Policy{cb2, cb, to}, []int{2}},
		{"breaker, timeout, timeout", []resilience.Policy{cb, to, to2}, []int{1}},
		{"an observed breaker, timeout", []resilience.Policy{observedCB, to}, []int{1}}, // told; its bound is 0
		{"timeout alone", []resilience.Policy{to}, nil},
		{"bulkhead, timeout", []resilience.Policy{bh, to}, nil},
		{"timeout, breaker", []resilience.Policy{to, cb}, nil},
		{"breaker, retry, timeout", []resilience.Policy{cb, rt, to}, nil},
		{"breaker, adaptive bulkhead, timeout", []resilience.Policy{cb, adaptive, to}, nil},
		{"breaker, observed bulkhead, timeout", []resilience.Policy{cb, observedBH, to}, nil},
		{"breaker, a bulkhead that may queue, timeout", []resilience.Policy{cb, queuing, to}, nil},
		{"breaker, a policy of the user's, timeout", []resilience.Policy{cb, plain, to}, nil},
		{"breaker, a chain, timeout", []resilience.Policy{cb, resilience.NewChain(bh), to}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]resilience.Policy(nil), tt.ps...)
			got := timely.Tellers(tt.ps, asPolicy)
			for i := range tt.ps {
				if tt.ps[i] != before[i] {
					t.Fatalf("the caller's slice changed at %d", i)
				}
			}
			for i, p := range got {
				told := false
				for _, j := range tt.told {
					told = told || i == j
				}
				if !told {
					if p != tt.ps[i] {
						t.Errorf("policy %d (%T) replaced", i, tt.ps[i])
					}
					continue
				}
				if p == tt.ps[i] {
					t.Errorf("policy %d (%T) not replaced by a telling copy", i, tt.ps[i])
					continue
				}
				// The copy tells when its breaker takes a 1 s timeout's word
				// (half the default threshold of 2 s), under a policy that
				// passes its start on (as the breaker does); the original
				// never does.
				err := resilience.NewChain(entering, p).Execute(context.Background(), nil)
				wantTold := tt.name != "an observed breaker, timeout"
				if got := errors.Is(err, timely.Err); got != wantTold {
					t.Errorf("the copy of policy %d returned %v, told = %v, want %v", i, err, got, wantTold)
				}
				if err := tt.ps[i].Apply(context.Background(), resilience.Next{}); err != nil {
					t.Errorf("the original of policy %d returned %v, want nil", i, err)
				}
			}
		})
	}
}

// entering passes the time it was entered on, as a breaker on the system
// clock does.
var entering = resilience.PolicyFunc(func(ctx context.Context, next resilience.Next) error {
	return next.RunAt(ctx, time.Now())
})

// Of gives the zero Role for what no package registered, a nil pointer of
// a registered type included.
func TestOfAnUnregisteredPolicyIsTheZeroRole(t *testing.T) {
	for _, p := range []any{nil, 42, (*circuitbreaker.Breaker)(nil), (*timeout.Timeout)(nil), (*bulkhead.Bulkhead)(nil), (*ratelimiter.Limiter)(nil)} {
		if r := timely.Of(p); r.Bound != nil || r.Passes || r.Tell != nil {
			t.Errorf("Of(%T) = %+v, want the zero Role", p, r)
		}
	}
}
