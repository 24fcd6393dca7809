package main

import (
	"flag"
	"fmt"
)

func init() { flag.Usage = usage }

// usage prints -h: what the program shows, how long it runs, its flags.
func usage() {
	fmt.Fprint(flag.CommandLine.Output(), `usage: go run ./examples/server [flags]

Load shedding on a gRPC server with grpcmw.NewServer (server.yaml): each
service gets a bulkhead of -limit calls, and a call past it is answered at once
with RESOURCE_EXHAUSTED, the reason BULKHEAD_FULL and a grpc-retry-pushback-ms
trailer of -pushback, without running the handler. The program fills the server
with -limit calls that wait, sends -extra calls from a plain gRPC client (each
is shed), then one from a meshless client that retries RESOURCE_EXHAUSTED
(client.yaml): shed once and not retried, since a shed call is a rejection.
Then it lets the waiting calls answer, makes one more call (OK) and prints how
many calls reached the server and how many its handler ran.

Everything runs in one process on 127.0.0.1 and ends in well under a second
(0.14 s measured with the defaults); no call waits for the pushback.

Flags:
`)
	flag.PrintDefaults()
}
