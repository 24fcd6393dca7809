//go:build !race

package grpcmw_test

const raceEnabled = false
