package dlns

import "strings"

// Problem is what Check says of a namespace it refuses.
const Problem = "must be 1 to 128 printable ASCII characters without spaces or braces"

// Check reports whether ns can prefix a Redis store's keys: 1 to 128
// printable ASCII characters, no space (an operator types it), no brace
// (the keys of one dead-letter key share a hash tag that the store puts
// after the namespace).
func Check(ns string) bool {
	if ns == "" || len(ns) > 128 || strings.ContainsAny(ns, "{} ") {
		return false
	}
	for i := 0; i < len(ns); i++ {
		if ns[i] < ' ' || ns[i] >= 0x7f {
			return false
		}
	}
	return true
}
