package main

import (
	"flag"
	"fmt"
)

func init() { flag.Usage = usage }

// usage prints -h: what the program shows, how long it runs, its flags.
func usage() {
	fmt.Fprint(flag.CommandLine.Output(), `usage: go run ./examples/weather [flags]

meshless's policies used directly, without gRPC, around a plain HTTP call: an
overall timeout, retries, a circuit breaker, a bulkhead and a per-attempt
timeout guard the calls of -callers goroutines to a weather API (a local
httptest server, 127.0.0.1). A 404 for an unknown city is a business answer: a
success for the breaker, never retried. The API is healthy, then hangs, then
fails with 503, then is healthy again, each for -phase; the program prints the
breaker's transitions as they happen, then how every call ended and how many
HTTP requests reached the API.

It runs for 4 x -phase: about 4 s with the defaults (4.2 s measured), 1.3 s
with -phase 300ms.

Flags:
`)
	flag.PrintDefaults()
}
