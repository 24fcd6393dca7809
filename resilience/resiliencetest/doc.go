// Package resiliencetest has test doubles for the meshless core: a fake
// [Clock] that tests advance by hand, and an [Observer] that keeps every
// event it receives.
//
//	clk := resiliencetest.NewClock(time.Unix(0, 0))
//	cb, _ := circuitbreaker.New(circuitbreaker.WithClock(clk))
//	...
//	clk.Advance(30 * time.Second) // fires every timer due by then, in order
package resiliencetest
