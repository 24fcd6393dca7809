#!/bin/bash
out=/tmp/final-run.txt
: > $out
for i in $(seq 8); do
  echo "round $i before: $(uptime)" >> $out
  /tmp/bench.final -test.run '^$' -test.bench '^BenchmarkClockFloor$/^one-read$|^BenchmarkChainPaired$/^timeout$|^BenchmarkGRPCInterceptorOnlyPaired$/^defaults$' -test.benchtime 500ms -test.benchmem >> $out 2>&1
  /tmp/bench.final -test.run '^$' -test.bench '^BenchmarkOutlierPickPaired$/^noted$' -test.benchtime 100000x >> $out 2>&1
  /tmp/bench.final -test.run '^$' -test.bench '^BenchmarkGRPCUnaryTCPPaired$/^defaults$' -test.benchtime 2s >> $out 2>&1
  echo "round $i after: $(uptime)" >> $out
done
for i in $(seq 6); do
  /tmp/bench.final -test.run '^$' -test.bench '^BenchmarkCores$' -test.benchtime 200ms >> /tmp/final-cores.txt 2>&1
done
echo DONE >> $out
