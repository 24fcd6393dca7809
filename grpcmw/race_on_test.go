//go:build race

package grpcmw_test

// raceEnabled: under the race detector sync.Pool drops a quarter of what
// it is given, so a pooled value is sometimes made anew.
const raceEnabled = true
