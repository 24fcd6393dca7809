package main

import (
	"flag"
	"fmt"
)

func init() { flag.Usage = usage }

// usage prints -h: what the program shows, how long it runs, its flags.
func usage() {
	fmt.Fprint(flag.CommandLine.Output(), `usage: go run ./examples/basic [-target ADDR]

The smallest meshless client: a gRPC client whose calls pass a circuit breaker,
retries, a bulkhead and timeouts, all from one YAML file (client.yaml). It asks
the gRPC health service twice and prints what came back: the server's overall
health (SERVING), then a service that does not exist (NotFound: a business
answer, returned unchanged, not retried, not a failure for the breaker), and
last the breaker's state (CLOSED).

Without -target it calls a health server it starts in the process, on
127.0.0.1, and ends in well under a second (0.1 s measured). With -target it
makes the same two calls to your server.

Flags:
`)
	flag.PrintDefaults()
}
