package engine

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// callPath is callpath.go's functions, in its order.
var callPath = []any{
	(*Engine).Cached, (*methodTable).load, hotIndex, (*Method).Run, (*Method).runPlain, (*Method).breakerTrusts,
	(*Method).begin,
	(*Engine).now, (*Engine).real, (*Call).retried, (*Call).retry, (*Call).attempt, (*Call).admit,
	(*throttleGate).EnterAt, (*Call).Finish, (*Call).finish, (*Engine).since, (*classes).classifier,
	(*classes).verdicts, (*classes).outcome, (*classes).verdict, (*Call).Abort,
	(*Call).Next, (*Call).deferCall, (*Call).End,
}

// The functions a unary call runs through the engine are one run of code,
// in callpath.go's order, with no other function between them (their
// closures and deferred calls aside): the linker keeps a package's
// functions in the order of its files, and a function of the path moved to
// another file, or another function put among them, would spread the path
// over more pages of memory, which a real call pays for. The test walks the
// program's own code, from the path's first function past its last, with
// the runtime's function table.
func TestTheCallPathIsOneRunOfCode(t *testing.T) {
	names := make([]string, len(callPath))
	lo, hi := ^uintptr(0), uintptr(0)
	for i, f := range callPath {
		pc := reflect.ValueOf(f).Pointer()
		names[i] = runtime.FuncForPC(pc).Name()
		lo, hi = min(lo, pc), max(hi, pc)
	}
	onPath := func(name string) int {
		for i, p := range names {
			if name == p || strings.HasPrefix(name, p+".") { // itself, or a closure or deferred call of it
				return i
			}
		}
		return -1
	}
	// A function's code holds the code of the functions inlined into it,
	// which the runtime names at those PCs: a function is known by its
	// entry, and named there.
	var run []string
	entry := uintptr(0)
	for pc := lo; pc < hi+1<<16; pc++ {
		f := runtime.FuncForPC(pc)
		if f == nil || f.Entry() == entry {
			continue
		}
		entry = f.Entry()
		name := runtime.FuncForPC(entry).Name()
		if entry > hi && onPath(name) < 0 {
			break // past the last function of the path
		}
		run = append(run, name)
	}
	prev := 0
	for _, name := range run {
		i := onPath(name)
		if i < 0 {
			t.Errorf("%s lies among the call path's functions", name)
			continue
		}
		if i < prev {
			t.Errorf("%s comes after %s, out of callpath.go's order", name, names[prev])
		}
		prev = max(prev, i)
	}
	if len(run) < len(callPath) {
		t.Errorf("the path's code holds %d functions, want at least its %d: %q", len(run), len(callPath), run)
	}
}
