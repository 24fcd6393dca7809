// Package difftest holds what the transports' differential tests share: a
// recorded event described as one comparable line, and a burst of calls
// described as one sorted line.
package difftest
