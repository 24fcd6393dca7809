// Command chaos shows what meshless does for a gRPC client whose backend
// goes bad. It runs scenarios (-scenario, all of them by default, in this
// order): backend, described first below, pods, cluster and events,
// described after it; docs/demo.md reads their results.
//
// In the backend scenario, two clients call their own gRPC backend (an in-process grpc.testing
// TestService over loopback TCP) at the same rate, side by side, each call in
// its own goroutine as a server handling requests would:
//
//   - bare is a plain gRPC client with a per-call deadline and nothing else;
//   - meshless makes the same calls through a grpcmw chain configured by
//     client.yaml (printed at the start): circuit breaker, retries, bulkhead
//     and timeouts.
//
// Half of the calls look up an item that does not exist, and a healthy
// backend answers them NOT_FOUND: a business answer, which must never open a
// breaker. Each backend has a fixed capacity: 8 workers that take 20ms a
// call (400 calls a second), a queue of 16 calls waiting for a worker, and
// beyond it the calls are shed (UNAVAILABLE, or with -shed pushback
// RESOURCE_EXHAUSTED and a grpc-retry-pushback-ms trailer). The backends run
// through a schedule of phases: healthy (200 calls a second); overloaded
// (1000 calls a second, 2.5 times what the workers serve: latency grows with
// the queue, and the rest is shed; meshless's adaptive throttler sends its
// backend about twice what it accepts, and its breaker stays closed, as
// docs/overload.md explains); failing (UNAVAILABLE at once); hanging
// (never answers); recovered (healthy again). The program prints the
// breaker's transitions and a status line per second, then a comparison: the
// whole run, then per phase the success rate, p50 and p99 latency, the
// requests that reached the backend and per call, and which client did
// better (stated plainly, also where meshless does worse).
//
// With -transport http the backend scenario runs over HTTP: the backends
// are net/http servers answering the same way (503 while failing or
// shedding, 429 with Retry-After with -shed pushback, 404 for the missing
// item), bare is a plain net/http client with the same deadline per
// request, and meshless's transport is an httpmw RoundTripper built from
// the same client.yaml (its defaults, with HTTP's status lists). The
// printout and the picture use HTTP's words.
//
// In the pods scenario, four gRPC pods serve the same service and a manual
// resolver gives both clients all four addresses: bare balances them with
// plain round_robin, meshless with the meshless_outlier balancer that
// pods.yaml's outlierDetection section installs (and nothing else: no
// breaker, no retry). One pod answers UNAVAILABLE, then another takes 250ms
// a call; the summary prints, per phase, the requests each pod received
// from each client, the bad pod's share, success and p99, also for the
// calls started once meshless had ejected the bad pod.
//
// In the cluster scenario, three meshless client pods (three grpcmw chains
// from cluster.yaml, each with its own connection) call one dead dependency
// at 3, 1 and 1 calls a second, for 5s alone (no cluster section), then 5s
// in cluster mode through an embedded miniredis on loopback TCP (-redis ADDR
// for a real Redis). The summary prints the requests that reached the dead
// dependency from each pod in each run, the calls rejected at once, and when
// each pod's breaker opened, by itself or by another pod's open.
//
// In the events scenario, two consumers handle the same events from a broker,
// 200 a second about 8 keys (each key's events one at a time, in order, as
// a partition is consumed), each event with one call to its own backend,
// which fails for 3s (UNAVAILABLE at once), then recovers; one event is
// poison (the backend never handles it). bare's broker redelivers an event
// whose call failed at once, up to 10 deliveries, then gives up on it (the
// default of Spring for Apache Kafka's error handler). meshless's calls go
// through a grpcmw chain configured by events.yaml: a breaker, and a
// deadLetter section that keeps each event the open breaker refuses, or
// whose call failed, in a bbolt file (in a temporary directory the run
// removes); the consumer acks it on DEFERRED, and the queue replays it once
// the breaker has closed, oldest first, with its meshless-replay-id. After
// the last event the run waits for the queue to drain (10s at most). The
// summary counts, from what each backend handled: the events lost, the
// duplicates (by event id and replay id), the events handled after a newer
// one of their key (among the replays, and overall), the backend requests
// per event, and when the breaker closed and the queue drained.
// -events-max-entries bounds the queue, to watch it refuse.
//
// At the end the program draws the run, an SVG written to
// chaos-timeline.svg in the working directory (-svg moves it, -svg "" turns
// it off), and prints its path: a section per scenario, on that scenario's
// own clock. Backend: per second, each client's calls answered, their p99,
// the requests that reached its backend per call, and meshless's breaker as
// a strip (closed, open, a mark for each half-open probe). Pods: the calls
// answered and their p99, and which pods meshless's balancer had ejected.
// Cluster: the requests that reached the dead dependency, in total, alone
// and in cluster mode, and each pod's breaker in each run. Events: the
// events each backend handled against those published, the events
// waiting in meshless's queue, the requests that reached each backend per
// second, and meshless's breaker.
//
// The meshless clients' metrics (package otelmw, through the OpenTelemetry
// Prometheus exporter; the cluster pods' syncs and remote opens through an
// otelmw.ClusterListener; the events consumer's queue through an
// otelmw.DeadLetterListener) are served on http://127.0.0.1:9464/metrics while the
// program runs; docs/operations.md shows them in Grafana.
//
//	go run ./examples/chaos                  # about 47 seconds
//	go run ./examples/chaos -scenario pods   # one scenario
//	go run ./examples/chaos -scenario backend -transport http
//	go run ./examples/chaos -scenario cluster -redis 127.0.0.1:6379
//	go run ./examples/chaos -scenario events -events-max-entries 300
//	go run ./examples/chaos -phase 1s        # every phase 1s long
//	go run ./examples/chaos -serve           # keep serving /metrics after the run, until Ctrl-C
//	go run ./examples/chaos -metrics ""      # no metrics endpoint
//	go run ./examples/chaos -help            # phases, rate, timeout
//
// Everything listens on 127.0.0.1 only.
package main
