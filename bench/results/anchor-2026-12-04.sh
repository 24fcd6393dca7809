#!/bin/bash
# The anchor run (docs/benchmarks/b4-parts.md): /tmp/bench.before (main before
# internal/sysclock) and /tmp/bench.after (with it), interleaved, 10 rounds.
out=/tmp/anchor-run.txt
: > $out
for i in $(seq 10); do
  for t in before after; do
    echo "round $i $t: $(uptime)" >> $out
    /tmp/bench.$t -test.run '^$' -test.bench '^BenchmarkClockFloor$|^BenchmarkClosed$/^(meshless|gobreaker)$|^BenchmarkChainPaired$/^(timeout|without-timeout)$|^BenchmarkGRPCInterceptorOnlyPaired$/^defaults$' -test.benchtime 500ms -test.benchmem >> $out 2>&1
  done
done
for i in $(seq 6); do
  for t in before after; do
    echo "tcp round $i $t: $(uptime)" >> $out
    /tmp/bench.$t -test.run '^$' -test.bench '^BenchmarkGRPCUnaryTCPPaired$/^defaults$' -test.benchtime 2s >> $out 2>&1
  done
done
echo DONE >> $out
