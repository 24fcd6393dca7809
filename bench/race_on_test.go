//go:build race

package bench

// raceEnabled: the race detector slows the virtual-time runs tenfold.
const raceEnabled = true
