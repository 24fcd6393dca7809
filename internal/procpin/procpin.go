package procpin

import _ "unsafe" // go:linkname

// ID returns the id of the processor (P) the calling goroutine runs on, in
// [0, GOMAXPROCS). The goroutine may move to another processor as soon as
// ID returns: the id picks a shard, it guarantees nothing about who else
// uses it.
func ID() int {
	p := procPin()
	procUnpin()
	return p
}

// procPin and procUnpin pin the goroutine to its processor and return the
// processor's id (the runtime keeps them for linkname callers: go.dev/issue/67401).
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()
