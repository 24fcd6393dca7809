package circuitbreaker

import (
	"context"

	"github.com/meshless/meshless/internal/timely"
	"github.com/meshless/meshless/resilience"
)

var (
	_ resilience.Policy = (*Breaker)(nil)
	_ resilience.Gate   = (*Breaker)(nil)
)

func (b *Breaker) executeSlow(ctx context.Context, fn func(context.Context) error) error {
	pm, err := b.acquire(ctx)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			pm.Record(resilience.Failure)
		}
	}()
	err = fn(ctx)
	done = true
	if err == timely.Err { // fn is a chain's next, with a timeout that tells (internal/timely)
		err = nil
	}
	pm.Done(err)
	return err
}
