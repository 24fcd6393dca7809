// Package throttler is client-side adaptive throttling, as described in
// Google's SRE book ("Handling Overload"): a client that sees its backend
// refuse more and more of its requests rejects the excess itself, locally
// and at once, instead of sending it to a backend that would only shed it.
//
// A [Throttler] counts, over a sliding time window (10 s by default), the
// requests it was asked to let through (those it rejected included) and
// those the backend accepted. It rejects each new request with probability
//
//	max(0, (requests − K × accepts) / (requests + 1))
//
// capped at maxRejectionRate (90 % by default), so at least a tenth of the
// requests still reach the backend and tell when it recovers. K (the
// multiplier, 2 by default) is how many requests the backend may get per
// request it accepts: with K = 2 an overloaded backend that serves 400
// requests a second receives about 800 a second from this client, whatever
// the client offers, and serves its 400. Below minimumRequests in the window
// (20 by default) nothing is rejected: a trickle of traffic always flows.
//
// A request counts when its verdict is known: a rejected one at once, an
// admitted one when it ends (Exit), at the time it ended, together with its
// accept if the backend accepted it. A call in flight is neither a request
// nor an accept: a burst of concurrent calls to a healthy backend is never
// throttled, however large, since only refusals and rejections can make
// requests exceed K × accepts. The price: a backend that does not answer at
// all is seen only as its calls time out, a timeout later than if calls in
// flight counted as refusals (docs/overload.md).
//
// A rejection is a *[RejectedError], which errors.Is [ErrThrottled] and is a
// resilience.Rejection: the request never reached the backend, so no circuit
// breaker counts it and no retry retries it.
//
// A Throttler is a resilience.Gate: package grpcmw runs it inside the circuit
// breaker and outside the bulkhead (docs/overload.md).
//
//	th, err := throttler.New(throttler.WithName("payments"))
//	...
//	err = th.Execute(ctx, func(ctx context.Context) error {
//		return client.Charge(ctx, req)
//	})
package throttler
