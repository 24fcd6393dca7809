package resilience_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/meshless/meshless/resilience"
)

// tracer is a policy that records when it is entered and left.
type tracer struct {
	name string
	log  *[]string
}

func (p tracer) Apply(ctx context.Context, next resilience.Next) error {
	*p.log = append(*p.log, p.name+">")
	err := next.Run(ctx)
	*p.log = append(*p.log, "<"+p.name)
	return err
}

func TestChainRunsPoliciesOutermostFirst(t *testing.T) {
	var log []string
	chain := resilience.NewChain(tracer{"a", &log}, nil, tracer{"b", &log}, tracer{"c", &log})
	if chain.Len() != 3 {
		t.Fatalf("Len() = %d, want 3 (nil policies are skipped)", chain.Len())
	}
	want := errors.New("boom")
	err := chain.Execute(t.Context(), func(context.Context) error {
		log = append(log, "call")
		return want
	})
	if err != want {
		t.Fatalf("Execute returned %v, want the call's error unchanged", err)
	}
	if w := []string{"a>", "b>", "c>", "call", "<c", "<b", "<a"}; !slices.Equal(log, w) {
		t.Fatalf("order = %v, want %v", log, w)
	}
}

func TestChainsNest(t *testing.T) {
	var log []string
	inner := resilience.NewChain(tracer{"b", &log})
	outer := resilience.NewChain(tracer{"a", &log}, inner, tracer{"c", &log})
	_ = outer.Execute(t.Context(), func(context.Context) error { log = append(log, "call"); return nil })
	if w := []string{"a>", "b>", "c>", "call", "<c", "<b", "<a"}; !slices.Equal(log, w) {
		t.Fatalf("order = %v, want %v", log, w)
	}
}

func TestZeroChainRunsTheCall(t *testing.T) {
	var chain resilience.Chain
	called := false
	if err := chain.Execute(t.Context(), func(context.Context) error { called = true; return nil }); err != nil || !called {
		t.Fatalf("Execute = %v, called = %v; want nil, true", err, called)
	}
}

func TestPolicyCanShortCircuitAndRepeat(t *testing.T) {
	refuse := resilience.PolicyFunc(func(context.Context, resilience.Next) error { return errors.New("refused") })
	calls := 0
	err := resilience.NewChain(refuse).Execute(t.Context(), func(context.Context) error { calls++; return nil })
	if err == nil || calls != 0 {
		t.Fatalf("refusing policy: err = %v, calls = %d; want an error and no call", err, calls)
	}
	twice := resilience.PolicyFunc(func(ctx context.Context, next resilience.Next) error {
		_ = next.Run(ctx)
		return next.Run(ctx)
	})
	_ = resilience.NewChain(twice).Execute(t.Context(), func(context.Context) error { calls++; return nil })
	if calls != 2 {
		t.Fatalf("a policy running next twice made %d calls, want 2", calls)
	}
}

type passthrough struct{}

func (passthrough) Apply(ctx context.Context, next resilience.Next) error { return next.Run(ctx) }

func TestChainExecuteDoesNotAllocate(t *testing.T) {
	chain := resilience.NewChain(passthrough{}, passthrough{}, passthrough{}, passthrough{})
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	if n := testing.AllocsPerRun(1000, func() { _ = chain.Execute(ctx, fn) }); n != 0 {
		t.Fatalf("Chain.Execute allocates %v times per call, want 0", n)
	}
}
