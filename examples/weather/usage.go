package main

import (
	"flag"
	"fmt"
)

func init() { flag.Usage = usage }

// usage prints -h: what the program shows, how long it runs, its flags.
func usage() {
	fmt.Fprint(flag.CommandLine.Output(), `usage: go run ./examples/weather [flags]

The scenario meshless started from: a service calls an external weather API
(a local httptest server, 127.0.0.1), and the API turns slow — each request
hangs for -hang — then fails with 503, then recovers, each phase lasting
-phase. Two copies of the same service run side by side, each in a process
of its own: "bare", with a plain http.Client (30 s timeout), and "meshless",
the same client through httpmw (timeouts, a circuit breaker, a bulkhead, one
retry). Users send -rate requests a second to each copy and give up after
-patience. The breaker's transitions print as they happen; at the end, per
phase and per service: the users' answers (ok, failed, gave up), the
service's latency as they saw it (p50, p99), the service process's peak
goroutine count, and the requests it sent the API.

It runs for 4 x -phase plus at most -patience: 4.3 s with the defaults
(measured; the users of the slow phase give up 2 s after it began), 1.8 s
with -phase 300ms -rate 40 -patience 1s.

Flags:
`)
	flag.PrintDefaults()
}
