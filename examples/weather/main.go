// Command weather guards a plain HTTP call — a weather API — with meshless's
// policies used directly, without gRPC: an overall timeout, retries, a
// circuit breaker, a bulkhead and a per-attempt timeout, in the order grpcmw
// uses (docs/order.md). A local httptest server stands in for the API; it is
// healthy, then hangs, then fails with 503, then recovers.
//
//	go run ./examples/weather
//	go run ./examples/weather -phase 300ms
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

// statusError is an HTTP answer that is not 2xx.
type statusError struct{ code int }

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d", e.code) }

// classify says what an outcome means for the API's health. A 4xx is the API
// working and saying no — a business answer, a success for the breaker, not
// retried; a 5xx, a transport error or a deadline is a failure; meshless's own
// rejections and a cancelled caller say nothing about the API.
func classify(err error) resilience.Outcome {
	var se *statusError
	if errors.As(err, &se) && se.code < 500 {
		return resilience.Success
	}
	return resilience.DefaultClassifier(err)
}

// retryable retries what may pass on another attempt: 502, 503, 504, a
// transport error, an attempt's timeout. Rejections are never retried,
// whatever this says.
func retryable(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.code == http.StatusBadGateway || se.code == http.StatusServiceUnavailable || se.code == http.StatusGatewayTimeout
	}
	return classify(err) == resilience.Failure
}

// newGuard builds the policies, outermost first; obs sees the breaker's
// events.
func newGuard(obs resilience.Observer) (resilience.Chain, error) {
	overall, err := timeout.New(time.Second, timeout.WithScope(timeout.Overall))
	if err != nil {
		return resilience.Chain{}, err
	}
	rt, err := retry.New(retry.WithMaxAttempts(3), retry.WithInitialBackoff(10*time.Millisecond),
		retry.WithRetryable(retryable))
	if err != nil {
		return resilience.Chain{}, err
	}
	cb, err := circuitbreaker.New(circuitbreaker.WithName("weather-api"),
		circuitbreaker.WithSlidingWindowSize(20), circuitbreaker.WithMinimumNumberOfCalls(10),
		circuitbreaker.WithFailureRateThreshold(50), circuitbreaker.WithWaitDurationInOpenState(200*time.Millisecond),
		circuitbreaker.WithMaxWaitDurationInOpenState(400*time.Millisecond),
		circuitbreaker.WithClassifier(classify), circuitbreaker.WithObserver(obs))
	if err != nil {
		return resilience.Chain{}, err
	}
	bh, err := bulkhead.New(bulkhead.WithName("weather-api"), bulkhead.WithMaxConcurrentCalls(3))
	if err != nil {
		return resilience.Chain{}, err
	}
	perAttempt, err := timeout.New(100 * time.Millisecond)
	if err != nil {
		return resilience.Chain{}, err
	}
	return resilience.NewChain(overall, rt, cb, bh, perAttempt), nil
}

// forecast is the guarded call: one GET, its status as an error.
func forecast(ctx context.Context, base, city string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/forecast?city="+city, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		return "", &statusError{resp.StatusCode}
	}
	return string(body), nil
}

func main() {
	length := flag.Duration("phase", time.Second, "the length of each of the API's phases")
	callers := flag.Int("callers", 4, "goroutines calling the API in a loop")
	pause := flag.Duration("pause", 10*time.Millisecond, "each caller's pause between calls")
	flag.Parse()
	if err := run(*length, *callers, *pause); err != nil {
		log.Fatal(err)
	}
}

func run(length time.Duration, callers int, pause time.Duration) error {
	var (
		mu    sync.Mutex
		tally = map[string]int{}
		start = time.Now()
	)
	// The breaker's transitions, printed as they happen.
	obs := resilience.ObserverFunc(func(resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
			if e.Type == resilience.EventTransition {
				fmt.Printf("%5.2fs   breaker %v → %v (%v)\n", time.Since(start).Seconds(), e.From, e.To, e.Reason)
			}
		})
	})
	guard, err := newGuard(obs)
	if err != nil {
		return err
	}
	a := newAPI()
	defer a.srv.Close()
	record := func(outcome string) {
		mu.Lock()
		defer mu.Unlock()
		tally[outcome]++
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				city := "Lisbon"
				if (n+i)%10 == 0 {
					city = "Atlantis" // the API answers 404: a business answer
				}
				err := guard.Execute(ctx, func(ctx context.Context) error {
					_, err := forecast(ctx, a.srv.URL, city)
					return err
				})
				record(outcomeOf(err))
				time.Sleep(pause)
			}
		})
	}
	for _, p := range []phase{healthy, hanging, failing, healthy} {
		a.set(p)
		fmt.Printf("%5.2fs the API is %v\n", time.Since(start).Seconds(), p)
		time.Sleep(length)
	}
	stop()
	wg.Wait()

	fmt.Printf("\n%-44s %6s\n", "outcome of each guarded call", "calls")
	total := 0
	for _, o := range outcomes {
		fmt.Printf("%-44s %6d\n", o, tally[o])
		total += tally[o]
	}
	fmt.Printf("%-44s %6d\n", "all", total)
	fmt.Printf("%-44s %6d\n", "HTTP requests that reached the API", a.requests.Load())
	return nil
}

var outcomes = []string{
	"ok",
	"404 (a business answer: success, not retried)",
	"failed (5xx or transport, retries exhausted)",
	"timed out",
	"rejected: circuit open",
	"rejected: bulkhead full",
	"cancelled (the run ended)",
}

func outcomeOf(err error) string {
	var se *statusError
	switch {
	case err == nil:
		return outcomes[0]
	case errors.As(err, &se) && se.code == http.StatusNotFound:
		return outcomes[1]
	case errors.Is(err, circuitbreaker.ErrOpen):
		return outcomes[4]
	case errors.Is(err, bulkhead.ErrFull):
		return outcomes[5]
	case errors.Is(err, timeout.ErrTimeout):
		return outcomes[3]
	case errors.Is(err, context.Canceled):
		return outcomes[6]
	}
	return outcomes[2]
}
